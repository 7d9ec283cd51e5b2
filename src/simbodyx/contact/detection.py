"""Collision detection between posed contact surfaces, Simbody's
``CollisionDetectionAlgorithm``s, as fixed-shape kernels.

A kernel maps two shapes and their poses in G to a ``PointContact`` with a
fixed number of points (one for sphere-sphere, two for a capsule's ends on a
half-space, ...). Every point is always computed: ``depth > 0`` says it is
touching, so a program's shape never depends on the State. The normal
points from surface 1 into surface 2 (the direction in which surface 2 is
pushed), as in Simbody. Kernels whose Simbody counterpart exists follow it
(HalfSpace-Sphere, Sphere-Sphere and HalfSpace-Brick exactly; HalfSpace-Ellipsoid with the
true radii of curvature, see there); the capsule pairs reduce to spheres at
the closest points of the capsules' segments, Sphere-Brick to the sphere
against the brick's closest point, Capsule-Brick to three spheres along
the capsule's segment (see there); Sphere-Ellipsoid and Capsule-Ellipsoid
take the ellipsoid's point closest to the sphere's centre or to the
segment (Simbody's ConvexConvex finds the same points by another route);
Ellipsoid-Ellipsoid minimizes the overlap of their support functions;
Brick-Brick is the separating-axis test with a face's contact patch;
Sphere-Cylinder and Capsule-Cylinder are as their Brick counterparts;
Brick-Ellipsoid, Cylinder-Ellipsoid, Cylinder-Brick and Cylinder-Cylinder
minimize the overlap of the support functions over every feature's cone
of normals (``_least_overlap``); a HeightField is MuJoCo's triangulated
terrain, under spheres (a row per nearby triangle and one for a ridge),
capsules (their end spheres), bricks (their vertices) and cylinders
(their rim points).

A HalfSpace-Brick contact's points are the vertices of the brick's face
that faces the half-space: the force law there is Simbody's
BrickHalfSpacePenalty (``VERTEX_KERNELS``), not Hertz's, as at the points
of two bricks' contact patch. A cylinder (which
Simbody has no contact for) meets a half-space the same way, at points of
its two rims: the deepest rim point of each end and three more a quarter
turn apart, so that it lies on two points and stands on four.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm


class PointContact(Module):
    """Contacts between two surfaces, each entry with a leading point axis:
    ``location`` (3,) and ``normal`` (3,, unit, from surface 1 into 2) in G,
    ``depth`` (m, positive when overlapping), the effective radius of
    curvature ``radius`` (m, Simbody's sqrt(r1 r2) of the relative principal
    radii) and ``ratio`` (kmax / kmin >= 1 of the relative principal
    curvatures: 1 where the contact is circular, and at vertices)."""

    location: jnp.ndarray
    normal: jnp.ndarray
    depth: jnp.ndarray
    radius: jnp.ndarray
    ratio: jnp.ndarray


def _stack(contacts):
    return jax.tree.map(lambda *a: jnp.stack(a), *contacts)


def _sphere_on_half_space(X_GH: Transform, center, r):
    """Simbody's HalfSpace-Sphere: the sphere of radius r at ``center`` (in G)."""
    local = X_GH.inverse().apply(center)
    depth = r + local[0]
    location = X_GH.apply(jnp.stack([depth / 2, local[1], local[2]]))
    return PointContact(location, -X_GH.R[:, 0], depth, r, jnp.ones_like(depth))


def _sphere_sphere(p1, r1, p2, r2, fallback=None):
    """Simbody's Sphere-Sphere. Coincident centres give no contact, as in
    Simbody, or, given a ``fallback`` unit normal (a capsule's axes
    crossing), full depth along it; then centres closer than 1e-9 (r1 + r2)
    count as coincident, their offset being rounding."""
    delta = p2 - p1
    dist = safe_norm(delta)
    apart = dist > (0.0 if fallback is None else 1e-9 * (r1 + r2))
    normal = delta / jnp.where(apart, dist, 1.0)
    if fallback is None:
        normal = jnp.where(apart, normal, jnp.zeros_like(delta))
        depth = jnp.where(apart, r1 + r2 - dist, -jnp.ones_like(dist))
    else:
        normal = jnp.where(apart, normal, fallback)
        depth = r1 + r2 - dist
    location = p1 + (r1 - depth / 2) * normal
    return PointContact(location, normal, depth, r1 * r2 / (r1 + r2), jnp.ones_like(depth))


