"""The tree-traversal primitive: every recursion over the multibody tree goes
through :func:`outward` (base to tip) or :func:`inward` (tip to base).

Strategy (the single place to change it). Bodies are grouped by depth into
levels; consecutive levels in which every body of one level has exactly one
child in the next (a chain, or a bundle of parallel chains) form a
*segment*. A segment's levels all have the same shapes, so the segment runs
as one ``lax.scan`` over its levels, the carry being the previous level's
values; a short segment is unrolled instead (scan's per-iteration overhead
is larger than the work of a few small levels). Each level applies the step
once, vmapped over the level's bodies, or, for a ``vectorized`` step (all of
the library's own), called directly on the whole level: tracing a vmapped
step costs about twice as much. Compile cost therefore grows with the
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

A schedule restricted to some bodies and their ancestors (:func:`restricted`)
sweeps data that is zero elsewhere (a constraint row's forces act on a few
bodies) over their paths to Ground only.
"""

from __future__ import annotations

import dataclasses
import functools
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla import releases
from simbodyx._xla.concatenation import concatenate
from simbodyx._xla.primitives import rows_of, stacked

#: Segments with at most this many levels are unrolled rather than scanned.
UNROLL_MAX_LEVELS = 8
#: A static row gather made of more slices than this is one gather instead.
MAX_SLICES = 16
#: With ``releases.SPLIT_TRANSPOSES``, the derivative of a gather of more
#: pieces than this stays one gather (transposed: a scatter-add), bounding
#: the slices a gradient has to compile.
MAX_SPLIT_TRANSPOSE_SLICES = 64
#: Children summed by elementwise adds up to this many per body; a reduction above.
MAX_ADDED_CHILDREN = 8


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
    def _where(self):
        """Each body's location (source, row) in [Ground's row, segment 0
        flattened, segment 1 flattened, ...] (source 0 is Ground)."""
        where = {0: (0, 0)}
        for i, seg in enumerate(self.segments):
            for row, b in enumerate(seg.bodies.reshape(-1)):
                where[int(b)] = (i + 1, row)
        return where

    @cached_property
    def _parent_locations(self):
        """Per segment: where its first level's parents are (see ``_where``)."""
        return tuple(tuple(self._where[int(p)] for p in seg.parents[0]) for seg in self.segments)

    @cached_property
    def _child_locations(self):
        """Per segment i: (c, locations), ``c`` the most children of any body of
        its deepest level and ``locations`` those children body by body, c
        each, as (segment t, row of t's first level), None for a missing one.
        Index -1 (one past the last segment) lists Ground's children."""
        targets = [seg.bodies[-1] for seg in self.segments] + [np.zeros(1, np.int32)]
        children = [[[] for _ in t] for t in targets]
        slot = {}
        for i, t in enumerate(targets):
            for j, b in enumerate(t):
                slot[int(b)] = (i, j)
        for t, seg in enumerate(self.segments):
            for j, p in enumerate(seg.parents[0]):
                i, k = slot[int(p)]
                children[i][k].append((t, j))
        out = []
        for per_body in children:
            c = max((len(ch) for ch in per_body), default=0)
            out.append((c, tuple(ch[k] if k < len(ch) else None for ch in per_body for k in range(c))))
        return tuple(out)

    @cached_property
    def _u_locations(self):
        """Each u's location (segment, flat slot) in the level layout."""
        num_u = self.segments[0].num_u if self.segments else 0
        where = [None] * num_u
        for i, seg in enumerate(self.segments):
            for slot, k in enumerate(seg.u_index.reshape(-1)):
                if k < num_u:
                    where[k] = (i, slot)
        return tuple(where)


@dataclasses.dataclass(frozen=True, eq=False)
class SubSchedule(TreeSchedule):
    """A schedule over some bodies and all their ancestors (``restricted``):
    each of its segments is a run of levels of one of the full schedule's
    segments, keeping some of its columns, with that segment's width, so
    level data moves between the two layouts by row selection
    (``restrict_levels``, ``expand_levels``). Body and mobility indices are
    the full tree's."""

    full: TreeSchedule = None
    #: per segment: (the full segment it comes from, its first level there, its columns there)
    sources: tuple = ()


