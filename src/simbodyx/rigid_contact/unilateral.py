"""Simbody's conditional constraints: unilateral contacts that the rigid-contact
time stepper (``sx.SemiExplicitEulerTimeStepper``) enforces only while they
touch.

Each unilateral contact wraps one built-in constraint, created disabled by
default exactly as Simbody does: HardStopUpper and HardStopLower a
ConstantCoordinate, Rope a Rod, PointPlaneFrictionlessContact a
PointInPlane, PointPlaneContact a PointOnPlaneContact, SpherePlaneContact a
SphereOnPlaneContact, SphereSphereContact a SphereOnSphereContact and
EdgeEdgeContact a LineOnLineContact (the last four with their two no-slip
rows, which carry the friction). The wrapped constraint's first position
error is the contact's perr (its derivatives and Jacobian come from the
constraint protocol); ``sign`` says which side is allowed: sign * perr >= 0
(a signed distance for sign = 1), sign * verr >= 0 while touching, and the
normal multiplier satisfies sign * lambda <= 0 (multipliers have the
opposite sign of the force). A contact takes part in dynamics only once
``matter.adopt_unilateral_contact`` has it, and only under the time
stepper; the error-controlled integrators and ``model.realize`` see the
wrapped constraint only if a user enables it.

The numbers (coefficient of restitution, friction coefficients and the
wrapped constraint's geometry) are Model leaves; whether a contact is
enabled is State data (the wrapped constraint's disabled flag, which the
time stepper sets to the contact's proximity each step, so a State it
returns realizes with the touching contacts as bilateral constraints, as
Simbody's does).

Three velocity-level kinds that Simbody declares without implementing
complete the family: UnilateralSpeedConstraint (a ratchet) and
BoundedSpeedConstraint (a speed motor of limited force), each wrapping a
ConstantSpeed, and StateLimitedFriction (friction whose normal force the
State gives, such as a compliant contact's), wrapping the velocity
constraints that stop its slip.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.constraints.contact import (
    LineOnLineContact,
    PointOnPlaneContact,
    SphereOnPlaneContact,
    SphereOnSphereContact,
)
from simbodyx.constraints.coordinate import ConstantCoordinate, ConstantSpeed
from simbodyx.constraints.geometric import PointInPlane, Rod, perpendicular, scalar, unit3
from simbodyx.handles import builder_of
from simbodyx.spatial.transform import Transform
from simbodyx.stage import Stage


def calc_effective_cor(min_cor, capture_speed, min_cor_speed, impact_speed):
    """Simbody's ConditionalConstraint::calcEffectiveCOR: 0 at or below the
    capture speed, ``min_cor`` at or above ``min_cor_speed``, and in between
    1 - (1 - min_cor) impact_speed / min_cor_speed (speeds >= 0, m/s)."""
    slope = (1 - min_cor) / jnp.where(min_cor_speed > 0, min_cor_speed, 1.0)
    between = 1 - slope * impact_speed
    return jnp.where(impact_speed <= capture_speed, 0.0, jnp.where(impact_speed >= min_cor_speed, min_cor, between))


def calc_effective_cof(mu_s, mu_d, mu_v, transition_speed, slip_speed):
    """Simbody's ConditionalConstraint::calcEffectiveCOF: mu_s at or below the
    sliding-to-rolling transition speed, mu_d above it, plus mu_v * slip_speed."""
    return mu_v * slip_speed + jnp.where(slip_speed <= transition_speed, mu_s, mu_d)


class ConditionalConstraint:
    """Simbody's ConditionalConstraint: the coefficient rules shared by the
    unilateral contacts."""

    calc_effective_cor = staticmethod(calc_effective_cor)
    calc_effective_cof = staticmethod(calc_effective_cof)


def _cor(value, kind: str) -> np.ndarray:
    a = scalar(value, "min_cor", kind)
    if not 0 <= a <= 1:
        raise ValueError(f"{kind}: the coefficient of restitution must be between 0 and 1 but was {value!r}")
    return a


def _friction(mu_s, mu_d, mu_v, kind: str):
    mu = [scalar(x, name, kind) for x, name in ((mu_s, "mu_s"), (mu_d, "mu_d"), (mu_v, "mu_v"))]
    if min(mu) < 0:
        raise ValueError(f"{kind}: all coefficients of friction must be nonnegative; got "
                         f"mu_s={mu_s!r}, mu_d={mu_d!r}, mu_v={mu_v!r}")
    if mu[1] > mu[0]:
        raise ValueError(f"{kind}: the dynamic coefficient of friction can't be larger than the static "
                         f"coefficient; got mu_s={mu_s!r}, mu_d={mu_d!r}")
    return mu


def _plane_frame(normal, height, kind: str) -> Transform:
    """Simbody's Rotation(normal, ZAxis) placed at height along the normal."""
    n = unit3(normal, "normal", kind)
    x = np.asarray(perpendicular(jnp.asarray(n)))
    return Transform(np.stack([x, np.cross(n, x), n], axis=-1), scalar(height, "height", kind) * n)


