"""3-vectors and spatial vectors.

A spatial vector is a (..., 6) array ``[angular; linear]``: V = [w; v],
A = [alpha; a], F = [torque; force]. The linear part refers to a frame
origin named by the variable (``V_GB``: velocity of B's origin in G).
"""

from __future__ import annotations

import jax.numpy as jnp


def safe_norm(x, axis=-1, keepdims=False):
    """Euclidean norm whose gradient is zero (not NaN) at x = 0."""
    sq = jnp.sum(x * x, axis=axis, keepdims=keepdims)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1.0)), 0.0)


def cross(a, b):
    """a x b along the last axis, written elementwise so XLA fuses it."""
    return jnp.stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ],
        axis=-1,
    )


def spatial_vec(angular, linear):
    """Stack ``[angular; linear]`` into (..., 6)."""
    return jnp.concatenate([angular, linear], axis=-1)


def shift_velocity(V, r):
    """Velocity of a point displaced by r from the point V refers to (same frame):
    [w; v + w x r]."""
    w, v = V[..., :3], V[..., 3:]
    return spatial_vec(w, v + cross(w, r))


def shift_force(F, r):
    """Simbody's shiftForceBy: the same spatial force [t; f] referred to a point
    displaced by r from the one it acts at: [t - r x f; f]."""
    t, f = F[..., :3], F[..., 3:]
    return spatial_vec(t - cross(r, f), f)


def rotate_spatial(R, V):
    """Re-express both halves of a spatial vector: [R w; R v]."""
    return spatial_vec(
        jnp.einsum("...ij,...j->...i", R, V[..., :3]),
        jnp.einsum("...ij,...j->...i", R, V[..., 3:]),
    )
