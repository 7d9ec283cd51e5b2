"""Collision detection between posed contact surfaces, Simbody's
``CollisionDetectionAlgorithm``s, as fixed-shape kernels: the table of
kernels by pair of shape kinds (``KERNELS``, in ``simbodyx.contact.kernels``
by family), the candidate pairs of a set of surfaces, and ``detect``, which
runs every candidate pair's kernel.

A kernel maps two shapes and their poses in G to a ``PointContact`` with a
fixed number of points (one for sphere-sphere, two for a capsule's ends on a
half-space, ...). Every point is always computed: ``depth > 0`` says it is
touching, so a program's shape never depends on the State. The normal
points from surface 1 into surface 2 (the direction in which surface 2 is
pushed), as in Simbody.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.kernels.box import (
    brick_brick,
    capsule_brick,
    capsule_cylinder,
    half_space_brick,
    half_space_cylinder,
    sphere_brick,
    sphere_cylinder,
)
from simbodyx.contact.kernels.convex import brick_ellipsoid, cylinder_brick, cylinder_cylinder, cylinder_ellipsoid
from simbodyx.contact.kernels.ellipsoid import (
    capsule_ellipsoid,
    ellipsoid_ellipsoid,
    half_space_ellipsoid,
    sphere_ellipsoid,
)
from simbodyx.contact.kernels.height_field import (
    height_field_brick,
    height_field_capsule,
    height_field_cylinder,
    height_field_ellipsoid,
    height_field_sphere,
)
from simbodyx.contact.kernels.primitive import (
    PointContact,
    capsule_capsule,
    half_space_capsule,
    half_space_sphere,
    sphere_capsule,
    sphere_sphere,
)
from simbodyx.spatial.transform import Transform


#: (kind of surface 1, kind of surface 2) -> kernel; a pair listed the other
#: way round is swapped, as Simbody does
KERNELS = {
    ("HalfSpace", "Sphere"): half_space_sphere,
    ("Sphere", "Sphere"): sphere_sphere,
    ("HalfSpace", "Ellipsoid"): half_space_ellipsoid,
    ("HalfSpace", "Capsule"): half_space_capsule,
    ("HalfSpace", "Brick"): half_space_brick,
    ("HalfSpace", "Cylinder"): half_space_cylinder,
    ("Sphere", "Brick"): sphere_brick,
    ("Sphere", "Capsule"): sphere_capsule,
    ("Capsule", "Capsule"): capsule_capsule,
    ("Capsule", "Brick"): capsule_brick,
    ("Sphere", "Ellipsoid"): sphere_ellipsoid,
    ("Capsule", "Ellipsoid"): capsule_ellipsoid,
    ("Brick", "Brick"): brick_brick,
    ("Sphere", "Cylinder"): sphere_cylinder,
    ("Capsule", "Cylinder"): capsule_cylinder,
    ("Ellipsoid", "Ellipsoid"): ellipsoid_ellipsoid,
    ("Brick", "Ellipsoid"): brick_ellipsoid,
    ("Cylinder", "Ellipsoid"): cylinder_ellipsoid,
    ("Cylinder", "Brick"): cylinder_brick,
    ("Cylinder", "Cylinder"): cylinder_cylinder,
    ("HeightField", "Sphere"): height_field_sphere,
    ("HeightField", "Capsule"): height_field_capsule,
    ("HeightField", "Ellipsoid"): height_field_ellipsoid,
    ("HeightField", "Brick"): height_field_brick,
    ("HeightField", "Cylinder"): height_field_cylinder,
}


#: Kernels that take the pair's margin (an extra argument): their depths
#: compare points, which a margin added afterwards would shift unequally.
MARGIN_KERNELS = frozenset({("Capsule", "Brick"), ("Capsule", "Cylinder")})


#: Kernels whose points are a flat face's vertices or a rim's points: the
#: force there is Simbody's BrickHalfSpacePenalty, k x (1 + c xdot), not Hertz's.
VERTEX_KERNELS = frozenset({("HalfSpace", "Brick"), ("HalfSpace", "Cylinder"), ("Brick", "Brick"),
                            ("Cylinder", "Brick"), ("Cylinder", "Cylinder"), ("HeightField", "Brick"),
                            ("HeightField", "Cylinder")})


class PairGroup(NamedTuple):
    """Candidate pairs sharing one kernel: surface indices, each pair ordered
    as the kernel takes it."""

    kinds: tuple
    first: tuple
    second: tuple


def candidate_pairs(surfaces, label: str, excluded=frozenset()) -> tuple:
    """The pairs of ``surfaces`` that can touch, grouped by kernel: every pair
    on two different bodies, not both on Ground and not in ``excluded``
    (index pairs (i, j), i < j). A pair no kernel handles is an error
    naming both surfaces and their bodies."""
    groups: dict = {}
    for i, s1 in enumerate(surfaces):
        for j in range(i + 1, len(surfaces)):
            s2 = surfaces[j]
            if s1.body == s2.body or (i, j) in excluded:
                continue
            kinds = (s1.shape.kind, s2.shape.kind)
            if kinds not in KERNELS:
                if kinds[::-1] not in KERNELS:
                    supported = ", ".join(f"{a}-{b}" for a, b in KERNELS)
                    raise ValueError(f"{label}: no contact between {s1.name} and {s2.name}; supported "
                                     f"pairs: {supported} (put the two in different contact sets)")
                kinds, i_j = kinds[::-1], (j, i)
            else:
                i_j = (i, j)
            groups.setdefault(kinds, []).append(i_j)
    return tuple(PairGroup(k, tuple(a for a, _ in p), tuple(b for _, b in p)) for k, p in groups.items())


def detect(surfaces, groups, X_GB: Transform):
    """(PointContact with one row per candidate point, surface 1 and surface
    2 of each row as numpy index arrays, and whether each row is a vertex
    (``VERTEX_KERNELS``), a numpy bool array). Each row's depth includes its
    pair's margin (the sum of its surfaces' ``margin``)."""
    def posed(indices):  # the surfaces' shapes and poses X_GS, stacked
        members = [surfaces[i] for i in indices]
        shapes = jax.tree.map(lambda *a: jnp.stack(a), *[m.shape for m in members])
        X_BS = jax.tree.map(lambda *a: jnp.stack(a), *[m.X_BS for m in members])
        return shapes, X_GB[np.array([m.body for m in members])].compose(X_BS)

    if not groups:  # no candidate pair: no rows
        none, dtype = np.zeros(0, np.int64), X_GB.p.dtype
        return (PointContact(jnp.zeros((0, 3), dtype), jnp.zeros((0, 3), dtype), *(jnp.zeros(0, dtype),) * 3), none,
                none, np.zeros(0, bool))
    contacts, first, second, vertex = [], [], [], []
    for group in groups:
        margin = np.array([surfaces[i].margin + surfaces[j].margin for i, j in zip(group.first, group.second)])
        args = (*posed(group.first), *posed(group.second))
        if group.kinds in MARGIN_KERNELS:
            c = jax.vmap(KERNELS[group.kinds])(*args, jnp.asarray(margin, X_GB.p.dtype))
        else:
            c = jax.vmap(KERNELS[group.kinds])(*args)
        if margin.any():  # each pair touches from the sum of its margins apart
            c = eqx.tree_at(lambda c: c.depth, c, c.depth + jnp.asarray(margin[:, None], c.depth.dtype))
        points = c.depth.shape[1]
        contacts.append(jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), c))
        first.append(np.repeat(group.first, points))
        second.append(np.repeat(group.second, points))
        vertex.append(np.full(len(group.first) * points, group.kinds in VERTEX_KERNELS))
    return (jax.tree.map(lambda *a: jnp.concatenate(a), *contacts), np.concatenate(first), np.concatenate(second),
            np.concatenate(vertex))