def _unit(v, other):
    """v normalized, or ``other`` where v is (nearly) zero."""
    size = safe_norm(v)
    ok = size > 1e-9
    return jnp.where(ok, v / jnp.where(ok, size, 1.0), other)


def _perpendicular(axis):
    """A unit vector perpendicular to the unit ``axis``."""
    helper = jnp.where(jnp.abs(axis[0]) < 0.9, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0, 0.0]))
    return _unit(cross(axis, helper.astype(axis.dtype)), helper.astype(axis.dtype))


def _segment(capsule, X: Transform):
    """The capsule's segment ends in G."""
    axis = X.R[:, 2] * capsule.half_length
    return X.p - axis, X.p + axis


def _closest_on_segment(a, b, p):
    d = b - a
    t = jnp.clip(jnp.dot(p - a, d) / jnp.dot(d, d), 0.0, 1.0)
    return a + t * d


def _closest_between_segments(a1, b1, a2, b2):
    """Closest points of segments a1-b1 and a2-b2 (neither of zero length);
    for parallel segments, the one nearest a1 on the second."""
    d1, d2, r = b1 - a1, b2 - a2, a1 - a2
    a, e, f = jnp.dot(d1, d1), jnp.dot(d2, d2), jnp.dot(d2, r)
    b, c = jnp.dot(d1, d2), jnp.dot(d1, r)
    denom = a * e - b * b
    skew = denom > 1e-12 * a * e
    s = jnp.where(skew, jnp.clip((b * f - c * e) / jnp.where(skew, denom, 1.0), 0.0, 1.0), 0.0)
    t = (b * s + f) / e
    # t outside [0, 1]: clamp it and recompute s for the clamped t
    t_clamped = jnp.clip(t, 0.0, 1.0)
    s = jnp.where(t == t_clamped, s, jnp.clip((t_clamped * b - c) / a, 0.0, 1.0))
    return a1 + s * d1, a2 + t_clamped * d2


#: Golden-section steps locating a segment's deepest point in a convex
#: shape (the bracket shrinks to 0.618^60 ~ 3e-13 of the segment).
SEGMENT_SEARCH_STEPS = 60


def _deepest_on_segment(distance, a, d):
    """The t in [0, 1] minimizing the convex ``distance(a + t d)`` (a signed
    distance from a convex shape), by golden-section search: at a smooth
    minimum, comparisons resolve t to about the square root of the
    rounding error (1e-8 in float64), the distance there to rounding. Its
    derivatives are not followed: the depth at the minimum needs none (the
    envelope theorem)."""
    a, d = jax.lax.stop_gradient(a), jax.lax.stop_gradient(d)
    shrink = jnp.asarray((np.sqrt(5.0) - 1.0) / 2.0, a.dtype)

    def step(_, bracket):
        lo, hi = bracket
        left, right = hi - shrink * (hi - lo), lo + shrink * (hi - lo)
        keep_left = distance(a + left * d) <= distance(a + right * d)
        return jnp.where(keep_left, lo, left), jnp.where(keep_left, right, hi)

    lo, hi = jax.lax.fori_loop(0, SEGMENT_SEARCH_STEPS, step, (jnp.zeros_like(a[0]), jnp.ones_like(a[0])))
    return (lo + hi) / 2


def half_space_sphere(half_space, X1, sphere, X2):
    return _stack([_sphere_on_half_space(X1, X2.p, sphere.radius)])


