"""A HeightField is MuJoCo's triangulated terrain, under spheres (a row per
nearby triangle and one for a ridge), capsules (their end spheres),
ellipsoids, bricks (their vertices) and cylinders (their rim points); a
flat height field is the plane of its base."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.kernels.box import _rim_points
from simbodyx.contact.kernels.convex import CORNER_SIGNS, _ellipsoid_in, _on_ellipsoid
from simbodyx.contact.kernels.ellipsoid import _deepest_in_ellipsoid, _ellipsoid_closest
from simbodyx.contact.kernels.primitive import PointContact, _segment, _unit
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm


def _grid_point(field, r, c):
    """A height field's grid point of row r and column c, in its frame S."""
    nrow, ncol = field.heights.shape
    hx, hy = field.half_lengths[0], field.half_lengths[1]
    return jnp.stack([-hx + 2 * hx * c / (ncol - 1), -hy + 2 * hy * r / (nrow - 1), jnp.asarray(field.heights)[r, c]])


def _cell(field, p):
    """(row, column) of the cell under p (x, y in S; clamped into the grid)
    and p's fractions (fx, fy) across it."""
    nrow, ncol = field.heights.shape
    hx, hy = field.half_lengths[0], field.half_lengths[1]
    u, v = (p[0] + hx) / (2 * hx) * (ncol - 1), (p[1] + hy) / (2 * hy) * (nrow - 1)
    c = jnp.clip(jnp.floor(u), 0, ncol - 2).astype(jnp.int32)
    r = jnp.clip(jnp.floor(v), 0, nrow - 2).astype(jnp.int32)
    return r, c, u - c, v - r


def _cell_triangles(field, r, c):
    """(2, 3, 3) the cell's two triangles, each counterclockwise seen from
    above: (r, c), (r + 1, c + 1), (r + 1, c) and (r, c), (r, c + 1),
    (r + 1, c + 1)."""
    corner = [[_grid_point(field, r + i, c + j) for j in (0, 1)] for i in (0, 1)]
    return jnp.stack([jnp.stack([corner[0][0], corner[1][1], corner[1][0]]),
                      jnp.stack([corner[0][0], corner[0][1], corner[1][1]])])


def _triangle_normal(t):
    return _unit(cross(t[1] - t[0], t[2] - t[0]), jnp.array([0.0, 0.0, 1.0], t.dtype))


def _terrain_below(field, p):
    """(the height field's height at p's x, y, its upward unit normal there):
    the plane of the triangle under p (beyond the grid, of the nearest
    border cell's)."""
    r, c, fx, fy = _cell(field, p)
    triangle = _cell_triangles(field, r, c)[jnp.where(fx >= fy, 1, 0)]
    normal = _triangle_normal(triangle)
    return triangle[0, 2] - jnp.dot(normal[:2], p[:2] - triangle[0, :2]) / normal[2], normal


def _over_terrain(field, p):
    """Whether p (in S) is over the height field's surface (or on it)."""
    return p[2] >= _terrain_below(field, p)[0]


def _closest_on_triangle(p, a, b, c):
    """(the point of the triangle abc closest to p, whether it is inside the
    triangle rather than on an edge or a vertex), by its Voronoi regions."""
    ab, ac = b - a, c - a
    d1, d2 = jnp.dot(ab, p - a), jnp.dot(ac, p - a)
    d3, d4 = jnp.dot(ab, p - b), jnp.dot(ac, p - b)
    d5, d6 = jnp.dot(ab, p - c), jnp.dot(ac, p - c)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2

    def ratio(num, den):
        return num / jnp.where(den != 0, den, 1.0)

    total = va + vb + vc
    x = a + ratio(vb, total) * ab + ratio(vc, total) * ac
    regions = [((d1 <= 0) & (d2 <= 0), a), ((d3 >= 0) & (d4 <= d3), b), ((d6 >= 0) & (d5 <= d6), c),
               ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ratio(d1, d1 - d3) * ab),
               ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ratio(d2, d2 - d6) * ac),
               ((va <= 0) & (d4 >= d3) & (d5 >= d6), b + ratio(d4 - d3, (d4 - d3) + (d5 - d6)) * (c - b))]
    for where, point in regions[::-1]:
        x = jnp.where(where, point, x)
    return x, ~functools.reduce(jnp.logical_or, [where for where, _ in regions])


