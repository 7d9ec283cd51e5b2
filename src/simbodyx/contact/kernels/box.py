"""Bricks and cylinders against half-spaces, spheres and capsules, and
brick against brick. HalfSpace-Brick is Simbody's: its points are the
vertices of the brick's face that faces the half-space, where the force
law is Simbody's BrickHalfSpacePenalty (``detection.VERTEX_KERNELS``), not
Hertz's. A cylinder (which Simbody has no contact for) meets a half-space
the same way, at points of its two rims: the deepest rim point of each end
and three more a quarter turn apart, so that it lies on two points and
stands on four. Sphere-Brick is the sphere against the brick's closest
point, Capsule-Brick three spheres along the capsule's segment;
Sphere-Cylinder and Capsule-Cylinder are as their Brick counterparts;
Brick-Brick is the separating-axis test with a face's contact patch."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.kernels.primitive import (
    PointContact,
    _closest_between_segments,
    _deepest_on_segment,
    _perpendicular,
    _segment,
    _stack,
    _unit,
)
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm


def _face_vertices() -> np.ndarray:
    """(6, 4, 3) the signs of each face's vertices (faces -x, +x, -y, +y, -z, +z;
    each face's vertices in order around it)."""
    faces = []
    for axis in range(3):
        i, j = [a for a in range(3) if a != axis]
        for side in (-1.0, 1.0):
            corners = []
            for si, sj in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                v = np.zeros(3)
                v[axis], v[i], v[j] = side, si, sj
                corners.append(v)
            faces.append(corners)
    return np.array(faces)


FACE_VERTICES = _face_vertices()


#: (6, 3) each face's outward normal in S: the mean of its vertices' signs
FACE_NORMALS = FACE_VERTICES.mean(axis=1)


def _points_in_half_space(X_GH: Transform, points):
    """Points given in the half-space's frame H as contacts with it (the
    vertex law, ``radius`` 0): depth their x (inside: x > 0), the force
    halfway up the overlap, the normal H's outward one (-x), in G."""
    depth = points[:, 0]
    normal = jnp.broadcast_to(-X_GH.R[:, 0], points.shape)
    return PointContact(X_GH.apply(points) + depth[:, None] / 2 * normal, normal, depth, jnp.zeros_like(depth),
                        jnp.ones_like(depth))


def half_space_brick(half_space, X1, brick, X2):
    """Simbody's HalfSpace-Brick: the 4 vertices of the brick's face most
    antiparallel to the half-space's outward normal (the face that holds the
    deepest vertex), each a point whose depth is its distance into the
    half-space (``radius`` 0: these points take the vertex law)."""
    X_HB = X1.inverse().compose(X2)
    outward = jnp.array([-1.0, 0.0, 0.0], X_HB.p.dtype)  # the half-space's outward normal, in H
    cosines = jnp.asarray(FACE_NORMALS, X_HB.p.dtype) @ X_HB.R.T @ outward  # each face normal . outward
    face = jnp.argmin(cosines)
    corners = jnp.asarray(FACE_VERTICES, X_HB.p.dtype)[face] * brick.half_lengths  # (4, 3) in B
    return _points_in_half_space(X1, X_HB.apply(corners))


def _brick_signed_distance(h, x):
    """The signed distance (m, negative inside) of x (in the brick's frame)
    from the brick of half-lengths h: convex in x."""
    q = jnp.abs(x) - h
    return safe_norm(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q), 0.0)


def _sphere_on_brick(center, r, brick, X_GB: Transform):
    """A sphere of radius r at ``center`` (in G) against the brick's point
    closest to it (a flat face: the effective radius is the sphere's); a
    centre inside the brick is pushed out through the nearest face."""
    local = X_GB.inverse().apply(center)
    h = brick.half_lengths
    surface = jnp.clip(local, -h, h)
    gaps = h - jnp.abs(local)
    axis = jnp.argmin(gaps)
    face = jnp.zeros(3, local.dtype).at[axis].set(jnp.where(local[axis] >= 0, 1.0, -1.0))
    inside = jnp.all(gaps > 0)
    outward = jnp.where(inside, face, _unit(local - surface, face))  # from the brick to the centre, in B
    depth = r + jnp.where(inside, gaps[axis], -safe_norm(local - surface))
    normal = -X_GB.rotate(outward)
    return PointContact(center + (r - depth / 2) * normal, normal, depth, r, jnp.ones_like(depth))


def sphere_brick(sphere, X1, brick, X2):
    """The sphere against the brick's closest point to its centre."""
    return _stack([_sphere_on_brick(X1.p, sphere.radius, brick, X2)])


