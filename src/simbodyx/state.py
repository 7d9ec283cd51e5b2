"""The immutable State and its per-stage caches.

A State holds t, q, u, z and the caches that ``Model.realize`` fills. Its
realization level is part of its pytree *structure* (caches are None until
realized), so asking for a quantity of an unrealized stage fails at trace
time with a message naming the stage. Setting q drops the position and
velocity caches; setting u drops the velocity cache. Every way of making a
State checks that it holds one configuration (t, q, u of its topology).

The State's Instance-stage data lives here too: mobilizer ``Locks`` and the
motion levels and methods (``Level``, ``Method``) that locks and Motions
(``simbodyx.motion``) share.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from simbodyx._xla.module import Module
from simbodyx.enums import NamedIntEnum
from simbodyx.parameters import Parameters
from simbodyx.spatial.transform import Transform
from simbodyx.stage import Stage
from simbodyx.topology import Topology


class Level(NamedIntEnum):
    """Simbody's Motion::Level: the highest level a mobilizer's motion is driven at."""

    NoLevel = -1
    Acceleration = 0
    Velocity = 1
    Position = 2


class Method(NamedIntEnum):
    """Simbody's Motion::Method: how one level (q, u or udot) is determined."""

    NoMethod = -1
    Zero = 0  #: always zero (the level below a lock)
    Discrete = 1  #: held by a lock (changes only between integration steps)
    Prescribed = 2  #: a function of time (a Motion)
    Free = 3  #: from forces (udot) or by integration (q, u)


def level_methods(level: Level, method: Method) -> tuple[Method, Method, Method]:
    """(q, u, udot) methods of a mobilizer driven at ``level`` by ``method``
    (Simbody's Motion::calcAllMethods); NoLevel: all Free."""
    if level == Level.NoLevel:
        return Method.Free, Method.Free, Method.Free
    below = Method.Prescribed if method == Method.Prescribed else Method.Zero
    if level == Level.Position:
        return method, below, below
    if level == Level.Velocity:
        return Method.Free, method, below
    return Method.Free, Method.Free, method


class Locks(Module):
    """Mobilizer locks, Instance-stage State data (``State.locks``, None while
    nothing is locked): a Position lock holds q (u = udot = 0), a Velocity
    lock holds u (udot = 0), an Acceleration lock holds udot."""

    level: jnp.ndarray  #: (nb,) int32 Level per body, -1 unlocked
    q: jnp.ndarray  #: (nq,) values held by Position locks
    u: jnp.ndarray  #: (nu,) values held by Velocity locks
    udot: jnp.ndarray  #: (nu,) values held by Acceleration locks

    @classmethod
    def unlocked(cls, topology, q, u) -> Locks:
        return cls(jnp.full(topology.num_bodies, Level.NoLevel, jnp.int32), q, u, jnp.zeros_like(u))


class PositionCache(Module):
    X_FM: Transform  #: (nb) joint poses, M in F
    X_GB: Transform  #: (nb) body poses in Ground
    H_FM: jnp.ndarray  #: (nu, 6) row k: d V_FM / d u_k, [w; v] in F
    H_PB_G: jnp.ndarray  #: (nu, 6) row k: d V_PB / d u_k (B relative to P at Bo), in G


class VelocityCache(Module):
    V_FM: jnp.ndarray  #: (nb, 6) [w; v] of M in F, expressed in F
    V_GB: jnp.ndarray  #: (nb, 6) [w; v] of B (at Bo) in G
    qdot: jnp.ndarray  #: (nq,)
    mobilizer_coriolis: jnp.ndarray  #: (nb, 6) A_GB's udot-free part given A_GP = 0, in G
    gyroscopic: jnp.ndarray  #: (nb, 6) [w x I w; m w x (w x c)] about Bo, in G


class DynamicsCache(Module):
    mobility_forces: jnp.ndarray  #: (nu,) applied generalized forces T
    body_forces: jnp.ndarray  #: (nb, 6) applied [torque; force] at each Bo, in G


class AccelerationCache(Module):
    udot: jnp.ndarray  #: (nu,)
    qdotdot: jnp.ndarray  #: (nq,)
    A_GB: jnp.ndarray  #: (nb, 6) [alpha; a] of each B (at Bo) in G
    #: (m,) constraint multipliers, rows [P; V; A] (simbodyx.constraints.equations)
    multipliers: jnp.ndarray | None = None
    #: (nz,) the auxiliary states' time derivatives (their force elements')
    zdot: jnp.ndarray | None = None


