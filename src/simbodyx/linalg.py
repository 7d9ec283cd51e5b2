"""Small dense matrices in batches: a mobilizer's D block, a system's
constraint matrix W = G M^-1 G^T.

At these sizes (a few to a few dozen rows, thousands of matrices) the
choice of routine matters more than its operation count: on CPU a
symmetric eigendecomposition per matrix (what ``jnp.linalg.pinv`` does)
costs several times the Cholesky factorizations of a least-squares solve
(docs/explanation/performance.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

#: ``min_norm_solve`` counts a row of a positive semi-definite W as
#: redundant when, with W scaled to a unit diagonal, the part of it
#: independent of the rows before it has squared norm below this times
#: 1 + |c|^2, c its coefficients on those rows: about sqrt(eps) in float64,
#: far above what rounding leaves of an exactly redundant row and far below
#: any physical stiffness ratio.
RANK_RTOL = {jnp.dtype("float64"): 1e-10, jnp.dtype("float32"): 1e-4}


def spd_inverse(D):
    """Inverse of a small symmetric positive-definite matrix (..., n, n) by
    Gauss-Jordan elimination without pivoting (safe for SPD), unrolled into
    elementwise operations that XLA fuses; a batched LAPACK call per matrix
    is far slower for the blocks of at most 6 x 6 it serves."""
    n = D.shape[-1]
    if n == 1:
        return 1.0 / D
    A = jnp.concatenate([D, jnp.broadcast_to(jnp.eye(n, dtype=D.dtype), D.shape)], axis=-1)
    for k in range(n):
        row = A[..., k, :] / A[..., k, k:k + 1]
        A = A - A[..., :, k:k + 1] * row[..., None, :]
        A = jnp.concatenate([A[..., :k, :], row[..., None, :], A[..., k + 1:, :]], axis=-2)  # no scatter
    return A[..., n:]


#: Up to this size the factorizations and products below are unrolled into
#: elementwise operations (XLA fuses them); above it they are LAPACK calls
#: and dots, whose fixed cost per matrix the larger sizes amortize.
UNROLLED_MAX = 6


def _cholesky(A):
    """Lower L with L L^T = A (n, n) symmetric positive definite."""
    n = A.shape[-1]
    if n > UNROLLED_MAX:
        return jnp.linalg.cholesky(A)
    below = [jnp.arange(n) >= k for k in range(n)]
    columns = []
    for k in range(n):
        c = A[:, k] - sum((col * col[k] for col in columns), jnp.zeros(n, A.dtype))
        columns.append(jnp.where(below[k], c / jnp.sqrt(c[k]), 0.0))
    return jnp.stack(columns, axis=1)


def _triangular_solve(L, B, transpose=False):
    """L^-1 B, or L^-T B with ``transpose``, for lower-triangular L (n, n) and B (n,) or (n, k)."""
    n = L.shape[-1]
    if n > UNROLLED_MAX:
        X = jax.lax.linalg.triangular_solve(L, B if B.ndim == 2 else B[:, None], left_side=True, lower=True,
                                            transpose_a=transpose)
        return X if B.ndim == 2 else X[:, 0]
    T = L.T if transpose else L
    x = [None] * n
    for k in (reversed(range(n)) if transpose else range(n)):
        done = [j for j in range(n) if x[j] is not None]
        x[k] = (B[k] - sum((T[k, j] * x[j] for j in done), jnp.zeros_like(B[k]))) / T[k, k]
    return jnp.stack(x)


def _cho_solve(L, B):
    """A^-1 B from A's Cholesky factor L."""
    return _triangular_solve(L, _triangular_solve(L, B), transpose=True)


def _mul(A, B):
    """A B for A (n, n) and B (n,) or (n, k)."""
    if A.shape[-1] > UNROLLED_MAX:
        return A @ B
    return jnp.sum(A[:, :, None] * (B[None, :, None] if B.ndim == 1 else B[None]), axis=1).reshape(B.shape)


def _diagonal(A):
    """A's diagonal (n,), as a product and a sum: ``jnp.diagonal`` is a
    platform-dependent program, which the scalar path does not evaluate."""
    return jnp.sum(A * jnp.eye(A.shape[-1], dtype=A.dtype), axis=-1)


