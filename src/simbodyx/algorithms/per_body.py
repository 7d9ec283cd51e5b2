"""Per-body views shared by the dynamics recursions.

Spatial quantities are in G, about each body's origin Bo. Shifting the
reference point from the parent's origin by r = p_PoBo: velocities map by
Phi(r) = [[1, 0], [-skew(r), 1]], forces back by Phi(r)^T, inertias by
Phi^T P Phi (Featherstone's rigid-body transforms with rotation 1).
"""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx import tree
from simbodyx.spatial.inertia import spatial_inertia_matrix
from simbodyx.spatial.vectors import mat_mul, mat_vec, skew_times, times_skew
from simbodyx.topology import Topology


def shift_inertia_to_parent(P, r):
    """Phi(r)^T P Phi(r) (..., 6, 6): a symmetric spatial (or articulated)
    inertia about Bo moved to Po, r = p_PoBo, by its 3x3 blocks
    P = [[A, B], [B^T, C]]:  E = B + [r]x C,  E^T = B^T - C [r]x,
    result [[A + [r]x B^T - E [r]x, E], [E^T, C]] (B^T read from P, so no
    transposes; the products with [r]x are cross products)."""
    A, B, Bt, C = P[..., :3, :3], P[..., :3, 3:], P[..., 3:, :3], P[..., 3:, 3:]
    E = B + skew_times(r, C)
    top_left = A + skew_times(r, Bt) - times_skew(E, r)
    return jnp.concatenate([
        jnp.concatenate([top_left, E], -1),
        jnp.concatenate([Bt - times_skew(C, r), C], -1),
    ], -2)


def parent_offsets(topology: Topology, X_GB):
    """p_PoBo in G for every body (Ground's row zero)."""
    return X_GB.p - tree.take_rows(X_GB.p, topology.parent)


def spatial_inertias_in_ground(instance, X_GB):
    """(nb, 6, 6) spatial inertia of each body about Bo, expressed in G."""
    R = X_GB.R
    com_G = mat_vec(R, instance.com)
    I_G = mat_mul(mat_mul(R, instance.inertia), R, transpose_b=True)
    return spatial_inertia_matrix(instance.mass, com_G, I_G)
