"""The tangent of the inverse-dynamics residual with respect to q and u, by
rigid-body twists (the derivative rule of forward dynamics uses it).

f(q, u) = M udot + f_inertial - T - J^T F at fixed udot, T and F (each F_k
[torque; force] at Bo, in G, its direction fixed in G). Every spatial
quantity here is in G about the Ground origin O (Featherstone's
world-origin form), where a body's motion vectors add along the tree with
no shifts. A change of q moves each body's subtree rigidly: joint b's own
change is the twist theta_b = Ad_{X_GF}(dX_FM X_FM^-1), and body k's total
twist is Theta_k = sum of theta over its ancestors and itself. Quantities
fixed to a body's frame then change by Theta x (motion), Theta x* (force),
Theta x* I - I Theta x (inertia), plus each joint's own local change,
computed per joint by forward-mode AD of X_FM, H_FM and N:

  dSu_k = Theta_P x S_k u_k + sigma_k,   dv_k = dv_P + dSu_k
  dgamma_k = Theta_P x gamma_k + rho_k   (gamma_k = S_k udot_k + S'_k u_k - v_P x S_k u_k)
  da_k = da_P + dgamma_k + dv_P x S_k u_k + v_P x dSu_k
  df_k = Theta_k x* f_k + [Theta_w x F_k] + I_k e_a + e_v x* I_k v_k + v_k x* I_k e_v,
         e_v = dv_k - Theta_k x v_k,  e_a = da_k - Theta_k x a_k
  dtau_b = S_b^T (dfC_b - Theta_P x* fC_b) + (dS_b local)^T fC_b

with f_k = I_k a_k + v_k x* I_k v_k - F_k, fC_b its subtree sums, a the
spatial (not classical) acceleration, [Theta_w x F_k] the force F_k with
both halves turned by Theta_w, moved to O. The tangent state per body is
three 6-vectors (Theta, dv, da), not the derivatives of rotation matrices
and of every cached quantity that differentiating the kinematics carries;
reverse mode transposes these few add-only sweeps instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx import tree
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.per_body import spatial_inertias_in_ground
from simbodyx.algorithms.rnea import body_inertial_forces
from simbodyx.spatial.rotation import vee
from simbodyx.spatial.vectors import (
    cross,
    force_cross,
    mat_mul,
    mat_vec,
    motion_cross,
    shift_force,
    shift_velocity,
    spatial_vec,
)
from simbodyx.topology import Topology


def _adjoint(R, p, m):
    """A motion [w; v] about a frame's origin in that frame, re-expressed in G
    about O, the frame being (R, p) in G."""
    w = mat_vec(R, m[..., :3])
    return spatial_vec(w, mat_vec(R, m[..., 3:]) + cross(p, w))


def _coadjoint(R, p, f):
    """A force [t; f] about O in G, re-expressed about the frame (R, p)'s origin in that frame."""
    return spatial_vec(mat_vec(R, f[..., :3] - cross(p, f[..., 3:]), transpose=True),
                       mat_vec(R, f[..., 3:], transpose=True))


def _joint_tangents(kind, q, u, udot, q_dot, u_dot, fC_F, params):
    """One joint's local changes, in F about Fo: (theta, sigma, rho, dS^T fC).
    h(q) is H_FM about Fo; sigma = d(h u), rho = d(gamma_F) with gamma_F =
    h udot + hdot u (hdot along qdot = N u); dS^T fC (nu,) pairs d(h) with the
    subtree force fC_F about Fo in F."""

    def pose_and_h(q):
        X_FM = kind.X_FM(q, params)
        return X_FM, shift_velocity(kind.H_FM(q, params), -X_FM[1])

    def local(q, u):  # X_FM, h u, gamma_F and h fC_F, differentiated together below
        (X_FM, H), (_, h_dot) = jax.jvp(pose_and_h, (q,), (mat_vec(kind.N(q), u),))
        gamma = mat_vec(H, udot, transpose=True) + mat_vec(h_dot, u, transpose=True)
        return X_FM, mat_vec(H, u, transpose=True), gamma, mat_vec(H, fC_F)

    ((R, p), *_), ((R_dot, p_dot), sigma, rho, dS_fC) = jax.jvp(local, (q, u), (q_dot, u_dot))
    theta = shift_velocity(spatial_vec(vee(mat_mul(R_dot, R, transpose_b=True)), p_dot), -p)  # Mo's twist, at Fo
    return theta, sigma, rho, dS_fC


#: The twist form pays off on bushy trees; along unrolled chain segments of
#: more levels its transposed per-level slices cost more than differentiating
#: the caches, and JAX cannot transpose it through a scanned segment inside
#: the derivative rule (docs/explanation/performance.md).
MAX_SEGMENT_LEVELS = 2


def applies(topology: Topology) -> bool:
    """Whether forward dynamics' derivative rule uses the twist form for ``topology``."""
    return all(segment.length <= MAX_SEGMENT_LEVELS for segment in topology.schedule.segments)