def sphere_sphere(sphere1, X1, sphere2, X2):
    return _stack([_sphere_sphere(X1.p, sphere1.radius, X2.p, sphere2.radius)])


def _ellipsoid_form(radii, x, t1, t2):
    """(2, 2) the ellipsoid's curvature matrix at its surface point x in the
    tangent directions t1, t2 (unit, orthogonal; all in its frame): with
    A = diag(1 / radii^2), [ti' A tj] / |A x| (Simbody's
    ``findParaboloidAtPointWithNormal``)."""
    r2 = radii * radii
    scale = safe_norm(x / r2)
    return jnp.stack([jnp.stack([jnp.sum(u * v / r2) / scale for v in (t1, t2)]) for u in (t1, t2)])


def _principal(K):
    """(effective radius (kmax kmin)^(-1/2), ratio kmax / kmin) of a
    symmetric (2, 2) relative curvature matrix with positive eigenvalues."""
    mean = (K[0, 0] + K[1, 1]) / 2
    gap_squared = ((K[0, 0] - K[1, 1]) / 2) ** 2 + K[0, 1] ** 2
    spread = jnp.where(gap_squared > 0, jnp.sqrt(jnp.where(gap_squared > 0, gap_squared, 1.0)), 0.0)
    return (mean * mean - gap_squared) ** -0.5, (mean + spread) / (mean - spread)


def half_space_ellipsoid(half_space, X1, ellipsoid, X2):
    """Simbody's HalfSpace-Ellipsoid: the ellipsoid's deepest point p along the
    half-space's inward normal, the force point halfway up the overlap, and
    the true principal curvatures kmax, kmin at p (Simbody's
    ``findParaboloidAtPointWithNormal``): with A = diag(1/radii^2) and t1, t2
    the plane's directions, they are the eigenvalues of [ti' A tj] / |A p|.
    The effective radius is (kmax kmin)^(-1/2). (Simbody's HuntCrossleyForce
    takes the radii as 1/sqrt of the eigenvalues of [ti' A tj], the
    ellipsoid's semi-axes in the contact plane: right for a sphere only.)"""
    r2 = ellipsoid.radii ** 2
    X_HE = X1.inverse().compose(X2)
    n = X_HE.R[0] * -1.0  # the half-space's outward normal (-x of H) in E
    point = n * r2
    point = point / -jnp.sqrt(jnp.dot(n, point))
    depth = X_HE.apply(point)[0]
    radius, ratio = _principal(_ellipsoid_form(ellipsoid.radii, point, X_HE.R[1], X_HE.R[2]))  # H's y, z in E
    location = X2.apply(point + depth / 2 * n)
    return _stack([PointContact(location, X2.rotate(n), depth, radius, ratio)])


#: Newton steps for an ellipsoid's closest point (converged to rounding
#: within 9 on ellipsoids of axis ratios up to 100, from anywhere outside)
ELLIPSOID_NEWTON_STEPS = 12


