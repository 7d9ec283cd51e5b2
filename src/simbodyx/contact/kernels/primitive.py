"""Spheres, half-spaces and capsules, and the result every kernel gives
(``PointContact``). HalfSpace-Sphere and Sphere-Sphere are Simbody's;
the capsule pairs reduce to spheres at the closest points of the
capsules' segments (crossing axes pushed apart along their common
perpendicular)."""

from __future__ import annotations

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


def half_space_capsule(half_space, X1, capsule, X2):
    """The capsule's two end spheres against the half-space (a capsule lying
    flat touches at both ends)."""
    return _stack([_sphere_on_half_space(X1, end, capsule.radius) for end in _segment(capsule, X2)])


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
