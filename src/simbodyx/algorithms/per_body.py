"""Per-body views shared by the dynamics recursions.

Generalized quantities are stored (nu,); the recursions work per body on a
padded (nb, 6) layout (``Topology.u_pad_index``) so every body of a level has
the same shapes: padded slots hold zeros, and padded H rows are zero.
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


def pad_u(topology: Topology, x):
    """(nu,) -> (nb, 6) per-body slots, zeros in unused slots."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])[topology.u_pad_index]


def unpad_u(topology: Topology, y):
    """(nb, 6, ...) per-body slots -> (nu, ...)."""
    return y.reshape((-1,) + y.shape[2:])[topology.u_flat_index]


def shift_matrix(r):
    """Phi(r) (..., 6, 6): V at a point displaced by r = [w; v + w x r] = Phi V."""
    eye = jnp.broadcast_to(jnp.eye(3, dtype=r.dtype), r.shape[:-1] + (3, 3))
    zero = jnp.zeros_like(eye)
    return jnp.concatenate([
        jnp.concatenate([eye, zero], -1),
        jnp.concatenate([-skew(r), eye], -1),
    ], -2)


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
