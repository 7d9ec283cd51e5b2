"""Per-body views shared by the dynamics recursions.

Spatial quantities are in G, about each body's origin Bo. Shifting the
reference point from the parent's origin by r = p_PoBo: velocities map by
Phi(r) = [[1, 0], [-skew(r), 1]], forces back by Phi(r)^T, inertias by
Phi^T P Phi (Featherstone's rigid-body transforms with rotation 1).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx.spatial.inertia import spatial_inertia_matrix
from simbodyx.spatial.rotation import skew
from simbodyx.topology import Topology


def shift_inertia_to_parent(P, r):
    """Phi(r)^T P Phi(r) (..., 6, 6): a symmetric spatial (or articulated)
    inertia about Bo moved to Po, r = p_PoBo, by its 3x3 blocks
    P = [[A, B], [B^T, C]]:  E = B + [r]x C,  result [[A + [r]x B^T - E [r]x, E], [E^T, C]]."""
    rx = skew(r)
    A, B, C = P[..., :3, :3], P[..., :3, 3:], P[..., 3:, 3:]
    E = B + small_matmul(rx, C)
    top_left = A + small_matmul(rx, jnp.swapaxes(B, -1, -2)) - small_matmul(E, rx)
    return jnp.concatenate([
        jnp.concatenate([top_left, E], -1),
        jnp.concatenate([jnp.swapaxes(E, -1, -2), C], -1),
    ], -2)


def small_matmul(a, b):
    """a @ b for small matrices as a broadcast product and sum, which XLA's
    CPU backend fuses (a batched dot call per small product is ~10x slower)."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def small_matvec(a, x):
    return jnp.sum(a * x[..., None, :], axis=-1)


def parent_offsets(topology: Topology, X_GB):
    """p_PoBo in G for every body (Ground's row zero)."""
    p = X_GB.p
    return p - p[np.asarray(topology.parent)]


def spatial_inertias_in_ground(instance, X_GB):
    """(nb, 6, 6) spatial inertia of each body about Bo, expressed in G."""
    R = X_GB.R
    com_G = jnp.einsum("bij,bj->bi", R, instance.com)
    I_G = R @ instance.inertia @ jnp.swapaxes(R, -1, -2)
    return spatial_inertia_matrix(instance.mass, com_G, I_G)