def _triangles_around(field, p):
    """(18, 3, 3) the triangles of the 3 x 3 cells around the cell under p
    (in S; at the field's border, its border cells repeated)."""
    row, column, _, _ = _cell(field, p)
    nrow, ncol = field.heights.shape
    offsets = np.array([(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)])
    return jax.vmap(lambda o: _cell_triangles(field, jnp.clip(row + o[0], 0, nrow - 2),
                                              jnp.clip(column + o[1], 0, ncol - 2)))(offsets).reshape(-1, 3, 3)


def _sphere_on_terrain(field, X_GS: Transform, center, r):
    """A sphere of radius r at ``center`` (in G) against a height field, as
    19 contacts: against each of the 18 triangles of the 3 x 3
    cells around the one under it whose plane it is over (or under), along
    that triangle's normal (so that in a crease it rests on both sides),
    and at the surface's point closest to it where that point is on an edge
    or a vertex (a ridge), along the line to the centre. A centre over the
    surface does not touch a triangle from behind (past a peak, under the
    plane of the face beyond it). Exact for radii up to a cell; the
    effective radius is the sphere's."""
    local = X_GS.inverse().apply(center)
    triangles = _triangles_around(field, local)
    points, interior = jax.vmap(lambda t: _closest_on_triangle(local, *t))(triangles)
    normals = jax.vmap(_triangle_normal)(triangles)
    heights = jax.vmap(jnp.dot)(local - triangles[:, 0], normals)  # over each triangle's plane
    over = _over_terrain(field, local)
    face_depth = jnp.where(interior & ((heights >= 0) | ~over), r - heights, -1.0)
    gaps = jax.vmap(safe_norm)(local - points)
    nearest = jnp.argmin(jax.lax.stop_gradient(gaps))
    ridge = _unit(local - points[nearest], normals[nearest]) * jnp.where(over, 1.0, -1.0)
    ridge_depth = jnp.where(interior[nearest], -1.0, r - jnp.where(over, gaps[nearest], -gaps[nearest]))
    depth = jnp.concatenate([face_depth, ridge_depth[None]])
    outward = jnp.concatenate([normals, ridge[None]])
    location = local - (r - depth[:, None] / 2) * outward
    return PointContact(jax.vmap(X_GS.apply)(location), jax.vmap(X_GS.rotate)(outward), depth,
                        jnp.full_like(depth, r), jnp.ones_like(depth))


def height_field_sphere(field, X1, sphere, X2):
    """The sphere against the height field (``_sphere_on_terrain``)."""
    return _sphere_on_terrain(field, X1, X2.p, sphere.radius)


def height_field_capsule(field, X1, capsule, X2):
    """The capsule's two end spheres against the height field (as on a
    half-space: a capsule lying on it touches at both ends)."""
    ends = [_sphere_on_terrain(field, X1, end, capsule.radius) for end in _segment(capsule, X2)]
    return jax.tree.map(lambda *a: jnp.concatenate(a), *ends)