def _scaled_factor(W, rtol, delta):
    """(kept (n,) bool, C (n, n), d (n,)) for a symmetric positive
    semi-definite W (n, n): D^-1 W D^-1 + delta I = L L^T with D = diag(d)
    scaling W to a unit diagonal, C = L^-1, and the rows that pass
    ``independent_rows``' test on this factor."""
    n, dtype = W.shape[-1], W.dtype
    eye = jnp.eye(n, dtype=dtype)
    diagonal = _diagonal(W)
    live = diagonal > rtol * jnp.max(diagonal)
    d = jnp.sqrt(jnp.where(live, diagonal, 1.0))
    scaled = jnp.where(live[:, None] & live[None, :], W / (d[:, None] * d[None, :]), eye)
    L = _cholesky(scaled + delta * eye)
    C = _triangular_solve(L, eye)
    pivots = _diagonal(L) ** 2
    growth = pivots * jnp.sum(C ** 2, axis=-1)
    return (pivots > 2 * rtol * growth) & live, C, d


def _rtol(W, rtol):
    return RANK_RTOL.get(jnp.dtype(W.dtype), 1e-4) if rtol is None else rtol


def independent_rows(W, rtol=None):
    """(n,) bool: a maximal set of linearly independent rows of a symmetric
    positive semi-definite W (n, n), chosen in order.

    Scaled to a unit diagonal and regularized, W + delta I = L L^T (delta =
    ``rtol``, default ``RANK_RTOL`` of W's dtype). Row k's pivot L_kk^2 is
    s_k + delta (1 + |c_k|^2), s_k the squared norm of its part independent
    of the rows before it and c_k its coefficients on them, and
    L_kk^2 |row k of L^-1|^2 = 1 + |c_k|^2; the row is kept when s_k exceeds
    the regularization's share, delta (1 + |c_k|^2). Rows whose diagonal is
    below ``rtol`` times W's largest are dropped outright (disabled
    constraints: zero rows)."""
    W = jax.lax.stop_gradient(W)
    rtol = _rtol(W, rtol)
    return _scaled_factor(W, rtol, rtol)[0]


def min_norm_solve(W, b, rtol=None):
    """W^+ b for a symmetric positive semi-definite W (n, n) and b (n,) or
    (n, k): the minimum-norm least-squares solution, as
    ``jnp.linalg.pinv(W) @ b``; ``min_norm_solver`` with its factorizations
    used once."""
    return min_norm_solver(W, rtol)(b)


def min_norm_solver(W, rtol=None, *, inverse_formed=False):
    """b -> W^+ b for a symmetric positive semi-definite W (n, n), the rank
    decided by ``independent_rows``, factored once for any number of b.

    With the kept rows c first, W = V W_cc V^T for V = [I; K] (K = W_rc W_cc^-1
    for the redundant rows r), and W^+ = V (V^T W V)^-1 V^T: two Cholesky
    factorizations (of W_cc and of V^T W V) and their solves, then one step
    of iterative refinement (the rows are kept in order, not pivoted, so
    W_cc can be far worse conditioned than W on its range: 1e10 on a tree
    with every kind of constraint, 23 of its 39 rows redundant; refined,
    its residual is 1e-15 of W). At full rank V = I. The kept set is
    piecewise constant in W, so the derivative is that of the
    pseudo-inverse at constant rank.

    ``inverse_formed=True``, for a caller that solves with many b and whose
    own derivative rule holds W constant at first order (constrained
    dynamics): above ``UNROLLED_MAX`` rows W^+ is formed once, so that each
    solve is a product, and a W that passes the full-rank test below takes
    W^-1 from the test's own factorization; under ``jax.vmap`` a batch
    whose every W passes takes it together (``jax.custom_batching.custom_vmap``:
    the choice is made once per batch, not per W, which would compute both).
    JAX cannot linearize that choice, so W^+ carries its own derivative
    rule (``_pseudo_inverse_tangent``), which second derivatives of the
    caller's rule take, in forward and in reverse mode."""
    n = W.shape[-1]
    if n == 0:
        return lambda b: b
    W = 0.5 * (W + W.T)
    if not inverse_formed or n <= UNROLLED_MAX:
        V, VWV = _factors(W, independent_rows(W, rtol))

        def apply(b):
            return _mul(V, _cho_solve(VWV, _mul(V.T, b)))
    else:
        W_plus = _pseudo_inverse_full_rank_first(W, _rtol(W, rtol))

        def apply(b):
            return _mul(W_plus, b)

    def solve(b):
        x = apply(b)
        return x + apply(b - _mul(W, x))  # one step of refinement

    return solve


