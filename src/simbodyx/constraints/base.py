"""The constraint protocol: Simbody's ``Constraint::Custom::Implementation``
as pure functions, which every built-in constraint also implements.

A constraint declares its constrained bodies and constrained mobilizers and
its equation counts (mp holonomic, mv nonholonomic, ma acceleration-only).
Body kinematics arrive measured and expressed in the constraint's Ancestor
frame A (the deepest common ancestor of the constrained bodies, or Ground):
``X_AB`` a Transform batched over the constrained bodies (``X_AB[i]``),
``V_AB`` and ``A_AB`` (ncb, 6) [angular; linear] at each body origin. The
constrained mobilizers' coordinates arrive as tuples with one array per
mobilizer (``q[i][k]`` is q_k of the i-th constrained mobilizer); so do
qdot, qdotdot, u and udot.

Values of the level being computed are arguments; lower-level values come
in a :class:`Kinematics` ``k`` (Simbody's "from state" accessors), exactly
as the seed's data-availability rules allow:

    position_errors(t, X_AB, q)                    -> perr  (mp,)
    position_dot_errors(k, V_AB, qdot)             -> pverr (mp,)  [k: t, X_AB, q]
    position_dotdot_errors(k, A_AB, qdotdot)       -> paerr (mp,)  [k: + V_AB, qdot]
    velocity_errors(k, V_AB, u)                    -> verr  (mv,)  [k: t, X_AB, q]
    velocity_dot_errors(k, A_AB, udot)             -> vaerr (mv,)  [k: + V_AB, qdot, u]
    acceleration_errors(k, A_AB, udot)             -> aerr  (ma,)  linear in A_AB, udot
    constraint_forces(k, multipliers)              -> (F_A (ncb, 6), f_q, f_u)

Only the first error method of each class in use is required. The rest
default to automatic differentiation: pverr = d/dt perr, paerr = d/dt
pverr and vaerr = d/dt verr (forward-mode derivatives along the State's
motion, dR_AB/dt = [w_AB] R_AB), and the constraint forces to the exact
transpose of the acceleration-level equations (a vector-Jacobian product
of [paerr; vaerr; aerr] with respect to A_AB, qdotdot and udot), so the
seed's consistency contract holds by construction. Any of them may be
overridden by hand (for speed, or, as Simbody's Ball and Weld do, to take
velocity-level errors at the material point coincident with the follower);
``simbodyx.constraints.check_derivatives`` compares an override with the
automatic one. Forces follow Simbody's sign: ``M udot + G^T lambda = f``,
so the force a constraint applies is -G^T lambda.
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from simbodyx._xla.module import Module
from simbodyx._xla.trace_context import per_context_jit
from simbodyx.algorithms import coordinates
from simbodyx.constraints.equations import Equations, Layout
from simbodyx.constraints.kinematics import Kinematics, transform_rate
from simbodyx.handles import builder_of, registering_matter
from simbodyx.stage import Stage


def _rates(k: Kinematics, A_AB, qdotdot, udot) -> Kinematics:
    """d/dt of every field of ``k`` (t advances at unit rate)."""
    return Kinematics(
        t=jnp.ones_like(k.t),
        X_AB=transform_rate(k.X_AB, k.V_AB),
        q=k.qdot,
        V_AB=A_AB,
        qdot=None if k.qdot is None else qdotdot,
        u=None if k.u is None else udot,
    )


def _zeros_like(tree):
    return jax.tree.map(jnp.zeros_like, tree)


class Constraint(Module):
    """Base of every constraint. The object made while building is the handle
    a user holds (``matter``: its SimbodyMatterSubsystem); the frozen Model
    holds a copy without that reference, its element (``model.constraints``).
    Both answer the State queries. Static: the indices of the constrained
    bodies and mobilizers, the Ancestor, the equation counts (mp, mv, ma).
    Array fields are the constraint's numbers, Model leaves that
    ``jax.grad`` reaches."""

    index: int = eqx.field(static=True)
    bodies: tuple = eqx.field(static=True)
    mobilizers: tuple = eqx.field(static=True)
    ancestor: int = eqx.field(static=True)
    mp: int = eqx.field(static=True)
    mv: int = eqx.field(static=True)
    ma: int = eqx.field(static=True)
    label: str = eqx.field(static=True)
    matter: object = eqx.field(static=True)  #: the handle's subsystem; None in the Model's element

    #: Simbody's default-value setters of a built-in, ``set_default_<name>`` and
    #: ``get_default_<name>`` (e.g. Rod's ``set_default_rod_length``): name ->
    #: (field, checker(value, what, kind)); the methods are made per subclass.
    DEFAULTS: ClassVar[dict] = {}
    #: Whether this kind's error methods read none of an instance's naming
    #: fields (index, label, bodies, mobilizers, Ancestor, matter), so that
    #: alike instances share one traced program of them: true of the
    #: built-ins, not of Constraint.Custom, whose functions are a user's.
    ALIKE: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, (field, check) in cls.__dict__.get("DEFAULTS", {}).items():
            setattr(cls, f"set_default_{name}", _default_setter(name, field, check))
            setattr(cls, f"get_default_{name}", _default_getter(field))

    def _set_numbers(self, kind: str, **values) -> None:
        """Set the constructor's numbers, each through its ``DEFAULTS`` checker
        (the messages name the constructor argument)."""
        checks = dict(self.DEFAULTS.values())
        for field, value in values.items():
            setattr(self, field, checks[field](value, field, kind))

    def _register(self, kind: str, bodies=(), mobilizers=(), counts=(0, 0, 0), name=None, matter=None):
        """Record the constrained bodies and mobilizers (handles), the counts
        and the Ancestor, and add this constraint to their matter subsystem,
        which checks the handles."""
        handles = tuple(bodies) + tuple(mobilizers)
        if not handles:
            raise ValueError(f"Constraint.{kind}: needs at least one constrained body or mobilizer")
        owner = registering_matter(f"Constraint.{kind}", handles)
        if matter is not None and owner is not matter:
            raise ValueError(f"Constraint.{kind}: the bodies belong to a different matter subsystem than the one given")
        matter = owner
        index = matter.get_num_constraints()
        self.label = f"Constraint.{kind} {name or f'constraint{index}'!r} (constraint {index})"
        for h in mobilizers:
            if h.is_ground():
                raise ValueError(f"{self.label}: Ground has no mobilizer to constrain")
        if len(bodies) > 1 and len({h.index for h in bodies}) == 1:
            raise ValueError(f"{self.label}: every constrained body is {bodies[0]._label}; a constraint "
                             "between a body and itself has nothing to constrain")
        counts = tuple(int(n) for n in counts)
        if any(n < 0 for n in counts) or sum(counts) == 0:
            raise ValueError(f"{self.label}: equation counts (mp, mv, ma) = {counts} must be >= 0, not all 0")
        self.index, self.matter = index, matter
        self.bodies = tuple(h.index for h in bodies)
        self.mobilizers = tuple(h.index for h in mobilizers)
        self.ancestor = _common_ancestor([h for h in bodies])
        self.mp, self.mv, self.ma = counts
        matter._add_constraint(self)

    # -- the seed's error methods ------------------------------------------------------
    def position_errors(self, t, X_AB, q):
        raise NotImplementedError(f"{self.label}: position_errors is needed when mp > 0")

    def position_dot_errors(self, k: Kinematics, V_AB, qdot):
        rates = (jnp.ones_like(k.t), transform_rate(k.X_AB, V_AB), qdot)
        return jax.jvp(self.position_errors, (k.t, k.X_AB, k.q), rates)[1]

    def position_dotdot_errors(self, k: Kinematics, A_AB, qdotdot):
        pverr = lambda k: self.position_dot_errors(k, k.V_AB, k.qdot)
        k = k._replace(u=None)
        return jax.jvp(pverr, (k,), (_rates(k, A_AB, qdotdot, None),))[1]

    def velocity_errors(self, k: Kinematics, V_AB, u):
        raise NotImplementedError(f"{self.label}: velocity_errors is needed when mv > 0")

    def velocity_dot_errors(self, k: Kinematics, A_AB, udot):
        verr = lambda k: self.velocity_errors(k, k.V_AB, k.u)  # velocity errors read no qdot
        return jax.jvp(verr, (k,), (_rates(k, A_AB, _zeros_like(k.qdot), udot),))[1]

    def acceleration_errors(self, k: Kinematics, A_AB, udot):
        raise NotImplementedError(f"{self.label}: acceleration_errors is needed when ma > 0")

    constraint_forces = None
    """Optional override ``(k, multipliers) -> (F_A (ncb, 6), f_q, f_u)``: body
    forces at the body origins in A, q-space forces (holonomic) and u-space
    forces, one array per constrained mobilizer; multipliers are [p; v; a]."""

    # -- derived: what the system-level equations use -----------------------------------
    @property
    def num_equations(self) -> int:
        return self.mp + self.mv + self.ma

    def acceleration_level(self, k: Kinematics, A_AB, qdotdot, udot):
        """(paerr (mp,), vaerr (mv,), aerr (ma,)): affine in (A_AB, qdotdot, udot)."""
        dtype = k.t.dtype
        empty = jnp.zeros(0, dtype)
        p = self.position_dotdot_errors(k, A_AB, qdotdot) if self.mp else empty
        v = self.velocity_dot_errors(k, A_AB, udot) if self.mv else empty
        a = self.acceleration_errors(k, A_AB, udot) if self.ma else empty
        return tuple(jnp.reshape(jnp.asarray(x, dtype), (-1,)) for x in (p, v, a))

    def velocity_level(self, k: Kinematics, V_AB, qdot, u):
        """(pverr (mp,), verr (mv,))."""
        dtype = k.t.dtype
        p = self.position_dot_errors(k, V_AB, qdot) if self.mp else jnp.zeros(0, dtype)
        v = self.velocity_errors(k, V_AB, u) if self.mv else jnp.zeros(0, dtype)
        return tuple(jnp.reshape(jnp.asarray(x, dtype), (-1,)) for x in (p, v))

    def position_level(self, t, X_AB, q):
        """perr (mp,)."""
        if not self.mp:
            return jnp.zeros(0, t.dtype)
        return jnp.reshape(jnp.asarray(self.position_errors(t, X_AB, q), t.dtype), (-1,))

    # -- the handle: building-time settings ------------------------------------------------
    def set_disabled_by_default(self, disabled: bool = True) -> Constraint:
        """Define this constraint but leave it off in the default State (before freezing)."""
        builder_of(self, "set_disabled_by_default")._set_constraint_disabled_by_default(self.index, disabled)
        return self

    def is_disabled_by_default(self) -> bool:
        return builder_of(self, "is_disabled_by_default")._constraint_disabled_by_default[self.index]

    def get_constrained_bodies(self) -> tuple:
        """The constrained bodies' MobilizedBody handles, in ConstrainedBodyIndex order."""
        matter = builder_of(self, "get_constrained_bodies")
        return tuple(matter.get_mobilized_body(b) for b in self.bodies)

    def get_constrained_mobilizers(self) -> tuple:
        matter = builder_of(self, "get_constrained_mobilizers")
        return tuple(matter.get_mobilized_body(b) for b in self.mobilizers)

    def get_num_constrained_bodies(self) -> int:
        return len(self.bodies)

    def get_num_constrained_mobilizers(self) -> int:
        return len(self.mobilizers)

    def get_ancestor_mobilized_body(self):
        """The Ancestor A: the deepest common ancestor of the constrained bodies."""
        return builder_of(self, "get_ancestor_mobilized_body").get_mobilized_body(self.ancestor)

    def get_default_num_constraint_equations(self) -> tuple[int, int, int]:
        return self.mp, self.mv, self.ma

    # -- queries on States of the frozen model (handle and element) ---------------------------
    def _in(self, state, stage: Stage, what: str) -> Constraint:
        """This constraint as the State's Instance stage holds it (its numbers there)."""
        if self.matter is not None and not state.topology.same_tree(self.matter.topology()):
            raise ValueError(f"{self.label} belongs to a different MultibodySystem than this State")
        state.require(stage, f"{self.label}.{what}")
        return state.instance.constraints[self.index]

    def is_disabled(self, state):
        """Whether this constraint is disabled in ``state`` (a JAX bool when traced)."""
        if state.constraint_disabled is None:
            raise ValueError(f"{self.label}: this State belongs to a model without constraints")
        return state.constraint_disabled[self.index]

    def set_disabled(self, state, disabled):
        """A new State with this constraint disabled (or enabled); Instance stage, no recompile."""
        if state.constraint_disabled is None:
            raise ValueError(f"{self.label}: this State belongs to a model without constraints")
        return state.with_constraint_disabled(state.constraint_disabled.at[self.index].set(disabled))

    def disable(self, state):
        return self.set_disabled(state, True)

    def enable(self, state):
        return self.set_disabled(state, False)

    def get_num_constraint_equations_in_use(self, state):
        """(mp, mv, ma) in use: zeros while disabled (JAX integers when traced)."""
        on = 1 - jnp.asarray(self.is_disabled(state), jnp.int32)
        if isinstance(on, jax.core.Tracer):
            return self.mp * on, self.mv * on, self.ma * on
        return tuple(int(n * on) for n in (self.mp, self.mv, self.ma))

    def get_position_errors_as_vector(self, state):
        """perr (mp,) (Position)."""
        return _position_errors(self._in(state, Stage.Position, "get_position_errors_as_vector"), state)

    def get_velocity_errors_as_vector(self, state):
        """[pverr (mp,); verr (mv,)] (Velocity)."""
        return _velocity_errors(self._in(state, Stage.Velocity, "get_velocity_errors_as_vector"), state)

    def get_acceleration_errors_as_vector(self, state):
        """[paerr; vaerr; aerr] (m,) at the State's udot (Acceleration)."""
        return _acceleration_errors(self._in(state, Stage.Acceleration, "get_acceleration_errors_as_vector"), state)

    def get_multipliers_as_vector(self, state):
        """[lambda_p; lambda_v; lambda_a] of this constraint (Acceleration); zeros while disabled."""
        c = self._in(state, Stage.Acceleration, "get_multipliers_as_vector")
        return state.acceleration.multipliers[Layout(state.instance.constraints).rows[c.index]]

    def calc_constraint_forces_from_multipliers(self, state, multipliers):
        """This constraint's G^T lambda as (body forces (nb, 6) [torque; force] at each Bo
        in G, mobility forces (nu,)): the force it applies is minus these (Position)."""
        c = self._in(state, Stage.Position, "calc_constraint_forces_from_multipliers")
        lam = jnp.asarray(multipliers, state.u.dtype).reshape(-1)
        if lam.shape != (c.num_equations,):
            raise ValueError(f"{self.label}: multipliers have shape {lam.shape}, expected ({c.num_equations},)")
        return _forces(c, state, lam)

    def calc_power(self, state):
        """Power this constraint delivers, -(F . V + f . u) for its forces G^T lambda
        (Acceleration); zero for a workless constraint."""
        lam = self.get_multipliers_as_vector(state)
        F, f = self.calc_constraint_forces_from_multipliers(state, lam)
        return -(jnp.sum(F * state.velocity.V_GB) + f @ state.u)