def residual_tangent(topology: Topology, x, udot, dx):
    """df (nu,) of the residual M udot + f_inertial - T - J^T F at the
    forward-dynamics inputs ``x`` (an ``aba.ForwardInputs``) and the given
    udot, for the tangents ``dx.q`` (nq,), ``dx.u`` (nu,),
    ``dx.mobility_forces`` (nu,) and ``dx.body_forces`` (nb, 6) (dense
    arrays; the other fields of ``dx`` are not read)."""
    params, position, velocity, q, u, body_forces = x.instance, x.position, x.velocity, x.q, x.u, x.body_forces
    q_dot, u_dot, mobility_forces_dot, body_forces_dot = dx.q, dx.u, dx.mobility_forces, dx.body_forces
    parent = topology.parent
    X_GB = position.X_GB
    p = X_GB.p
    M = spatial_inertias_in_ground(params, X_GB)  # about Bo

    def at(rows, index):
        return tree.take_rows(rows, index)

    # Primal values about O.
    V, A = velocity.V_GB, body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)
    w = V[:, :3]
    v = shift_velocity(V, -p)
    a = spatial_vec(A[:, :3], A[:, 3:] - cross(w, V[:, 3:]) - cross(A[:, :3], p))  # spatial acceleration
    f_own = shift_force(body_inertial_forces(params, position, A, velocity.gyroscopic) - body_forces, -p)  # about O
    fC = tree.inward(topology.schedule, lambda own, children: (own + children,) * 2, f_own,
                     jnp.zeros(6, q.dtype), vectorized=True)[0]
    v_P, a_P = at(v, parent), at(a, parent)
    Su = v - v_P
    gamma = a - a_P - motion_cross(v_P, Su)

    # Each joint's local changes, per kind group, in G about O.
    with jax.named_scope("joint_local_tangents"):  # names in the HLO, for benchmarks/profile_kernels.py
        R_GF = mat_mul(at(X_GB.R, parent), params.X_PF.R)
        p_GF = at(p, parent) + mat_vec(at(X_GB.R, parent), params.X_PF.p)
        local, dS_fC = ([], [], []), []
        for group, jp in zip(topology.groups, params.joint_params):
            b = group.body_array
            R_g, p_g = at(R_GF, b), at(p_GF, b)
            out = jax.vmap(lambda *x, kind=group.kind: _joint_tangents(kind, *x))(
                at(q, group.q_array), at(u, group.u_array), at(udot, group.u_array),
                at(q_dot, group.q_array), at(u_dot, group.u_array), _coadjoint(R_g, p_g, at(fC, b)), jp)
            for rows, m in zip(local, out[:3]):
                rows.append(_adjoint(R_g, p_g, m))
            dS_fC.append(out[3])
    local = tuple(  # straight from the groups to the level layout, one gather per segment
        tuple(topology.from_groups("body", rows, jnp.zeros(6, q.dtype), segment.bodies) for rows in local)
        for segment in topology.schedule.segments)

    # The tangent sweeps, in the tree's level layout: the tangents are
    # converted once in and once out (their transposes cost most), and each
    # body's parent values come from the sweep, not from gathers.
    schedule = topology.schedule

    def outward_step(parent_values, inputs):
        Theta_P, dv_P, da_P = parent_values
        (theta, sigma, rho), Su, gamma, v_P, v, a, f_own, F, F_dot, M, p = inputs
        Theta = Theta_P + theta
        dSu = motion_cross(Theta_P, Su) + sigma
        dv = dv_P + dSu
        da = da_P + motion_cross(Theta_P, gamma) + rho + motion_cross(dv_P, Su) + motion_cross(v_P, dSu)
        e_v = dv - motion_cross(Theta, v)
        e_a = da - motion_cross(Theta, a)
        w = Theta[..., :3]
        turned_F = spatial_vec(cross(w, F[..., :3]), cross(w, F[..., 3:]))

        def inertia(x):  # I_k x about O for a motion x about O
            return shift_force(mat_vec(M, shift_velocity(x, p)), -p)

        df = (force_cross(Theta, f_own) + shift_force(turned_F - F_dot, -p) + inertia(e_a)
              + force_cross(e_v, inertia(v)) + force_cross(v, inertia(e_v)))
        return (Theta, dv, da), (df, Theta_P)

    def inward_step(inputs, children):
        (df, Theta_P), (fC, p), H = inputs
        dfC = df + children
        return mat_vec(H, shift_force(dfC - force_cross(Theta_P, fC), p)), dfC  # about Bo: H is H_PB_G

    zero = jnp.zeros(6, q.dtype)
    with jax.named_scope("tangent_sweeps"):
        inputs = tree.to_levels(schedule, (Su, gamma, v_P, v, a, f_own, body_forces, body_forces_dot, M, p))
        inputs = tuple((local_l,) + inputs_l for local_l, inputs_l in zip(local, inputs))
        _, per_body = tree.outward_levels(schedule, outward_step, (zero, zero, zero), inputs, vectorized=True)
        levels = zip(per_body, tree.to_levels(schedule, (fC, p)),
                     tree.mobilities_to_levels(schedule, position.H_PB_G))
        rigid, _ = tree.inward_levels(schedule, inward_step, tuple(levels), zero, vectorized=True)
        rigid = tree.mobilities_from_levels(schedule, rigid, jnp.zeros(0, q.dtype))
    return rigid + topology.from_groups("u", dS_fC, jnp.zeros((), q.dtype)) - mobility_forces_dot
