"""Rotation matrices and their parameterizations.

Conventions (``spec/conventions.md``): R_AB re-expresses a vector from B to A
(``v_A = R_AB @ v_B``); quaternions are scalar first ``[w, x, y, z]`` and need
not be normalized; body-fixed X-Y-Z angles mean ``R = Rx(a0) Ry(a1) Rz(a2)``.
Every function accepts leading batch dimensions and follows the input dtype.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from simbodyx._xla.module import Module
from simbodyx._xla.primitives import matrix3
from simbodyx.spatial.vectors import (
    array_module,
    cross,
    device_array,
    mat_mul,
    mat_vec,
    safe_norm,
    skew_times,
    small_sum,
)


def rot_x(angle):
    """Rotation by ``angle`` (rad) about the common x axis, shape (..., 3, 3)."""
    xp = array_module(angle)
    c, s = xp.cos(angle), xp.sin(angle)
    return matrix3([1.0, 0.0, 0.0, 0.0, c, -s, 0.0, s, c])


def rot_y(angle):
    """Rotation by ``angle`` (rad) about the common y axis, shape (..., 3, 3)."""
    xp = array_module(angle)
    c, s = xp.cos(angle), xp.sin(angle)
    return matrix3([c, 0.0, s, 0.0, 1.0, 0.0, -s, 0.0, c])


def rot_z(angle):
    """Rotation by ``angle`` (rad) about the common z axis, shape (..., 3, 3)."""
    xp = array_module(angle)
    c, s = xp.cos(angle), xp.sin(angle)
    return matrix3([c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0])


@jax.custom_jvp
def quaternion_to_matrix(q):
    """R from a quaternion ``[w, x, y, z]`` (..., 4) of any nonzero length.

    Uses ``s = 2 / |q|^2`` so the result is exactly the rotation of q/|q|
    without a square root (smooth everywhere except q = 0). Its derivative
    is dR = [omega]x R with the angular velocity omega = 2 (w dv - dw v +
    v x dv) / |q|^2 for q = [w, v] (the radial part of dq turns nothing): a
    few operations, where differentiating the nine entries takes hundreds.
    """
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    s = 2.0 / (w * w + x * x + y * y + z * z)
    entries = [
        1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y),
        s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x),
        s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y),
    ]
    return matrix3(entries)


@quaternion_to_matrix.defjvp
def _quaternion_to_matrix_jvp(primals, tangents):
    (q,), (dq,) = primals, tangents
    w, v = lax.slice_in_dim(q, 0, 1, axis=-1), lax.slice_in_dim(q, 1, 4, axis=-1)
    dw, dv = lax.slice_in_dim(dq, 0, 1, axis=-1), lax.slice_in_dim(dq, 1, 4, axis=-1)
    omega = 2 * (w * dv - dw * v + cross(v, dv)) / small_sum(q * q, -1)[..., None]
    R = quaternion_to_matrix(q)
    return R, skew_times(omega, R)


def matrix_to_quaternion(R):
    """Unit quaternion ``[w, x, y, z]`` with w >= 0 for rotation matrix R.

    Shepperd/Spurrier: pick the largest of (trace, R_xx, R_yy, R_zz) so the
    square root is taken of a number >= 1/4 (Simbody's
    ``convertRotationToQuaternion``). All four branches are formed with
    clamped square roots so gradients stay finite under ``jnp.where``.
    """
    r = R
    tr = r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2]
    diag = jnp.stack([tr, r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]], axis=-1)
    best = jnp.argmax(diag, axis=-1)

    def branch(k):
        # 4 |q_k|^2 = 1 + 2 diag_k - tr (for k = 0: 1 + tr).
        val = 1 + tr if k == 0 else 1 + 2 * diag[..., k] - tr
        s = 2.0 * jnp.sqrt(jnp.maximum(val, 0.25))  # s = 4 |q_k|
        if k == 0:
            q = [s / 4, (r[..., 2, 1] - r[..., 1, 2]) / s,
                 (r[..., 0, 2] - r[..., 2, 0]) / s, (r[..., 1, 0] - r[..., 0, 1]) / s]
        elif k == 1:
            q = [(r[..., 2, 1] - r[..., 1, 2]) / s, s / 4,
                 (r[..., 0, 1] + r[..., 1, 0]) / s, (r[..., 0, 2] + r[..., 2, 0]) / s]
        elif k == 2:
            q = [(r[..., 0, 2] - r[..., 2, 0]) / s, (r[..., 0, 1] + r[..., 1, 0]) / s,
                 s / 4, (r[..., 1, 2] + r[..., 2, 1]) / s]
        else:
            q = [(r[..., 1, 0] - r[..., 0, 1]) / s, (r[..., 0, 2] + r[..., 2, 0]) / s,
                 (r[..., 1, 2] + r[..., 2, 1]) / s, s / 4]
        return jnp.stack(q, axis=-1)

    q = branch(3)
    for k in (2, 1, 0):
        q = jnp.where((best == k)[..., None], branch(k), q)
    q = q / safe_norm(q, axis=-1, keepdims=True)
    return jnp.where(q[..., :1] < 0, -q, q)


def body_fixed_xyz_to_matrix(angles):
    """R = Rx(a0) Ry(a1) Rz(a2) for body-fixed X-Y-Z angles (..., 3), the
    product written out entry by entry."""
    xp = array_module(angles)
    c, s = xp.cos(angles), xp.sin(angles)
    (ca, cb, cc), (sa, sb, sc) = (c[..., i] for i in range(3)), (s[..., i] for i in range(3))
    sa_sb, ca_sb = sa * sb, ca * sb
    return matrix3([cb * cc, -cb * sc, sb,
                    sa_sb * cc + ca * sc, ca * cc - sa_sb * sc, -sa * cb,
                    sa * sc - ca_sb * cc, ca_sb * sc + sa * cc, ca * cb])


def body_fixed_xyz_to_quaternion(angles):
    """Unit quaternion ``[w, x, y, z]`` (..., 4) of R = Rx(a0) Ry(a1) Rz(a2):
    the product of the three half-angle quaternions, smooth in the angles
    and branch-free (w may be negative beyond a half turn, unlike
    matrix_to_quaternion's w >= 0)."""
    c, s = jnp.cos(angles / 2), jnp.sin(angles / 2)
    (cx, cy, cz), (sx, sy, sz) = (c[..., i] for i in range(3)), (s[..., i] for i in range(3))
    return jnp.stack([
        cx * cy * cz - sx * sy * sz, sx * cy * cz + cx * sy * sz,
        cx * sy * cz - sx * cy * sz, cx * cy * sz + sx * sy * cz,
    ], axis=-1)


def matrix_to_body_fixed_xyz(R):
    """Body-fixed X-Y-Z angles (..., 3) of R; the middle angle is in [-pi/2, pi/2].

    From R = Rx(a) Ry(b) Rz(c): R02 = sin b, (R12, R22) = cos b (-sin a, cos a),
    (R01, R00) = cos b (-sin c, cos c).
    """
    a = jnp.arctan2(-R[..., 1, 2], R[..., 2, 2])
    cb = safe_norm(jnp.stack([R[..., 1, 2], R[..., 2, 2]], axis=-1), axis=-1)
    b = jnp.arctan2(R[..., 0, 2], cb)
    c = jnp.arctan2(-R[..., 0, 1], R[..., 0, 0])
    return jnp.stack([a, b, c], axis=-1)


def axis_angle_to_matrix(axis, angle):
    """Rotation by ``angle`` (rad) about ``axis`` (..., 3; normalized here), Rodrigues."""
    axis = jnp.asarray(axis)
    n = axis / safe_norm(axis, axis=-1, keepdims=True)
    angle = jnp.asarray(angle)[..., None, None]
    K = skew(n)
    eye = jnp.eye(3, dtype=K.dtype)
    return eye + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * mat_mul(K, K)


def matrix_to_rotation_vector(R):
    """Axis times angle (3,), the angle in [0, pi], of the rotation R (3, 3):
    the inverse of ``axis_angle_to_matrix`` (MuJoCo's ``mju_quat2Vel`` of
    R's quaternion), its derivatives finite at the identity."""
    q = matrix_to_quaternion(R)
    q = jnp.where(q[0] < 0, -q, q)
    s = safe_norm(q[1:])
    return q[1:] * jnp.where(s > 0, 2 * jnp.arctan2(s, q[0]) / jnp.where(s > 0, s, 1.0), 2 / q[0])


def rotation_problem(R, tol=1e-6) -> str | None:
    """Why a concrete 3x3 matrix is not a proper rotation (finite, R^T R = 1 to
    ``tol``, det R > 0), or None if it is."""
    R = np.asarray(R, dtype=np.float64)
    if not np.all(np.isfinite(R)):
        return "contains NaN or infinity"
    error, det = np.max(np.abs(R.T @ R - np.eye(3))), np.linalg.det(R)
    if error > tol or det < 0:
        return f"is not a proper rotation matrix (R^T R - 1 up to {error:.2g}, det {det:.3g})"
    return None


def skew(v):
    """Cross-product matrix: ``skew(a) @ b == cross(a, b)``; shape (..., 3, 3)."""
    xp = array_module(v)
    v = xp.asarray(v)
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    return matrix3([0.0, -z, y, z, 0.0, -x, -y, x, 0.0])


def vee(S):
    """Inverse of :func:`skew` for the skew-symmetric part of S (..., 3, 3)."""
    return 0.5 * jnp.stack(
        [S[..., 2, 1] - S[..., 1, 2], S[..., 0, 2] - S[..., 2, 0], S[..., 1, 0] - S[..., 0, 1]],
        axis=-1,
    )


def _float_array(x):
    """x as a JAX array of a floating dtype (JAX's default float for
    integers). A concrete x is converted on the host, so that only a
    transfer, and no XLA program, makes the array (:func:`device_array`)."""
    if array_module(x) is np:
        x = np.asarray(x)
        return device_array(x, None if np.issubdtype(x.dtype, np.floating) else float)
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.result_type(float))


