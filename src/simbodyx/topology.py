"""The static tree: parents, joint kinds, q/u layout, kind groups and the
traversal schedule. Built once by ``realize_topology()``, hashed once, and
carried as static (jit cache key) data by the Model and every State."""

from __future__ import annotations

import dataclasses
from functools import cached_property

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.mobilizers import Ground, Mobilizer
from simbodyx.mobilizers.base import euler_q_to_quaternion_q, quaternion_q_to_euler_q
from simbodyx.tree import TreeSchedule, take_rows

#: Most mobilities one mobilizer may have (Free has 6).
MAX_BODY_U = 6


@dataclasses.dataclass(frozen=True)
class BodySpec:
    """What the build API records per mobilized body: its joint kind as built
    (quaternion mode) and its defaults, with default q stored in quaternion
    mode and converted when the Euler-angle option is on."""

    name: str
    parent: int
    built_kind: Mobilizer
    default_q: tuple[float, ...]
    default_u: tuple[float, ...]
    #: lock_by_default level (simbodyx.state.Level value; -1: not locked)
    lock_level: int = -1

    def kind(self, use_euler_angles: bool) -> Mobilizer:
        return self.built_kind.in_mode(use_euler_angles)


@dataclasses.dataclass(frozen=True)
class KindGroup:
    """All bodies sharing one mobilizer kind, with their q and u indices
    (shapes (n, nq) and (n, nu)) for vectorized gathers."""

    kind: Mobilizer
    bodies: tuple[int, ...]
    q_index: tuple[tuple[int, ...], ...]
    u_index: tuple[tuple[int, ...], ...]

    @cached_property
    def q_array(self):
        return np.asarray(self.q_index, dtype=np.int32).reshape(len(self.bodies), self.kind.nq)

    @cached_property
    def u_array(self):
        return np.asarray(self.u_index, dtype=np.int32).reshape(len(self.bodies), self.kind.nu)

    @cached_property
    def body_array(self):
        return np.asarray(self.bodies, dtype=np.int32)


