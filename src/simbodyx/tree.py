"""The tree-traversal primitive: every recursion over the multibody tree goes
through :func:`outward` (base to tip) or :func:`inward` (tip to base).

Strategy (the single place to change it): a Python loop over depth levels
at trace time; each level gathers its parents' values, applies the step
once, vmapped over the level's bodies, and scatters the results. Index sets
that are contiguous are taken as slices (XLA slices faster than it gathers).
Body-indexed pytrees have a leading axis of length nb, Ground at row 0.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


def _as_index(indices: tuple[int, ...]):
    """A slice when the indices are contiguous and increasing, else an int array."""
    if indices == tuple(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return np.asarray(indices)


@dataclasses.dataclass(frozen=True)
class Level:
    bodies: tuple[int, ...]
    parents: tuple[int, ...]

    @property
    def body_index(self):
        return _as_index(self.bodies)

    @property
    def parent_index(self):
        return _as_index(self.parents)


@dataclasses.dataclass(frozen=True)
class TreeSchedule:
    """Bodies grouped by depth (level 0 is Ground alone). Built once per topology."""

    parent: tuple[int, ...]
    levels: tuple[Level, ...]

    @classmethod
    def from_parents(cls, parent: tuple[int, ...]) -> TreeSchedule:
        depth = [0] * len(parent)
        for b in range(1, len(parent)):
            depth[b] = depth[parent[b]] + 1
        levels = []
        for d in range(1, max(depth, default=0) + 1):
            bodies = tuple(b for b in range(len(parent)) if depth[b] == d)
            levels.append(Level(bodies, tuple(parent[b] for b in bodies)))
        return cls(tuple(parent), tuple(levels))

    @property
    def num_bodies(self) -> int:
        return len(self.parent)


def _take(tree, index):
    return jax.tree.map(lambda a: a[index], tree)


def _put(tree, index, values):
    return jax.tree.map(lambda a, v: a.at[index].set(v), tree, values)


def outward(schedule: TreeSchedule, step, root, inputs):
    """Base-to-tip sweep: ``out[b] = step(out[parent[b]], inputs[b])``, ``out[0] = root``.

    ``step`` maps one body (unbatched pytrees) and is vmapped per level;
    ``inputs`` is a body-indexed pytree (row 0 unused). Returns the
    body-indexed pytree of outputs.
    """
    nb = schedule.num_bodies
    out = jax.tree.map(lambda r: jnp.broadcast_to(r, (nb,) + jnp.shape(r)), root)
    for level in schedule.levels:
        parent_out = _take(out, level.parent_index)
        values = jax.vmap(step)(parent_out, _take(inputs, level.body_index))
        out = _put(out, level.body_index, values)
    return out


def inward(schedule: TreeSchedule, step, inputs, up_zero):
    """Tip-to-base sweep.

    ``step(input_b, children_b) -> (out_b, up_b)``: ``children_b`` is the sum
    of ``up`` over b's children, and ``up_zero`` (one body's zero ``up``,
    passed explicitly so steps never test for a missing value) for a leaf.
    Returns the body-indexed outputs (Ground's row zero) and the sum of
    ``up`` over Ground's children.
    """
    nb = schedule.num_bodies
    out_shape = jax.eval_shape(step, _take(inputs, 0), up_zero)[0]
    out = jax.tree.map(lambda s: jnp.zeros((nb,) + s.shape, s.dtype), out_shape)
    acc = jax.tree.map(lambda z: jnp.broadcast_to(z, (nb,) + jnp.shape(z)), up_zero)
    for level in reversed(schedule.levels):
        values, up = jax.vmap(step)(_take(inputs, level.body_index), _take(acc, level.body_index))
        out = _put(out, level.body_index, values)
        parents = np.asarray(level.parents)
        acc = jax.tree.map(lambda a, v: a.at[parents].add(v), acc, up)
    return out, _take(acc, 0)