def _default_setter(name: str, field: str, check):
    def setter(self, value):
        matter = builder_of(self, f"set_default_{name}")
        matter.system.check_not_frozen(f"change {self.label}")
        object.__setattr__(self, field, check(value, name, self.label.removeprefix("Constraint.")))
        matter._invalidate()
        return self

    setter.__doc__ = f"Simbody's setDefault: set ``{field}`` before freezing, checked like the constructor's."
    return setter


def _default_getter(field: str):
    def getter(self):
        return getattr(self, field)

    getter.__doc__ = f"The default ``{field}``."
    return getter


def _common_ancestor(bodies) -> int:
    """The deepest mobilized body that is an ancestor of (or is) every one of
    ``bodies``; Ground (0) when there are none."""
    if not bodies:
        return 0
    def path(b):
        chain = [b.index]
        while not b.is_ground():
            b = b.parent
            chain.append(b.index)
        return chain[::-1]
    paths = [path(b) for b in bodies]
    common = 0
    for level in zip(*paths):
        if len(set(level)) != 1:
            break
        common = level[0]
    return common


def _equations(c: Constraint, state, velocity: bool = True):
    return Equations.of_state(state, (c,), velocity)


@per_context_jit(eqx.filter_jit)
def _position_errors(c, state):
    return _equations(c, state, velocity=False).position_errors()


@per_context_jit(eqx.filter_jit)
def _velocity_errors(c, state):
    return _equations(c, state).velocity_errors()


@per_context_jit(eqx.filter_jit)
def _acceleration_errors(c, state):
    return _equations(c, state).acceleration_errors(state.acceleration.A_GB, state.acceleration.qdotdot,
                                                    state.acceleration.udot)


@per_context_jit(eqx.filter_jit)
def _forces(c, state, multipliers):
    F, fq, fu = _equations(c, state).forces(multipliers)
    return F, coordinates.multiply_by_n(state.topology, state.q, fq, True) + fu
