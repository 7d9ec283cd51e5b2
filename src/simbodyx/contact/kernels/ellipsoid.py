"""Ellipsoids against half-spaces, spheres, capsules and each other.
HalfSpace-Ellipsoid is Simbody's with the true radii of curvature;
Sphere-Ellipsoid and Capsule-Ellipsoid take the ellipsoid's point closest
to the sphere's centre or to the segment (Simbody's ConvexConvex finds the
same points by another route); Ellipsoid-Ellipsoid minimizes the overlap
of their support functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx.contact.kernels.primitive import PointContact, _perpendicular, _segment, _stack, _unit
from simbodyx.spatial.vectors import cross, safe_norm


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