class Topology:
    """Frozen, hashable tree description. Equality is structural: two systems
    built by the same code have equal topologies, so their States, handles
    and compiled programs are interchangeable. Equality and hash use a key
    tuple computed once; identity short-circuits equality (the common case
    in jit's cache lookup)."""

    def __init__(self, specs: tuple[BodySpec, ...], use_euler_angles: bool):
        self.specs = specs
        self.use_euler_angles = use_euler_angles
        self.names = tuple(s.name for s in specs)
        self.parent = tuple(s.parent for s in specs)
        self.kinds = (Ground(),) + tuple(s.kind(use_euler_angles) for s in specs[1:])
        nq = [k.nq for k in self.kinds]
        nu = [k.nu for k in self.kinds]
        self.q_start = tuple(int(x) for x in np.concatenate([[0], np.cumsum(nq)[:-1]]))
        self.u_start = tuple(int(x) for x in np.concatenate([[0], np.cumsum(nu)[:-1]]))
        self.body_nq, self.body_nu = tuple(nq), tuple(nu)
        self.nq, self.nu = sum(nq), sum(nu)
        self.num_bodies = len(specs)
        self.schedule = TreeSchedule.from_parents(self.parent, nu, self.u_start)
        self.u_body = tuple(b for b in range(self.num_bodies) for _ in range(nu[b]))
        self.q_body = tuple(b for b in range(self.num_bodies) for _ in range(nq[b]))
        # (nb, most mobilities of any body): body b's u indices, then nu (no mobility).
        self.body_u_index = np.full((self.num_bodies, max(nu)), self.nu, dtype=np.int32)
        for b in range(self.num_bodies):
            self.body_u_index[b, :nu[b]] = np.arange(self.u_start[b], self.u_start[b] + nu[b])
        if max(nu) > MAX_BODY_U:
            raise ValueError(f"a mobilizer may have at most {MAX_BODY_U} mobilities")
        self.default_q = tuple(
            q for b, s in enumerate(specs) for q in self._default_q_in_mode(s, self.kinds[b])
        )
        self.default_u = tuple(u for s in specs for u in s.default_u)
        self.default_lock_level = tuple(s.lock_level for s in specs)
        self.groups = self._group_by_kind()
        self._group_orders = {}
        self._key = (use_euler_angles, specs)
        self._hash = hash(self._key)
        self._siblings = {use_euler_angles: self}

    @staticmethod
    def _default_q_in_mode(spec: BodySpec, kind: Mobilizer) -> tuple[float, ...]:
        quat_kind = spec.kind(False)
        if quat_kind.quaternion_at is None or kind.quaternion_at is not None:
            return spec.default_q
        with jax.ensure_compile_time_eval():  # concrete even when first built inside a trace
            q = quaternion_q_to_euler_q(np.asarray(spec.default_q, float), quat_kind.quaternion_at)
        return tuple(float(x) for x in np.asarray(q))

    def _group_by_kind(self) -> tuple[KindGroup, ...]:
        members: dict[Mobilizer, list[int]] = {}
        for b in range(1, self.num_bodies):
            if self.kinds[b].nq or self.kinds[b].nu:
                members.setdefault(self.kinds[b], []).append(b)
        return tuple(
            KindGroup(
                kind,
                tuple(bodies),
                tuple(tuple(range(self.q_start[b], self.q_start[b] + kind.nq)) for b in bodies),
                tuple(tuple(range(self.u_start[b], self.u_start[b] + kind.nu)) for b in bodies),
            )
            for kind, bodies in members.items()
        )

    def _group_order(self, axis: str):
        """Gather index from [rows of every group in order, then the rows no
        group owns] to ``axis`` order ('body', 'q' or 'u')."""
        size = {"body": self.num_bodies, "q": self.nq, "u": self.nu}[axis]
        owned = [np.asarray(getattr(g, f"{axis}_array")).reshape(-1) for g in self.groups]
        owned = np.concatenate([np.zeros(0, np.int64)] + owned)
        order = np.concatenate([owned, np.setdiff1d(np.arange(size), owned)])
        inverse = np.empty(size, dtype=np.int64)
        inverse[order] = np.arange(size)
        return inverse

    def group_row(self, b: int) -> tuple[int, int]:
        """(kind group, row within it) of body b (which must have mobilities)."""
        for g, group in enumerate(self.groups):
            if b in group.bodies:
                return g, group.bodies.index(b)
        raise ValueError(f"{self.body_label(b)} belongs to no kind group")

    def from_groups(self, axis: str, per_group, fill, select=None):
        """Assemble per-kind-group rows (one (n_g, ...) or (n_g, k, ...) array per
        group, leading axes flattened) into ``axis`` order; rows no group owns
        (Ground, Welds) take ``fill``. ``select`` (static indices in ``axis``
        order, any shape) takes those rows only, in one gather."""
        if axis not in self._group_orders:
            self._group_orders[axis] = self._group_order(axis)
        inverse = self._group_orders[axis]
        fill = jnp.asarray(fill)
        num_owned = sum(int(np.prod(getattr(g, f"{axis}_array").shape)) for g in self.groups)
        rows = [a.reshape((-1,) + fill.shape) for a in per_group]
        rows.append(jnp.broadcast_to(fill, (len(inverse) - num_owned,) + fill.shape))
        return take_rows(jnp.concatenate(rows), inverse if select is None else inverse[np.asarray(select)])

    def with_euler_angles(self, use_euler_angles: bool) -> Topology:
        """The sibling topology with the other rotation representation (cached)."""
        if use_euler_angles not in self._siblings:
            other = Topology(self.specs, use_euler_angles)
            other._siblings = self._siblings
            self._siblings[use_euler_angles] = other
        return self._siblings[use_euler_angles]

    def convert_q(self, q, target: Topology):
        """Map q (..., nq) of this topology to the same configuration in ``target``
        (a sibling differing only in the Euler-angle option)."""
        if target is self:
            return q
        pieces = []
        for b in range(1, self.num_bodies):
            qb = q[..., self.q_start[b]:self.q_start[b] + self.body_nq[b]]
            src, dst = self.kinds[b].quaternion_at, target.kinds[b].quaternion_at
            if src is not None and dst is None:
                qb = quaternion_q_to_euler_q(qb, src)
            elif src is None and dst is not None:
                qb = euler_q_to_quaternion_q(qb, dst)
            pieces.append(qb)
        return jnp.concatenate(pieces, axis=-1) if pieces else q

    @property
    def quaternion_bodies(self) -> tuple[int, ...]:
        return tuple(b for b, k in enumerate(self.kinds) if k.quaternion_at is not None)

    def body_label(self, b: int) -> str:
        return f"body {b} ({self.names[b]!r}, {type(self.kinds[b]).__name__})"

    def same_tree(self, other: Topology) -> bool:
        """The same bodies, joints and defaults, in either rotation representation."""
        return self.specs is other.specs or self.specs == other.specs

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Topology) and self._key == other._key)

    def __repr__(self):
        return (
            f"Topology({self.num_bodies} bodies incl. Ground, nq={self.nq}, nu={self.nu}, "
            f"euler_angles={self.use_euler_angles})"
        )
