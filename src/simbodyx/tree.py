"""The tree-traversal primitive: every recursion over the multibody tree goes
through :func:`outward` (base to tip) or :func:`inward` (tip to base).

Strategy (the single place to change it). Bodies are grouped by depth into
levels; consecutive levels in which every body of one level has exactly one
child in the next (a chain, or a bundle of parallel chains) form a
*segment*. A segment's levels all have the same shapes, so the segment runs
as one ``lax.scan`` over its levels, the carry being the previous level's
values; a short segment is unrolled instead (scan's per-iteration overhead
is larger than the work of a few small levels). Each level applies the step
once, vmapped over the level's bodies. Compile cost therefore grows with the
number of segments (about the tree's branching), not with its depth: a
256-body chain compiles like a 7-body one.

Two data layouts:

* body-indexed pytrees, leading axis nb, Ground at row 0 (:func:`outward`,
  :func:`inward`);
* the *level layout*, one pytree per segment with leading axes
  (levels, bodies per level), and, for per-mobility data, a third axis of
  the segment's width (the most mobilities of any of its bodies; unused
  slots hold zeros). :func:`outward_levels` and :func:`inward_levels` work on
  it directly, so a recursion that passes results from one sweep to the next
  (the articulated-body method) never pads to six mobilities nor goes back
  to the body-indexed layout in between.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

#: Segments with at most this many levels are unrolled rather than scanned.
UNROLL_MAX_LEVELS = 8


def _as_index(indices):
    """A slice when the indices are contiguous and increasing, else an int array."""
    flat = np.asarray(indices).reshape(-1)
    if flat.size and np.array_equal(flat, np.arange(flat[0], flat[0] + flat.size)):
        return slice(int(flat[0]), int(flat[0]) + flat.size)
    return flat


@dataclasses.dataclass(frozen=True, eq=False)
class Segment:
    """Consecutive levels of equal size where level l+1's bodies are, in
    order, the only children of level l's bodies.

    bodies, parents: (L, n) body indices; u_index: (L, n, width) indices
    into u, with ``num_u`` (one past the end) in unused slots.
    """

    bodies: np.ndarray
    parents: np.ndarray
    u_index: np.ndarray
    num_u: int

    @property
    def length(self) -> int:
        return self.bodies.shape[0]

    @property
    def size(self) -> int:
        return self.bodies.shape[1]

    @property
    def width(self) -> int:
        return self.u_index.shape[2]

    @property
    def scanned(self) -> bool:
        return self.length > UNROLL_MAX_LEVELS

    @cached_property
    def body_index(self):
        return _as_index(self.bodies)

    @cached_property
    def parent_index(self):
        """The first level's parents."""
        return _as_index(self.parents[0])

    @cached_property
    def u_used(self) -> np.ndarray:
        """(L, n, width) bool: the slot holds a real mobility."""
        return self.u_index < self.num_u


@dataclasses.dataclass(frozen=True, eq=False)
class TreeSchedule:
    """The segments, base first, and the index maps between layouts.
    Built once per topology."""

    parent: tuple[int, ...]
    segments: tuple[Segment, ...]

    @classmethod
    def from_parents(cls, parent, body_nu=None, u_start=None) -> TreeSchedule:
        """``parent[b] < b`` for b >= 1; ``body_nu``/``u_start`` give each
        body's mobilities (default: none)."""
        nb = len(parent)
        body_nu = tuple(body_nu) if body_nu is not None else (0,) * nb
        u_start = tuple(u_start) if u_start is not None else (0,) * nb
        num_u = sum(body_nu)
        depth = [0] * nb
        for b in range(1, nb):
            depth[b] = depth[parent[b]] + 1
        levels = [
            [b for b in range(nb) if depth[b] == d] for d in range(1, max(depth, default=0) + 1)
        ]
        runs: list[list[list[int]]] = []
        for level in levels:
            previous = runs[-1][-1] if runs else None
            if previous is not None and [parent[b] for b in level] == previous:
                runs[-1].append(level)
            else:
                runs.append([level])
        segments = []
        for run in runs:
            bodies = np.asarray(run, dtype=np.int32)
            width = max(body_nu[b] for b in bodies.reshape(-1))
            u_index = np.full(bodies.shape + (width,), num_u, dtype=np.int32)
            for (l, j), b in np.ndenumerate(bodies):
                u_index[l, j, :body_nu[b]] = np.arange(u_start[b], u_start[b] + body_nu[b])
            parents = np.asarray([[parent[b] for b in level] for level in run], dtype=np.int32)
            segments.append(Segment(bodies, parents, u_index, num_u))
        return cls(tuple(parent), tuple(segments))

    @property
    def num_bodies(self) -> int:
        return len(self.parent)

    @cached_property
    def _body_order(self):
        """Gather index from [Ground, segment bodies flattened in order] to body order."""
        order = np.concatenate([[0]] + [s.bodies.reshape(-1) for s in self.segments]).astype(np.int32)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size, dtype=np.int32)
        return _as_index(inverse)

    @cached_property
    def _u_order(self):
        """Gather index from the segments' mobility slots flattened in order to u order."""
        flat = np.concatenate([np.zeros(0, np.int32)] + [s.u_index.reshape(-1) for s in self.segments])
        num_u = self.segments[0].num_u if self.segments else 0
        position = np.empty(num_u, dtype=np.int32)
        used = flat < num_u
        position[flat[used]] = np.flatnonzero(used)
        return _as_index(position)


def _take(tree, index):
    return jax.tree.map(lambda a: a[index], tree)