def _slab(a, d, half, length):
    """The s interval where |a + s d| <= half (per axis: lower, upper; all
    or nothing where d is 0; ``length`` scales the test for 0)."""
    moving = jnp.abs(d) > 1e-12 * length
    step = jnp.where(moving, d, 1.0)
    ends = jnp.sort(jnp.stack([(-half - a) / step, (half - a) / step]), axis=0)
    inside = jnp.where(jnp.abs(a) <= half, jnp.inf, -jnp.inf)
    return jnp.where(moving, ends[0], -inside), jnp.where(moving, ends[1], inside)


def _capsule_on_faces(capsule, X1, X2, distance, sphere_at, over, margin):
    """A capsule against a convex shape with flat faces (in X2's frame:
    ``distance`` its signed distance, ``sphere_at(centre in G, radius)`` a
    sphere's contact with it, ``over(a, d, t)`` the interval of s where
    a + s d lies over the face nearest a + t d), at three points of the
    segment, each a sphere of the capsule's radius: the two ends of the
    segment's part over the face nearest its deepest point (a capsule lying
    on a face rests on two points, at its ends or the face's edges), and
    the deepest point itself, whose depth counts only what it exceeds the
    other two by (nothing lying flat; all of it across an edge, where the
    other two do not touch). Every depth is continuous in the poses.
    ``margin``: the pair's, which the caller adds to every depth."""
    top, bottom = _segment(capsule, X1)
    a, d = X2.inverse().apply(top), X2.inverse().rotate(bottom - top)
    t = _deepest_on_segment(distance, a, d)
    s0, s1 = over(a, d, t)
    s0, s1 = jnp.maximum(s0, 0.0), jnp.minimum(s1, 1.0)
    inside = s0 <= s1
    points = [sphere_at(top + s * (bottom - top), capsule.radius)
              for s in (jnp.where(inside, s0, t), jnp.where(inside, s1, t), t)]
    apart = -jnp.ones_like(points[2].depth) - margin
    ends_depth = [jnp.where(inside, p.depth, apart) for p in points[:2]]
    excess = points[2].depth - jnp.maximum(jnp.maximum(*ends_depth) + margin, 0.0)
    return _stack([eqx.tree_at(lambda c: c.depth, p, depth) for p, depth in zip(points, [*ends_depth, excess])])


def capsule_brick(capsule, X1, brick, X2, margin=0.0):
    """The capsule against the brick (``_capsule_on_faces``): the face
    nearest the deepest point is the one across the axis where it lies
    farthest out, and the part over it the segment clipped to that face's
    prism."""
    h = brick.half_lengths

    def over(a, d, t):
        face = jnp.argmax(jnp.abs(a + t * d) - h)
        lower, upper = _slab(a, d, h, capsule.half_length)
        other = jnp.arange(3) != face
        return jnp.max(jnp.where(other, lower, -jnp.inf)), jnp.min(jnp.where(other, upper, jnp.inf))

    return _capsule_on_faces(capsule, X1, X2, functools.partial(_brick_signed_distance, jax.lax.stop_gradient(h)),
                             lambda c, r: _sphere_on_brick(c, r, brick, X2), over, margin)


def _cylinder_signed_distance(radius, half_length, x):
    """The signed distance (m, negative inside) of x (in the cylinder's
    frame) from the solid cylinder: convex in x."""
    q = jnp.stack([safe_norm(x[:2]) - radius, jnp.abs(x[2]) - half_length])
    return safe_norm(jnp.maximum(q, 0.0)) + jnp.minimum(jnp.max(q), 0.0)


def _sphere_on_cylinder(center, r, cylinder, X_GC: Transform):
    """A sphere of radius r at ``center`` (in G) against the cylinder's point
    closest to it (a centre inside is pushed out through the nearer of the
    side and the end). Against the side the relative curvatures are
    1/r + 1/radius around the axis and 1/r along it; against an end or its
    rim, the sphere's."""
    local = X_GC.inverse().apply(center)
    rho, half = cylinder.radius, cylinder.half_length
    radial_size = safe_norm(local[:2])
    radial = jnp.concatenate([_unit(local[:2], jnp.array([1.0, 0.0], local.dtype)), jnp.zeros(1, local.dtype)])
    z = jnp.array([0.0, 0.0, 1.0], local.dtype)
    axial = z * jnp.where(local[2] >= 0, 1.0, -1.0)
    side_gap, end_gap = rho - radial_size, half - jnp.abs(local[2])
    inside = (side_gap > 0) & (end_gap > 0)
    surface = jnp.minimum(radial_size, rho) * radial + jnp.clip(local[2], -half, half) * z
    through_side = side_gap < end_gap
    outward = jnp.where(inside, jnp.where(through_side, radial, axial), _unit(local - surface, radial))
    depth = r + jnp.where(inside, jnp.minimum(side_gap, end_gap), -safe_norm(local - surface))
    on_side = jnp.where(inside, through_side, (radial_size > rho) & (jnp.abs(local[2]) < half))
    normal = -X_GC.rotate(outward)
    k_around = 1 / r + jnp.where(on_side, 1 / rho, 0.0)
    return PointContact(center + (r - depth / 2) * normal, normal, depth, (k_around / r) ** -0.5, k_around * r)