@functools.lru_cache(maxsize=None)
def restricted(schedule: TreeSchedule, bodies: tuple) -> TreeSchedule:
    """The schedule of ``bodies`` and their ancestors: an inward sweep of
    data that is zero elsewhere runs over their paths to Ground only. The
    full schedule itself when that is every body."""
    support = set()
    for b in bodies:
        while b and b not in support:
            support.add(b)
            b = schedule.parent[b]
    if len(support) == schedule.num_bodies - 1:
        return schedule
    segments, sources = [], []
    for i, seg in enumerate(schedule.segments):
        start = None
        for l in range(seg.length + 1):  # a piece ends where the kept columns change
            cols = [] if l == seg.length else [j for j in range(seg.size) if int(seg.bodies[l, j]) in support]
            if start is not None and cols != start[1]:
                (l0, kept) = start
                segments.append(Segment(seg.bodies[l0:l][:, kept], seg.parents[l0:l][:, kept],
                                        seg.u_index[l0:l][:, kept], seg.num_u))
                sources.append((i, l0, tuple(kept)))
                start = None
            if start is None and cols:
                start = (l, cols)
    return SubSchedule(schedule.parent, tuple(segments), schedule, tuple(sources))


def _columns(a, cols):
    """a[:, cols] for a static column list, as slices."""
    runs = _runs([(0, j) for j in cols])
    return concatenate([a[:, j:j + count] for _, j, count in runs], axis=1)


def restrict_levels(sub: TreeSchedule, levels):
    """Level data of the full schedule -> ``sub``'s layout (``restricted``)."""
    if not isinstance(sub, SubSchedule):
        return levels
    return tuple(jax.tree.map(lambda a, seg=seg, l0=l0, cols=cols: _columns(a[l0:l0 + seg.length], cols), levels[i])
                 for seg, (i, l0, cols) in zip(sub.segments, sub.sources))


def expand_levels(sub: TreeSchedule, levels, like):
    """``sub``'s level data -> the full schedule's layout (shaped like
    ``like``, full-layout data of the same structure), zero for the bodies
    outside ``sub``."""
    if not isinstance(sub, SubSchedule):
        return levels
    out = []
    for i, (seg, like_i) in enumerate(zip(sub.full.segments, like)):
        pieces = [(p, l0, cols) for p, (k, l0, cols) in enumerate(sub.sources) if k == i]
        if not pieces:
            out.append(jax.tree.map(jnp.zeros_like, like_i))
            continue
        where = {}
        for source, (p, l0, cols) in enumerate(pieces):
            for l in range(sub.segments[p].length):
                for c, j in enumerate(cols):
                    where[(l0 + l, j)] = (source, l * len(cols) + c)
        locations = [where.get((l, j)) for l in range(seg.length) for j in range(seg.size)]
        out.append(jax.tree.map(lambda like_a, *a: _gather([_rows(x, 2) for x in a], locations).reshape(like_a.shape),
                                like_i, *[levels[p] for p, _, _ in pieces]))
    return tuple(out)


def _gather(sources, locations, tail_like=None):
    """Rows ``sources[src][row]`` for each ``(src, row)`` of ``locations``
    (None: a zero row, shaped like the rows of ``tail_like`` or
    ``sources[0]``), stacked; ``sources`` are arrays with rows on axis 0.

    Computed as slices: consecutive rows of one source become one slice and
    the result a concatenation, which XLA's CPU backend fuses (a gather on
    batched data forces layout copies). How it is differentiated:

    - a selection of one whole source is that source, and one that takes
      each of its rows k times in a row (a binary tree's parents) is a
      broadcast of those rows;
    - a gather that takes no source row twice, and is more than whole
      sources concatenated, is written as each source split at its runs'
      ends and differentiated as written: the transpose splits the
      cotangent and concatenates its pieces, zeros for the rows not taken;
    - the others have a custom derivative: with ``releases.SPLIT_TRANSPOSES``, a sum
      of such split gathers, each taking one occurrence of every row taken,
      whose transpose is split cotangents summed; otherwise one gather from
      the stacked sources, whose transpose is a scatter-add. Transposing
      plain slices would pad every piece to full size (quadratic).

    docs/explanation/performance.md has the figures."""
    like = sources[0] if tail_like is None else tail_like
    sources, locations, tail, dtype = tuple(sources), tuple(locations), tuple(like.shape[1:]), np.dtype(like.dtype)
    runs = _runs(locations)
    whole = _whole_sources(sources, runs)
    if len(runs) == 1 and whole:
        return jnp.zeros((len(locations),) + tail, dtype) if runs[0][0] is None else sources[runs[0][0]]
    repeats = _uniform_repeats(locations)
    if repeats > 1:  # e.g. a binary tree's parents: each row twice
        rows = _gather(sources, locations[::repeats], tail_like)
        return jnp.broadcast_to(rows[:, None], (rows.shape[0], repeats) + tail).reshape((-1,) + tail)
    if len(runs) <= MAX_SLICES and _injective(runs) and not whole:
        return _split_gather(sources, runs, tail, dtype)
    return _gather_rows(sources, locations, tail, dtype)