class _Conditional(Module):
    """What every conditional constraint has: the wrapped constraint
    (``constraint``, its ConstraintIndex, left disabled by default), its
    name, and its index in its adopting list (set by adoption)."""

    constraint: int = eqx.field(static=True)
    label: str = eqx.field(static=True)
    matter: object = eqx.field(static=True)  #: the handle's subsystem; None in the Model's element
    index: int | None = eqx.field(static=True)

    def _wrap_constraint(self, kind: str, constraint, name):
        constraint.set_disabled_by_default(True)
        self.constraint, self.index = constraint.index, None
        self.matter = constraint.matter
        self.label = f"{kind} {name!r}" if name else f"{kind} (on constraint {constraint.index})"

    def get_my_index(self):
        """The index given by adoption (None before)."""
        return self.index

    def get_constraint(self):
        """The wrapped constraint's handle (while building)."""
        return builder_of(self, "get_constraint").get_constraint(self.constraint)

    def _check(self, state):
        if self.matter is not None and not state.topology.same_tree(self.matter.topology()):
            raise ValueError(f"{self.label} belongs to a different MultibodySystem than this State")

    def _wrapped(self, state):
        self._check(state)
        return state.instance.constraints[self.constraint]

    def is_enabled(self, state):
        """Whether the wrapped constraint is enabled in ``state`` (a JAX bool)."""
        self._check(state)
        return ~state.constraint_disabled[self.constraint]

    def set_enabled(self, state, enabled):
        """A new State with the wrapped constraint enabled (or disabled)."""
        self._check(state)
        return state.with_constraint_disabled(state.constraint_disabled.at[self.constraint].set(~jnp.asarray(enabled)))

    def enable(self, state):
        return self.set_enabled(state, True)

    def disable(self, state):
        return self.set_enabled(state, False)


class UnilateralContact(_Conditional):
    """Base of the unilateral contacts: the sign convention, the minimum
    coefficient of restitution and, with friction, mu_s >= mu_d >= 0 and
    mu_v >= 0; ``index`` is the UnilateralContactIndex."""

    sign: float = eqx.field(static=True)
    friction: bool = eqx.field(static=True)
    min_cor: jnp.ndarray
    mu_s: jnp.ndarray
    mu_d: jnp.ndarray
    mu_v: jnp.ndarray

    def _wrap(self, kind: str, constraint, sign: int, min_cor, friction=None, name=None):
        """Record the wrapped constraint and the numbers."""
        self._wrap_constraint(kind, constraint, name)
        self.sign = float(sign)
        self.min_cor = _cor(min_cor, kind)
        self.friction = friction is not None
        self.mu_s, self.mu_d, self.mu_v = (np.zeros(()),) * 3 if friction is None else _friction(*friction, kind)

    # -- Simbody's queries ------------------------------------------------------------------
    def get_sign_convention(self) -> float:
        """1: perr >= 0 is allowed (a signed distance); -1: perr <= 0 is."""
        return self.sign

    def has_friction(self, state=None) -> bool:
        return self.friction

    def get_perr(self, state):
        """The contact's position error, enabled or not (Position)."""
        state.require(Stage.Position, f"{self.label}.get_perr")
        return self._wrapped(state).get_position_errors_as_vector(state)[0]

    def get_verr(self, state):
        """Its time derivative (Velocity)."""
        state.require(Stage.Velocity, f"{self.label}.get_verr")
        return self._wrapped(state).get_velocity_errors_as_vector(state)[0]

    def get_aerr(self, state):
        """Its second time derivative at the State's udot (Acceleration)."""
        state.require(Stage.Acceleration, f"{self.label}.get_aerr")
        return self._wrapped(state).get_acceleration_errors_as_vector(state)[0]

    def is_proximal(self, state, ptol):
        """sign * perr <= ptol: close enough to touching to take part in a step."""
        return self.sign * self.get_perr(state) <= ptol

    def get_slip_velocity(self, state):
        """(2,) the velocity of the second body's contact point relative to the
        first's along the contact frame's x and y (Velocity); NaN without friction."""
        if not self.friction:
            return jnp.full(2, jnp.nan, state.u.dtype)
        state.require(Stage.Velocity, f"{self.label}.get_slip_velocity")
        return self._wrapped(state).get_velocity_errors_as_vector(state)[1:3]

    def calc_effective_cor(self, default_capture_speed, default_min_cor_speed, impact_speed):
        """The coefficient of restitution at ``impact_speed`` (m/s, >= 0)."""
        return calc_effective_cor(self.min_cor, default_capture_speed, default_min_cor_speed, impact_speed)

    def calc_effective_cof(self, default_transition_speed, slip_speed):
        """The coefficient of friction at ``slip_speed`` (m/s, >= 0); NaN without friction."""
        if not self.friction:
            return jnp.nan
        return calc_effective_cof(self.mu_s, self.mu_d, self.mu_v, default_transition_speed, slip_speed)


