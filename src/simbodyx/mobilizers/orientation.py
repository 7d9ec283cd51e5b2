"""Mobilizers with unrestricted orientation coordinates: Ball (Orientation,
Spherical), Free, Ellipsoid, LineOrientation and FreeLine.

The rotational q is a quaternion [w, x, y, z] (not necessarily normalized)
or, with the model's Euler-angle option, body-fixed X-Y-Z angles; any
translational q (Free, FreeLine: p_FM in F) follows it. Ball, Free and
Ellipsoid take the angular velocity w_FM expressed in F as their angular u;
LineOrientation and FreeLine take only its x and y components expressed in M
(spin about Mz is not a mobility). Translational u are v_FM = d/dt p_FM in F.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from simbodyx.mobilizers.base import Mobilizer
from simbodyx.mobilizers.fitting import pick, rotation_between
from simbodyx.spatial.rotation import (
    body_fixed_xyz_to_matrix,
    matrix_to_body_fixed_xyz,
    matrix_to_quaternion,
    quaternion_to_matrix,
)
from simbodyx.spatial.vectors import cross, mat_mul, small_sum, spatial_vec


def _linear_in_q(rows):
    """(rows, columns, 4) C with M[i, j] = sum_k C[i, j, k] q[k], for the matrix M
    whose entries ``rows`` name as signed quaternion components ("-x")."""
    C = np.zeros((len(rows), len(rows[0]), 4))
    for i, row in enumerate(rows):
        for j, entry in enumerate(row):
            C[i, j, "wxyz".index(entry[-1])] = -1.0 if entry[0] == "-" else 1.0
    return C


#: N and NInv (= 4 N^T) as constant tensors times q: a product each in the
#: traced program, where stacking their entries took some thirty equations.
_QUATERNION_N = 0.5 * _linear_in_q([["-x", "-y", "-z"], ["w", "z", "-y"], ["-z", "w", "x"], ["y", "-x", "w"]])
_QUATERNION_N_INV = 4.0 * _QUATERNION_N.transpose(1, 0, 2)


def quaternion_N(q):
    """(4, 3) qdot = N w for w in the parent frame: qdot = 1/2 [0, w] (x) q."""
    return small_sum(_QUATERNION_N.astype(q.dtype) * q, axis=-1)


def quaternion_N_inv(q):
    """(3, 4) w = NInv qdot; NInv N = |q|^2 1 (Simbody's unnormalized form)."""
    return small_sum(_QUATERNION_N_INV.astype(q.dtype) * q, axis=-1)


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


def block_diag(a, b):
    """[[a, 0], [0, b]] for two matrices."""
    top = jnp.concatenate([a, jnp.zeros((a.shape[0], b.shape[1]), a.dtype)], axis=1)
    bottom = jnp.concatenate([jnp.zeros((b.shape[0], a.shape[1]), a.dtype), b], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


@dataclasses.dataclass(frozen=True)
class Oriented(Mobilizer):
    """Shared rotation-coordinate handling: q = [rotation (4 or 3), p (num_translations)]."""

    use_euler_angles: bool = False
    qdot_is_u = False
    num_translations: ClassVar[int] = 0

    @property
    def num_rotation_q(self) -> int:
        return 3 if self.use_euler_angles else 4

    @property
    def nq(self):
        return self.num_rotation_q + self.num_translations

    @property
    def quaternion_at(self):
        return None if self.use_euler_angles else 0

    def default_q(self):
        identity = (0.0, 0.0, 0.0) if self.use_euler_angles else (1.0, 0.0, 0.0, 0.0)
        return identity + (0.0,) * self.num_translations

    def in_mode(self, use_euler_angles):
        return dataclasses.replace(self, use_euler_angles=use_euler_angles)

    def rotation(self, q):
        """R_FM from the leading rotational q (any extra q are ignored)."""
        qr = q[:self.num_rotation_q]
        return body_fixed_xyz_to_matrix(qr) if self.use_euler_angles else quaternion_to_matrix(qr)

    def rotation_N(self, q, in_M: bool):
        """(nq_rot, 3) d(rotational q)/dt per unit angular velocity, expressed in M or F."""
        qr = q[:self.num_rotation_q]
        if self.use_euler_angles:
            N_M = euler_xyz_N_body(qr)
            return N_M if in_M else mat_mul(N_M, self.rotation(qr), transpose_b=True)
        N_F = quaternion_N(qr)
        return mat_mul(N_F, self.rotation(qr)) if in_M else N_F

    def rotation_N_inv(self, q, in_M: bool):
        """(3, nq_rot) angular velocity (in M or F) per unit rotational qdot;
        times rotation_N it is |q|^2 1 for a quaternion, 1 for Euler angles."""
        qr = q[:self.num_rotation_q]
        if self.use_euler_angles:
            A = euler_xyz_rates_to_body_velocity(qr)
            return mat_mul(self.rotation(qr), A) if not in_M else A
        N_inv_F = quaternion_N_inv(qr)
        return mat_mul(self.rotation(qr).T, N_inv_F) if in_M else N_inv_F

    def rotation_q(self, R):
        """The rotational q of R: a unit quaternion with w >= 0, or X-Y-Z angles."""
        return matrix_to_body_fixed_xyz(R) if self.use_euler_angles else matrix_to_quaternion(R)

    def fit_q(self, q, params, R=None, p=None):
        """R exactly (every rotation is reachable); p exactly where q holds a
        translation (ignored otherwise)."""
        n = self.num_rotation_q
        translation = pick(p, lambda p: p, q[n:]) if self.num_translations else q[n:]
        return jnp.concatenate([pick(R, self.rotation_q, q[:n]), translation])

    def _with_translation(self, block):
        if not self.num_translations:
            return block
        return block_diag(block, jnp.eye(self.num_translations, dtype=block.dtype))


@dataclasses.dataclass(frozen=True)
class Ball(Oriented):
    """Fo = Mo; u = w_FM in F; H = [1; 0] is constant."""

    nu = 3

    def X_FM(self, q, params):
        return self.rotation(q), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        eye = jnp.eye(3, dtype=q.dtype)
        return spatial_vec(eye, jnp.zeros_like(eye))

    def N(self, q):
        return self._with_translation(self.rotation_N(q, in_M=False))

    def N_inv(self, q):
        return self._with_translation(self.rotation_N_inv(q, in_M=False))


@dataclasses.dataclass(frozen=True)
class Free(Ball):
    """Six dof: q = [orientation (4 or 3), p_FM (3)], u = [w_FM; v_FM], both in F."""

    nu = 6
    num_translations = 3

    def X_FM(self, q, params):
        return self.rotation(q), q[-3:]

    def H_FM(self, q, params):
        return jnp.eye(6, dtype=q.dtype)


@dataclasses.dataclass(frozen=True)
class Ellipsoid(Ball):
    """q and u as Ball; Mo rides on the ellipsoid with semi-axes params = radii
    (along Fx, Fy, Fz, in m): p_FM = radii * Mz (elementwise, Mz in F), so the
    reference pose (q = identity) puts Mo at (0, 0, rz). H's linear parts are
    radii * (e_k x Mz)."""

    num_params = 3

    def X_FM(self, q, params):
        R = self.rotation(q)
        return R, params * R[:, 2]

    def H_FM(self, q, params):
        eye = jnp.eye(3, dtype=q.dtype)
        return spatial_vec(eye, params * cross(eye, self.rotation(q)[:, 2]))

    def fit_q(self, q, params, R=None, p=None):
        """R fixes the pose (p then follows). From p alone: turn the current
        orientation minimally so that Mz is parallel to p / radii, which puts
        Mo on the ellipsoid exactly in p's direction (Simbody's rule, exact
        only for a sphere, points Mz at p instead)."""
        if R is not None or p is None:
            return super().fit_q(q, params, R, None)
        R_now = self.rotation(q)
        toward = jnp.where(params > 0, p / jnp.where(params > 0, params, 1.0), 0.0)
        return self.rotation_q(mat_mul(rotation_between(R_now[:, 2], toward), R_now))


@dataclasses.dataclass(frozen=True)
class LineOrientation(Oriented):
    """Orientation of a body with no inertia about Mz (a linear molecule):
    u = (w_x, w_y) of w_FM expressed in M; H = [Mx; 0], [My; 0] (in F)."""

    nu = 2

    def X_FM(self, q, params):
        return self.rotation(q), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        axes = self.rotation(q)[:, :2].T
        return spatial_vec(axes, jnp.zeros_like(axes))

    def N(self, q):
        return self._with_translation(self.rotation_N(q, in_M=True)[:, :2])

    def N_inv(self, q):
        return self._with_translation(self.rotation_N_inv(q, in_M=True)[:2])


@dataclasses.dataclass(frozen=True)
class FreeLine(LineOrientation):
    """LineOrientation plus free translation: q = [orientation, p_FM],
    u = [w_x, w_y (in M), v_FM (in F)]."""

    nu = 5
    num_translations = 3

    def X_FM(self, q, params):
        return self.rotation(q), q[-3:]

    def H_FM(self, q, params):
        eye = jnp.eye(3, dtype=q.dtype)
        angular = super().H_FM(q, params)
        return jnp.concatenate([angular, spatial_vec(jnp.zeros_like(eye), eye)], axis=0)