class ReportCache(Module):
    kinetic_energy: jnp.ndarray  #: () J
    potential_energy: jnp.ndarray  #: () J, of the force elements

    @property
    def total_energy(self):
        return self.kinetic_energy + self.potential_energy


class InstanceData(Module):
    """A State's Instance-stage variables, in one place: what locks, Motions and
    constraints are doing. Changing them never changes shapes once a State
    has them, so a jitted function is not recompiled (``locks`` going from
    None to locked changes the structure once)."""

    #: Mobilizer locks, None while nothing is locked (Locks).
    locks: Locks | None = None
    #: (num_constraints,) bool, True where a constraint is disabled; None when
    #: the model has no constraints.
    constraint_disabled: jnp.ndarray | None = None
    #: (num_motions,) bool, True where a Motion is disabled; None when the
    #: model has no Motions.
    motion_disabled: jnp.ndarray | None = None


#: Each cache, from the lowest stage, and the stage a State holding it is at
#: (the Instance cache is filled for Stage.Time).
_CACHE_STAGES = (("instance", Stage.Time), ("position", Stage.Position), ("velocity", Stage.Velocity),
                 ("dynamics", Stage.Dynamics), ("acceleration", Stage.Acceleration), ("report", Stage.Report))


def _has(state, cache: str) -> bool:
    return object.__getattribute__(state, "_" + cache) is not None


def _cache(name: str, stage: Stage) -> property:
    """The State's ``name`` cache (field ``_name``), or the stage error when
    the State has not reached ``stage`` (``state.acceleration.udot`` on a
    Position-stage State names the stage to realize, not ``None``)."""
    field = "_" + name

    def get(self):
        value = object.__getattribute__(self, field)
        if value is None:
            self.require(stage, f"state.{name}")
        return value

    return property(get, doc=f"The {name} cache (Stage.{stage.name}); the stage error before it is realized.")


