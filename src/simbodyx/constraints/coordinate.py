"""Constraints on mobilizer coordinates and speeds: ConstantCoordinate,
ConstantSpeed, ConstantAcceleration, CoordinateCoupler, SpeedCoupler and
PrescribedMotion, with Simbody's errors (multipliers act on the named q or
u: q-space forces for holonomic rows, mobility forces otherwise)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx.constraints.base import Constraint
from simbodyx.constraints.geometric import scalar
from simbodyx.functions import Function, as_function


def _which(mobod, which: int, kind: str, what: str) -> int:
    if mobod.is_ground():
        raise ValueError(f"Constraint.{kind}: Ground has no mobilizer to constrain")
    n = mobod.num_q if what == "q" else mobod.num_u
    if not isinstance(which, int) or not 0 <= which < n:
        raise IndexError(f"Constraint.{kind}: {what} index {which!r} out of range; {mobod._label} has {n}")
    return which


class ConstantCoordinate(Constraint):
    """q_which of a mobilizer held at ``position`` (1, 0, 0): perr = q - position."""

    DEFAULTS = {"position": ("position", scalar)}

    which_q: int = eqx.field(static=True)
    position: jnp.ndarray

    def __init__(self, mobilized_body, which_q: int, position, *, name=None):
        self.which_q = _which(mobilized_body, which_q, "ConstantCoordinate", "q")
        self._set_numbers("ConstantCoordinate", position=position)
        self._register("ConstantCoordinate", mobilizers=(mobilized_body,), counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return q[0][self.which_q][None] - self.position


class ConstantSpeed(Constraint):
    """u_which held at ``speed`` (0, 1, 0): verr = u - speed."""

    DEFAULTS = {"speed": ("speed", scalar)}

    which_u: int = eqx.field(static=True)
    speed: jnp.ndarray

    def __init__(self, mobilized_body, which_u: int, speed, *, name=None):
        self.which_u = _which(mobilized_body, which_u, "ConstantSpeed", "u")
        self._set_numbers("ConstantSpeed", speed=speed)
        self._register("ConstantSpeed", mobilizers=(mobilized_body,), counts=(0, 1, 0), name=name)

    def velocity_errors(self, k, V_AB, u):
        return u[0][self.which_u][None] - self.speed


class ConstantAcceleration(Constraint):
    """udot_which held at ``acceleration`` (0, 0, 1): aerr = udot - acceleration."""

    DEFAULTS = {"acceleration": ("acceleration", scalar)}

    which_u: int = eqx.field(static=True)
    acceleration: jnp.ndarray

    def __init__(self, mobilized_body, which_u: int, acceleration, *, name=None):
        self.which_u = _which(mobilized_body, which_u, "ConstantAcceleration", "u")
        self._set_numbers("ConstantAcceleration", acceleration=acceleration)
        self._register("ConstantAcceleration", mobilizers=(mobilized_body,), counts=(0, 0, 1), name=name)

    def acceleration_errors(self, k, A_AB, udot):
        return udot[0][self.which_u][None] - self.acceleration


def _mobilizer_slots(bodies, indices, kind: str, what: str):
    """Distinct mobilizers (in first-seen order) and, per argument, (mobilizer slot, index)."""
    bodies, indices = list(bodies), list(indices)
    if len(bodies) != len(indices):
        raise ValueError(f"Constraint.{kind}: {len(bodies)} bodies but {len(indices)} {what} indices")
    mobilizers, slots = [], []
    for b, i in zip(bodies, indices):
        if b not in mobilizers:
            mobilizers.append(b)
        slots.append((mobilizers.index(b), _which(b, int(i), kind, what)))
    return mobilizers, tuple(slots)


def _function(f, num_args: int, kind: str) -> Function:
    f = as_function(f, num_args)
    if f.num_args is not None and f.num_args != num_args:
        raise ValueError(f"Constraint.{kind}: the function takes {f.num_args} arguments, expected {num_args}")
    return f


class CoordinateCoupler(Constraint):
    """f(q_1, ..., q_n) = 0 over coordinates of any mobilizers (1, 0, 0)."""

    function: Function  # its numbers are Model leaves
    slots: tuple = eqx.field(static=True)

    def __init__(self, matter, function, coordinate_bodies, coordinate_indices, *, name=None):
        mobilizers, self.slots = _mobilizer_slots(coordinate_bodies, coordinate_indices, "CoordinateCoupler", "q")
        self.function = _function(function, len(self.slots), "CoordinateCoupler")
        self._register("CoordinateCoupler", mobilizers=mobilizers, matter=matter, counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return jnp.reshape(self.function(jnp.stack([q[m][i] for m, i in self.slots])), (1,))


class SpeedCoupler(Constraint):
    """f(u_1, ..., u_n, q_1, ..., q_k) = 0 over speeds and, optionally,
    coordinates (0, 1, 0): verr = f(u's, q's); the function should be linear
    in the speeds (Simbody's nonholonomic rule)."""

    function: Function  # its numbers are Model leaves
    speed_slots: tuple = eqx.field(static=True)
    coordinate_slots: tuple = eqx.field(static=True)

    def __init__(self, matter, function, speed_bodies, speed_indices, coordinate_bodies=(), coordinate_indices=(),
                 *, name=None):
        speed_mobs, speed_slots = _mobilizer_slots(speed_bodies, speed_indices, "SpeedCoupler", "u")
        coord_mobs, coord_slots = _mobilizer_slots(coordinate_bodies, coordinate_indices, "SpeedCoupler", "q")
        mobilizers = speed_mobs + [b for b in coord_mobs if b not in speed_mobs]
        remap = [mobilizers.index(b) for b in coord_mobs]
        self.speed_slots = speed_slots
        self.coordinate_slots = tuple((remap[m], i) for m, i in coord_slots)
        self.function = _function(function, len(speed_slots) + len(coord_slots), "SpeedCoupler")
        self._register("SpeedCoupler", mobilizers=mobilizers, matter=matter, counts=(0, 1, 0), name=name)

    def velocity_errors(self, k, V_AB, u):
        args = [u[m][i] for m, i in self.speed_slots] + [k.q[m][i] for m, i in self.coordinate_slots]
        return jnp.reshape(self.function(jnp.stack(args)), (1,))


class PrescribedMotion(Constraint):
    """q_which = f(t) (1, 0, 0): perr = q - f(t)."""

    function: Function  # its numbers are Model leaves
    which_q: int = eqx.field(static=True)

    def __init__(self, matter, function, mobilized_body, which_q: int, *, name=None):
        self.function = _function(function, 1, "PrescribedMotion")
        self.which_q = _which(mobilized_body, which_q, "PrescribedMotion", "q")
        self._register("PrescribedMotion", mobilizers=(mobilized_body,), matter=matter, counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return q[0][self.which_q][None] - jnp.reshape(self.function(jnp.reshape(t, (1,))), (1,))
