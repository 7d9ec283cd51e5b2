"""Mobilizer reaction forces: the spatial force the mobilizer applies to its
child body at Mo, in G, mobility forces included (SD/FAST convention).

Two independent methods:
- articulated (O(n), Jain 2011 Eq. 7.34): the force across B's inboard joint
  is F = P_B A_B + z_B from the articulated-body quantities;
- free body: tip to base, F_B = M_B A_B + b_B - F_applied_B plus the
  reactions of B's children moved to Bo (Newton's third law).
Ground's entry continues the recursion: the sum of its children's
reactions moved to the Ground origin (the reaction of an imagined weld).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx import tree
from simbodyx.algorithms.aba import ForwardInputs, articulate_with_locks
from simbodyx.algorithms.rnea import body_inertial_forces, shift_force_to_parent, subtree_forces
from simbodyx.spatial.vectors import mat_vec, shift_force


def _to_Mo(topology, instance, position, F_Bo):
    """Move forces at Bo to Mo and set Ground's entry."""
    p_BoMo_G = position.X_GB.rotate(instance.X_BM.p)
    F_Mo = shift_force(F_Bo, p_BoMo_G)
    base = np.asarray([b for b in range(1, topology.num_bodies) if topology.parent[b] == 0], dtype=np.int32)
    at_ground = jnp.sum(shift_force_to_parent(F_Bo[base], position.X_GB.p[base]), axis=0)
    return F_Mo.at[0].set(at_ground)


def reactions_articulated(topology, x: ForwardInputs, A_GB):
    """P A + z per body (locked joints rigid, as in forward dynamics), moved
    to Mo, for forward dynamics' inputs ``x`` and its body accelerations A_GB."""
    art = articulate_with_locks(topology, x)
    schedule, zero = topology.schedule, jnp.zeros(6, A_GB.dtype)
    P = tree.from_levels(schedule, art.P, jnp.zeros((6, 6), A_GB.dtype))
    F = mat_vec(P, A_GB) + tree.from_levels(schedule, art.z, zero)
    return _to_Mo(topology, x.instance, x.position, F)


def reactions_free_body(topology, instance, position, velocity, body_forces, A_GB):
    F_own = body_inertial_forces(instance, position, A_GB, velocity.gyroscopic) - body_forces
    F, _ = subtree_forces(topology, position, F_own)
    return _to_Mo(topology, instance, position, F)