def _put(tree, index, values):
    return jax.tree.map(lambda a, v: a.at[index].set(v), tree, values)


def _flatten_levels(tree, axes):
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[axes:]), tree)


def to_levels(schedule: TreeSchedule, tree):
    """Body-indexed pytree -> level layout (one (L, n, ...) pytree per segment)."""
    return tuple(
        jax.tree.map(lambda a, s=s: a[s.body_index].reshape(s.bodies.shape + a.shape[1:]), tree)
        for s in schedule.segments
    )


def from_levels(schedule: TreeSchedule, levels, ground):
    """Level layout -> body-indexed pytree with ``ground`` as row 0."""
    def gather(g, *per_segment):
        rows = [jnp.asarray(g)[None]] + [a.reshape((-1,) + a.shape[2:]) for a in per_segment]
        return jnp.concatenate(rows)[schedule._body_order]

    return jax.tree.map(gather, ground, *levels)


def mobilities_to_levels(schedule: TreeSchedule, tree):
    """(nu, ...) pytree -> level layout (L, n, width, ...), zeros in unused slots."""
    def gather(a, s):
        padded = jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)])
        return padded[s.u_index]

    return tuple(jax.tree.map(lambda a, s=s: gather(a, s), tree) for s in schedule.segments)


def mobilities_from_levels(schedule: TreeSchedule, levels, empty):
    """Level layout (L, n, width, ...) -> (nu, ...); unused slots are dropped.
    ``empty`` (a (0, ...) pytree) is the answer for a tree without bodies."""
    if not schedule.segments:
        return empty

    def gather(*per_segment):
        flat = jnp.concatenate([a.reshape((-1,) + a.shape[3:]) for a in per_segment])
        return flat[schedule._u_order]

    return jax.tree.map(gather, *levels)


def outward_levels(schedule: TreeSchedule, step, root, levels):
    """Base-to-tip sweep in the level layout.

    ``step(value_parent, input_b) -> (value_b, extra_b)``: ``value`` is
    passed down the tree (Ground's is ``root``), ``extra`` is only collected
    (its shape may differ between segments, e.g. per-mobility results).
    Returns (values, extras), each in the level layout.
    """
    nb = schedule.num_bodies
    done = jax.tree.map(lambda r: jnp.broadcast_to(r, (nb,) + jnp.shape(r)), root)
    values, extras = [], []
    vstep = jax.vmap(step)
    for segment, inputs in zip(schedule.segments, levels):
        carry = _take(done, segment.parent_index)
        if segment.scanned:
            def scan_step(value, x):
                out = vstep(value, x)
                return out[0], out

            _, (value, extra) = jax.lax.scan(scan_step, carry, inputs)
        else:
            rows = []
            for l in range(segment.length):
                rows.append(vstep(carry, _take(inputs, l)))
                carry = rows[-1][0]
            value, extra = jax.tree.map(lambda *r: jnp.stack(r), *rows)
        values.append(value)
        extras.append(extra)
        done = _put(done, segment.body_index, _flatten_levels(value, 2))
    return tuple(values), tuple(extras)


def inward_levels(schedule: TreeSchedule, step, levels, up_zero):
    """Tip-to-base sweep in the level layout.

    ``step(input_b, children_b) -> (out_b, up_b)``: ``children_b`` is the sum
    of ``up`` over b's children, ``up_zero`` (one body's zero ``up``, passed
    explicitly so steps never test for a missing value) for a leaf. Returns
    the outputs in the level layout and the sum of ``up`` over Ground's
    children.
    """
    nb = schedule.num_bodies
    acc = jax.tree.map(lambda z: jnp.broadcast_to(z, (nb,) + jnp.shape(z)), up_zero)
    outputs = [None] * len(schedule.segments)
    vstep = jax.vmap(step)
    for i in reversed(range(len(schedule.segments))):
        segment, inputs = schedule.segments[i], levels[i]
        carry = _take(acc, _as_index(segment.bodies[-1]))
        if segment.scanned:
            def scan_step(children, x):
                out, up = vstep(x, children)
                return up, out

            carry, out = jax.lax.scan(scan_step, carry, inputs, reverse=True)
        else:
            rows = []
            for l in reversed(range(segment.length)):
                row, carry = vstep(_take(inputs, l), carry)
                rows.append(row)
            out = jax.tree.map(lambda *r: jnp.stack(r[::-1]), *rows)
        outputs[i] = out
        parents = segment.parents[0]
        acc = jax.tree.map(lambda a, v: a.at[parents].add(v), acc, carry)
    return tuple(outputs), _take(acc, 0)


def outward(schedule: TreeSchedule, step, root, inputs):
    """Base-to-tip sweep: ``out[b] = step(out[parent[b]], inputs[b])``, ``out[0] = root``.

    ``step`` maps one body (unbatched pytrees); ``inputs`` is a body-indexed
    pytree (row 0 unused). Returns the body-indexed pytree of outputs.
    """
    out, _ = outward_levels(schedule, lambda p, x: (step(p, x), ()), root, to_levels(schedule, inputs))
    return from_levels(schedule, out, root)


def inward(schedule: TreeSchedule, step, inputs, up_zero):
    """Tip-to-base sweep on body-indexed pytrees (see :func:`inward_levels`).
    Returns the body-indexed outputs (Ground's row zero) and the sum of
    ``up`` over Ground's children."""
    out, at_ground = inward_levels(schedule, step, to_levels(schedule, inputs), up_zero)
    shape = jax.eval_shape(step, _take(inputs, 0), up_zero)[0]
    ground = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    return from_levels(schedule, out, ground), at_ground