def _ellipsoid_closest(radii, p):
    """(x, outward unit normal n at x, signed distance) of the point p (in
    the ellipsoid's frame) from the ellipsoid of semi-axes ``radii``.

    Outside, exact: x = a^2 p / (a^2 + s) with s >= 0 the root of
    sum a^2 p^2 / (a^2 + s)^2 = 1, found by Newton's method on the sum's
    inverse square root (linear in s for a sphere) from the bracket
    [|a p| - max a^2, |a p| - min a^2], its derivatives those of the
    converged root (one step differentiated: the implicit function
    theorem). Inside (where Simbody's ConvexConvex also takes a point of
    its own choosing): x is p scaled onto the surface and the distance the
    first-order one, (F - 1) / |grad F| with F = |p / a|, which meets the
    exact one at the surface with the same slope."""
    a2 = radii * radii
    scaled = safe_norm(p / radii)
    outside = scaled > 1
    weight = a2 * p * p
    reach = safe_norm(radii * p)
    lower, upper = jnp.maximum(reach - jnp.max(a2), 0.0), jnp.maximum(reach - jnp.min(a2), 0.0)

    def step(s):  # one Newton step on sum(...)^(-1/2) = 1
        d = a2 + s
        total = jnp.where(outside, jnp.sum(weight / d ** 2), 1.0)
        slope = jnp.where(outside, jnp.sum(weight / d ** 3) * total ** -1.5, 1.0)  # d/ds of total^(-1/2)
        return s - (total ** -0.5 - 1) / slope

    lower, upper = jax.lax.stop_gradient(lower), jax.lax.stop_gradient(upper)
    s = lower
    for _ in range(ELLIPSOID_NEWTON_STEPS):
        s = jnp.clip(jax.lax.stop_gradient(step(s)), lower, upper)
    s = jnp.where(outside, step(s), 0.0)
    x_out = a2 * p / (a2 + s)
    smallest = jnp.zeros(3, p.dtype).at[jnp.argmin(radii)].set(1.0)
    centred = scaled < 1e-12
    x_in = jnp.where(centred, smallest * radii, p / jnp.where(centred, 1.0, scaled))
    x = jnp.where(outside, x_out, x_in)
    normal = _unit(x / a2, smallest)
    gradient = safe_norm(p / a2)
    inside = (scaled - 1) * jnp.where(centred, jnp.min(radii), scaled / jnp.where(centred, 1.0, gradient))
    return x, normal, jnp.where(outside, safe_norm(p - x_out), inside)


def sphere_ellipsoid(sphere, X1, ellipsoid, X2):
    """The sphere against the ellipsoid's point closest to its centre
    (``_ellipsoid_closest``), the common normal there; the relative
    principal curvatures are the ellipsoid's there plus the sphere's
    1 / r (the contact elliptical, as Simbody's ConvexConvex finds it)."""
    r = sphere.radius
    x, n, distance = _ellipsoid_closest(ellipsoid.radii, X2.inverse().apply(X1.p))
    depth = r - distance
    normal = -X2.rotate(n)
    t1 = _perpendicular(n)
    radius, ratio = _principal(_ellipsoid_form(ellipsoid.radii, x, t1, cross(n, t1)) + jnp.eye(2, dtype=x.dtype) / r)
    return _stack([PointContact(X1.p + (r - depth / 2) * normal, normal, depth, radius, ratio)])


#: Newton steps along a segment for its point deepest in an ellipsoid
#: (converged within 3 over 400 random poses: depths MuJoCo's to 1.2e-8)
SEGMENT_NEWTON_STEPS = 4


def _deepest_in_ellipsoid(radii, a, d):
    """t in [0, 1] where the segment a + t d (in the ellipsoid's frame) is
    deepest in the ellipsoid of semi-axes ``radii`` (least signed distance
    ``_ellipsoid_closest``): Newton's method along it from its point
    deepest in the ellipsoid's scaled norm, each step the best of
    ``STEP_SCALES`` of it (the distance never rises: inside, the first-order
    distance is not convex along a line). Held constant under
    differentiation: callers evaluate their distance at it, whose
    derivative along the segment is zero there."""
    fixed = jax.lax.stop_gradient((radii, a, d))
    scaled_a, scaled_d = fixed[1] / fixed[0], fixed[2] / fixed[0]
    t = jnp.clip(-jnp.dot(scaled_a, scaled_d) / jnp.maximum(jnp.dot(scaled_d, scaled_d), 1e-30), 0.0, 1.0)

    def distance_at(t):
        return _ellipsoid_closest(fixed[0], fixed[1] + t * fixed[2])[2]

    def newton(_, t):  # the best of STEP_SCALES along Newton's step (a quarter of the segment where not convex)
        slope, bend = jax.jvp(jax.grad(distance_at), (t,), (jnp.ones_like(t),))
        step = jnp.where(bend > 0, -slope / jnp.where(bend > 0, bend, 1.0), -0.25 * jnp.sign(slope))
        tried = jnp.clip(t + jnp.asarray(STEP_SCALES, t.dtype) * step, 0.0, 1.0)
        return tried[jnp.argmin(jax.vmap(distance_at)(tried))]

    return jax.lax.fori_loop(0, SEGMENT_NEWTON_STEPS, newton, t)