def sphere_cylinder(sphere, X1, cylinder, X2):
    """The sphere against the cylinder's point closest to its centre."""
    return _stack([_sphere_on_cylinder(X1.p, sphere.radius, cylinder, X2)])


def capsule_cylinder(capsule, X1, cylinder, X2, margin=0.0):
    """The capsule against the cylinder (``_capsule_on_faces``): where the
    deepest point lies farther beyond an end than beyond the side, the part
    over that end is the segment within the radius of the axis; else the
    part along the side is the segment between the end planes."""
    rho, half = cylinder.radius, cylinder.half_length

    def over(a, d, t):
        c = a + t * d
        to_end = jnp.abs(c[2]) - half > safe_norm(c[:2]) - rho
        # |a_xy + s d_xy| <= rho: A s^2 + B s + C <= 0
        A, B, C = jnp.dot(d[:2], d[:2]), 2 * jnp.dot(a[:2], d[:2]), jnp.dot(a[:2], a[:2]) - rho * rho
        moving = A > 1e-24 * capsule.half_length ** 2
        disc = B * B - 4 * A * C
        root = jnp.sqrt(jnp.where(moving & (disc > 0), disc, 0.0))
        A_safe = jnp.where(moving, A, 1.0)
        within = jnp.where(C <= 0, jnp.inf, -jnp.inf)
        disk = (jnp.where(moving, jnp.where(disc > 0, (-B - root) / (2 * A_safe), jnp.inf), -within),
                jnp.where(moving, jnp.where(disc > 0, (-B + root) / (2 * A_safe), -jnp.inf), within))
        slab = _slab(a[2], d[2], half, capsule.half_length)
        return jnp.where(to_end, disk[0], slab[0]), jnp.where(to_end, disk[1], slab[1])

    distance = functools.partial(_cylinder_signed_distance, jax.lax.stop_gradient(rho), jax.lax.stop_gradient(half))
    return _capsule_on_faces(capsule, X1, X2, distance, lambda c, r: _sphere_on_cylinder(c, r, cylinder, X2), over,
                             margin)