class HardStopUpper(UnilateralContact):
    """q_which of ``mobod`` may not exceed ``default_upper_limit`` (sign -1);
    an impact rebounds with coefficient of restitution ``min_cor``."""

    def __init__(self, mobod, which_q: int, default_upper_limit, min_cor, *, name=None):
        stop = ConstantCoordinate(mobod, which_q, default_upper_limit, name=name)
        self._wrap("HardStopUpper", stop, -1, min_cor, name=name)


class HardStopLower(UnilateralContact):
    """q_which of ``mobod`` may not fall below ``default_lower_limit`` (sign 1)."""

    def __init__(self, mobod, which_q: int, default_lower_limit, min_cor, *, name=None):
        stop = ConstantCoordinate(mobod, which_q, default_lower_limit, name=name)
        self._wrap("HardStopLower", stop, 1, min_cor, name=name)


class Rope(UnilateralContact):
    """Point 1 on ``mobod1`` and point 2 on ``mobod2`` stay at most
    ``default_length_limit`` apart (sign -1 on perr = distance - length)."""

    def __init__(self, mobod1, point1, mobod2, point2, default_length_limit, min_cor, *, name=None):
        rod = Rod(mobod1, point1, mobod2, point2, default_length_limit, name=name)
        self._wrap("Rope", rod, -1, min_cor, name=name)


class PointPlaneFrictionlessContact(UnilateralContact):
    """A point on the follower body stays on the positive side of a plane on
    the plane body (normal in the plane body, ``height`` along it); no friction."""

    def __init__(self, plane_body, normal, height, follower_body, point, min_cor, *, name=None):
        kind = "PointPlaneFrictionlessContact"
        n = unit3(normal, "normal", kind)
        plane = PointInPlane(plane_body, n, scalar(height, "height", kind), follower_body, point, name=name)
        self._wrap(kind, plane, 1, min_cor, name=name)


class PointPlaneContact(UnilateralContact):
    """As PointPlaneFrictionlessContact, with Coulomb friction in the plane."""

    def __init__(self, plane_body, normal, height, follower_body, point, min_cor, mu_s, mu_d, mu_v, *,
                 name=None):
        kind = "PointPlaneContact"
        contact = PointOnPlaneContact(plane_body, _plane_frame(normal, height, kind), follower_body, point,
                                      name=name)
        self._wrap(kind, contact, 1, min_cor, (mu_s, mu_d, mu_v), name=name)


class SpherePlaneContact(UnilateralContact):
    """A sphere (``center`` on the follower body, ``radius``) stays on the
    positive side of a plane on the plane body, with friction."""

    def __init__(self, plane_body, normal, height, follower_body, center, radius, min_cor, mu_s, mu_d, mu_v, *,
                 name=None):
        kind = "SpherePlaneContact"
        contact = SphereOnPlaneContact(plane_body, _plane_frame(normal, height, kind), follower_body, center,
                                       radius, True, name=name)
        self._wrap(kind, contact, 1, min_cor, (mu_s, mu_d, mu_v), name=name)


