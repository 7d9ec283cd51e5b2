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
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from simbodyx._xla.module import Module
from simbodyx.spatial.vectors import (
    array_module,
    cross,
    device_array,
    mat_mul,
    mat_vec,
    one_traced_type,
    safe_norm,
    skew_times,
    small_sum,
)


def matrix3(entries):
    """A (..., 3, 3) matrix from its nine entries in row order: arrays of
    shape (...), or Python numbers for entries fixed whatever the input
    (the zeros and ones of an elementary rotation). Traced, it is one
    equation (:data:`matrix3_p`) under every transformation, with the fixed
    entries among its parameters: a model's program is rich in rotation
    matrices, and nine entries stacked with ``jax.numpy`` traced 16
    equations, each again under every ``vmap``, ``jvp`` and transpose, and
    a broadcast for each fixed entry under ``vmap``."""
    free = [e for e in entries if type(e) not in (int, float)]
    if array_module(*entries) is np:
        dtype = np.result_type(*map(np.asarray, free))
        return _matrix3_entries(*np.broadcast_arrays(*(np.asarray(e, dtype) for e in entries)), xp=np)
    fixed = tuple((k, float(e)) for k, e in enumerate(entries) if type(e) in (int, float))
    if not one_traced_type(*free):
        dtype = jnp.result_type(*free)
        free = jnp.broadcast_arrays(*(jnp.asarray(e, dtype) for e in free))
    return matrix3_p.bind(*free, fixed=fixed)


def _matrix3_entries(*entries, xp=jnp):
    """The matrix of nine entries of one shape, stacked as three rows of
    three: XLA's CPU compiler fuses the producers of a concatenation of at
    most eight pieces into it (a stack of nine would leave each entry a
    kernel of its own)."""
    rows = [xp.stack(entries[i:i + 3], axis=-1) for i in (0, 3, 6)]
    return xp.stack(rows, axis=-2)


def _with_fixed(free, fixed, full):
    """The nine entries: the ``free`` ones in order, ``full(value)`` at the fixed places."""
    values, free = dict(fixed), iter(free)
    return [full(values[k]) if k in values else next(free) for k in range(9)]


def _matrix3_impl(*free, fixed):
    return _matrix3_entries(*_with_fixed(free, fixed, lambda v: lax.full_like(free[0], v)))


def _matrix3_jvp(primals, tangents, *, fixed):
    """The matrix of the entries' tangents, zero at the fixed places and
    wherever an entry's tangent is zero."""
    out = matrix3_p.bind(*primals, fixed=fixed)
    zero = {k for k, v in fixed} | {k for k, t in zip(_free_places(fixed), tangents) if type(t) is ad.Zero}
    if len(zero) == 9:
        return out, ad.Zero.from_primal_value(out)
    nonzero = [t for t in tangents if type(t) is not ad.Zero]
    return out, matrix3_p.bind(*nonzero, fixed=tuple((k, 0.0) for k in sorted(zero)))


def _free_places(fixed):
    places = {k for k, _ in fixed}
    return [k for k in range(9) if k not in places]


def _matrix3_transpose(ct, *free, fixed):
    """Each linear entry's cotangent: its place in the matrix's (the tangent
    form, whose fixed entries are zeros, is the only linear one)."""
    assert all(v == 0 for _, v in fixed), "matrix3 with nonzero fixed entries is affine, not linear"
    if type(ct) is ad.Zero:
        return [ad.Zero(e.aval) if ad.is_undefined_primal(e) else None for e in free]
    return [lax.index_in_dim(lax.index_in_dim(ct, k // 3, -2, keepdims=False), k % 3, -1, keepdims=False)
            if ad.is_undefined_primal(e) else None for k, e in zip(_free_places(fixed), free)]


def _matrix3_batch(args, dims, *, fixed):
    """Batch axes in front, unbatched entries broadcast along the batch."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    return matrix3_p.bind(*(batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)), fixed=fixed), 0


#: :func:`matrix3` as a primitive, lowered to :func:`_matrix3_entries`; the
#: operands are the free entries (one shape and dtype), ``fixed`` holds
#: (place, number) for the others.
matrix3_p = Primitive("matrix3")
matrix3_p.def_impl(_matrix3_impl)
matrix3_p.def_abstract_eval(lambda *free, fixed: jax.core.ShapedArray(
    free[0].shape + (3, 3), free[0].dtype, weak_type=all(e.weak_type for e in free)))
mlir.register_lowering(matrix3_p, mlir.lower_fun(_matrix3_impl, multiple_results=False))
ad.primitive_jvps[matrix3_p] = _matrix3_jvp
ad.primitive_transposes[matrix3_p] = _matrix3_transpose
batching.primitive_batchers[matrix3_p] = _matrix3_batch


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
