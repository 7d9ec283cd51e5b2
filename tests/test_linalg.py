"""simbodyx.linalg's minimum-norm solve against the pseudo-inverse: full rank,
redundant rows (consistent and not), rows of very different scales, zero
rows, float32, the derivative at constant rank, and the full-rank-first
factorization (one W, and batches all of full rank or not); the small SPD
inverse of a mobilizer's D block."""

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.linalg import independent_rows, min_norm_solve, min_norm_solver, spd_inverse

N = 12


def _cases(rng):
    """(W, b, null, rank) for a batch of 12 x 12 positive semi-definite
    matrices W = B B^T (B: 12 x rank, some with rows in other units, cond W up
    to about 1e12), ``null`` an orthonormal basis of W's null space."""
    cases = []
    for rank, consistent, scales in ((12, True, 0), (12, True, 2), (9, True, 0), (9, False, 0), (9, True, 2),
                                     (5, True, 0), (1, False, 0), (0, True, 0)):
        A = rng.standard_normal((N, rank)) @ np.diag(np.logspace(0, -1.5, rank))
        D = np.diag(np.logspace(-scales, scales, N)[rng.permutation(N)])  # rows in other units
        B = D @ A
        W = B @ B.T
        b = W @ rng.standard_normal(N) if consistent else rng.standard_normal(N)
        null = np.linalg.svd(B)[0][:, rank:]
        cases.append((W, b, null, rank))
    return cases


def test_min_norm_solve_is_the_pseudo_inverse_solution():
    """Checked by what defines W^+ b, free of W's conditioning: the normal
    equations W (W x - b) = 0 to rounding (relative to |W|^2 |x| + |W| |b|),
    and x orthogonal to W's null space (minimum norm), with the rank found."""
    rng = np.random.default_rng(0)
    cases = _cases(rng)
    W = jnp.asarray(np.stack([c[0] for c in cases]))
    b = jnp.asarray(np.stack([c[1] for c in cases]))
    x, kept = jax.jit(jax.vmap(lambda W, b: (min_norm_solve(W, b), independent_rows(W))))(W, b)
    _check_solutions(x, cases)
    for i, (_, _, _, rank) in enumerate(cases):
        assert int(kept[i].sum()) == rank, i
    assert min_norm_solve(jnp.zeros((0, 0)), jnp.zeros(0)).shape == (0,)


def _check_solutions(x, cases):
    for i, (Wi, bi, null, rank) in enumerate(cases):
        xi, norm = np.asarray(x[i]), np.linalg.norm(Wi, 2)
        if rank == 0:  # W = 0: nothing to solve
            np.testing.assert_array_equal(xi, 0.0)
            continue
        residual = np.linalg.norm(Wi @ (Wi @ xi - bi)) / (norm ** 2 * np.linalg.norm(xi) + norm * np.linalg.norm(bi))
        assert residual < 1e-15, (i, residual)  # observed <= 2e-17
        assert np.linalg.norm(null.T @ xi) <= 1e-11 * np.linalg.norm(xi), i  # observed <= 1.3e-13


def test_redundant_rows_are_dropped_in_order_and_float32_works():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((4, 5))
    A = np.vstack([A[:2], A[1:2], A[2:], 2 * A[:1]])  # row 2 repeats row 1, row 5 is twice row 0
    W, b = A @ A.T, A @ A.T @ rng.standard_normal(6)
    np.testing.assert_array_equal(independent_rows(jnp.asarray(W)), [True, True, False, True, True, False])
    expected = np.linalg.pinv(W, hermitian=True) @ b
    np.testing.assert_allclose(min_norm_solve(jnp.asarray(W), jnp.asarray(b)), expected, atol=1e-12)
    x32 = min_norm_solve(jnp.asarray(W, jnp.float32), jnp.asarray(b, jnp.float32))
    assert x32.dtype == jnp.float32
    np.testing.assert_allclose(x32, expected, atol=2e-4 * np.linalg.norm(expected))


