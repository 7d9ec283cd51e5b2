"""The small fixed-size products of spatial/vectors.py against jnp.einsum,
and small_sum (their sum over the inner index) against jnp.sum: adds in a
program of one state, a reduction across a wide batch, jnp.sum's
derivatives (1e-14: the two differ only in the order of at most six adds)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import primitive_names

from simbodyx._xla.primitives import SMALL_SUM_ADDS_MAX_BATCH
from simbodyx._xla.scalarize import scalarize
from simbodyx.spatial.rotation import skew
from simbodyx.spatial.vectors import cross, force_cross, mat_mul, mat_vec, motion_cross, skew_times, small_sum, times_skew

PRODUCTS = {
    "a b": (lambda a, b: mat_mul(a, b), "...ij,...jk->...ik"),
    "a b^T": (lambda a, b: mat_mul(a, b, transpose_b=True), "...ij,...kj->...ik"),
}


@pytest.mark.parametrize("name", PRODUCTS)
@pytest.mark.parametrize("n", [3, 6])
def test_mat_mul_matches_einsum_batched_jit_vmap_grad(name, n):
    fn, spec = PRODUCTS[name]
    rng = np.random.default_rng(n)
    a, b = rng.normal(size=(2, 4, n, n)), rng.normal(size=(2, 4, n, n))
    expected = np.einsum(spec, a, b)
    np.testing.assert_allclose(fn(a, b), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(jax.jit(jax.vmap(fn))(a, b), expected, rtol=1e-13, atol=1e-13)
    # b broadcast against a's leading axes
    np.testing.assert_allclose(jax.jit(fn)(a, b[0, 0]), np.einsum(spec, a, b[0, 0]), rtol=1e-13, atol=1e-13)
    ours = jax.grad(lambda a, b: jnp.sum(jnp.sin(fn(a, b))), argnums=(0, 1))(a, b)
    theirs = jax.grad(lambda a, b: jnp.sum(jnp.sin(jnp.einsum(spec, a, b))), argnums=(0, 1))(a, b)
    for x, y in zip(ours, theirs):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("transpose", [False, True])
def test_mat_vec_matches_einsum(transpose):
    rng = np.random.default_rng(1)
    a, x = rng.normal(size=(5, 3, 6, 6)), rng.normal(size=(5, 3, 6))
    spec = "...ji,...j->...i" if transpose else "...ij,...j->...i"
    expected = np.einsum(spec, a, x)
    np.testing.assert_allclose(mat_vec(a, x, transpose), expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(jax.jit(jax.vmap(lambda a, x: mat_vec(a, x, transpose)))(a, x), expected,
                               rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(jax.jit(lambda a, x: mat_vec(a, x, transpose))(a, x[0, 0]),
                               np.einsum(spec, a, x[0, 0]), rtol=1e-13, atol=1e-13)  # x broadcast
    ours = jax.grad(lambda a, x: jnp.sum(jnp.sin(mat_vec(a, x, transpose))), argnums=(0, 1))(a, x)
    theirs = jax.grad(lambda a, x: jnp.sum(jnp.sin(jnp.einsum(spec, a, x))), argnums=(0, 1))(a, x)
    for g, h in zip(ours, theirs):
        np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-12)


def test_cross_is_one_primitive_that_matches_numpy_under_jit_vmap_and_both_modes():
    """``cross`` traces to one equation and computes np.cross eagerly, under
    jit, under vmap with either operand unbatched and with broadcast
    operands; its derivatives (cross products again) equal jnp.cross's in
    forward and reverse mode, second order included (1e-12: the same
    products, summed in another order), on the scalar path too."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    np.testing.assert_allclose(cross(a, b), np.cross(a, b), rtol=1e-14, atol=1e-14)
    assert [e.primitive.name for e in jax.make_jaxpr(cross)(a, b).jaxpr.eqns] == ["cross"]
    np.testing.assert_allclose(jax.jit(cross)(a, b[0]), np.cross(a, b[0]), rtol=1e-14, atol=1e-14)
    for axes in ((0, None), (None, 0), (1, 0)):
        x = a.T if axes[0] == 1 else (a if axes[0] == 0 else a[0])
        y = b if axes[1] == 0 else b[0]
        np.testing.assert_allclose(jax.vmap(cross, axes)(x, y), np.cross(a if axes[0] is not None else a[0], y),
                                   rtol=1e-14, atol=1e-14)
    M = rng.normal(size=(4, 3, 3))
    np.testing.assert_allclose(cross(M, b[:4, None, :]), np.cross(M, b[:4, None, :]), rtol=1e-14, atol=1e-14)

    def loss(f):
        return lambda a, b: jnp.sum(jnp.sin(f(a, b[None, 0]) * a))

    for argnums in (0, 1):
        ours, theirs = (jax.grad(loss(f), argnums) for f in (cross, jnp.cross))
        np.testing.assert_allclose(ours(a, b), theirs(a, b), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(jax.jacfwd(ours)(a, b), jax.jacfwd(theirs)(a, b), rtol=1e-12, atol=1e-12)
    fn = scalarize(lambda a, b: cross(a, b) + 1.0)
    np.testing.assert_allclose(fn(a[0], b[0]), np.cross(a[0], b[0]) + 1.0, rtol=1e-14, atol=1e-14)
    assert "cross" not in primitive_names(jax.make_jaxpr(fn)(a[0], b[0]).jaxpr)


def test_skew_products_are_cross_products():
    """[r]x M and M [r]x against products with the skew matrix (exact: the
    skew matrix's zeros only add exact zeros), batched and under vmap."""
    rng = np.random.default_rng(3)
    r, M = rng.normal(size=(5, 3)), rng.normal(size=(5, 3, 3))
    rx = np.asarray(skew(r))
    np.testing.assert_allclose(skew_times(r, M), rx @ M, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(times_skew(M, r), M @ rx, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(skew_times)(r, M), rx @ M, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(jax.vmap(times_skew)(M, r), M @ rx, rtol=1e-15, atol=1e-15)


def test_spatial_cross_products_match_featherstones_matrices():
    """m x and m x* against crm(m) = [[w]x, 0; [v]x, [w]x] and crf(m) = -crm(m)^T,
    batched; and the duality (m x x) . f = -x . (m x* f) that the residual's
    tangent relies on."""
    rng = np.random.default_rng(4)
    m, x, f = (jnp.asarray(rng.normal(size=(5, 6))) for _ in range(3))
    w, v = skew(m[:, :3]), skew(m[:, 3:])
    crm = jnp.concatenate([jnp.concatenate([w, jnp.zeros_like(w)], -1), jnp.concatenate([v, w], -1)], -2)
    crf = -jnp.swapaxes(crm, -1, -2)
    np.testing.assert_allclose(motion_cross(m, x), jnp.einsum("...ij,...j->...i", crm, x), atol=1e-14)
    np.testing.assert_allclose(force_cross(m, f), jnp.einsum("...ij,...j->...i", crf, f), atol=1e-14)
    np.testing.assert_allclose(jnp.sum(motion_cross(m, x) * f, -1), -jnp.sum(x * force_cross(m, f), -1), atol=1e-13)


def test_products_and_their_gradients_fuse():
    """The products and their gradients are broadcasts, products and sums
    only: no gather (its derivative is a scatter-add), no batched dot (slow
    on XLA's CPU backend), no slice and no pad (a slice's transpose, which
    made reverse mode memory-bound; docs/explanation/performance.md)."""
    a = jnp.ones((4, 6, 6))
    x = jnp.ones((4, 6))

    def everything(a, x):
        return (jnp.sum(mat_mul(a, a)) + jnp.sum(mat_mul(a, a, transpose_b=True))
                + jnp.sum(mat_vec(a, x)) + jnp.sum(mat_vec(a, x, transpose=True)))

    for jaxpr in (jax.make_jaxpr(everything)(a, x), jax.make_jaxpr(jax.grad(everything, (0, 1)))(a, x)):
        found = primitive_names(jaxpr.jaxpr)
        assert not found & {"gather", "scatter", "scatter-add", "dot_general", "pad", "slice"}, found


def _close(a, b, tol=1e-14):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("axis", [-1, -2, 1])
@pytest.mark.parametrize("shape", [(4, 6, 3), (4, 0, 0)])  # a Weld's mobilities: none
def test_small_sum_is_jnp_sum_for_one_state_and_batches(axis, shape):
    rng = np.random.default_rng(5)
    p = jnp.asarray(rng.normal(size=shape))
    _close(small_sum(p, axis), jnp.sum(p, axis=axis))
    _close(jax.jit(small_sum, static_argnums=1)(p, axis), jnp.sum(p, axis=axis))
    for batch in (3, 4 * SMALL_SUM_ADDS_MAX_BATCH):  # adds, then a reduction
        stack = jnp.asarray(rng.normal(size=(2, batch) + p.shape))
        batched = jax.vmap(jax.vmap(lambda p: small_sum(p, axis)), in_axes=1, out_axes=1)
        _close(batched(stack), jnp.sum(stack, axis=axis if axis < 0 else axis + 2))


def test_small_sum_has_jnp_sums_derivatives():
    weights = jnp.arange(1.0, 7.0)

    def loss(total):
        return lambda p: jnp.sum(jnp.sin(total(p * p)) * weights)

    ours, ref = loss(lambda p: small_sum(p, -1)), loss(lambda p: jnp.sum(p, axis=-1))
    p = jnp.asarray(np.random.default_rng(6).normal(size=(4, 6, 3)))
    _close(jax.grad(ours)(p), jax.grad(ref)(p))
    _close(jax.jvp(ours, (p,), (p[::-1],))[1], jax.jvp(ref, (p,), (p[::-1],))[1])
    _close(jax.hessian(ours)(p[0]), jax.hessian(ref)(p[0]), 1e-13)
    _close(jax.vmap(jax.grad(ours))(p[:, None]), jax.vmap(jax.grad(ref))(p[:, None]))


def test_products_are_adds_for_one_state_and_reductions_across_a_batch():
    """XLA's CPU backend pays per reduction on every call (about 0.4 us at
    batch 1), so one state's product is adds; a wide batch's is a reduction
    (the adds recompute across it); either way the reverse pass is a
    broadcast product, no pad."""
    rng = np.random.default_rng(7)
    a, x = jnp.asarray(rng.normal(size=(6, 6))), jnp.asarray(rng.normal(size=6))
    xs = jnp.asarray(rng.normal(size=(4 * SMALL_SUM_ADDS_MAX_BATCH, 6)))

    def hlo(fn, *args):
        return jax.jit(fn).lower(*args).compile().as_text()

    def loss(a, x):
        return jnp.sum(mat_mul(a, mat_vec(a, x)[:, None]) ** 2)

    assert " reduce(" not in hlo(lambda a, x: mat_mul(a, mat_vec(a, x)[:, None]), a, x)
    assert " reduce(" not in hlo(jax.vmap(lambda x: mat_vec(a, x)), xs[:SMALL_SUM_ADDS_MAX_BATCH])
    assert " reduce(" in hlo(jax.vmap(lambda x: mat_vec(a, x)), xs)
    assert "pad" not in primitive_names(jax.make_jaxpr(jax.grad(loss))(a, x).jaxpr)
    _close(jax.vmap(lambda x: mat_vec(a, x, transpose=True))(xs), xs @ a)


def test_scalar_path_evaluates_small_sum():
    rng = np.random.default_rng(8)
    a, x = jnp.asarray(rng.normal(size=(3, 3))), jnp.asarray(rng.normal(size=3))
    _close(scalarize(lambda x: mat_vec(a, x))(x), a @ x)
    _close(jax.grad(scalarize(lambda x: jnp.sum(mat_vec(a, x) ** 2)))(x), 2 * a.T @ (a @ x), 1e-13)
