"""3-vectors, spatial vectors and small fixed-size products.

A spatial vector is a (..., 6) array ``[angular; linear]``: V = [w; v],
A = [alpha; a], F = [torque; force]. The linear part refers to a frame
origin named by the variable (``V_GB``: velocity of B's origin in G).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from simbodyx._xla.concatenation import concatenate
from simbodyx._xla.primitives import cross, small_sum


def array_module(*values):
    """NumPy when every value is concrete (a number, a NumPy array or a JAX
    array outside any trace), else ``jax.numpy``. The spatial types compute a
    model's built-in values (defaults, mass properties, frames) with NumPy,
    so that building a model compiles no XLA program for them: each eager
    ``jax.numpy`` operation of a new shape or dtype is a program of its
    own to compile (docs/explanation/performance.md). Under ``jit``, ``vmap`` and ``grad`` the values are traced, and
    the same functions build the program with ``jax.numpy``."""
    return jnp if any(isinstance(v, jax.core.Tracer) for v in values) else np


def device_array(x, dtype=None):
    """``jnp.asarray(x, dtype)``, converted on the host when x is concrete
    (:func:`array_module`): a transfer, with no XLA program compiled for a
    change of dtype, JAX's default precision included."""
    if array_module(x) is jnp:
        return jnp.asarray(x, dtype)
    x = np.asarray(x, dtype)
    return jnp.asarray(x.astype(jax.dtypes.canonicalize_dtype(x.dtype), copy=False))


def mat_mul(a, b, transpose_b=False):
    """a @ b (or a @ b^T) for small matrices (..., m, k) and (..., k, n), as a
    broadcast product summed over the inner index (:func:`small_sum`). XLA
    fuses the product into the sum, and the reverse pass is a broadcast
    product again, which fuses as well. A batched ``dot`` per 3x3 or 6x6
    product is far slower on XLA's CPU backend (docs/explanation/performance.md)."""
    if transpose_b:
        b = jnp.swapaxes(b, -1, -2)
    if _alike(a, b, 2):
        return small_sum(lax.mul(lax.expand_dims(a, (a.ndim,)), lax.expand_dims(b, (b.ndim - 2,))), -2)
    return small_sum(jnp.expand_dims(a, -1) * jnp.expand_dims(b, -3), -2)


def mat_vec(a, x, transpose=False):
    """a @ x (or a^T @ x) for (..., m, k) x (..., k), formed like :func:`mat_mul`."""
    if _alike(a, x, 1):
        return small_sum(lax.mul(a, lax.expand_dims(x, (x.ndim - (not transpose),))), -2 if transpose else -1)
    if transpose:
        return small_sum(a * jnp.expand_dims(x, -1), -2)
    return small_sum(a * jnp.expand_dims(x, -2), -1)


def _alike(a, b, b_matrix_dims):
    """Whether traced ``a`` (a matrix) and ``b`` (with ``b_matrix_dims``
    trailing axes) share their dtype and leading axes, so that their
    product is written with ``lax`` directly, the same equations as
    ``jax.numpy``'s without its promotion and checks, which cost more to
    trace than the product."""
    if not (isinstance(a, jax.core.Tracer) and isinstance(b, jax.core.Tracer)):
        return False
    ta, tb = jax.typeof(a), jax.typeof(b)
    return (ta.dtype == tb.dtype and ta.weak_type == tb.weak_type and ta.ndim == tb.ndim + 2 - b_matrix_dims
            and ta.shape[:-2] == tb.shape[:tb.ndim - b_matrix_dims])


def safe_norm(x, axis=-1, keepdims=False):
    """Euclidean norm whose gradient is zero (not NaN) at x = 0."""
    sq = jnp.sum(x * x, axis=axis, keepdims=keepdims)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def times_skew(M, r):
    """M [r]x for (..., 3, 3) M: each row of M crossed with r (27 operations,
    against 45 for a product with the skew matrix, zeros included)."""
    return cross(M, r[..., None, :])


def skew_times(r, M):
    """[r]x M for (..., 3, 3) M: r crossed with each column of M."""
    return jnp.swapaxes(cross(r[..., None, :], jnp.swapaxes(M, -1, -2)), -1, -2)


def spatial_vec(angular, linear):
    """Stack ``[angular; linear]`` into (..., 6)."""
    return concatenate([angular, linear], axis=-1)


def motion_cross(m, x):
    """m x x for spatial motion vectors (..., 6) about one point in one frame
    (Featherstone's crm(m) x)."""
    w, v = m[..., :3], m[..., 3:]
    return spatial_vec(cross(w, x[..., :3]), cross(w, x[..., 3:]) + cross(v, x[..., :3]))


def force_cross(m, f):
    """m x* f for a spatial motion m and a spatial force f (..., 6) about one
    point in one frame (Featherstone's crf(m) f = -crm(m)^T f)."""
    w, v = m[..., :3], m[..., 3:]
    return spatial_vec(cross(w, f[..., :3]) + cross(v, f[..., 3:]), cross(w, f[..., 3:]))


def shift_velocity(V, r):
    """Velocity of a point displaced by r from the point V refers to (same frame):
    [w; v + w x r]."""
    w, v = V[..., :3], V[..., 3:]
    return spatial_vec(w, v + cross(w, r))


def shift_force(F, r):
    """Simbody's shiftForceBy: the same spatial force [t; f] referred to a point
    displaced by r from the one it acts at: [t - r x f; f]."""
    t, f = F[..., :3], F[..., 3:]
    return spatial_vec(t - cross(r, f), f)


def rotate_spatial(R, V):
    """Re-express both halves of a spatial vector: [R w; R v]."""
    return spatial_vec(mat_vec(R, V[..., :3]), mat_vec(R, V[..., 3:]))