class SphereSphereContact(UnilateralContact):
    """Two spheres, one on each body, do not interpenetrate; with friction."""

    def __init__(self, mobod_f, center_on_f, radius_on_f, mobod_b, center_on_b, radius_on_b, min_cor, mu_s, mu_d,
                 mu_v, *, name=None):
        contact = SphereOnSphereContact(mobod_f, center_on_f, radius_on_f, mobod_b, center_on_b, radius_on_b, True,
                                        name=name)
        self._wrap("SphereSphereContact", contact, 1, min_cor, (mu_s, mu_d, mu_v), name=name)


class EdgeEdgeContact(UnilateralContact):
    """Two crossing edges (edge frames: origin at the edge centre, x along it,
    z out of its solid) do not pass through each other; with friction."""

    def __init__(self, mobod_f, edge_frame_f, half_length_f, mobod_b, edge_frame_b, half_length_b, min_cor, mu_s,
                 mu_d, mu_v, *, name=None):
        contact = LineOnLineContact(mobod_f, edge_frame_f, half_length_f, mobod_b, edge_frame_b, half_length_b, True,
                                    name=name)
        self._wrap("EdgeEdgeContact", contact, 1, min_cor, (mu_s, mu_d, mu_v), name=name)


class UnilateralSpeedConstraint(_Conditional):
    """A ratchet: u_which of ``mobod`` moves only in the direction of ``sign``
    (sign * u >= 0), stopped by an impulse otherwise (no restitution: it is a
    velocity-level constraint). Simbody declares the class but provides none;
    this one wraps a ConstantSpeed(mobod, which_u, 0). It is always in play
    under the time stepper, impacts included."""

    sign: float = eqx.field(static=True)

    def __init__(self, mobod, which_u: int, sign: int = 1, *, name=None):
        if sign not in (1, -1):
            raise ValueError(f"UnilateralSpeedConstraint: sign must be 1 or -1, got {sign!r}")
        self._wrap_constraint("UnilateralSpeedConstraint", ConstantSpeed(mobod, which_u, 0.0, name=name), name)
        self.sign = float(sign)

    def get_sign_convention(self) -> float:
        return self.sign


class BoundedSpeedConstraint(_Conditional):
    """A speed-control motor of limited strength: u_which of ``mobod`` held at
    ``speed`` as long as the force (N or N m) that takes stays within
    [lower, upper], and that bound applied while it slips (Simbody's
    definition, lower <= -lambda <= upper; Simbody declares the class but
    provides none). It wraps a ConstantSpeed(mobod, which_u, speed) and acts
    in the time stepper's dynamics phase (an impact's impulse of a bounded
    force is zero)."""

    lower: jnp.ndarray
    upper: jnp.ndarray

    def __init__(self, mobod, which_u: int, speed, lower, upper, *, name=None):
        kind = "BoundedSpeedConstraint"
        lo, hi = scalar(lower, "lower", kind), scalar(upper, "upper", kind)
        if lo > hi:
            raise ValueError(f"{kind}: the lower bound {float(lo)} exceeds the upper bound {float(hi)}")
        self._wrap_constraint(kind, ConstantSpeed(mobod, which_u, speed, name=name), name)
        self.lower, self.upper = lo, hi

    def calc_effective_bounds(self, state=None):
        """(lower, upper) bounds of the force (N or N m)."""
        return self.lower, self.upper


