"""Euler-angle rotations with u = qdot: Universal (body-fixed X then Y) and
Gimbal (body-fixed X-Y-Z). The angular H columns are the successive joint
axes expressed in F: x, Rx(q0) y, Rx(q0) Ry(q1) z."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer
from simbodyx.spatial.rotation import body_fixed_xyz_to_matrix, rot_x, rot_y
from simbodyx.spatial.vectors import mat_mul


def _angular_rows(axes):
    """(k, 6) rows [axis; 0] from (k, 3) axes."""
    return jnp.concatenate([axes, jnp.zeros_like(axes)], axis=-1)


@dataclasses.dataclass(frozen=True)
class Universal(Mobilizer):
    """X_FM = (Rx(q0) Ry(q1), 0); singular near q1 = +-90 deg."""

    nq = 2
    nu = 2

    def X_FM(self, q, params):
        return mat_mul(rot_x(q[0]), rot_y(q[1])), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        Rx = rot_x(q[0])
        return _angular_rows(jnp.stack([Rx[:, 0], Rx[:, 1]]))


@dataclasses.dataclass(frozen=True)
class Gimbal(Mobilizer):
    """X_FM = (Rx(q0) Ry(q1) Rz(q2), 0); u = Euler rates; singular at q1 = +-90 deg."""

    nq = 3
    nu = 3

    def X_FM(self, q, params):
        return body_fixed_xyz_to_matrix(q), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        Rx = rot_x(q[0])
        Rxy = mat_mul(Rx, rot_y(q[1]))
        return _angular_rows(jnp.stack([Rx[:, 0], Rx[:, 1], Rxy[:, 2]]))