def _injective(runs):
    """Whether no source row is taken twice."""
    taken = sorted((src, row, count) for src, row, count in runs if src is not None)
    return all(a[0] != b[0] or a[1] + a[2] <= b[1] for a, b in zip(taken, taken[1:]))


def _whole_sources(sources, runs):
    """Whether every run is a whole source or zeros (a concatenation)."""
    return all(src is None or (row == 0 and count == sources[src].shape[0]) for src, row, count in runs)


def _split_gather(sources, runs, tail, dtype):
    """An injective gather as its sources split at the runs' ends, the
    pieces concatenated."""
    pieces = {}
    for i, src in enumerate(sources):
        at, sizes, keys = 0, [], []
        for _, row, count in sorted(r for r in runs if r[0] == i):
            if row > at:
                sizes.append(row - at)
                keys.append(None)
            sizes.append(count)
            keys.append((i, row, count))
            at = row + count
        if at < src.shape[0]:
            sizes.append(src.shape[0] - at)
            keys.append(None)
        parts = jax.lax.split(src, sizes) if len(sizes) > 1 else [src]
        pieces.update((key, part) for key, part in zip(keys, parts) if key is not None)
    out = [jnp.zeros((count,) + tail, dtype) if src is None else pieces[(src, row, count)] for src, row, count in runs]
    return concatenate(out) if out else jnp.zeros((0,) + tail, dtype)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _gather_rows(sources, locations, tail, dtype):
    runs = _runs(locations)
    if len(runs) > MAX_SLICES:  # one gather compiles faster than hundreds of slices
        return _stacked(sources, tail, dtype)[_flat_index(sources, locations)]
    pieces = [jnp.zeros((count,) + tail, dtype) if src is None else sources[src][row:row + count]
              for src, row, count in runs]
    return concatenate(pieces) if pieces else jnp.zeros((0,) + tail, dtype)


def _runs(locations):
    """Maximal runs of consecutive rows of one source: (src, row, count),
    src None for a run of zero rows."""
    runs = []
    for loc in locations:
        src, row = (None, 0) if loc is None else loc
        if runs and runs[-1][0] == src and (src is None or runs[-1][1] + runs[-1][2] == row):
            runs[-1][2] += 1
        else:
            runs.append([src, row, 1])
    return [tuple(r) for r in runs]


def _injective_parts(locations):
    """``locations`` as injective location lists whose sum it is: part r
    keeps each row's (r+1)-th occurrence, None elsewhere."""
    seen, parts = {}, []
    for i, loc in enumerate(locations):
        if loc is None:
            continue
        r = seen[loc] = seen.get(loc, -1) + 1
        if r == len(parts):
            parts.append([None] * len(locations))
        parts[r][i] = loc
    return parts


def _uniform_repeats(locations):
    """k > 1 when ``locations`` is each of its distinct entries k times in a
    row (and not all one entry), else 1."""
    n = len(locations)
    k = 1
    while k < n and locations[k] == locations[0]:
        k += 1
    if k == 1 or k == n or n % k:
        return 1
    blocks = [locations[i:i + k] for i in range(0, n, k)]
    same = all(len(set(b)) == 1 for b in blocks) and all(a[0] != b[0] for a, b in zip(blocks, blocks[1:]))
    return k if same else 1


def _stacked(sources, tail, dtype):
    """The sources stacked on axis 0 with one zero row appended."""
    return jnp.concatenate(list(sources) + [jnp.zeros((1,) + tail, dtype)])


def _flat_index(sources, locations):
    """Row of each location in ``_stacked(sources)`` (None: the zero row)."""
    offsets = np.cumsum([0] + [a.shape[0] for a in sources])
    return np.asarray([offsets[-1] if loc is None else offsets[loc[0]] + loc[1] for loc in locations], np.int32)


@_gather_rows.defjvp
def _gather_rows_jvp(locations, tail, dtype, primals, tangents):
    (sources,), (d_sources,) = primals, tangents
    rows = _gather_rows(sources, locations, tail, dtype)
    if releases.SPLIT_TRANSPOSES and len(_runs(locations)) <= MAX_SPLIT_TRANSPOSE_SLICES:
        parts = _injective_parts(locations)
        d_rows = jax.lax.optimization_barrier(sum(_split_gather(d_sources, _runs(p), tail, dtype) for p in parts))
    else:
        d_rows = _stacked(d_sources, tail, dtype)[_flat_index(sources, locations)]
    # + zeros_like(rows): the tangent takes the primal's type. A batch placed
    # by shard_batch carries its mesh in the primals' types but not in their
    # tangents', and JAX refuses a rule whose two outputs' types differ.
    return rows, d_rows + jnp.zeros_like(rows)


