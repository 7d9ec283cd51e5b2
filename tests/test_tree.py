"""The traversal primitive, checked exactly with integer carries (Brax's idea)."""

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx import tree

# Ground 0; 1 and 2 hang from Ground, 3 from 1, 4 and 5 from 3, 6 from 2.
PARENT = (0, 0, 0, 1, 3, 3, 2)


def test_levels():
    s = tree.TreeSchedule.from_parents(PARENT)
    assert [lv.bodies for lv in s.levels] == [(1, 2), (3, 6), (4, 5)]
    assert [lv.parents for lv in s.levels] == [(0, 0), (1, 2), (3, 3)]
    assert s.levels[0].body_index == slice(1, 3)
    assert isinstance(s.levels[1].body_index, np.ndarray)


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
