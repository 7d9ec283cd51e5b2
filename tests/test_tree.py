"""The traversal primitive, checked exactly with integer carries (Brax's idea)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from simbodyx import tree
from simbodyx._xla import releases

# Ground 0; 1 and 2 hang from Ground, 3 from 1, 4 and 5 from 3, 6 from 2.
PARENT = (0, 0, 0, 1, 3, 3, 2)


def test_segments():
    # Depth levels (1, 2), (3, 6), (4, 5): the second continues the first
    # (one child each, in order), the third does not (3 has two children).
    s = tree.TreeSchedule.from_parents(PARENT)
    assert [seg.bodies.tolist() for seg in s.segments] == [[[1, 2], [3, 6]], [[4, 5]]]
    assert [seg.parents.tolist() for seg in s.segments] == [[[0, 0], [1, 2]], [[3, 3]]]
    assert s._child_locations[0] == (2, ((1, 0), (1, 1), None, None))  # body 3's two children, 6's none
    assert s._child_locations[-1] == (2, ((0, 0), (0, 1)))  # Ground's


def test_take_rows_uses_slices_and_zero_rows():
    a = jnp.arange(12.0).reshape(6, 2)
    index = np.array([[6, 0, 1], [2, 5, 6]])
    np.testing.assert_array_equal(tree.take_rows(a, index), np.concatenate([np.zeros((1, 2)), a])[(index + 1) % 7])
    hlo = jax.jit(lambda a: tree.take_rows(a, index)).lower(a).as_text()
    assert "gather" not in hlo


def test_take_rows_repeats_and_many_pieces():
    """Each row k times (a binary tree's parents) is a selection then a broadcast;
    past MAX_SLICES pieces, one gather. Values and derivatives match numpy's."""
    n = 4 * tree.MAX_SLICES
    a = jnp.arange(3.0 * n).reshape(n, 3)
    for index in (np.repeat(np.arange(3, 9), 2), np.arange(0, n, 2), np.array([1, 1, 2, 2, 2, 3])):
        np.testing.assert_array_equal(tree.take_rows(a, index), np.asarray(a)[index])
        weights = jnp.arange(1.0, 1.0 + 3 * len(index)).reshape(-1, 3)
        grad = jax.grad(lambda a: jnp.sum(weights * tree.take_rows(a, index)))(a)
        expect = np.zeros((n, 3))
        np.add.at(expect, index, np.asarray(weights))
        np.testing.assert_array_equal(grad, expect)
    hlo = jax.jit(lambda a: tree.take_rows(a, np.repeat(np.arange(3, 9), 2))).lower(a).as_text()
    assert "gather" not in hlo and "broadcast_in_dim" in hlo
    assert "gather" in jax.jit(lambda a: tree.take_rows(a, np.arange(0, n, 2))).lower(a).as_text()


def test_long_chain_is_one_scanned_segment():
    n = 3 * tree.UNROLL_MAX_LEVELS
    parent = (0,) + tuple(range(n))
    s = tree.TreeSchedule.from_parents(parent, (0,) + (1,) * n, tuple(range(-1, n)))
    assert len(s.segments) == 1 and s.segments[0].scanned
    labels = jnp.arange(n + 1) % 7
    out = jax.jit(lambda x: tree.outward(s, lambda parent, own: (parent * 3 + own) % 1000, jnp.array(0), x))(labels)
    expect = [0]
    for b in range(1, n + 1):
        expect.append((expect[-1] * 3 + b % 7) % 1000)
    assert out.tolist() == expect
    totals, at_ground = tree.inward(s, lambda own, c: (own + c, own + c), labels, jnp.array(0))
    assert totals.tolist() == [0] + [int(labels[b:].sum()) for b in range(1, n + 1)]
    assert int(at_ground) == int(labels[1:].sum())


def test_mobility_layout_round_trip():
    # Body nu: 1 -> 2, 2 -> 0 (a weld), 3 -> 3, others 1; widths per segment.
    nu = (0, 2, 0, 3, 1, 1, 1)
    start = tuple(int(x) for x in np.concatenate([[0], np.cumsum(nu)[:-1]]))
    s = tree.TreeSchedule.from_parents(PARENT, nu, start)
    assert [seg.width for seg in s.segments] == [3, 1]
    u = jnp.arange(1.0, sum(nu) + 1)
    levels = tree.mobilities_to_levels(s, u)
    assert levels[0][0, 1].tolist() == [0, 0, 0]  # body 2 is a weld: all slots unused
    assert levels[0][1, 0].tolist() == [3, 4, 5]  # body 3
    np.testing.assert_array_equal(tree.mobilities_from_levels(s, levels, jnp.zeros(0)), u)


def test_outward_builds_paths():
    # Each body's value: parent's value * 10 + own label -> digits spell the path.
    s = tree.TreeSchedule.from_parents(PARENT)
    labels = jnp.arange(len(PARENT))
    out = jax.jit(lambda x: tree.outward(s, lambda parent, own: parent * 10 + own, jnp.array(0), x))(labels)
    assert out.tolist() == [0, 1, 2, 13, 134, 135, 26]


def test_inward_subtree_sums_and_order():
    s = tree.TreeSchedule.from_parents(PARENT)
    mass = jnp.array([0, 1, 2, 4, 8, 16, 32])

    def step(own, children):
        total = own + children
        return total, total

    out, at_ground = tree.inward(s, step, mass, jnp.array(0))
    # Subtree sums: 3 -> 4+8+16, 1 -> 1+28, 2 -> 2+32.
    assert out.tolist() == [0, 29, 34, 28, 8, 16, 32]
    assert int(at_ground) == 63


def test_inward_bushy_tree():
    """A binary tree and a Ground with many children: child sums gathered
    at once per level (summed by a reduction above eight children)."""
    parent = (0,) + (0,) * 12 + tuple(1 + (b - 13) // 2 for b in range(13, 37))
    s = tree.TreeSchedule.from_parents(parent)
    labels = jnp.asarray(2 ** np.arange(len(parent)) % 1009)
    out, at_ground = jax.jit(lambda x: tree.inward(s, lambda own, c: (own + c, own + c), x, jnp.array(0)))(labels)
    children = {b: [c for c in range(1, len(parent)) if parent[c] == b] for b in range(len(parent))}

    def subtree(b):
        return int(labels[b]) + sum(subtree(c) for c in children[b])

    assert out.tolist() == [0] + [subtree(b) for b in range(1, len(parent))]
    assert int(at_ground) == subtree(0) - int(labels[0])


def test_inward_pytree_and_vmap():
    s = tree.TreeSchedule.from_parents(PARENT)

    def step(own, children):
        count, total = children
        return (count + 1, total + own), (count + 1, total + own)

    def subtree(values):
        return tree.inward(s, step, values, (jnp.array(0), jnp.array(0.0)))[0]

    values = jnp.stack([jnp.arange(7.0), 2 * jnp.arange(7.0)])
    counts, totals = jax.vmap(subtree)(values)
    assert counts[0].tolist() == [0, 4, 2, 3, 1, 1, 1]
    np.testing.assert_allclose(totals[1], 2 * np.array([0, 1 + 3 + 4 + 5, 2 + 6, 3 + 4 + 5, 4, 5, 6]))


def _take_rows_reverse_pass(index):
    """take_rows of 8 rows by ``index`` (8: a zero row): its value, forward
    and reverse mode against numpy's gather and its transpose; returns the
    reverse pass's HLO."""
    a = jnp.arange(16.0).reshape(8, 2)
    f = lambda a: tree.take_rows(a, index)
    expected = np.concatenate([np.asarray(a), np.zeros((1, 2))])[index]
    np.testing.assert_array_equal(f(a), expected)
    np.testing.assert_array_equal(jax.jvp(f, (a,), (a,))[1], expected)
    w = jnp.arange(2.0 * len(index)).reshape(-1, 2)
    (grad,) = jax.vjp(f, a)[1](w)
    expect_grad = np.zeros((9, 2))
    np.add.at(expect_grad, index, np.asarray(w))
    np.testing.assert_array_equal(grad, expect_grad[:8])
    cubes = lambda take: lambda a: jnp.sum(w * take(a) ** 3)  # a second derivative, against numpy's indexing
    np.testing.assert_allclose(jax.hessian(cubes(f))(a),
                               jax.hessian(cubes(lambda a: jnp.concatenate([a, jnp.zeros((1, 2))])[index]))(a))
    return jax.jit(lambda a, w: jax.vjp(f, a)[1](w)).lower(a, w).as_text()


@pytest.mark.parametrize("split", [False, True], ids=["scatter_add", "split_transposes"])
def test_take_rows_with_repeated_rows_transposes_without_pads(split, monkeypatch):
    # Rows repeat (7 -> 2 twice) and zero rows appear. The reverse pass is
    # one scatter-add, or with SPLIT_TRANSPOSES the cotangent split and
    # summed (one split per occurrence), with no scatter; never pads (the
    # transpose of slices would pad every piece to full size).
    monkeypatch.setattr(releases, "SPLIT_TRANSPOSES", split)
    hlo = _take_rows_reverse_pass(np.array([8, 0, 1, 7, 7, 3, 8]))
    assert ("stablehlo.scatter" in hlo) is not split and "stablehlo.pad" not in hlo


def test_injective_take_rows_transposes_to_a_concatenation():
    # No row taken twice: the source is split at the runs' ends, so the
    # reverse pass splits the cotangent and concatenates it, zeros for the
    # rows not taken (rows 2 and 6 here): no scatter-add, no pads.
    hlo = _take_rows_reverse_pass(np.array([3, 4, 8, 0, 1, 7, 5]))
    assert "scatter" not in hlo and "stablehlo.pad" not in hlo and "concatenate" in hlo


@pytest.mark.parametrize("parent", [
    PARENT,
    (0,) + tuple(range(3 * tree.UNROLL_MAX_LEVELS)),  # one scanned segment
    (0,) + (0,) * 12 + tuple(1 + (b - 13) // 2 for b in range(13, 37)),  # Ground's 12 children, a binary tree
], ids=["tree", "long_chain", "bushy"])
def test_vectorized_steps_take_whole_levels(parent):
    """``vectorized=True`` hands the step whole levels (a leading axis of
    bodies) instead of vmapping it; the sweeps' results are the same."""
    s = tree.TreeSchedule.from_parents(parent)
    labels = jnp.arange(len(parent)) % 7
    seen = {False: set(), True: set()}

    def down(vectorized):
        def step(value, own):
            seen[vectorized].add(own.shape)
            return (value * 3 + own) % 1000
        return step

    def up(vectorized):
        def step(own, children):
            count, total = children
            seen[vectorized].add(own.shape)
            return total + own, (count + 1, total + own)
        return step

    zero = (jnp.array(0), jnp.array(0))
    results = {}
    for vectorized in (False, True):
        out = jax.jit(lambda x: tree.outward(s, down(vectorized), jnp.array(0), x, vectorized=vectorized))(labels)
        sums, at_ground = tree.inward(s, up(vectorized), labels, zero, vectorized=vectorized)
        results[vectorized] = [np.asarray(x) for x in (out, sums, *at_ground)]
    for ours, theirs in zip(results[True], results[False]):
        np.testing.assert_array_equal(ours, theirs)
    assert seen[False] == {()}
    levels = {(seg.size,) for seg in s.segments}
    assert levels <= seen[True] <= levels | {(1,)}  # (1,): inward's shape probe


def test_restricted_schedule_sweeps_only_the_paths():
    """A schedule restricted to some bodies and their ancestors: pieces of
    the full segments (split where the kept columns change, widths kept);
    an inward sweep of data that is zero elsewhere gives the full sweep's
    values on those bodies, and expand_levels puts them back with zeros."""
    parent = (0, 0, 0, 1, 2, 3, 4, 5, 5)  # one segment 1,2 / 3,4 / 5,6, then 7 and 8 under 5
    nu = (0, 1, 2, 3, 1, 2, 1, 1, 2)
    start = tuple(int(x) for x in np.concatenate([[0], np.cumsum(nu)[:-1]]))
    full = tree.TreeSchedule.from_parents(parent, nu, start)
    assert tree.restricted(full, (6, 7, 8)) is full  # every body is on a path
    sub = tree.restricted(full, (4, 5))
    assert sub is tree.restricted(full, (4, 5))  # built once
    assert [seg.bodies.tolist() for seg in sub.segments] == [[[1, 2], [3, 4]], [[5]]]
    assert sub.sources == ((0, 0, (0, 1)), (0, 2, (0,)))
    assert [seg.width for seg in sub.segments] == [full.segments[0].width] * 2

    on_paths = np.isin(np.arange(len(parent)), [1, 2, 3, 4, 5])
    values = jnp.asarray(np.where(on_paths, 2 ** np.arange(len(parent)), 0))

    def step(own, children):
        return own + children, own + children

    whole, at_ground = tree.inward_levels(full, step, tree.to_levels(full, values), jnp.array(0), vectorized=True)
    part, at_ground_sub = tree.inward_levels(sub, step, tree.to_levels(sub, values), jnp.array(0), vectorized=True)
    compact = tree.to_levels(sub, values[np.array([2, 5])], bodies=(2, 5))  # rows of bodies 2 and 5 only
    for a, b in zip(compact, tree.to_levels(sub, jnp.where(np.isin(np.arange(len(parent)), [2, 5]), values, 0))):
        np.testing.assert_array_equal(a, b)
    assert int(at_ground_sub) == int(at_ground)
    for a, b in zip(part, tree.restrict_levels(sub, whole)):
        np.testing.assert_array_equal(a, b)
    back = tree.expand_levels(sub, part, whole)
    expect = np.where(on_paths, tree.from_levels(full, whole, 0), 0)
    np.testing.assert_array_equal(tree.from_levels(full, back, 0), expect)

    u = jnp.arange(1.0, sum(nu) + 1)
    per_mobility = tree.restrict_levels(sub, tree.mobilities_to_levels(full, u))
    kept = np.concatenate([np.full(n, b in (1, 2, 3, 4, 5)) for b, n in enumerate(nu)])
    np.testing.assert_array_equal(tree.mobilities_from_levels(sub, per_mobility, jnp.zeros(0)), np.where(kept, u, 0))
    like = tree.mobilities_to_levels(full, u)
    np.testing.assert_array_equal(tree.mobilities_from_levels(full, tree.expand_levels(sub, per_mobility, like),
                                                              jnp.zeros(0)), np.where(kept, u, 0))


def test_rows_and_stacking_are_one_equation_each_under_jit_vmap_and_both_modes():
    """The sweeps' unrolled levels take a leaf's rows and stack rows back with
    one equation each (``rows_of`` and ``stacked``, each the other's
    transpose): exact against indexing and jnp.stack eagerly, under jit,
    under vmap with the batch on either axis or on some rows only, and in
    forward and reverse mode with a row the loss does not read (a symbolic
    zero cotangent); the scalar path inlines both."""
    from simbodyx._xla.scalarize import scalarize

    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 2, 4))
    tree_in = {"x": a, "y": a[:, 0]}
    rows = tree._unstacked(tree_in, 3)
    assert tree._unstacked((), 2) == [(), ()]
    assert len(rows) == 3 and all(np.array_equal(r["x"], a[i]) and np.array_equal(r["y"], a[i, 0])
                                  for i, r in enumerate(rows))
    equations = jax.make_jaxpr(lambda t: tree._unstacked(t, 3))(tree_in).jaxpr.eqns
    assert [e.primitive.name for e in equations] == ["rows_of"] * 2
    np.testing.assert_array_equal(tree._stack([a[0], a[1], a[2]]), a)
    np.testing.assert_array_equal(jax.jit(lambda a: tree._stack(tree._unstacked(a, 3)[::-1]))(a), a[::-1])
    for axis in (0, 1, 2):
        np.testing.assert_array_equal(jax.vmap(lambda a: tree._stack(tree._unstacked(a, len(a))), in_axes=axis)(a),
                                      np.moveaxis(a, axis, 0))
    shared = [np.broadcast_to(a[0, 0], (2, 4)), a[1], np.broadcast_to(a[2, 0], (2, 4))]  # rows 0 and 2 unbatched
    np.testing.assert_array_equal(jax.vmap(lambda r: tree._stack([a[0, 0], r, a[2, 0]]))(a[1]), np.stack(shared, 1))

    def loss(f):
        return lambda a: jnp.sum(jnp.sin(f(a)) * a[::-1])

    ours = loss(lambda a: tree._stack([2.0 * r for r in tree._unstacked(a, 3)[:2]] + [a[2] * 0])
                + tree._unstacked(a, 3)[1])
    theirs = loss(lambda a: jnp.stack([2.0 * a[0], 2.0 * a[1], a[2] * 0]) + a[1])
    np.testing.assert_allclose(jax.grad(ours)(a), jax.grad(theirs)(a), rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(jax.jacfwd(ours)(a), jax.jacfwd(theirs)(a), rtol=1e-14, atol=1e-14)
    fn = scalarize(lambda a: tree._stack(tree._unstacked(a, 3)[::-1]) + 1.0)
    np.testing.assert_array_equal(fn(a), a[::-1] + 1.0)
