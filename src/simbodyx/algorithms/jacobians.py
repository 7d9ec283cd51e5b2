"""Kinematic Jacobians as O(n) operators, all in Ground.

System Jacobian J: u -> V_GB for every body (the velocity recursion with the
Coriolis terms left out), J^T: body spatial forces -> generalized forces
(the inward force sweep). A task frame A fixed on body B with origin at the
station r_B (in B) has V_GA = [w_GB; v_GB + w_GB x r], r = R_GB r_B, so the
frame Jacobian is J's row of B shifted to Ao; the station Jacobian is its
linear half. Bias terms are the same shift of JDot u (accelerations at
udot = 0), plus the centripetal w x (w x r).

A few bodies' rows of J are cheaper written out than swept for
(``body_jacobians``): body B's column for mobility k is H_PB_G[k] shifted
from its body's origin to Bo when that body is B or an ancestor of B, else
zero.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx import tree
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.crba import strict_ancestors
from simbodyx.algorithms.rnea import jacobian_transpose_times, shift_force_to_parent
from simbodyx.spatial.vectors import cross, shift_velocity, spatial_vec


def body_jacobians(topology, position, bodies):
    """(len(bodies), nu, 6): J's rows for ``bodies`` (a static sequence),
    each column a mobility's [w; v] of Bo in G per unit speed; no sweep."""
    bodies, u_body = np.asarray(bodies, np.int32), np.asarray(topology.u_body, np.int32)
    on_path = strict_ancestors(topology)[np.ix_(u_body, bodies)].T | (u_body[None, :] == bodies[:, None])
    p = position.X_GB.p
    r = tree.take_rows(p, bodies)[:, None, :] - tree.take_rows(p, topology.u_body)[None, :, :]
    H = position.H_PB_G
    return shift_velocity(jnp.broadcast_to(H, r.shape[:2] + (6,)), r) * jnp.asarray(on_path, H.dtype)[..., None]


def task_offsets(position, bodies, origins):
    """(nt, 3): each task origin's offset from its body origin, in G."""
    return jnp.einsum("tij,tj->ti", position.X_GB.R[bodies], origins)


def frame_velocities(topology, position, bodies, origins, u):
    """(nt, 6) V_GA of each task frame for generalized speeds u."""
    V = body_accelerations(topology, position, u)[bodies]  # J u: no Coriolis terms
    r = task_offsets(position, bodies, origins)
    return spatial_vec(V[:, :3], V[:, 3:] + cross(V[:, :3], r))


def frame_jacobians(topology, position, bodies, origins):
    """(nt, nu, 6): each task frame's explicit Jacobian, its body's row of J
    shifted to the task origin."""
    r = task_offsets(position, bodies, origins)
    return shift_velocity(body_jacobians(topology, position, bodies), r[:, None, :])


def frame_forces_to_mobilities(topology, position, bodies, origins, F_task):
    """(nu,) J_F^T F for spatial forces (nt, 6) [torque; force] at the task origins."""
    r = task_offsets(position, bodies, origins)
    F_B = shift_force_to_parent(F_task, r)  # moment about Bo: t + r x f
    F = jnp.zeros((topology.num_bodies, 6), F_task.dtype).at[bodies].add(F_B)
    return jacobian_transpose_times(topology, position, F)


def frame_bias(topology, position, velocity, bodies, origins):
    """(nt, 6) JDot_F u: [alpha; a + alpha x r + w x (w x r)] at udot = 0."""
    udot = jnp.zeros(topology.nu, velocity.V_GB.dtype)
    A = body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)[bodies]
    w = velocity.V_GB[bodies, :3]
    r = task_offsets(position, bodies, origins)
    return spatial_vec(A[:, :3], A[:, 3:] + cross(A[:, :3], r) + cross(w, cross(w, r)))