class Rotation(Module):
    """An orientation R_AB as a 3x3 matrix (..., 3, 3); ``Rotation()`` is the identity.

    Construct with the class methods (``from_quaternion``, ``from_body_fixed_xyz``,
    ``from_axis_angle``, ``about_x/y/z``) or from a matrix. ``R1 @ R2`` composes,
    ``R @ v`` re-expresses a vector.
    """

    matrix: jnp.ndarray

    def __init__(self, matrix=None):
        self.matrix = _float_array(np.eye(3) if matrix is None else matrix)

    @classmethod
    def from_quaternion(cls, q):
        if array_module(q) is np:  # on the host: the function itself, not its JAX derivative rule's wrapper
            return cls(quaternion_to_matrix.fun(np.asarray(q, float)))
        return cls(quaternion_to_matrix(_float_array(q)))

    @classmethod
    def from_body_fixed_xyz(cls, angles):
        return cls(body_fixed_xyz_to_matrix(_float_array(angles)))

    @classmethod
    def from_axis_angle(cls, angle, axis):
        """Simbody's ``Rotation(angle, axis)``."""
        return cls(axis_angle_to_matrix(_float_array(axis), _float_array(angle)))

    @classmethod
    def about_x(cls, angle):
        return cls(rot_x(_float_array(angle)))

    @classmethod
    def about_y(cls, angle):
        return cls(rot_y(_float_array(angle)))

    @classmethod
    def about_z(cls, angle):
        return cls(rot_z(_float_array(angle)))

    def to_quaternion(self):
        """Unit quaternion [w, x, y, z] with w >= 0."""
        return matrix_to_quaternion(self.matrix)

    def to_body_fixed_xyz(self):
        return matrix_to_body_fixed_xyz(self.matrix)

    def inverse(self):
        return Rotation(jnp.swapaxes(self.matrix, -1, -2))

    def __matmul__(self, other):
        if isinstance(other, Rotation):
            return Rotation(mat_mul(self.matrix, other.matrix))
        return mat_vec(self.matrix, jnp.asarray(other))
