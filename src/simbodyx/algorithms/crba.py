"""The dense mass matrix by the composite-rigid-body method.

One inward sweep forms each body's composite inertia K_B (its whole subtree
welded rigid, about Bo, in G). The force that mobility j (of body b) needs
to accelerate that subtree is F_j = K_b H_j; because every spatial quantity
is in G, moving it to any ancestor a's origin is one shift by
p_AoBo = p_GB - p_GA, with no recursion:

    M[i, j] = H_i . shift(F_j, Bo -> Ao)   for body(i) an ancestor of, or, body(j),

and M[j, i] = M[i, j]; every other entry is zero (Featherstone's CRBA, with
the upward walk replaced by a static ancestor mask). The armature adds to
the diagonal.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx import tree
from simbodyx.algorithms.per_body import parent_offsets, shift_inertia_to_parent, spatial_inertias_in_ground
from simbodyx.spatial.vectors import cross, mat_vec
from simbodyx.topology import Topology


def composite_inertias(topology: Topology, instance, position):
    """(nb, 6, 6): each body and its whole subtree, rigidly welded, about Bo in G."""
    M = spatial_inertias_in_ground(instance, position.X_GB)
    r = parent_offsets(topology, position.X_GB)

    def step(inputs, children):
        M_b, r_b = inputs
        K = M_b + children
        return K, shift_inertia_to_parent(K, r_b)

    return tree.inward(topology.schedule, step, (M, r), jnp.zeros((6, 6), M.dtype), vectorized=True)[0]


def strict_ancestors(topology: Topology):
    """(nb, nb) numpy mask: ``above[a, b]`` when body a is a strict ancestor of body b."""
    nb = topology.num_bodies
    above = np.zeros((nb, nb), bool)
    for b in range(1, nb):
        above[:, b] = above[:, topology.parent[b]]
        above[topology.parent[b], b] = True
    return above


def ancestry(topology: Topology):
    """(nu, nu) numpy masks over mobilities: ``below[i, j]`` when body(j) lies
    strictly below body(i) in the tree, ``same[i, j]`` when they share a body."""
    u_body = np.asarray(topology.u_body, np.int32)
    return strict_ancestors(topology)[np.ix_(u_body, u_body)], u_body[:, None] == u_body[None, :]


def mass_matrix(topology: Topology, instance, position):
    """M (nu, nu), O(n^2) (the size of M): composite inertias, then one shift
    and one projection per nonzero entry."""
    K = composite_inertias(topology, instance, position)
    u_body, H = topology.u_body, position.H_PB_G
    F = mat_vec(tree.take_rows(K, u_body), H)  # (nu, 6) at each mobility's Bo
    p = tree.take_rows(position.X_GB.p, u_body)
    d = p[None, :, :] - p[:, None, :]  # (i, j): p_GBj - p_GBi
    torque = F[None, :, :3] + cross(d, F[None, :, 3:])
    full = jnp.sum(H[:, None, :3] * torque, -1) + jnp.sum(H[:, None, 3:] * F[None, :, 3:], -1)
    below, same = ancestry(topology)
    upper = jnp.where(below, full, 0)
    M = upper + upper.T + jnp.where(same, (full + full.T) / 2, 0)  # exactly symmetric
    return M if instance.armature is None else M + jnp.diag(instance.armature)