class State(Module):
    t: jnp.ndarray  #: () time (s)
    q: jnp.ndarray  #: (nq,) generalized coordinates
    u: jnp.ndarray  #: (nu,) generalized speeds
    z: jnp.ndarray  #: (nz,) auxiliary continuous states
    topology: Topology = eqx.field(static=True)
    _instance: Parameters | None = None
    _position: PositionCache | None = None
    _velocity: VelocityCache | None = None
    _dynamics: DynamicsCache | None = None
    _acceleration: AccelerationCache | None = None
    #: the Instance-stage variables: locks, disabled constraints and Motions
    instance_data: InstanceData = InstanceData()
    #: values of the force elements that hold them (Force.DiscreteForces, ...),
    #: one entry per such element; changing them keeps the caches through Velocity
    discrete: tuple = ()
    _report: ReportCache | None = None

    instance = _cache("instance", Stage.Instance)  #: the Model's numbers, as realized (Parameters)
    position = _cache("position", Stage.Position)
    velocity = _cache("velocity", Stage.Velocity)
    dynamics = _cache("dynamics", Stage.Dynamics)
    acceleration = _cache("acceleration", Stage.Acceleration)
    report = _cache("report", Stage.Report)  #: report-only quantities (kinetic, potential, total energy)

    def has(self, cache: str) -> bool:
        """Whether this State carries ``cache`` ("instance", "position",
        "velocity", "dynamics", "acceleration" or "report")."""
        return _has(self, cache)

    @property
    def locks(self) -> Locks | None:
        return self.instance_data.locks

    @property
    def constraint_disabled(self):
        return self.instance_data.constraint_disabled

    @property
    def motion_disabled(self):
        return self.instance_data.motion_disabled

    @property
    def stage(self) -> Stage:
        """The highest stage whose results this State carries."""
        for name, stage in reversed(_CACHE_STAGES):
            if _has(self, name):
                return stage
        return Stage.Model

    def require(self, stage: Stage, what: str) -> None:
        """Raise unless this State is realized to at least ``stage``."""
        if self.stage < stage:
            raise ValueError(
                f"{what} needs Stage.{stage.name} but the State is realized only to "
                f"Stage.{self.stage.name}; call model.realize(state, Stage.{stage.name}) first"
            )

    def __check_init__(self):
        """Every way of making a State (the constructor, ``replace`` and the
        ``with_*`` and ``set_*`` methods) checks its variables' shapes here."""
        for name, expected in self._shapes().items():
            _check_shape(name, jnp.shape(getattr(self, name)), expected)

    def _shapes(self) -> dict:
        """The shape of each variable of one State of this topology."""
        return {"t": (), "q": (self.topology.nq,), "u": (self.topology.nu,), "z": (jnp.size(self.z),)}

    def check_model(self, model) -> State:
        """This State, checked for ``model``: its topology, and its dtype, which
        must be the Model's (the Model's dtype wins; no silent casts)."""
        if self.topology != model.topology:
            raise ValueError(
                "this State belongs to a different model (or to the other rotation "
                "representation); make states with model.default_state() or "
                "model.matter.convert_to_euler_angles/convert_to_quaternions"
            )
        for name, elements in (("constraint", model.params.constraints), ("motion", model.params.motions)):
            flags = getattr(self, f"{name}_disabled")
            if (0 if flags is None else jnp.shape(flags)[0]) != len(elements):
                raise ValueError(f"this State is of a model with the same tree but other {name}s "
                                 f"({len(elements)} in this model); make states with model.default_state()")
        if self.q.dtype != model.dtype:
            raise TypeError(f"the State is {jnp.dtype(self.q.dtype).name} but the Model is "
                            f"{jnp.dtype(model.dtype).name}: a Model computes in its own dtype; convert the "
                            f"State with state.astype(model.dtype) (or the Model with model.astype)")
        return self

    def astype(self, dtype) -> State:
        """This State with t, q, u, z and every floating-point cache and
        Instance-stage number cast to ``dtype``."""
        return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, self)

    def with_q(self, q) -> State:
        """A new State with q replaced; position and velocity caches dropped."""
        return self.replace(q=q, keep=Stage.Time)

    def with_u(self, u) -> State:
        """A new State with u replaced; velocity and later caches dropped."""
        return self.replace(u=u, keep=Stage.Position)

    def with_z(self, z) -> State:
        """A new State with the auxiliary states z replaced; dynamics and later
        caches dropped (z enters through the force elements that own it)."""
        return self.replace(z=z, keep=Stage.Velocity)

    def with_time(self, t) -> State:
        """A new State at time t; position and velocity caches dropped."""
        return self.replace(t=t, keep=Stage.Time)

    def with_locks(self, locks: Locks | None) -> State:
        """A new State with other mobilizer locks; caches dropped (Instance stage changed)."""
        return self.replace(locks=locks, keep=Stage.Model)

    def with_constraint_disabled(self, disabled) -> State:
        """A new State with other constraints disabled; caches dropped (Instance stage changed)."""
        return self.replace(constraint_disabled=disabled, keep=Stage.Model)

    def replace(self, keep: Stage = Stage.Model, **fields) -> State:
        """A new State with ``fields`` replaced (``locks``, ``constraint_disabled``
        and ``motion_disabled`` go into ``instance_data``), keeping the caches of
        stages up to ``keep`` (Time keeps the Instance cache, Position also the
        position cache). t, q, u and z are converted to this State's dtype; the
        new State checks their shapes (batches go through ``jax.vmap``)."""
        for name in ("t", "q", "u", "z"):
            if name in fields:
                fields[name] = jnp.asarray(fields[name], getattr(self, name).dtype)
        variables = {name: fields.pop(name) for name in ("locks", "constraint_disabled", "motion_disabled")
                     if name in fields}
        if variables:
            fields["instance_data"] = dataclasses.replace(self.instance_data, **variables)
        dropped = {"_" + name: None for name, stage in _CACHE_STAGES if stage > keep}
        return dataclasses.replace(self, **{**dropped, **fields})


def _check_shape(name: str, shape: tuple, expected: tuple) -> None:
    if tuple(shape) != tuple(expected):
        hint = ("; a State holds one configuration: for a batch, jax.vmap a function of one State "
                "(jax.vmap(lambda q: f(state.with_q(q)))(qs))" if len(shape) > len(expected) else "")
        raise ValueError(f"State.{name} has shape {tuple(shape)}, expected {tuple(expected)}{hint}")