def take_rows(a, index):
    """``a[index]`` for a static integer ``index`` (any shape); the value
    ``len(a)`` selects a row of zeros. Written as slices (see ``_gather``)."""
    index = np.asarray(index, dtype=np.int64)
    n = a.shape[0]
    locations = [None if i == n else (0, int(i)) for i in index.reshape(-1)]
    return _gather([a], locations).reshape(index.shape + a.shape[1:])


def _gather_tree(sources, locations):
    """``_gather`` over pytrees: ``sources`` is a list of pytrees of one structure."""
    return jax.tree.map(lambda *leaves: _gather(leaves, locations), *sources)


def _take(tree, index):
    return jax.tree.map(lambda a: a[index], tree)


def _unstacked(tree, length: int):
    """The ``length`` rows (axis 0) of every leaf, as a list of pytrees: one
    equation per leaf (:func:`simbodyx._xla.primitives.rows_of`); a pytree without leaves is its
    own every row."""
    leaves, structure = jax.tree.flatten(tree)
    if not leaves:
        return [tree] * length
    return [jax.tree.unflatten(structure, row) for row in zip(*(rows_of(a) for a in leaves))]


def _rows(tree, axes):
    """Merge the leading ``axes`` axes of every leaf (level layout -> flat rows)."""
    return jax.tree.map(lambda a: a.reshape((-1,) + a.shape[axes:]), tree)


def _stack(rows):
    """Each leaf's rows stacked: one equation per leaf
    (:func:`simbodyx._xla.primitives.stacked`) where they share a type."""
    return jax.tree.map(lambda *r: stacked(*r) if len({jax.typeof(x) for x in r}) == 1 else jnp.stack(r),
                        *rows)


def to_levels(schedule: TreeSchedule, tree, bodies=None):
    """Body-indexed pytree -> level layout (one (L, n, ...) pytree per segment).
    With ``bodies`` (static) the pytree's rows are those bodies' only, and
    the other bodies get zeros."""
    if bodies is None:
        return tuple(jax.tree.map(lambda a, s=s: take_rows(a, s.bodies), tree) for s in schedule.segments)
    row = {b: i for i, b in enumerate(bodies)}
    return tuple(jax.tree.map(lambda a, s=s: take_rows(a, np.vectorize(lambda b: row.get(int(b), len(row)))(s.bodies)),
                              tree) for s in schedule.segments)


def from_levels(schedule: TreeSchedule, levels, ground):
    """Level layout -> body-indexed pytree with ``ground`` as row 0."""
    sources = [jax.tree.map(lambda g: jnp.asarray(g)[None], ground)] + [_rows(lv, 2) for lv in levels]
    return _gather_tree(sources, [schedule._where[b] for b in range(schedule.num_bodies)])


def mobilities_to_levels(schedule: TreeSchedule, tree):
    """(nu, ...) pytree -> level layout (L, n, width, ...), zeros in unused slots."""
    return tuple(jax.tree.map(lambda a, s=s: take_rows(a, s.u_index), tree) for s in schedule.segments)


def mobilities_from_levels(schedule: TreeSchedule, levels, empty):
    """Level layout (L, n, width, ...) -> (nu, ...); unused slots are dropped.
    ``empty`` (a (0, ...) pytree) is the answer for a tree without bodies."""
    if not schedule.segments:
        return empty
    return _gather_tree([_rows(lv, 3) for lv in levels], schedule._u_locations)


def _level_step(step, vectorized):
    """``step`` applied to a whole level: as it is when ``vectorized`` (every
    leaf then has a leading axis of the level's bodies), else vmapped."""
    return step if vectorized else jax.vmap(step)