def capsule_ellipsoid(capsule, X1, ellipsoid, X2):
    """The capsule against the ellipsoid at its segment's point deepest in
    it (Newton's method on ``_ellipsoid_closest``'s distance along the
    segment, from the point deepest in the ellipsoid's scaled norm), as a
    sphere of the capsule's radius there; the relative curvatures add the
    ellipsoid's and the capsule's:
    its cylinder's (1 / r across the axis, 0 along it) where the point is
    inside the segment, its end's sphere's at an end."""
    top, bottom = _segment(capsule, X1)
    X_inverse = X2.inverse()
    a, d = X_inverse.apply(top), X_inverse.rotate(bottom - top)  # in the ellipsoid's frame
    radii, r = ellipsoid.radii, capsule.radius
    t = _deepest_in_ellipsoid(radii, a, d)
    x, n, distance = _ellipsoid_closest(radii, a + t * d)
    t1 = _perpendicular(n)
    t2 = cross(n, t1)
    along = jnp.stack([jnp.dot(t1, d), jnp.dot(t2, d)]) / safe_norm(d)  # the axis in the tangent plane
    inner = (t > 1e-9) & (t < 1 - 1e-9)
    tube = (jnp.eye(2, dtype=d.dtype) - jnp.where(inner, 1.0, 0.0) * jnp.outer(along, along)) / r
    radius, ratio = _principal(_ellipsoid_form(radii, x, t1, t2) + tube)
    depth = r - distance
    normal = -X2.rotate(n)
    return _stack([PointContact(top + t * (bottom - top) + (r - depth / 2) * normal, normal, depth, radius, ratio)])


#: Newton steps over the direction between two ellipsoids (converged to
#: rounding within 10 from the line of centres in the tests' random poses)
SUPPORT_NEWTON_STEPS = 16


def _overlap_along(n, cA, MA, cB, MB):
    """How far two ellipsoids (centres c, M = R diag(radii^2) R' in a common
    frame) overlap along the unit n (from A toward B): h_A(n) + h_B(-n), h
    the support function c.n + sqrt(n' M n)."""
    return jnp.dot(n, cA - cB) + jnp.sqrt(n @ MA @ n) + jnp.sqrt(n @ MB @ n)


def _sphere_newton_step(objective, n, params):
    """One damped Newton step of ``objective(unit n, params)`` over the unit
    sphere, in n's tangent plane (a gradient step where the objective is
    not convex there; at most half a radian)."""
    t1 = _perpendicular(n)
    t2 = cross(n, t1)

    def f(x):
        v = n + x[0] * t1 + x[1] * t2
        return objective(v / safe_norm(v), params)

    zero = jnp.zeros(2, n.dtype)
    g, H = jax.grad(f)(zero), jax.hessian(f)(zero)
    det = H[0, 0] * H[1, 1] - H[0, 1] ** 2
    convex = (H[0, 0] > 0) & (det > 0)
    inverse_times_g = jnp.stack([H[1, 1] * g[0] - H[0, 1] * g[1], H[0, 0] * g[1] - H[0, 1] * g[0]])
    newton = -inverse_times_g / jnp.where(convex, det, 1.0)
    x = jnp.where(convex, newton, -g / (jnp.abs(H[0, 0]) + jnp.abs(H[1, 1]) + 1e-30))
    x = x * jnp.minimum(1.0, 0.5 / jnp.maximum(safe_norm(x), 1e-30))
    return _unit_sphere_best(f, x, n, t1, t2)


#: Step lengths tried along a Newton direction (the best taken: the
#: objective never rises, across a kink of a support function included)
STEP_SCALES = (1.0, 0.5, 0.25, 0.125, 0.0)


