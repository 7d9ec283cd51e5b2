"""Unrestricted orientation: Ball (Orientation, Spherical) and Free.

q holds a quaternion [w, x, y, z] (not necessarily normalized) or, with the
model's Euler-angle option, body-fixed X-Y-Z angles. In both modes the
angular u is w_FM, the angular velocity of M in F expressed in F, so H is
constant; Free's translational q is p_FM and u = v_FM = d/dt p_FM (in F).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer
from simbodyx.spatial.rotation import body_fixed_xyz_to_matrix, quaternion_to_matrix
from simbodyx.spatial.vectors import mat_mul


def quaternion_N(q):
    """(4, 3) qdot = N w for w in the parent frame: qdot = 1/2 [0, w] (x) q."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return 0.5 * jnp.stack([
        jnp.stack([-x, -y, -z]),
        jnp.stack([w, z, -y]),
        jnp.stack([-z, w, x]),
        jnp.stack([y, -x, w]),
    ])


def quaternion_N_inv(q):
    """(3, 4) w = NInv qdot; NInv N = |q|^2 1 (Simbody's unnormalized form)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return 2.0 * jnp.stack([
        jnp.stack([-x, w, -z, y]),
        jnp.stack([-y, z, w, -x]),
        jnp.stack([-z, -y, x, w]),
    ])


def euler_xyz_rates_to_body_velocity(a):
    """(3, 3) A with w_M = A(a) adot for body-fixed X-Y-Z angles a."""
    s1, c1 = jnp.sin(a[1]), jnp.cos(a[1])
    s2, c2 = jnp.sin(a[2]), jnp.cos(a[2])
    z = jnp.zeros_like(s1)
    return jnp.stack([
        jnp.stack([c1 * c2, s2, z]),
        jnp.stack([-c1 * s2, c2, z]),
        jnp.stack([s1, z, jnp.ones_like(s1)]),
    ])


def euler_xyz_N_body(a):
    """(3, 3) N_B with adot = N_B(a) w_M; singular at cos(a1) = 0."""
    s1, c1 = jnp.sin(a[1]), jnp.cos(a[1])
    s2, c2 = jnp.sin(a[2]), jnp.cos(a[2])
    z = jnp.zeros_like(s1)
    return jnp.stack([
        jnp.stack([c2 / c1, -s2 / c1, z]),
        jnp.stack([s2, c2, z]),
        jnp.stack([-s1 * c2 / c1, s1 * s2 / c1, jnp.ones_like(s1)]),
    ])


@dataclasses.dataclass(frozen=True)
class Ball(Mobilizer):
    """Fo = Mo; u = w_FM in F. nq = 4 (quaternion) or 3 (Euler angles)."""

    nu = 3
    use_euler_angles: bool = False
    qdot_is_u = False

    @property
    def nq(self):
        return 3 if self.use_euler_angles else 4

    @property
    def quaternion_at(self):
        return None if self.use_euler_angles else 0

    def default_q(self):
        return (0.0, 0.0, 0.0) if self.use_euler_angles else (1.0, 0.0, 0.0, 0.0)

    def rotation(self, q):
        """R_FM from this kind's rotational q."""
        return body_fixed_xyz_to_matrix(q) if self.use_euler_angles else quaternion_to_matrix(q)

    def X_FM(self, q, params):
        return self.rotation(q), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        eye = jnp.eye(3, dtype=q.dtype)
        return jnp.concatenate([eye, jnp.zeros_like(eye)], axis=-1)

    def N(self, q):
        if not self.use_euler_angles:
            return quaternion_N(q)
        return mat_mul(euler_xyz_N_body(q), self.rotation(q), transpose_b=True)

    def N_inv(self, q):
        if not self.use_euler_angles:
            return quaternion_N_inv(q)
        return mat_mul(self.rotation(q), euler_xyz_rates_to_body_velocity(q))


@dataclasses.dataclass(frozen=True)
class Free(Ball):
    """Six dof: q = [orientation (4 or 3), p_FM (3)], u = [w_FM; v_FM], both in F."""

    nu = 6

    @property
    def nq(self):
        return 6 if self.use_euler_angles else 7

    def default_q(self):
        return super().default_q() + (0.0, 0.0, 0.0)

    def X_FM(self, q, params):
        return self.rotation(q[:-3]), q[-3:]

    def H_FM(self, q, params):
        return jnp.eye(6, dtype=q.dtype)

    def N(self, q):
        return _block_diag(super().N(q[:-3]), jnp.eye(3, dtype=q.dtype))

    def N_inv(self, q):
        return _block_diag(super().N_inv(q[:-3]), jnp.eye(3, dtype=q.dtype))


def _block_diag(a, b):
    top = jnp.concatenate([a, jnp.zeros((a.shape[0], b.shape[1]), a.dtype)], axis=1)
    bottom = jnp.concatenate([jnp.zeros((b.shape[0], a.shape[1]), a.dtype), b], axis=1)
    return jnp.concatenate([top, bottom], axis=0)