def _factors(W, kept):
    """(V, Cholesky factor of V^T W V) of ``min_norm_solver`` for the kept rows (n,) bool."""
    kept = kept.astype(W.dtype)
    dropped = jnp.diag(1 - kept)
    W_cc = _cholesky(W * (kept[:, None] * kept[None, :]) + dropped)
    V = _cho_solve(W_cc, (W * kept[None, :]).T).T  # W_:c W_cc^-1: [I; K], zero in columns r
    return V, _cholesky(_mul(V.T, _mul(W, V)) + dropped)


def _pseudo_inverse(W, kept):
    """W^+ = V (V^T W V)^-1 V^T from ``_factors`` (V's columns r are zero, so
    the unit block of the dropped rows in V^T W V drops out)."""
    V, VWV = _factors(W, kept)
    P = _mul(V, _triangular_solve(VWV, jnp.eye(W.shape[-1], dtype=W.dtype)).T)  # V L^-T
    return _mul(P, P.T)


def _full_rank_inverse(W, rtol):
    """(passes, W^-1): the full-rank test, ``independent_rows``' criterion on
    the unregularized factor of W scaled to a unit diagonal (about twice as strict
    as the regularized one, so a W that passes keeps every row there too),
    and W^-1 = D^-1 L^-T L^-1 D^-1 from that factor (NaN where it failed)."""
    kept, C, d = _scaled_factor(W, rtol, 0.0)
    S = C / d[None, :]
    return jnp.all(kept), _mul(S.T, S)


def _pseudo_inverse_full_rank_first(W, rtol):
    """``_pseudo_inverse``, from ``_full_rank_inverse`` when every W (one, or
    a batch under vmap) passes its test."""

    def choose(W, passes, inverse, general):
        return jax.lax.cond(jnp.all(passes), lambda: inverse, lambda: general(W))

    def general(W):
        return _pseudo_inverse(W, independent_rows(W, rtol))

    @jax.custom_batching.custom_vmap
    def pseudo_inverse(W):
        return choose(W, *_full_rank_inverse(W, rtol), general)

    @pseudo_inverse.def_vmap
    def _batched(axis_size, in_batched, W):  # W, the one argument, is batched
        passes, inverse = jax.vmap(lambda W: _full_rank_inverse(W, rtol))(W)
        return choose(W, passes, inverse, jax.vmap(general)), True

    @jax.custom_jvp
    def differentiable(W):
        return pseudo_inverse(W)

    @differentiable.defjvp
    def _jvp(primals, tangents):
        (W,), (dW,) = primals, tangents
        P = differentiable(W)
        return P, _pseudo_inverse_tangent(W, P, dW)

    return differentiable(W)


def _pseudo_inverse_tangent(W, P, dW):
    """d(W^+) along dW for a symmetric W of constant rank, P = W^+ (Golub and
    Pereyra): -P dW P + T + T^T with T = P P dW (I - W P), whose last factor,
    the projector onto W's null space, is zero at full rank. W's rank is
    piecewise constant along a trajectory (a structural redundancy stays
    one), and the kept-rows construction differentiated by JAX gives the
    same derivative along such a dW."""
    P_dW = _mul(P, dW)
    null = jnp.eye(W.shape[-1], dtype=W.dtype) - _mul(W, P)
    T = _mul(P, _mul(P_dW, null))
    return -_mul(P_dW, P) + T + T.T


def significant_real(dtype) -> float:
    """Simbody's SignificantReal for ``dtype``: eps^(7/8), the smallest
    number it treats as other than rounding."""
    return float(jnp.finfo(dtype).eps) ** 0.875
