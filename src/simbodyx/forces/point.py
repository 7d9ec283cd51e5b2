"""Forces at points and on bodies: TwoPointLinearSpring, TwoPointLinearDamper,
TwoPointConstantForce, ConstantForce (at a station) and ConstantTorque."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx.forces.base import ForceElement, as_param, forces_at, velocity_at, zeros
from simbodyx.spatial.vectors import safe_norm


class _TwoPoint(ForceElement):
    body1: int = eqx.field(static=True)
    body2: int = eqx.field(static=True)
    station1: jnp.ndarray
    station2: jnp.ndarray

    def _init_points(self, forces, b1, s1, b2, s2, label):
        for b in (b1, b2):
            forces._check_body(b, label)
        self.body1, self.body2 = b1.index, b2.index
        self.station1 = as_param(s1, (3,), "station1", label)
        self.station2 = as_param(s2, (3,), "station2", label)

    def _geometry(self, state):
        X = state.position.X_GB
        p1 = X.R[self.body1] @ self.station1 + X.p[self.body1]
        p2 = X.R[self.body2] @ self.station2 + X.p[self.body2]
        d = p2 - p1
        length = safe_norm(d)
        direction = d / jnp.where(length > 0, length, 1.0)
        return length, direction

    def _apply(self, state, tension, direction):
        """Pull the two points toward each other with ``tension`` (N)."""
        f = tension * direction
        R = state.position.X_GB.R
        F = forces_at(state, self.body1, R[self.body1] @ self.station1, f)
        F = F + forces_at(state, self.body2, R[self.body2] @ self.station2, -f)
        return zeros(state)[0], F


class TwoPointLinearSpring(_TwoPoint):
    """Tension k (|p2 - p1| - x0) along the line between two stations;
    potential energy 1/2 k (length - x0)^2. No force at zero length."""

    NONNEGATIVE = ("stiffness",)

    stiffness: jnp.ndarray
    rest_length: jnp.ndarray

    def __init__(self, forces, body1, station1, body2, station2, stiffness, rest_length):
        label = "Force.TwoPointLinearSpring"
        self._init_points(forces, body1, station1, body2, station2, label)
        self.stiffness = as_param(stiffness, (), "stiffness", label)
        self.rest_length = as_param(rest_length, (), "rest length", label)
        forces._add(self)

    def calc(self, model, state):
        length, direction = self._geometry(state)
        return self._apply(state, self.stiffness * (length - self.rest_length), direction)

    def potential_energy(self, model, state):
        length, _ = self._geometry(state)
        return 0.5 * self.stiffness * (length - self.rest_length) ** 2


class TwoPointLinearDamper(_TwoPoint):
    """Tension c d(length)/dt along the line between two stations."""

    NONNEGATIVE = ("damping",)

    damping: jnp.ndarray

    def __init__(self, forces, body1, station1, body2, station2, damping):
        label = "Force.TwoPointLinearDamper"
        self._init_points(forces, body1, station1, body2, station2, label)
        self.damping = as_param(damping, (), "damping", label)
        forces._add(self)

    def calc(self, model, state):
        _, direction = self._geometry(state)
        R = state.position.X_GB.R
        rate = direction @ (velocity_at(state, self.body2, R[self.body2] @ self.station2)
                            - velocity_at(state, self.body1, R[self.body1] @ self.station1))
        return self._apply(state, self.damping * rate, direction)


class TwoPointConstantForce(_TwoPoint):
    """A force of constant magnitude ``force`` (N) along the line between two
    stations, pushing them apart when positive; none at zero distance.
    Simbody gives it no potential energy, and neither does simbodyx."""

    force: jnp.ndarray

    def __init__(self, forces, body1, station1, body2, station2, force):
        label = "Force.TwoPointConstantForce"
        self._init_points(forces, body1, station1, body2, station2, label)
        self.force = as_param(force, (), "force", label)
        forces._add(self)

    def calc(self, model, state):
        _, direction = self._geometry(state)
        return self._apply(state, -self.force, direction)


class ConstantForce(ForceElement):
    """A constant force (N, in G) at a station of a body (m, in B)."""

    body: int = eqx.field(static=True)
    station: jnp.ndarray
    force: jnp.ndarray

    def __init__(self, forces, body, station, force):
        label = "Force.ConstantForce"
        forces._check_body(body, label)
        self.body = body.index
        self.station = as_param(station, (3,), "station", label)
        self.force = as_param(force, (3,), "force", label)
        forces._add(self)

    def calc(self, model, state):
        offset = state.position.X_GB.R[self.body] @ self.station
        return zeros(state)[0], forces_at(state, self.body, offset, self.force)


class ConstantTorque(ForceElement):
    """A constant torque (N m, in G) on a body."""

    body: int = eqx.field(static=True)
    torque: jnp.ndarray

    def __init__(self, forces, body, torque):
        label = "Force.ConstantTorque"
        forces._check_body(body, label)
        self.body = body.index
        self.torque = as_param(torque, (3,), "torque", label)
        forces._add(self)

    def calc(self, model, state):
        mobility, F = zeros(state)
        return mobility, F.at[self.body, :3].add(self.torque)
