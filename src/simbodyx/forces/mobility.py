"""Forces on single mobilities: MobilityLinearSpring, MobilityLinearDamper,
MobilityConstantForce, and GlobalDamper on every mobility."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

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