def height_field_ellipsoid(field, X1, ellipsoid, X2):
    """The ellipsoid against the height field as the sphere is
    (``_sphere_on_terrain``), as 19 rows: one per triangle of the 3 x 3
    cells around the one under its centre where its deepest point under
    that triangle's plane (its support point) is over the triangle, along
    the triangle's normal with that support depth (as on a half-space);
    and one at an edge point (a ridge) where the triangle the ellipsoid
    overlaps most, or is nearest, meets it at an edge or a vertex rather
    than its face: that triangle's edge point deepest in the ellipsoid
    (``_deepest_in_ellipsoid``), along the ellipsoid's normal at its
    surface point closest to it, the depth minus its signed distance
    (``_ellipsoid_closest``; first order inside, and for choosing the
    triangle the lower bound (1 - |p / radii|) min(radii), so that a flat
    patch is never taken for a ridge). A centre over the
    surface does not touch a triangle from behind. Each at the
    ellipsoid's support point along its normal with its curvatures there
    (the terrain flat). Equal radii give ``_sphere_on_terrain``'s rows."""
    X_SE = X1.inverse().compose(X2)
    radii, R = ellipsoid.radii, X_SE.R
    centre, M, _ = _ellipsoid_in(X_SE, ellipsoid)
    triangles = _triangles_around(field, centre)
    normals = jax.vmap(_triangle_normal)(triangles)
    support = centre - jax.vmap(lambda n: M @ n / jnp.sqrt(n @ M @ n))(normals)  # its deepest point under each plane
    _, interior = jax.vmap(_closest_on_triangle)(support, triangles[:, 0], triangles[:, 1], triangles[:, 2])
    heights = jax.vmap(jnp.dot)(centre - triangles[:, 0], normals)  # the centre over each triangle's plane
    over = _over_terrain(field, centre)
    faces = interior & ((heights >= 0) | ~over)
    face_depth = jax.vmap(jnp.dot)(support - triangles[:, 0], -normals)
    # each triangle's edges (18, 3, 3) in the ellipsoid's frame, and their points deepest in it
    starts = (triangles - centre) @ R
    directions = jnp.roll(starts, -1, axis=1) - starts
    deepest = jax.vmap(jax.vmap(lambda a, d: a + _deepest_in_ellipsoid(radii, a, d) * d))(starts, directions)
    _, surface_normals, distances = jax.vmap(jax.vmap(lambda p: _ellipsoid_closest(radii, p)))(deepest)
    # for the choice, a depth no more than the true one: inside, (1 - |p / radii|) min(radii)
    scaled = jax.vmap(jax.vmap(lambda p: safe_norm(p / radii)))(deepest)
    overlap = jax.lax.stop_gradient(jnp.where(scaled < 1, (1 - scaled) * jnp.min(radii), -distances))
    edge = jnp.argmax(overlap, axis=1)
    by_triangle = jnp.where(faces, face_depth, jnp.take_along_axis(overlap, edge[:, None], 1)[:, 0])
    k = jnp.argmax(jax.lax.stop_gradient(by_triangle))
    ridge = R @ surface_normals[k, edge[k]] * jnp.where(over, -1.0, 1.0)  # a centre under the surface is pushed up
    anchor = centre + R @ deepest[k, edge[k]]
    reach = jnp.sqrt(ridge @ M @ ridge)
    ridge_depth = jnp.where(over, -distances[k, edge[k]], reach - jnp.dot(centre - anchor, ridge))
    depth = jnp.where(jnp.concatenate([faces, ~faces[k][None]]), jnp.append(face_depth, ridge_depth), -1.0)
    rows = jax.vmap(lambda n, d: _on_ellipsoid(n, d, ellipsoid, M, X1, X_SE))(jnp.concatenate([normals, ridge[None]]),
                                                                               depth)
    return jax.tree.map(lambda a: a[:, 0], rows)


def _points_on_terrain(field, X_GS: Transform, points):
    """Points (k, 3) given in the height field's frame S as contacts with it
    (the vertex law, ``radius`` 0): each under the plane of the triangle
    below it by its depth along that triangle's normal, the force halfway
    up the overlap; a point beyond the field's rectangle does not touch."""
    heights, normals = jax.vmap(lambda p: _terrain_below(field, p))(points)
    inside = jnp.all(jnp.abs(points[:, :2]) <= field.half_lengths, axis=1)
    depth = jnp.where(inside, (heights - points[:, 2]) * normals[:, 2], -1.0)
    location = points + depth[:, None] / 2 * normals
    return PointContact(jax.vmap(X_GS.apply)(location), jax.vmap(X_GS.rotate)(normals), depth, jnp.zeros_like(depth),
                        jnp.ones_like(depth))


def height_field_brick(field, X1, brick, X2):
    """The brick's 8 vertices against the height field
    (``_points_on_terrain``: the vertex law, as on a half-space)."""
    X = X1.inverse().compose(X2)
    return _points_on_terrain(field, X1, jax.vmap(X.apply)(jnp.asarray(CORNER_SIGNS, X.p.dtype) * brick.half_lengths))


def height_field_cylinder(field, X1, cylinder, X2):
    """The cylinder's rims against the height field (``_points_on_terrain``),
    as on the half-space of the triangle under its centre
    (``half_space_cylinder``): on each end, the rim point deepest along
    that triangle's normal and three more a quarter turn apart."""
    X = X1.inverse().compose(X2)
    inward = -jax.lax.stop_gradient(_terrain_below(field, X.p)[1])
    return _points_on_terrain(field, X1, _rim_points(cylinder, X, inward))