def test_derivative_is_the_pseudo_inverse_derivative_at_constant_rank():
    """W(s) = A(s) A(s)^T keeps rank 3 of 5; b(s) stays in its range: the
    derivative equals that of jnp.linalg.pinv (Golub-Pereyra) to 1e-9. The
    formed inverse's own rule, at rank 9 and 12 of 12, gives the first and
    second derivatives (reverse mode twice, over a vmapped batch of s) of
    the kept-rows construction differentiated by JAX, to 1e-9 (pinv's own
    loses digits where W's condition number reaches 1e6)."""
    rng = np.random.default_rng(2)
    formed = lambda W, b: min_norm_solver(W, inverse_formed=True)(b)
    cases = [(5, 3, min_norm_solve, lambda W, b: jnp.linalg.pinv(W, hermitian=True) @ b, (jax.grad,))]
    cases += [(N, rank, formed, min_norm_solve, (jax.grad, lambda f: jax.grad(jax.grad(f)))) for rank in (9, N)]
    for n, rank, solve, reference, derivatives in cases:
        A0, A1 = rng.standard_normal((n, rank)), rng.standard_normal((n, rank))
        y, c = rng.standard_normal(n), rng.standard_normal(n)

        def loss(solve, s):
            A = A0 + s * A1
            W = A @ A.T
            return c @ solve(W, W @ y + s * A[:, 0])

        for derivative in derivatives:
            ours, theirs = (jax.jit(jax.vmap(derivative(lambda s: loss(f, s))))(jnp.array([0.3, -0.2]))
                            for f in (solve, reference))
            np.testing.assert_allclose(ours, theirs, rtol=1e-9)


def test_full_rank_first_factors_give_the_pseudo_inverse_solution():
    """``inverse_formed=True`` takes one Cholesky factorization of W where
    every W of the call (one, or a vmapped batch) has full rank, and the
    general factors otherwise: checked as above, on a batch all of full rank,
    on the mixed batch, and one W at a time."""
    rng = np.random.default_rng(0)
    cases = _cases(rng)
    W = jnp.asarray(np.stack([c[0] for c in cases]))
    b = jnp.asarray(np.stack([c[1] for c in cases]))
    solve = jax.jit(jax.vmap(lambda W, b: min_norm_solver(W, inverse_formed=True)(b)))
    _check_solutions(solve(W[:2], b[:2]), cases[:2])  # cases 0, 1: full rank
    _check_solutions(solve(W, b), cases)
    one = jax.jit(lambda W, b: min_norm_solver(W, inverse_formed=True)(b))
    _check_solutions(jnp.stack([one(W[i], b[i]) for i in range(len(cases))]), cases)


def test_spd_inverse_is_the_inverse_and_differentiates_as_one():
    """Every size a mobilizer's D block has (1 to 6), batched and single,
    against NumPy's inverse (to 1e-13 of its largest entry at condition
    numbers up to about 1e3), and its derivative against -D^-1 dD D^-1."""
    rng = np.random.default_rng(3)
    for n in range(1, 7):
        A = rng.standard_normal((4, n, n))
        D = A @ np.swapaxes(A, -1, -2) + np.diag(np.logspace(-1, 1, n))
        expect = np.linalg.inv(D)
        atol = 1e-13 * np.abs(expect).max()
        np.testing.assert_allclose(spd_inverse(jnp.asarray(D)), expect, rtol=0, atol=atol)
        np.testing.assert_allclose(spd_inverse(jnp.asarray(D[0])), expect[0], rtol=0, atol=atol)
        dD = rng.standard_normal((n, n))
        dD = dD + dD.T
        _, tangent = jax.jvp(spd_inverse, (jnp.asarray(D[1]),), (jnp.asarray(dD),))
        np.testing.assert_allclose(tangent, -expect[1] @ dD @ expect[1], rtol=0, atol=1e-12 * np.abs(tangent).max())
