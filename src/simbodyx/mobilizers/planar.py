"""Planar: q = [angle about the common z, x along Fx, y along Fy]; the
translation is measured in F (not rotated). H = [z;0], [0;x], [0;y]."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit
from simbodyx.mobilizers.fitting import closest_z_angle, pick
from simbodyx.spatial.rotation import rot_z


@dataclasses.dataclass(frozen=True)
class Planar(Mobilizer):
    nq = 3
    nu = 3

    def X_FM(self, q, params):
        return rot_z(q[0]), jnp.stack([q[1], q[2], 0 * q[0]])

    def H_FM(self, q, params):
        return rows(unit(2, q.dtype), unit(0, q.dtype, True), unit(1, q.dtype, True))

    def fit_q(self, q, params, R=None, p=None):
        """The closest z angle; p's x and y (its z is unreachable and dropped)."""
        return jnp.concatenate([jnp.stack([pick(R, closest_z_angle, q[0])]), pick(p, lambda p: p[:2], q[1:])])
