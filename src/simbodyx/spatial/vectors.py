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
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from simbodyx._xla.concatenation import concatenate
from simbodyx._xla.trace_context import traced_in_loop_body


def array_module(*values):
    """NumPy when every value is concrete (a number, a NumPy array or a JAX
    array outside any trace), else ``jax.numpy``. The spatial types compute a
    model's built-in values (defaults, mass properties, frames) with NumPy,
    so that building a model compiles no XLA program for them: each eager
    ``jax.numpy`` operation of a new shape or dtype is a program of its
    own to compile (benchmarks/README.md, "Why the code is as it is"). Under ``jit``, ``vmap`` and ``grad`` the values are traced, and
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
    product is far slower on XLA's CPU backend (benchmarks/README.md, "Why
    the code is as it is")."""
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


def one_traced_type(*operands):
    """Whether the operands are all traced and of one type (shape, dtype,
    weak type): the common case, bound to a primitive as they are, without
    ``jax.numpy``'s promotion and broadcasting, which cost more to trace
    than the primitive."""
    return all(isinstance(x, jax.core.Tracer) for x in operands) and len(set(map(jax.typeof, operands))) == 1


def small_sum(p, axis):
    """The sum of ``p`` over a short ``axis`` (a 3x3 or 6x6 product's inner
    index): adds of its entries in a program of one state that runs once
    per call, a reduction in a loop body (:mod:`simbodyx._xla.trace_context`) or
    once ``jax.vmap`` batches it; linear, so its reverse pass is a broadcast.

    XLA's CPU runtime pays for each reduction on every call of a program,
    where adds cost nothing extra; in a loop body it pays that once, and the
    adds' long chains run slower. Across a batch the reductions vectorize
    and the adds, fused into long chains, recompute. Slices of the entries
    would transpose to full-size pads. (Measurements: benchmarks/README.md,
    "Why the code is as it is".)"""
    return small_sum_p.bind(p, axis=axis % p.ndim - p.ndim, reduction=traced_in_loop_body())


def _small_sum(p, *, axis, reduction):
    if reduction:
        return jnp.sum(p, axis=axis)
    at = axis % p.ndim
    if p.shape[at] == 0:
        return jnp.zeros(p.shape[:at] + p.shape[at + 1:], p.dtype)
    return _halves_added(p, at).reshape(p.shape[:at] + p.shape[at + 1:])


def _halves_added(p, at):
    """p's entries along ``at`` added pairwise, halves first (9 operations
    for 6 entries, against 17 for slices added in a row), kept as a width-1 axis."""
    n = p.shape[at]
    if n == 1:
        return p
    half = n // 2
    total = _halves_added(lax.slice_in_dim(p, 0, half, axis=at) + lax.slice_in_dim(p, half, 2 * half, axis=at), at)
    return total + lax.slice_in_dim(p, 2 * half, n, axis=at) if n % 2 else total


def _small_sum_shape(p, *, axis, reduction):
    return jax.core.ShapedArray(p.shape[:axis % p.ndim] + p.shape[axis % p.ndim + 1:], p.dtype, weak_type=p.weak_type)


def _small_sum_transpose(ct, p, *, axis, reduction):
    return [jnp.broadcast_to(jnp.expand_dims(ct, axis), p.aval.shape)]


def _small_sum_batch(args, dims, *, axis, reduction):
    (p,), (dim,) = args, dims
    reduction = reduction or p.shape[dim] > SMALL_SUM_ADDS_MAX_BATCH
    return small_sum_p.bind(jnp.moveaxis(p, dim, 0), axis=axis, reduction=reduction), 0


#: Batches of up to this many keep :func:`small_sum`'s adds (where the
#: reductions start to win: benchmarks/README.md, "Why the code is as it is").
SMALL_SUM_ADDS_MAX_BATCH = 8

#: :func:`small_sum` as a primitive: ``axis`` counted from the end (a batch
#: axis in front leaves it valid), ``reduction`` chosen where it is traced
#: and by the batching rule.
small_sum_p = Primitive("small_sum")
small_sum_p.def_impl(_small_sum)
small_sum_p.def_abstract_eval(_small_sum_shape)
mlir.register_lowering(small_sum_p, mlir.lower_fun(_small_sum, multiple_results=False))
ad.deflinear2(small_sum_p, _small_sum_transpose)
batching.primitive_batchers[small_sum_p] = _small_sum_batch


def _slice(a, k, axis):
    """Entry ``k`` along ``axis``, kept as a width-1 axis (an integer index
    would lower to a gather), taken with ``lax`` directly: numpy-style
    indexing costs far more to trace."""
    return lax.index_in_dim(a, k, axis % a.ndim, keepdims=True)


def safe_norm(x, axis=-1, keepdims=False):
    """Euclidean norm whose gradient is zero (not NaN) at x = 0."""
    sq = jnp.sum(x * x, axis=axis, keepdims=keepdims)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def cross(a, b):
    """a x b along the last axis (operands broadcast against each other).
    One primitive in a traced program (its derivative and its transposes
    are cross products again), lowered to the entries' products, which XLA
    fuses: 16 operations fewer to trace per product."""
    if one_traced_type(a, b):
        return cross_p.bind(a, b)
    dtype = jnp.result_type(a, b)
    a, b = jnp.broadcast_arrays(jnp.asarray(a, dtype), jnp.asarray(b, dtype))
    return cross_p.bind(a, b)


def _cross_entries(a, b):
    """a x b written entry by entry: :func:`cross`'s program (same shapes)."""
    a0, a1, a2 = (_slice(a, k, -1) for k in range(3))
    b0, b1, b2 = (_slice(b, k, -1) for k in range(3))
    return jnp.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _cross_batch(args, dims):
    """Batch axes in front, an unbatched operand broadcast along the batch."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    return cross_p.bind(*(batching.bdim_at_front(x, d, size) for x, d in zip(args, dims))), 0


#: :func:`cross` as a primitive (bilinear: (a x b).c = a.(b x c) = b.(c x a)).
cross_p = Primitive("cross")
cross_p.def_impl(_cross_entries)
cross_p.def_abstract_eval(lambda a, b: jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type and b.weak_type))
mlir.register_lowering(cross_p, mlir.lower_fun(_cross_entries, multiple_results=False))
ad.defbilinear(cross_p, lambda ct, a, b: cross(b, ct), lambda ct, a, b: cross(ct, a))
batching.primitive_batchers[cross_p] = _cross_batch


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
