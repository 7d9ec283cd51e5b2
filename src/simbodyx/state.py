"""The immutable State and its per-stage caches.

A State holds t, q, u, z and the caches that ``Model.realize`` fills. Its
realization level is part of its pytree *structure* (caches are None until
realized), so asking for a quantity of an unrealized stage fails at trace
time with a message naming the stage. Setting q drops the position and
velocity caches; setting u drops the velocity cache.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp

from simbodyx.motion import Locks
from simbodyx.module import Module
from simbodyx.parameters import Parameters
from simbodyx.spatial.transform import Transform
from simbodyx.stage import Stage
from simbodyx.topology import Topology


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

    #: Mobilizer locks, None while nothing is locked (simbodyx.motion.Locks).
    locks: Locks | None = None
    #: (num_constraints,) bool, True where a constraint is disabled; None when
    #: the model has no constraints.
    constraint_disabled: jnp.ndarray | None = None
    #: (num_motions,) bool, True where a Motion is disabled; None when the
    #: model has no Motions.
    motion_disabled: jnp.ndarray | None = None


class State(Module):
    t: jnp.ndarray  #: () time (s)
    q: jnp.ndarray  #: (nq,) generalized coordinates
    u: jnp.ndarray  #: (nu,) generalized speeds
    z: jnp.ndarray  #: (nz,) auxiliary continuous states
    topology: Topology = eqx.field(static=True)
    instance: Parameters | None = None
    position: PositionCache | None = None
    velocity: VelocityCache | None = None
    dynamics: DynamicsCache | None = None
    acceleration: AccelerationCache | None = None
    #: the Instance-stage variables: locks, disabled constraints and Motions
    instance_data: InstanceData = InstanceData()
    #: values of the force elements that hold them (Force.DiscreteForces, ...),
    #: one entry per such element; changing them keeps the caches through Velocity
    discrete: tuple = ()
    #: report-only quantities (Stage.Report)
    report: ReportCache | None = None

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
        if self.report is not None:
            return Stage.Report
        if self.acceleration is not None:
            return Stage.Acceleration
        if self.dynamics is not None:
            return Stage.Dynamics
        if self.velocity is not None:
            return Stage.Velocity
        if self.position is not None:
            return Stage.Position
        if self.instance is not None:
            return Stage.Time
        return Stage.Model

    def require(self, stage: Stage, what: str) -> None:
        """Raise unless this State is realized to at least ``stage``."""
        if self.stage < stage:
            raise ValueError(
                f"{what} needs Stage.{stage.name} but the State is realized only to "
                f"Stage.{self.stage.name}; call model.realize(state, Stage.{stage.name}) first"
            )

    def _checked(self, name: str, value, size: int):
        value = jnp.asarray(value, dtype=getattr(self, name).dtype)
        if value.shape != (size,):
            raise ValueError(f"{name} has shape {value.shape}, expected ({size},)")
        return value

    def with_q(self, q) -> State:
        """A new State with q replaced; position and velocity caches dropped."""
        return self.replace(q=self._checked("q", q, self.topology.nq), keep=Stage.Time)

    def with_u(self, u) -> State:
        """A new State with u replaced; velocity and later caches dropped."""
        return self.replace(u=self._checked("u", u, self.topology.nu), keep=Stage.Position)

    def with_time(self, t) -> State:
        """A new State at time t; position and velocity caches dropped."""
        return self.replace(t=jnp.asarray(t, dtype=self.t.dtype), keep=Stage.Time)

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
        position cache)."""
        variables = {name: fields.pop(name) for name in ("locks", "constraint_disabled", "motion_disabled")
                     if name in fields}
        if variables:
            fields["instance_data"] = dataclasses.replace(self.instance_data, **variables)
        caches = {"instance": Stage.Time, "position": Stage.Position, "velocity": Stage.Velocity,
                  "dynamics": Stage.Dynamics, "acceleration": Stage.Acceleration, "report": Stage.Report}
        dropped = {name: None for name, stage in caches.items() if stage > keep and name not in fields}
        return dataclasses.replace(self, **{**dropped, **fields})