def _unit_sphere_best(f, x, n, t1, t2):
    """n moved by the tangent step x (scaled by the best of ``STEP_SCALES``
    for f) and renormalized."""
    scales = jnp.asarray(STEP_SCALES, x.dtype)
    values = jax.vmap(lambda a: f(a * x))(jax.lax.stop_gradient(scales))
    a = scales[jnp.argmin(jax.lax.stop_gradient(values))]
    v = n + a * (x[0] * t1 + x[1] * t2)
    return v / safe_norm(v)


def ellipsoid_ellipsoid(ellipsoid1, X1, ellipsoid2, X2):
    """Two ellipsoids by their support functions: the signed overlap is the
    minimum over unit n of h_1(n) + h_2(-n) (the depth when they overlap,
    minus the distance apart otherwise), found by Newton's method on the
    tangent plane from the line of centres; the contact is at the two
    support points along n (the common normal, as Simbody's ConvexConvex
    finds it), their relative curvatures summed in one tangent basis.
    Derivatives: one Newton step differentiated (the implicit function
    theorem)."""
    cA, cB = X1.p, X2.p
    MA = X1.R @ jnp.diag(ellipsoid1.radii ** 2) @ X1.R.T
    MB = X2.R @ jnp.diag(ellipsoid2.radii ** 2) @ X2.R.T
    fallback = jax.lax.stop_gradient(X1.R[:, jnp.argmin(ellipsoid1.radii)])

    def overlap(n, params):
        return _overlap_along(n, *params)

    fixed = jax.lax.stop_gradient((cA, MA, cB, MB))
    n = jax.lax.fori_loop(0, SUPPORT_NEWTON_STEPS, lambda _, n: _sphere_newton_step(overlap, n, fixed),
                          _unit(fixed[2] - fixed[0], fallback))
    n = _sphere_newton_step(overlap, jax.lax.stop_gradient(n), (cA, MA, cB, MB))
    wA, wB = MA @ n, MB @ n
    pA, pB = cA + wA / jnp.sqrt(n @ wA), cB - wB / jnp.sqrt(n @ wB)  # the support points
    depth = jnp.dot(pA - pB, n)
    t1 = _perpendicular(n)
    t2 = cross(n, t1)
    forms = [_ellipsoid_form(e.radii, X.inverse().rotate(p - X.p), X.inverse().rotate(t1), X.inverse().rotate(t2))
             for e, X, p in ((ellipsoid1, X1, pA), (ellipsoid2, X2, pB))]
    radius, ratio = _principal(forms[0] + forms[1])
    return _stack([PointContact((pA + pB) / 2, n, depth, radius, ratio)])


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


def half_space_capsule(half_space, X1, capsule, X2):
    """The capsule's two end spheres against the half-space (a capsule lying
    flat touches at both ends)."""
    return _stack([_sphere_on_half_space(X1, end, capsule.radius) for end in _segment(capsule, X2)])


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


def sphere_capsule(sphere, X1, capsule, X2):
    """The sphere against the capsule's nearest point; a centre on the axis
    is pushed out perpendicular to it."""
    near = _closest_on_segment(*_segment(capsule, X2), X1.p)
    return _stack([_sphere_sphere(X1.p, sphere.radius, near, capsule.radius, _perpendicular(X2.R[:, 2]))])


def capsule_capsule(capsule1, X1, capsule2, X2):
    """The capsules' closest points as spheres; crossing axes are pushed apart
    along their common perpendicular (parallel ones, along one perpendicular
    to both)."""
    p1, p2 = _closest_between_segments(*_segment(capsule1, X1), *_segment(capsule2, X2))
    a1, a2 = X1.R[:, 2], X2.R[:, 2]
    fallback = _unit(cross(a1, a2), _perpendicular(a1))
    return _stack([_sphere_sphere(p1, capsule1.radius, p2, capsule2.radius, fallback)])


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
