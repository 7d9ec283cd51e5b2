"""Position and velocity kinematics: X_FM, X_GB, H_FM, H_PB_G, V_FM, V_GB.

Pose chain (spec/conventions.md): X_GB = X_GP X_PF X_FM(q) X_BM^-1.
Velocity (Jain; Simbody's theory manual): V_GB = shift(V_GP, p_PoBo) + V_PB,
with V_PB = H_PB_G u the body's velocity relative to its parent, at Bo, in G.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx import tree
from simbodyx.algorithms.coordinates import multiply_by_n
from simbodyx.algorithms.per_body import parent_offsets
from simbodyx.parameters import Parameters
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, mat_mul, mat_vec, rotate_spatial, shift_velocity, small_sum, spatial_vec
from simbodyx.state import PositionCache, VelocityCache
from simbodyx.topology import Topology


def evaluate_mobilizers(topology: Topology, params: Parameters, q):
    """X_FM for every body (identity for Ground and Welds) and H_FM (nu, 6),
    one vmapped kernel call per kind group."""
    R, p, H = [], [], []
    for group, jp in zip(topology.groups, params.joint_params):
        q_g = tree.take_rows(q, group.q_array)
        R_g, p_g = jax.vmap(group.kind.X_FM)(q_g, jp)
        R.append(R_g)
        p.append(p_g)
        H.append(jax.vmap(group.kind.H_FM)(q_g, jp))
    dtype = q.dtype
    R = topology.from_groups("body", R, jnp.eye(3, dtype=dtype))
    p = topology.from_groups("body", p, jnp.zeros(3, dtype))
    return Transform(R, p), topology.from_groups("u", H, jnp.zeros(6, dtype))


def realize_position(topology: Topology, params: Parameters, q) -> PositionCache:
    with jax.named_scope("realize_position"):
        X_FM, H_FM = evaluate_mobilizers(topology, params, q)
        X_MB = params.X_BM.inverse()
        X_PB = params.X_PF.compose(X_FM).compose(X_MB)
        root = Transform(jnp.eye(3, dtype=q.dtype), jnp.zeros(3, q.dtype))
        X_GB = tree.outward(topology.schedule, Transform.compose, root, X_PB, vectorized=True)
        # H_PB_G = rotate(R_GF, shift(H_FM, p_MoBo in F)).
        R_GF = mat_mul(tree.take_rows(X_GB.R, topology.parent), params.X_PF.R)
        p_MB_F = X_FM.rotate(X_MB.p)
        u_body = topology.u_body
        H_PB_G = rotate_spatial(tree.take_rows(R_GF, u_body), shift_velocity(H_FM, tree.take_rows(p_MB_F, u_body)))
        return PositionCache(X_FM=X_FM, X_GB=X_GB, H_FM=H_FM, H_PB_G=H_PB_G)


def sum_per_body(topology: Topology, rows, u):
    """(nb, 6): sum over each body's mobilities of rows[k] * u[k]."""
    return small_sum(tree.take_rows(rows * u[:, None], topology.body_u_index), 1)


def _hdot_fm_u(topology: Topology, params: Parameters, q, qdot, u):
    """(nb, 6): HDot_FM u per body, in F (exact, by forward-mode AD of H_FM)."""
    HDot = [
        jax.vmap(group.kind.H_FM_dot)(tree.take_rows(q, group.q_array), tree.take_rows(qdot, group.q_array), jp)
        for group, jp in zip(topology.groups, params.joint_params)
    ]
    return sum_per_body(topology, topology.from_groups("u", HDot, jnp.zeros(6, q.dtype)), u)


def realize_velocity(topology: Topology, params: Parameters, position: PositionCache, q, u) -> VelocityCache:
    """V_FM, V_GB, qdot = N(q) u, the mobilizer Coriolis accelerations and the
    gyroscopic forces."""
    with jax.named_scope("realize_velocity"):
        V_FM = sum_per_body(topology, position.H_FM, u)
        V_PB = sum_per_body(topology, position.H_PB_G, u)
        p_PB = parent_offsets(topology, position.X_GB)

        def step(V_GP, inputs):
            r, V_rel = inputs
            return shift_velocity(V_GP, r) + V_rel

        V_GB = tree.outward(topology.schedule, step, jnp.zeros(6, u.dtype), (p_PB, V_PB), vectorized=True)
        qdot = multiply_by_n(topology, q, u)

        # Mobilizer Coriolis acceleration (the udot-free part of A_GB given
        # A_GP = 0), from differentiating V_GB = shift(V_GP, r) + V_PB:
        #   [w_P x w_rel;  w_P x (w_P x r) + 2 w_P x v_rel]
        #   + R_GF [alpha0;  a0 + alpha0 x r_MB + w_FM x (w_FM x r_MB)],
        # with [alpha0; a0] = HDot_FM u and r_MB = p_MoBo, both in F.
        w_P = tree.take_rows(V_GB[:, :3], topology.parent)
        w_rel, v_rel = V_PB[:, :3], V_PB[:, 3:]
        HDu = _hdot_fm_u(topology, params, q, qdot, u)
        r_MB = position.X_FM.rotate(params.X_BM.inverse().p)
        w_FM = V_FM[:, :3]
        alpha0 = HDu[:, :3]
        a_F = HDu[:, 3:] + cross(alpha0, r_MB) + cross(w_FM, cross(w_FM, r_MB))
        R_GF = mat_mul(tree.take_rows(position.X_GB.R, topology.parent), params.X_PF.R)
        coriolis = spatial_vec(cross(w_P, w_rel), cross(w_P, cross(w_P, p_PB)) + 2 * cross(w_P, v_rel))
        coriolis = coriolis + rotate_spatial(R_GF, spatial_vec(alpha0, a_F))

        # Gyroscopic force about Bo in G: [w x (I_Bo w); m w x (w x c)],
        # I_Bo w formed in B as R (I (R^T w)).
        R = position.X_GB.R
        w = V_GB[:, :3]
        c = mat_vec(R, params.com)
        I_w = mat_vec(R, mat_vec(params.inertia, mat_vec(R, w, transpose=True)))
        gyroscopic = spatial_vec(cross(w, I_w), params.mass[:, None] * cross(w, cross(w, c)))
        return VelocityCache(V_FM=V_FM, V_GB=V_GB, qdot=qdot, mobilizer_coriolis=coriolis, gyroscopic=gyroscopic)