class StateLimitedFriction(Module):
    """Friction whose normal force N is known from the State (Simbody's
    StateLimitedFriction, which Simbody declares without implementing): the
    velocity errors of the wrapped ``constraints`` (1 to 3 rows in all: a
    ``Constraint.ConstantSpeed(mobod, which_u, 0)`` for a joint's dry
    friction, two ``NoSlip1D`` for a point sliding on a plane, ...) are the
    slip, which the time stepper stops while the friction force that takes
    has a length |f| <= mu N, and opposes with |f| = mu N while it slips;
    mu is Simbody's effective coefficient of friction
    (``calc_effective_cof``) at the slip speed at the start of the step.

    ``normal_force`` (N, >= 0) is a number (a Model leaf) or a function of a
    State realized to Velocity returning one (traced once per Model, as a
    ``Force.Custom``'s is: numbers that change belong in the Model). The
    element takes part in a step when N is at least the stepper's
    ``min_significant_force`` (and is enabled in the State it returns), in
    the dynamics phase only: during an impact a finite force gives no
    impulse. The wrapped constraints are disabled by default, and must have
    velocity rows only."""

    constraints: tuple = eqx.field(static=True)  #: the wrapped ConstraintIndex values
    label: str = eqx.field(static=True)
    matter: object = eqx.field(static=True)  #: the handle's subsystem; None in the Model's element
    index: int | None = eqx.field(static=True)
    normal_force_function: object = eqx.field(static=True)  #: None when ``normal_force`` is a number
    normal_force: jnp.ndarray | None
    mu_s: jnp.ndarray
    mu_d: jnp.ndarray
    mu_v: jnp.ndarray

    def __init__(self, constraints, normal_force, mu_s, mu_d, mu_v, *, name=None):
        kind = "StateLimitedFriction"
        constraints = tuple(constraints) if isinstance(constraints, (tuple, list)) else (constraints,)
        rows = 0
        for c in constraints:
            if not hasattr(c, "mv") or getattr(c, "matter", None) is None:
                raise TypeError(f"{kind}: expected constraint handles, got {type(c).__name__}")
            if c.mp or c.ma or not c.mv:
                raise ValueError(f"{kind}: {c.label} must have velocity rows only (its counts (mp, mv, ma) are "
                                 f"{(c.mp, c.mv, c.ma)})")
            rows += c.mv
        if not 1 <= rows <= 3:
            raise ValueError(f"{kind}: the wrapped constraints have {rows} velocity rows; a friction has 1 to 3")
        if len({id(c.matter) for c in constraints}) != 1:
            raise ValueError(f"{kind}: the wrapped constraints belong to different matter subsystems")
        if callable(normal_force):
            self.normal_force_function, self.normal_force = normal_force, None
        else:
            n = scalar(normal_force, "normal_force", kind)
            if n < 0:
                raise ValueError(f"{kind}: normal_force must be nonnegative, got {normal_force!r}")
            self.normal_force_function, self.normal_force = None, n
        self.mu_s, self.mu_d, self.mu_v = _friction(mu_s, mu_d, mu_v, kind)
        for c in constraints:
            c.set_disabled_by_default(True)
        self.constraints = tuple(c.index for c in constraints)
        self.matter, self.index = constraints[0].matter, None
        self.label = f"{kind} {name!r}" if name else f"{kind} (on constraints {list(self.constraints)})"

    def get_my_index(self):
        """The index given by adoption (None before)."""
        return self.index

    def get_constraints(self) -> tuple:
        """The wrapped constraints' handles (while building)."""
        matter = builder_of(self, "get_constraints")
        return tuple(matter.get_constraint(i) for i in self.constraints)

    def _check(self, state):
        if self.matter is not None and not state.topology.same_tree(self.matter.topology()):
            raise ValueError(f"{self.label} belongs to a different MultibodySystem than this State")

    def get_normal_force_magnitude(self, state):
        """N (N) at a State realized to Velocity, from the State's Model numbers."""
        self._check(state)
        state.require(Stage.Velocity, f"{self.label}.get_normal_force_magnitude")
        if self.matter is not None and self.index is None:
            raise ValueError(f"{self.label}: adopt it first (matter.adopt_state_limited_friction)")
        element = self if self.matter is None else state.instance.state_limited_frictions[self.index]
        if element.normal_force_function is None:
            return element.normal_force
        return jnp.asarray(element.normal_force_function(state), state.u.dtype)

    def get_slip_speed(self, state):
        """The length of the wrapped constraints' velocity errors (m/s or rad/s) (Velocity)."""
        self._check(state)
        verr = jnp.concatenate([state.instance.constraints[i].get_velocity_errors_as_vector(state)
                                for i in self.constraints])
        return jnp.sqrt(jnp.sum(verr * verr))

    def calc_effective_cof(self, default_transition_speed, slip_speed):
        """Simbody's rule (``ConditionalConstraint.calc_effective_cof``) with this element's coefficients."""
        return calc_effective_cof(self.mu_s, self.mu_d, self.mu_v, default_transition_speed, slip_speed)

    def is_enabled(self, state):
        """Whether the wrapped constraints are enabled in ``state`` (a JAX bool)."""
        self._check(state)
        return ~jnp.any(state.constraint_disabled[np.asarray(self.constraints)])

    def set_enabled(self, state, enabled):
        """A new State with the wrapped constraints enabled (or disabled)."""
        self._check(state)
        flags = state.constraint_disabled.at[np.asarray(self.constraints)].set(~jnp.asarray(enabled))
        return state.with_constraint_disabled(flags)

    def enable(self, state):
        return self.set_enabled(state, True)

    def disable(self, state):
        return self.set_enabled(state, False)
