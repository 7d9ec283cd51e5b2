"""Euler-angle rotations with u = qdot: Universal (body-fixed X then Y) and
Gimbal (body-fixed X-Y-Z). The angular H columns are the successive joint
axes expressed in F: x, Rx(q0) y, Rx(q0) Ry(q1) z."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer
from simbodyx.mobilizers.fitting import pick
from simbodyx.spatial.rotation import body_fixed_xyz_to_matrix, matrix_to_body_fixed_xyz, rot_x, rot_y
from simbodyx.spatial.vectors import mat_mul


def _angular_rows(axes):
    """(k, 6) rows [axis; 0] from (k, 3) axes."""
    return jnp.concatenate([axes, jnp.zeros_like(axes)], axis=-1)


@dataclasses.dataclass(frozen=True)
class Universal(Mobilizer):
    """X_FM = (Rx(q0) Ry(q1), 0); its two axes stay perpendicular, so no
    configuration is singular."""

    nq = 2
    nu = 2

    def X_FM(self, q, params):
        return mat_mul(rot_x(q[0]), rot_y(q[1])), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        Rx = rot_x(q[0])
        return _angular_rows(jnp.stack([Rx[:, 0], Rx[:, 1]]))

    def fit_q(self, q, params, R=None, p=None):
        """From Rx(a) Ry(b) = [[cb, 0, sb], [., ca, .], [., sa, .]]: a from the
        second column, b from the first row (exact for reachable R)."""
        return pick(R, lambda R: jnp.stack([jnp.arctan2(R[2, 1], R[1, 1]), jnp.arctan2(R[0, 2], R[0, 0])]), q)


@dataclasses.dataclass(frozen=True)
class Gimbal(Mobilizer):
    """X_FM = (Rx(q0) Ry(q1) Rz(q2), 0); u = Euler rates; singular at q1 = +-90 deg
    (the three axes coplanar: H loses rank and the mass matrix with it)."""

    nq = 3
    nu = 3

    def X_FM(self, q, params):
        return body_fixed_xyz_to_matrix(q), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        Rx = rot_x(q[0])
        Rxy = mat_mul(Rx, rot_y(q[1]))
        return _angular_rows(jnp.stack([Rx[:, 0], Rx[:, 1], Rxy[:, 2]]))

    def fit_q(self, q, params, R=None, p=None):
        return pick(R, matrix_to_body_fixed_xyz, q)


@dataclasses.dataclass(frozen=True)
class Bushing(Mobilizer):
    """q = [X-Y-Z angles, p_FM]: Mo is first translated by p_FM (in F), then M
    rotates body-fixed X-Y-Z about it; u = qdot (Euler rates, v_FM). H = Gimbal's
    rows, then [0; 1]. Singular at q1 = +-90 deg."""

    nq = 6
    nu = 6

    def X_FM(self, q, params):
        return Gimbal().X_FM(q[:3], params)[0], q[3:]

    def H_FM(self, q, params):
        eye = jnp.eye(3, dtype=q.dtype)
        translation = jnp.concatenate([jnp.zeros_like(eye), eye], axis=-1)
        return jnp.concatenate([Gimbal().H_FM(q[:3], params), translation], axis=0)

    def fit_q(self, q, params, R=None, p=None):
        return jnp.concatenate([pick(R, matrix_to_body_fixed_xyz, q[:3]), pick(p, lambda p: p, q[3:])])
