"""The small array operations simbodyx traces most, each as one JAX primitive.

A model's program is rich in cross products, 3x3 and 6x6 products and
rotation matrices, and its tree sweeps take rows of every leaf level by
level. Written with ``jax.numpy`` each is a dozen equations, traced again
under every ``vmap``, ``jvp`` and transpose; as a primitive each is one
equation whose rules are the mathematics (a cross product's derivative and
transposes are cross products), lowered to the entries' arithmetic, which
XLA fuses. The scalar path (:mod:`simbodyx._xla.scalarize`) inlines them.

The rest of simbodyx calls the functions: :func:`cross`, :func:`small_sum`,
:func:`matrix3`, :func:`rows_of` and :func:`stacked`. The measurements
behind each are in docs/explanation/performance.md.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from simbodyx._xla.trace_context import traced_in_loop_body


def one_traced_type(*operands):
    """Whether the operands are all traced and of one type (shape, dtype,
    weak type): the common case, bound to a primitive as they are, without
    ``jax.numpy``'s promotion and broadcasting, which cost more to trace
    than the primitive."""
    return all(isinstance(x, jax.core.Tracer) for x in operands) and len(set(map(jax.typeof, operands))) == 1


def _batched_in_front(args, dims):
    """The operands with their batch axes in front, an unbatched one broadcast along the batch."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    return [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]


# -- small_sum ---------------------------------------------------------------------------------

def small_sum(p, axis):
    """The sum of ``p`` over a short ``axis`` (a 3x3 or 6x6 product's inner
    index): adds of its entries in a program of one state that runs once
    per call, a reduction in a loop body (:mod:`simbodyx._xla.trace_context`) or
    once ``jax.vmap`` batches it; linear, so its reverse pass is a broadcast.

    XLA's CPU runtime pays for each reduction on every call of a program,
    where adds cost nothing extra; in a loop body it pays that once, and the
    adds' long chains run slower. Across a batch the reductions vectorize
    and the adds, fused into long chains, recompute. Slices of the entries
    would transpose to full-size pads."""
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
#: reductions start to win: docs/explanation/performance.md).
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


# -- cross -------------------------------------------------------------------------------------

def cross(a, b):
    """a x b along the last axis (operands broadcast against each other).
    One primitive in a traced program (its derivative and its transposes
    are cross products again), lowered to the entries' products, which XLA
    fuses: 16 operations fewer to trace per product."""
    if not one_traced_type(a, b):
        dtype = jnp.result_type(a, b)
        a, b = jnp.broadcast_arrays(jnp.asarray(a, dtype), jnp.asarray(b, dtype))
    return cross_p.bind(a, b)


def _entry(a, k, axis):
    """Entry ``k`` along ``axis``, kept as a width-1 axis (an integer index
    would lower to a gather)."""
    return lax.index_in_dim(a, k, axis % a.ndim, keepdims=True)


