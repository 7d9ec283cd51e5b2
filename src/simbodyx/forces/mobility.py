"""Forces on single mobilities: MobilityLinearSpring, MobilityLinearDamper,
MobilityConstantForce, MobilityLinearStop (a joint limit),
MobilityCoulombFriction (dry friction, smoothed), and GlobalDamper on every
mobility."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx.forces.base import ForceElement, as_param, zeros


def _mobility_index(forces, body, which, label, need_q=False):
    forces._check_body(body, label)
    if not isinstance(which, int) or not 0 <= which < body.num_u:
        raise IndexError(f"{label}: mobility index {which!r} out of range for {body._label} with {body.num_u} u")
    if need_q and not body._kind.qdot_is_u:
        raise ValueError(f"{label}: {body._label} has qdot != u, so its q and u cannot be paired by index")
    return body.index, which


class _OnMobility(ForceElement):
    body: int = eqx.field(static=True)
    which: int = eqx.field(static=True)

    def _u_index(self, state):
        return state.topology.u_start[self.body] + self.which

    def _q_index(self, state):
        return state.topology.q_start[self.body] + self.which

    def _apply(self, state, f):
        mobility, body = zeros(state)
        return mobility.at[self._u_index(state)].set(f), body


class MobilityLinearSpring(_OnMobility):
    """f = -k (q - q0) on one mobility whose q and u coincide (Pin, Slider, ...);
    potential energy 1/2 k (q - q0)^2."""

    NONNEGATIVE = ("stiffness",)

    stiffness: jnp.ndarray
    q_zero: jnp.ndarray

    def __init__(self, forces, body, which, stiffness, q_zero):
        label = "Force.MobilityLinearSpring"
        self.body, self.which = _mobility_index(forces, body, which, label, need_q=True)
        self.stiffness = as_param(stiffness, (), "stiffness", label)
        self.q_zero = as_param(q_zero, (), "q_zero", label)
        forces._add(self)

    def calc(self, model, state):
        return self._apply(state, -self.stiffness * (state.q[self._q_index(state)] - self.q_zero))

    def potential_energy(self, model, state):
        return 0.5 * self.stiffness * (state.q[self._q_index(state)] - self.q_zero) ** 2


class MobilityLinearDamper(_OnMobility):
    """f = -c u on one mobility."""

    NONNEGATIVE = ("damping",)

    damping: jnp.ndarray

    def __init__(self, forces, body, which, damping):
        label = "Force.MobilityLinearDamper"
        self.body, self.which = _mobility_index(forces, body, which, label)
        self.damping = as_param(damping, (), "damping", label)
        forces._add(self)

    def calc(self, model, state):
        return self._apply(state, -self.damping * state.u[self._u_index(state)])


class MobilityConstantForce(_OnMobility):
    """A constant generalized force on one mobility."""

    force: jnp.ndarray

    def __init__(self, forces, body, which, force):
        label = "Force.MobilityConstantForce"
        self.body, self.which = _mobility_index(forces, body, which, label)
        self.force = as_param(force, (), "force", label)
        forces._add(self)

    def calc(self, model, state):
        return self._apply(state, self.force)


class MobilityCoulombFriction(_OnMobility):
    """Dry friction on one mobility, smoothed so that it is differentiable
    at rest: f = -F u / sqrt(u^2 + vt^2). Well above the transition velocity
    vt it is Coulomb's -F sign(u) (to a fraction vt^2 / (2 u^2) of F); near
    u = 0 a damper of coefficient F / vt, so a generalized force |f| < F
    keeps the mobility creeping at u = vt f / sqrt(F^2 - f^2) instead of
    holding it. ``friction`` F in N (sliding u) or N m (turning u), >= 0;
    ``transition_velocity`` vt in m/s or rad/s, > 0. Simbody has no such
    element (its dry friction is rigid contact's StateLimitedFriction);
    ``sx.io.load_mjcf`` models MuJoCo's joint ``frictionloss`` with it."""

    NONNEGATIVE = ("friction",)

    friction: jnp.ndarray
    transition_velocity: jnp.ndarray

    def __init__(self, forces, body, which, friction, transition_velocity):
        label = "Force.MobilityCoulombFriction"
        self.body, self.which = _mobility_index(forces, body, which, label)
        self.friction = as_param(friction, (), "friction", label)
        self.transition_velocity = as_param(transition_velocity, (), "transition_velocity", label)
        forces._add(self)

    def check(self) -> None:
        super().check()
        if np.any(np.asarray(self.transition_velocity) <= 0):
            raise ValueError(f"Force.MobilityCoulombFriction: transition_velocity must be > 0, got "
                             f"{self.transition_velocity}")

    def calc(self, model, state):
        u = state.u[self._u_index(state)]
        return self._apply(state, -self.friction * u / jnp.sqrt(u * u + self.transition_velocity ** 2))


class GlobalDamper(ForceElement):
    """f = -c u on every mobility."""

    NONNEGATIVE = ("damping",)

    damping: jnp.ndarray

    def __init__(self, forces, matter, damping):
        label = "Force.GlobalDamper"
        forces._check_matter(matter, label)
        self.damping = as_param(damping, (), "damping", label)
        forces._add(self)

    def calc(self, model, state):
        _, body = zeros(state)
        return -self.damping * state.u, body


class MobilityLinearStop(_OnMobility):
    """Simbody's joint stop on one q (whose qdot is its u): past ``q_high`` by
    x > 0 the generalized force is min(0, -k x (1 + d qdot)), below ``q_low``
    by x < 0 it is max(0, -k x (1 - d qdot)), so it never pulls; potential
    energy 1/2 k x^2. ``dissipation`` d (s/rad or s/m) is Hunt-Crossley's."""

    NONNEGATIVE = ("stiffness", "dissipation")

    stiffness: jnp.ndarray
    dissipation: jnp.ndarray
    q_low: jnp.ndarray
    q_high: jnp.ndarray

    def __init__(self, forces, mobilized_body, which_q, default_stiffness, default_dissipation, default_q_low,
                 default_q_high):
        label = "Force.MobilityLinearStop"
        self.body, self.which = _mobility_index(forces, mobilized_body, which_q, label, need_q=True)
        self.stiffness = as_param(default_stiffness, (), "stiffness", label)
        self.dissipation = as_param(default_dissipation, (), "dissipation", label)
        self.q_low = as_param(default_q_low, (), "q_low", label)
        self.q_high = as_param(default_q_high, (), "q_high", label)
        forces._add(self)

    def check(self) -> None:
        super().check()
        if np.any(np.asarray(self.q_low) > np.asarray(self.q_high)):
            raise ValueError(f"Force.MobilityLinearStop: the lower bound {self.q_low} is above the upper bound "
                             f"{self.q_high}")

    def get_lower_bound(self):
        return self.q_low

    def get_upper_bound(self):
        return self.q_high

    def get_stiffness(self):
        return self.stiffness

    def get_dissipation(self):
        return self.dissipation

    def _excursion(self, state):
        """x: q - q_high above the upper bound, q - q_low below the lower, else 0."""
        q = state.q[self._q_index(state)]
        return jnp.where(q > self.q_high, q - self.q_high, jnp.where(q < self.q_low, q - self.q_low, 0.0))

    def calc(self, model, state):
        x = self._excursion(state)
        qdot = state.u[self._u_index(state)]
        upper = jnp.minimum(0.0, -self.stiffness * x * (1 + self.dissipation * qdot))
        lower = jnp.maximum(0.0, -self.stiffness * x * (1 - self.dissipation * qdot))
        return self._apply(state, jnp.where(x > 0, upper, lower))

    def potential_energy(self, model, state):
        return 0.5 * self.stiffness * self._excursion(state) ** 2