def _face_patch(h, k, s, center, R, g, apart):
    """4 points where an incident brick (half-lengths g, centre and axes R
    in the reference brick's frame) meets the reference brick's face s e_k
    (half-lengths h): of the vertices of the overlap of that face with the
    incident brick's face turned against it (projected along e_k: each
    face's vertices inside the other and the edges' crossings, 24
    candidates), the deepest, the one farthest from it, the one farthest
    from the line through those two, and the one farthest from the other
    two sides of that triangle; (the points in the reference frame, on the
    incident face; their depths behind the reference face; the outward
    normal s e_k). Without an overlap every depth is ``apart``."""
    dtype = center.dtype
    u, v = (k + 1) % 3, (k + 2) % 3
    e = jnp.eye(3, dtype=dtype)
    along = jnp.abs(R[k])
    m = jnp.argmax(along)  # the incident axis nearest the reference normal
    N = R[:, m]
    sigma = -jnp.sign(s * N[k])  # the incident face's outward normal is sigma N, against s e_k
    face_center = center + sigma * g[m] * N
    side1, side2 = R[:, (m + 1) % 3] * g[(m + 1) % 3], R[:, (m + 2) % 3] * g[(m + 2) % 3]
    signs = jnp.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]], dtype)  # around a rectangle
    corners = face_center + signs @ jnp.stack([side1, side2])

    def plane(q):  # (u, v) points -> their points on the incident face's plane (in the reference frame)
        x_k = face_center[k] - (N[u] * (q[:, 0] - face_center[u]) + N[v] * (q[:, 1] - face_center[v])) / N[k]
        return q[:, :1] * e[u] + q[:, 1:] * e[v] + x_k[:, None] * e[k]

    quad = jnp.stack([corners[:, u], corners[:, v]], axis=1)  # (4, 2) the incident face in the plane
    rect = signs * jnp.stack([h[u], h[v]])
    slack = 1e-9 * (jnp.max(h) + jnp.max(g))
    in_rect = jnp.all(jnp.abs(quad) <= jnp.stack([h[u], h[v]]) + slack, axis=1)
    edges = jnp.roll(quad, -1, axis=0) - quad
    turn = edges[:, 0] * (rect[:, None, 1] - quad[None, :, 1]) - edges[:, 1] * (rect[:, None, 0] - quad[None, :, 0])
    orientation = jnp.sign(jnp.sum(edges[:, 0] * jnp.roll(edges, -1, axis=0)[:, 1]
                                   - edges[:, 1] * jnp.roll(edges, -1, axis=0)[:, 0]))
    in_quad = jnp.all(orientation * turn >= -slack * jnp.max(g), axis=1)
    # each incident edge against each reference edge
    rect_edges = jnp.roll(rect, -1, axis=0) - rect
    p, r = quad[:, None, :], edges[:, None, :]
    q, w = rect[None, :, :], rect_edges[None, :, :]
    cross_rw = r[..., 0] * w[..., 1] - r[..., 1] * w[..., 0]
    crossing = jnp.abs(cross_rw) > 1e-12 * (jnp.max(h) + jnp.max(g)) ** 2
    denominator = jnp.where(crossing, cross_rw, 1.0)
    qp = q - p
    t = (qp[..., 0] * w[..., 1] - qp[..., 1] * w[..., 0]) / denominator
    t2 = (qp[..., 0] * r[..., 1] - qp[..., 1] * r[..., 0]) / denominator
    meets = crossing & (t >= 0) & (t <= 1) & (t2 >= 0) & (t2 <= 1)
    points = jnp.concatenate([quad, rect, (p + t[..., None] * r).reshape(16, 2)])
    valid = jnp.concatenate([in_rect, in_quad, meets.reshape(16)])
    depths = h[k] - s * plane(points)[:, k]

    def farthest(score):
        return jnp.argmax(jnp.where(valid, score, -jnp.inf))

    def off_line(a, b):  # each point's distance from the line through points a and b (times |b - a|)
        d = points[b] - points[a]
        return jnp.abs(d[0] * (points[:, 1] - points[a, 1]) - d[1] * (points[:, 0] - points[a, 0]))

    a = farthest(depths)  # the deepest point, then three spanning a large quadrilateral with it
    b = farthest(jnp.sum((points - points[a]) ** 2, axis=1))
    c = farthest(off_line(a, b))
    d = farthest(off_line(a, c) + off_line(b, c))
    chosen = jnp.stack([a, b, c, d])
    on_face = plane(points[chosen])
    return on_face, jnp.where(jnp.any(valid), depths[chosen], apart), s * e[k]