def outward_levels(schedule: TreeSchedule, step, root, levels, vectorized=False):
    """Base-to-tip sweep in the level layout.

    ``step(value_parent, input_b) -> (value_b, extra_b)``: ``value`` is
    passed down the tree (Ground's is ``root``), ``extra`` is only collected
    (its shape may differ between segments, e.g. per-mobility results).
    Returns (values, extras), each in the level layout. ``vectorized``: see
    :func:`outward`.
    """
    sources = [jax.tree.map(lambda r: jnp.asarray(r)[None], root)]
    values, extras = [], []
    vstep = _level_step(step, vectorized)
    for segment, inputs, parents in zip(schedule.segments, levels, schedule._parent_locations):
        carry = _gather_tree(sources, parents)
        if segment.scanned:
            def scan_step(value, x):
                out = vstep(value, x)
                return out[0], out

            _, (value, extra) = jax.lax.scan(scan_step, carry, inputs)
        else:
            rows = []
            for level in _unstacked(inputs, segment.length):
                rows.append(vstep(carry, level))
                carry = rows[-1][0]
            value, extra = _stack(rows)
        values.append(value)
        extras.append(extra)
        sources.append(_rows(value, 2))
    return tuple(values), tuple(extras)


def inward_levels(schedule: TreeSchedule, step, levels, up_zero, vectorized=False):
    """Tip-to-base sweep in the level layout.

    ``step(input_b, children_b) -> (out_b, up_b)``: ``children_b`` is the sum
    of ``up`` over b's children, ``up_zero`` (one body's zero ``up``, passed
    explicitly so steps never test for a missing value) for a leaf. Returns
    the outputs in the level layout and the sum of ``up`` over Ground's
    children.
    """
    num = len(schedule.segments)
    ups = [None] * num  # each segment's first-level ups, once computed
    outputs = [None] * num
    vstep = _level_step(step, vectorized)

    def children_sum(i, count):
        """(count, ...) sums of ``up`` over the children of segment i's deepest
        bodies (i = num: Ground's), gathered from the segments done so far."""
        c, locations = schedule._child_locations[i]
        zero = jax.tree.map(lambda z: jnp.broadcast_to(z, (count,) + jnp.shape(z)), up_zero)
        if c == 0:
            return zero
        sources = [up if up is not None else zero for up in ups]  # only done ones are read

        def total(like, *leaves):
            rows = _gather(leaves, locations, like).reshape((count, c) + like.shape[1:])
            if c > MAX_ADDED_CHILDREN:
                return jnp.sum(rows, axis=1)
            return functools.reduce(jnp.add, [rows[:, k] for k in range(c)])  # elementwise, fuses

        return jax.tree.map(total, zero, *sources)

    for i in reversed(range(num)):
        segment, inputs = schedule.segments[i], levels[i]
        carry = children_sum(i, segment.size)
        if segment.scanned:
            def scan_step(children, x):
                out, up = vstep(x, children)
                return up, out

            carry, out = jax.lax.scan(scan_step, carry, inputs, reverse=True)
        else:
            rows = []
            for level in reversed(_unstacked(inputs, segment.length)):
                row, carry = vstep(level, carry)
                rows.append(row)
            out = _stack(rows[::-1])
        outputs[i] = out
        ups[i] = carry
    at_ground = jax.tree.map(lambda a: a[0], children_sum(num, 1))
    return tuple(outputs), at_ground


def outward(schedule: TreeSchedule, step, root, inputs, vectorized=False):
    """Base-to-tip sweep: ``out[b] = step(out[parent[b]], inputs[b])``, ``out[0] = root``.

    ``step`` maps one body (unbatched pytrees); ``inputs`` is a body-indexed
    pytree (row 0 unused). Returns the body-indexed pytree of outputs.
    With ``vectorized=True`` the step is called on a whole level at once,
    every leaf with a leading axis of bodies (write it with ``...``
    broadcasting, as simbodyx.spatial's operators are); otherwise it is
    vmapped, which costs about twice as much to trace.
    """
    out, _ = outward_levels(schedule, lambda p, x: (step(p, x), ()), root, to_levels(schedule, inputs), vectorized)
    return from_levels(schedule, out, root)


def inward(schedule: TreeSchedule, step, inputs, up_zero, vectorized=False):
    """Tip-to-base sweep on body-indexed pytrees (see :func:`inward_levels`;
    ``vectorized`` as in :func:`outward`). Returns the body-indexed outputs
    (Ground's row zero) and the sum of ``up`` over Ground's children."""
    out, at_ground = inward_levels(schedule, step, to_levels(schedule, inputs), up_zero, vectorized)
    shape = jax.eval_shape(_level_step(step, vectorized), _take(inputs, slice(0, 1)),
                           jax.tree.map(lambda z: jnp.asarray(z)[None], up_zero))[0]
    shape = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape[1:], s.dtype), shape)
    ground = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
    return from_levels(schedule, out, ground), at_ground
