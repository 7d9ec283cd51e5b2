"""Bricks and cylinders against ellipsoids, and cylinders against bricks
and cylinders: the least overlap of the two shapes' support functions
over every feature's cone of normals (``_least_overlap``), the contact at
the features that realize it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.kernels.ellipsoid import (
    STEP_SCALES,
    SUPPORT_NEWTON_STEPS,
    _ellipsoid_form,
    _principal,
    _sphere_newton_step,
)
from simbodyx.contact.kernels.primitive import PointContact, _closest_between_segments, _perpendicular, _stack, _unit
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm


#: Newton steps along an arc of directions (an edge's or a side's normals),
#: from the best of ARC_SAMPLES evenly spaced along it
ARC_NEWTON_STEPS, ARC_SAMPLES = 8, 17


#: (rad) how far inside its ends an arc is searched (its ends are other candidates)
ARC_INSET = 1e-7


def _least_overlap(overlap, params, directions, arcs, starts):
    """(n, value): the least of ``overlap(unit n, params)`` (the overlap along
    n of two convex shapes, whose minimum over n is their depth, or minus
    their distance apart) and where it is, searched in each feature's cone
    of normals: ``directions`` (k, 3), fixed normals (flat faces, two edges'
    common normal); ``arcs`` (u, v, lo, hi), arrays with a leading axis,
    the normals cos t u + sin t v for t in [lo, hi] (an edge or a side
    against a curved feature), by Newton's method on t from the best of
    ``ARC_SAMPLES`` along it; ``starts`` (k, 3), Newton's method over the
    sphere from each (vertices, rims). Every candidate's value is an upper
    bound on the minimum, reached by the one in whose cone it lies. The
    search holds the parameters (``stop_gradient``); one step more from the
    chosen candidate with them live gives the derivatives of its n (the
    implicit function theorem)."""
    held = jax.lax.stop_gradient((params, directions, arcs))
    fixed = held[0]

    def arc_step(t, u, v, lo, hi, params):
        def along(t):
            return overlap(jnp.cos(t) * u + jnp.sin(t) * v, params)

        slope, bend = jax.jvp(jax.grad(along), (t,), (jnp.ones_like(t),))
        step = jnp.clip(jnp.where(bend > 0, -slope / jnp.where(bend > 0, bend, 1.0), -slope), -0.5, 0.5)
        tried = jnp.clip(t + jnp.asarray(STEP_SCALES, t.dtype) * step, lo, hi)
        return tried[jnp.argmin(jax.lax.stop_gradient(jax.vmap(along)(tried)))]

    def inset(lo, hi):  # off the ends' kinks, where autodiff's slope of |x| is 0
        return lo + ARC_INSET, hi - ARC_INSET

    def arc_search(u, v, lo, hi):
        lo, hi = inset(lo, hi)
        samples = lo + (hi - lo) * jnp.linspace(0.0, 1.0, ARC_SAMPLES, dtype=lo.dtype)
        values = jax.vmap(lambda t: overlap(jnp.cos(t) * u + jnp.sin(t) * v, fixed))(samples)
        return jax.lax.fori_loop(0, ARC_NEWTON_STEPS, lambda _, t: arc_step(t, u, v, lo, hi, fixed),
                                 samples[jnp.argmin(values)])

    def sphere_search(n0):
        return jax.lax.fori_loop(0, SUPPORT_NEWTON_STEPS, lambda _, n: _sphere_newton_step(overlap, n, fixed), n0)

    u, v, lo, hi = held[2]
    t = jax.vmap(arc_search)(u, v, lo, hi)
    candidates = jnp.concatenate([held[1], jnp.cos(t)[:, None] * u + jnp.sin(t)[:, None] * v,
                                  jax.vmap(sphere_search)(starts)])
    best = jnp.argmin(jax.vmap(overlap, (0, None))(candidates, fixed))
    num_fixed, num_arcs = directions.shape[0], t.shape[0]
    n = directions[jnp.minimum(best, num_fixed - 1)] if num_fixed else candidates[best]
    if num_arcs:  # the chosen arc's t, one Newton step with everything live
        k = jnp.clip(best - num_fixed, 0, num_arcs - 1)
        u, v, lo, hi = (a[k] for a in arcs)
        t_live = arc_step(t[k], u, v, *inset(lo, hi), params)
        n = jnp.where(best >= num_fixed, jnp.cos(t_live) * u + jnp.sin(t_live) * v, n)
    if starts.shape[0]:
        n = jnp.where(best >= num_fixed + num_arcs, _sphere_newton_step(overlap, candidates[best], params), n)
    return n, overlap(n, params)


def _brick_support(h, Q, n):
    """The support function sum h_i |q_i . n| of a brick centred at the
    origin (half-lengths h, axes the columns of Q)."""
    return jnp.sum(h * jnp.abs(Q.T @ n))


def _cylinder_support(rho, half_length, a, n):
    """The support function rho |n across a| + l |n . a| of a cylinder
    centred at the origin (radius rho, half-length l, unit axis a)."""
    along = jnp.dot(a, n)
    return rho * safe_norm(n - along * a) + half_length * jnp.abs(along)


def _on_ellipsoid(n, depth, ellipsoid, M, X_GS: Transform, X_SE: Transform, extra=None):
    """The contact of a convex shape S with an ellipsoid E (M = R diag(radii^2)
    R' in S, ``_ellipsoid_in``) along n (unit, in S, from S into E) and its
    depth: at E's support point toward S, halfway up the overlap, with E's
    curvatures there (plus ``extra``, a function of the tangent basis t1, t2
    in S giving S's (2, 2) curvatures; flat if None)."""
    point = X_SE.p - M @ n / jnp.sqrt(n @ M @ n)  # E's support point along -n, in S
    t1 = _perpendicular(n)
    t2 = cross(n, t1)
    form = _ellipsoid_form(ellipsoid.radii, X_SE.inverse().apply(point), X_SE.R.T @ t1, X_SE.R.T @ t2)
    radius, ratio = _principal(form if extra is None else form + extra(t1, t2))
    return _stack([PointContact(X_GS.apply(point + depth / 2 * n), X_GS.rotate(n), depth, radius, ratio)])


def _ellipsoid_in(X_SE: Transform, ellipsoid):
    """(centre, M = R diag(radii^2) R', M^-1) of the ellipsoid in S."""
    R, r2 = X_SE.R, ellipsoid.radii ** 2
    return X_SE.p, R @ jnp.diag(r2) @ R.T, R @ jnp.diag(1 / r2) @ R.T


#: (8, 3) the signs of a brick's vertices
CORNER_SIGNS = np.array(np.meshgrid(*[[-1.0, 1.0]] * 3)).reshape(3, -1).T


def brick_ellipsoid(brick, X1, ellipsoid, X2):
    """The brick against the ellipsoid (``_least_overlap`` with the brick's
    support function sum h |n_i|): candidates the 6 face normals, the 12
    edges' quarter circles of normals and the 8 vertices' octants, from
    the ellipsoid's normal at each vertex; one point, with the ellipsoid's
    curvatures."""
    X_SE = X1.inverse().compose(X2)
    c, M, Minv = _ellipsoid_in(X_SE, ellipsoid)
    h = brick.half_lengths
    dtype = c.dtype

    eye = jnp.eye(3, dtype=dtype)

    def overlap(n, params):
        h, c, M = params
        return _brick_support(h, eye, n) + jnp.sqrt(n @ M @ n) - jnp.dot(n, c)

    edges = [(axis, sj, sk) for axis in range(3) for sj in (-1.0, 1.0) for sk in (-1.0, 1.0)]
    u = jnp.stack([sj * eye[(axis + 1) % 3] for axis, sj, _ in edges])
    v = jnp.stack([sk * eye[(axis + 2) % 3] for axis, _, sk in edges])
    quarter = jnp.full(len(edges), jnp.pi / 2, dtype)
    corners = jnp.asarray(CORNER_SIGNS, dtype) * h
    starts = jax.vmap(lambda p: _unit(Minv @ (c - p), eye[0]))(jax.lax.stop_gradient(corners))
    n, depth = _least_overlap(overlap, (h, c, M), jnp.concatenate([eye, -eye]),
                              (u, v, jnp.zeros_like(quarter), quarter), starts)
    return _on_ellipsoid(n, depth, ellipsoid, M, X1, X_SE)


def cylinder_ellipsoid(cylinder, X1, ellipsoid, X2):
    """The cylinder against the ellipsoid (``_least_overlap`` with the
    cylinder's support function rho |n_xy| + l |n_z|): candidates the two
    end normals, the side's circle of normals from the ellipsoid's
    direction, and each rim's cone from the ellipsoid's normal at the rim
    point nearest it; one point, with the ellipsoid's curvatures (plus the
    side's 1 / rho around the axis where the side is the feature)."""
    X_SE = X1.inverse().compose(X2)
    c, M, Minv = _ellipsoid_in(X_SE, ellipsoid)
    rho, half = cylinder.radius, cylinder.half_length
    dtype = c.dtype

    eye = jnp.eye(3, dtype=dtype)

    def overlap(n, params):
        rho, half, c, M = params
        return _cylinder_support(rho, half, eye[2], n) + jnp.sqrt(n @ M @ n) - jnp.dot(n, c)

    fixed = jax.lax.stop_gradient((rho, half, c, Minv))
    radial = _unit(fixed[2] * jnp.array([1.0, 1.0, 0.0], dtype), eye[0])
    rims = jnp.stack([fixed[0] * radial + side * fixed[1] * eye[2] for side in (-1.0, 1.0)])
    starts = jax.vmap(lambda p: _unit(fixed[3] @ (fixed[2] - p), radial))(rims)
    pi = jnp.full(1, jnp.pi, dtype)
    side = (radial[None], cross(eye[2], radial)[None], -pi, pi)
    n, depth = _least_overlap(overlap, (rho, half, c, M), jnp.stack([eye[2], -eye[2]]), side, starts)
    on_side = jnp.abs(n[2]) < FEATURE_TOLERANCE

    def around(t1, t2):  # the side's curvature 1 / rho around the axis (along z x n)
        w = cross(eye[2], n)
        w = jnp.stack([jnp.dot(w, t1), jnp.dot(w, t2)])
        return jnp.where(on_side, 1.0, 0.0) * jnp.outer(w, w) / rho

    return _on_ellipsoid(n, depth, ellipsoid, M, X1, X_SE, around)


#: How small a direction's component may be and still count as zero when
#: naming the feature a shape touches along it (a face, an edge, a vertex)
FEATURE_TOLERANCE = 1e-9


def _brick_feature(h, Q, d, m):
    """(centre, half, clamp, dimension, size) of the feature of a brick
    (half-lengths h, axes the columns of Q, centre d) farthest along m: a
    vertex (0), an edge (1; ``half`` half of it, along it; size its length)
    or a face (2; size its area); clamp(x) is the feature's point nearest
    x."""
    along = Q.T @ m
    free = jnp.abs(along) < FEATURE_TOLERANCE
    extent = jnp.where(free, h, 0.0)
    centre = d + Q @ (h * jnp.where(free, 0.0, jnp.sign(along)))
    dimension = jnp.sum(free)
    size = jnp.where(dimension == 1, 2 * jnp.sum(extent), 4 * jnp.prod(jnp.where(free, h, 1.0)))
    half = Q @ jnp.where(dimension == 1, extent, 0.0)
    return centre, half, lambda x: centre + Q @ jnp.clip(Q.T @ (x - centre), -extent, extent), dimension, size


def _cylinder_feature(rho, half_length, d, a, m):
    """``_brick_feature`` for a cylinder (radius rho, centre d, unit axis a):
    a rim point (0), a line of the side (1) or an end (2)."""
    along = jnp.dot(a, m)
    radial = m - along * a
    size = safe_norm(radial)
    on_end, on_side = size < FEATURE_TOLERANCE, jnp.abs(along) < FEATURE_TOLERANCE
    centre = (d + jnp.where(on_end, 0.0, rho / jnp.where(on_end, 1.0, size)) * radial
              + jnp.where(on_side, 0.0, jnp.sign(along) * half_length) * a)
    length, reach = jnp.where(on_side, half_length, 0.0), jnp.where(on_end, rho, 0.0)

    def clamp(x):
        r = x - centre
        axial = jnp.dot(r, a)
        across = r - axial * a
        return centre + jnp.clip(axial, -length, length) * a + across * jnp.minimum(
            1.0, reach / jnp.maximum(safe_norm(across), 1e-30))

    dimension = jnp.where(on_end, 2, jnp.where(on_side, 1, 0))
    return centre, length * a, clamp, dimension, jnp.where(on_end, jnp.pi * rho * rho, 2 * length)


def _between_features(n, depth, first, second):
    """The force point of two flat-featured shapes touching along n (from the
    first into the second), on the plane halfway across the overlap: where
    two edge-like features meet, their crossing; else, seen along n, the
    centre of the smaller feature (a point before a line before a face; of
    two alike, the shorter or smaller) clamped into the other and back (a
    vertex, a rim point, an edge's middle over a face, a smaller face's
    centre over a larger one)."""
    (c1, half1, clamp1, dim1, size1), (c2, half2, clamp2, dim2, size2) = first, second

    def flat(x):  # x projected onto the plane through S's origin normal to n
        return x - jnp.dot(x, n) * n

    smaller = (dim1 < dim2) | ((dim1 == dim2) & (size1 <= size2))
    x = flat(jnp.where(smaller, c1, c2))
    x = flat(jnp.where(smaller, clamp2(x), clamp1(x)))
    x = flat(jnp.where(smaller, clamp1(x), clamp2(x)))
    lines = (dim1 == 1) & (dim2 == 1)
    stand_in = _perpendicular(n)  # keeps the segments' lengths nonzero where they are not used
    half1, half2 = jnp.where(lines, half1, stand_in), jnp.where(lines, half2, cross(n, stand_in))
    x1, x2 = _closest_between_segments(c1 - half1, c1 + half1, c2 - half2, c2 + half2)
    x = jnp.where(lines, flat((x1 + x2) / 2), x)
    return x + (jnp.dot(c1, n) + jnp.dot(c2, n)) / 2 * n


def _flat_contact(n, depth, location, X_GS: Transform):
    """One vertex-law contact (``radius`` 0) given in S, in G."""
    return _stack([PointContact(X_GS.apply(location), X_GS.rotate(n), depth, jnp.zeros_like(depth),
                                jnp.ones_like(depth))])


def _rim_normal(axis, side, toward):
    """The normal halfway between a cylinder's side and its end (``side``
    +-1 along the unit ``axis``) at the rim point nearest ``toward`` (both
    relative to the cylinder's centre)."""
    radial = toward - jnp.dot(toward, axis) * axis
    return _unit(_unit(radial, _perpendicular(axis)) + side * axis, axis)


def cylinder_brick(cylinder, X1, brick, X2):
    """The cylinder against the brick (``_least_overlap`` with both support
    functions): candidates the ends' and faces' normals, the side against
    each edge (their common normal), each rim against each edge (the
    circle of normals across the edge), the side against the vertices (the
    circle across the axis) and each rim against each vertex (from the
    rim's normal); one point, the vertex law (``_between_features``)."""
    X = X1.inverse().compose(X2)  # the brick in the cylinder's frame S
    Q, d, h = X.R, X.p, brick.half_lengths
    rho, half = cylinder.radius, cylinder.half_length
    dtype = d.dtype
    z = jnp.eye(3, dtype=dtype)[2]

    def overlap(n, params):
        rho, half, h, Q, d = params
        return _cylinder_support(rho, half, z, n) + _brick_support(h, Q, n) - jnp.dot(n, d)

    axes = Q.T  # the brick's axes, one per row
    across = jax.vmap(lambda q: _unit(cross(z, q), _perpendicular(q)))(axes)
    circle = jnp.full(4, jnp.pi, dtype)
    arcs = (jnp.concatenate([axes[jnp.array([1, 2, 0])], jnp.eye(3, dtype=dtype)[:1]]),
            jnp.concatenate([axes[jnp.array([2, 0, 1])], jnp.eye(3, dtype=dtype)[1:2]]), -circle, circle)
    held_Q, held_d, held_h = jax.lax.stop_gradient((Q, d, h))
    corners = held_d + jnp.asarray(CORNER_SIGNS, dtype) * held_h @ held_Q.T
    starts = jnp.concatenate([jax.vmap(lambda p: _rim_normal(z, side, p))(corners) for side in (-1.0, 1.0)])
    n, depth = _least_overlap(overlap, (rho, half, h, Q, d), jnp.concatenate([z[None], -z[None], axes, -axes, across,
                                                                              -across]), arcs, starts)
    location = _between_features(n, depth, _cylinder_feature(rho, half, jnp.zeros_like(d), z, n),
                                 _brick_feature(h, Q, d, -n))
    return _flat_contact(n, depth, location, X1)


def cylinder_cylinder(cylinder1, X1, cylinder2, X2):
    """Two cylinders (``_least_overlap`` with both support functions):
    candidates the four ends' normals, the two sides' common normal, each
    side against the other's rims (the circle of normals across its axis)
    and each rim against each rim (from their rims' normals); one point, the
    vertex law (``_between_features``)."""
    X = X1.inverse().compose(X2)  # the second in the first's frame S
    b, d = X.R[:, 2], X.p
    dtype = d.dtype
    eye = jnp.eye(3, dtype=dtype)
    z = eye[2]
    params = (cylinder1.radius, cylinder1.half_length, cylinder2.radius, cylinder2.half_length, b, d)

    def overlap(n, params):
        rho1, half1, rho2, half2, b, d = params
        return _cylinder_support(rho1, half1, z, n) + _cylinder_support(rho2, half2, b, n) - jnp.dot(n, d)

    sides = _unit(cross(z, b), _perpendicular(b))
    u2 = _perpendicular(b)
    pi = jnp.full(2, jnp.pi, dtype)
    arcs = (jnp.stack([eye[0], u2]), jnp.stack([eye[1], cross(b, u2)]), -pi, pi)
    rho1, half1, rho2, half2, held_b, held_d = jax.lax.stop_gradient(params)
    starts = []
    for s in (-1.0, 1.0):
        for t in (-1.0, 1.0):
            rim1, rim2 = s * half1 * z, held_d + t * half2 * held_b
            starts.append(_unit(_rim_normal(z, s, rim2) - _rim_normal(held_b, t, rim1 - held_d), z))
    n, depth = _least_overlap(overlap, params, jnp.stack([z, -z, b, -b, sides, -sides]), arcs, jnp.stack(starts))
    location = _between_features(n, depth, _cylinder_feature(cylinder1.radius, cylinder1.half_length,
                                                             jnp.zeros_like(d), z, n),
                                 _cylinder_feature(cylinder2.radius, cylinder2.half_length, d, b, -n))
    return _flat_contact(n, depth, location, X1)