def _cross_entries(a, b):
    """a x b written entry by entry: :func:`cross`'s program (same shapes)."""
    a0, a1, a2 = (_entry(a, k, -1) for k in range(3))
    b0, b1, b2 = (_entry(b, k, -1) for k in range(3))
    return jnp.concatenate([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


#: :func:`cross` as a primitive (bilinear: (a x b).c = a.(b x c) = b.(c x a)).
cross_p = Primitive("cross")
cross_p.def_impl(_cross_entries)
cross_p.def_abstract_eval(lambda a, b: jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type and b.weak_type))
mlir.register_lowering(cross_p, mlir.lower_fun(_cross_entries, multiple_results=False))
ad.defbilinear(cross_p, lambda ct, a, b: cross(b, ct), lambda ct, a, b: cross(ct, a))
batching.primitive_batchers[cross_p] = lambda args, dims: (cross_p.bind(*_batched_in_front(args, dims)), 0)


# -- matrix3 -----------------------------------------------------------------------------------

def matrix3(entries):
    """A (..., 3, 3) matrix from its nine entries in row order: arrays of
    shape (...), or Python numbers for entries fixed whatever the input
    (the zeros and ones of an elementary rotation). With every entry
    concrete it is a NumPy array. Traced, it is one equation under every
    transformation, with the fixed entries among its parameters: nine
    entries stacked with ``jax.numpy`` traced 16 equations, each again
    under every ``vmap``, ``jvp`` and transpose, and a broadcast for each
    fixed entry under ``vmap``."""
    free = [e for e in entries if type(e) not in (int, float)]
    if not any(isinstance(e, jax.core.Tracer) for e in free):
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


def _free_places(fixed):
    places = {k for k, _ in fixed}
    return [k for k in range(9) if k not in places]


def _matrix3_jvp(primals, tangents, *, fixed):
    """The matrix of the entries' tangents, zero at the fixed places and
    wherever an entry's tangent is zero."""
    out = matrix3_p.bind(*primals, fixed=fixed)
    zero = {k for k, v in fixed} | {k for k, t in zip(_free_places(fixed), tangents) if type(t) is ad.Zero}
    if len(zero) == 9:
        return out, ad.Zero.from_primal_value(out)
    nonzero = [t for t in tangents if type(t) is not ad.Zero]
    return out, matrix3_p.bind(*nonzero, fixed=tuple((k, 0.0) for k in sorted(zero)))


def _matrix3_transpose(ct, *free, fixed):
    """Each linear entry's cotangent: its place in the matrix's (the tangent
    form, whose fixed entries are zeros, is the only linear one)."""
    assert all(v == 0 for _, v in fixed), "matrix3 with nonzero fixed entries is affine, not linear"
    if type(ct) is ad.Zero:
        return [ad.Zero(e.aval) if ad.is_undefined_primal(e) else None for e in free]
    return [lax.index_in_dim(lax.index_in_dim(ct, k // 3, -2, keepdims=False), k % 3, -1, keepdims=False)
            if ad.is_undefined_primal(e) else None for k, e in zip(_free_places(fixed), free)]


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
batching.primitive_batchers[matrix3_p] = lambda args, dims, *, fixed: (
    matrix3_p.bind(*_batched_in_front(args, dims), fixed=fixed), 0)


# -- rows_of and stacked -----------------------------------------------------------------------

def rows_of(a):
    """``a``'s rows along axis 0, each without that axis, as a list: one
    equation (the unrolled levels of a tree sweep trace one per leaf
    instead of two per row)."""
    return rows_of_p.bind(a)


def stacked(*rows):
    """Rows of one type stacked along a new axis 0: one equation, the transpose of :func:`rows_of`."""
    return stacked_p.bind(*rows)


def _rows_of(a):
    return [lax.index_in_dim(a, i, 0, keepdims=False) for i in range(a.shape[0])]


def _rows_stacked(*rows):
    return lax.concatenate([lax.expand_dims(r, (0,)) for r in rows], 0)


def _rows_of_batch(args, dims):
    a = jnp.moveaxis(args[0], dims[0], 1)  # rows first, the batch next: each row batched in front
    return rows_of_p.bind(a), [0] * a.shape[0]


#: :func:`rows_of` and :func:`stacked` as primitives (linear, each the
#: other's transpose), lowered to the slices and the concatenation they stand for.
rows_of_p = Primitive("rows_of")
rows_of_p.multiple_results = True
rows_of_p.def_impl(_rows_of)
rows_of_p.def_abstract_eval(lambda a: [a.update(shape=a.shape[1:])] * a.shape[0])
mlir.register_lowering(rows_of_p, mlir.lower_fun(_rows_of, multiple_results=True))
ad.deflinear2(rows_of_p, lambda cts, a: [stacked_p.bind(*map(ad.instantiate_zeros, cts))])
batching.primitive_batchers[rows_of_p] = _rows_of_batch
stacked_p = Primitive("stacked")
stacked_p.def_impl(_rows_stacked)
stacked_p.def_abstract_eval(lambda *rows: rows[0].update(shape=(len(rows),) + rows[0].shape))
mlir.register_lowering(stacked_p, mlir.lower_fun(_rows_stacked, multiple_results=False))
ad.deflinear2(stacked_p, lambda ct, *rows: rows_of_p.bind(ad.instantiate_zeros(ct)))
batching.primitive_batchers[stacked_p] = lambda args, dims: (stacked_p.bind(*_batched_in_front(args, dims)), 1)