def brick_brick(brick1, X1, brick2, X2):
    """Two bricks by the separating-axis test over their 15 axes (3 face
    normals each, 9 edge-edge cross products). Where a face normal
    separates least, or an edge-edge axis within 8 degrees of the best face
    normal does (MJX's rule), the contact is the face's patch
    (``_face_patch``): 4 points, each its depth behind the reference face,
    as MuJoCo's box-box keeps 4; else the two edges' closest points, one
    point, if they lie inside both edges (else a vertex is deepest, and the
    face's patch holds it). The vertex law applies (``VERTEX_KERNELS``)."""
    X_BA = X2.inverse().compose(X1)  # brick 1 in brick 2's frame
    pA, RA = X_BA.p, X_BA.R
    hA, hB = jnp.asarray(brick1.half_lengths, pA.dtype), jnp.asarray(brick2.half_lengths, pA.dtype)
    dtype = pA.dtype
    eye = jnp.eye(3, dtype=dtype)
    edge_axes = jnp.cross(jnp.repeat(RA.T, 3, axis=0), jnp.tile(eye, (3, 1)))  # a_i x e_j, i major
    edge_size = safe_norm(edge_axes, axis=-1)
    usable = edge_size > 1e-6
    edge_axes = edge_axes / jnp.where(usable, edge_size, 1.0)[:, None]
    axes = jnp.concatenate([RA.T, eye, edge_axes])

    def overlap(L):
        return jnp.sum(hA * jnp.abs(RA.T @ L)) + jnp.sum(hB * jnp.abs(L)) - jnp.abs(jnp.dot(pA, L))

    overlaps = jax.vmap(overlap)(axes)
    overlaps = jnp.where(jnp.concatenate([jnp.ones(6, bool), usable]), overlaps, jnp.inf)
    face = jnp.argmin(overlaps[:6])
    edge = jnp.argmin(overlaps[6:])
    edge_contact = (overlaps[6 + edge] < overlaps[face]) & (jnp.abs(jnp.dot(axes[face], axes[6 + edge])) < 0.99)
    apart = -jnp.ones((), dtype)

    # the face patch, the reference face on brick 1 (face < 3) or brick 2
    k = face % 3
    on_A = face < 3
    toward = jnp.where(on_A, -1.0, 1.0) * jnp.dot(pA, axes[face])  # from the reference brick to the other
    s = jnp.where(toward >= 0, 1.0, -1.0)
    # the reference brick's frame: brick 1's (the other brick's centre -RA' pA, axes RA') or brick 2's
    R_ref = jnp.where(on_A, RA, eye)  # the reference frame's axes in brick 2's
    points, depth, outward = _face_patch(jnp.where(on_A, hA, hB), k, s, jnp.where(on_A, RA.T @ -pA, pA),
                                         jnp.where(on_A, RA.T, RA), jnp.where(on_A, hB, hA), apart)
    points = points @ R_ref.T + jnp.where(on_A, pA, jnp.zeros_like(pA))  # back to brick 2's frame
    outward = R_ref @ outward
    normal = jnp.where(on_A, outward, -outward)  # from brick 1 into brick 2
    location = points + (depth / 2)[:, None] * outward  # halfway up the overlap

    # the edge-edge contact: each brick's edge along the axis's factor nearest the other brick
    i, j = edge // 3, edge % 3
    L = axes[6 + edge] * jnp.where(jnp.dot(axes[6 + edge], -pA) >= 0, 1.0, -1.0)  # from brick 1 toward brick 2
    signs_A = jnp.where(RA.T @ L >= 0, 1.0, -1.0) * (jnp.arange(3) != i)
    signs_B = -jnp.where(L >= 0, 1.0, -1.0) * (jnp.arange(3) != j)
    mid_A, mid_B = pA + RA @ (signs_A * hA), signs_B * hB
    a1, b1 = mid_A - RA[:, i] * hA[i], mid_A + RA[:, i] * hA[i]
    a2, b2 = mid_B - eye[j] * hB[j], mid_B + eye[j] * hB[j]
    c1, c2 = _closest_between_segments(a1, b1, a2, b2)
    edge_depth = jnp.dot(c1 - c2, L)
    inner = [(jnp.abs(jnp.dot(c - mid, axis)) < (1 - 1e-9) * half)
             for c, mid, axis, half in ((c1, mid_A, RA[:, i], hA[i]), (c2, mid_B, eye[j], hB[j]))]
    edge_contact = edge_contact & inner[0] & inner[1]  # else a vertex, which a face's patch holds
    edge_rows = jnp.stack([(c1 + c2) / 2] * 4)
    location = jnp.where(edge_contact, edge_rows, location)
    depth = jnp.where(edge_contact, jnp.stack([edge_depth, apart, apart, apart]), depth)
    normal = jnp.where(edge_contact, L, normal)
    normal_G = X2.rotate(normal)
    return PointContact(jax.vmap(X2.apply)(location), jnp.broadcast_to(normal_G, (4, 3)), depth,
                        jnp.zeros_like(depth), jnp.ones_like(depth))


def half_space_cylinder(half_space, X1, cylinder, X2):
    """The cylinder's rims against the half-space: on each end, the rim
    point deepest in the half-space and three more a quarter turn apart
    (8 points, the vertex law: ``radius`` 0). Standing upright the deepest
    direction is undefined and any quarter-turned four serve."""
    X_HC = X1.inverse().compose(X2)
    inward = jnp.array([1.0, 0.0, 0.0], X_HC.p.dtype)  # H's x: depth grows along it
    return _points_in_half_space(X1, _rim_points(cylinder, X_HC, inward))


def _rim_points(cylinder, X, inward):
    """(8, 3) on each end of the cylinder posed at X, the rim point farthest
    along ``inward`` and three more a quarter turn apart (in X's frame)."""
    axis = X.R[:, 2]
    e = _unit(inward - jnp.dot(inward, axis) * axis, _perpendicular(axis))
    f = cross(axis, e)
    turns = jnp.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]], axis.dtype)
    rim = cylinder.radius * (turns[:, :1] * e + turns[:, 1:] * f)  # (4, 3) from an end's centre
    ends = jnp.stack([-axis, axis]) * cylinder.half_length
    return (X.p + ends[:, None, :] + rim[None, :, :]).reshape(8, 3)
