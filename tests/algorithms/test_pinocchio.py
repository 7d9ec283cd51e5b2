"""Forward kinematics against Pinocchio (an independent C++ engine) on random
trees of Pin, Slider, Ball and Free joints, float64, to 1e-12.

Mapping: Pinocchio's joint placement is relative to the parent *joint*
frame (our parent's M), so it is X_BM(parent)^-1 X_PF; our body frame B is a
Pinocchio frame at X_MB = X_BM^-1 on the joint. Pinocchio's quaternions are
[x, y, z, w]; its Ball and free-flyer velocities are expressed in the child
(M) frame, ours in F; spatial vectors are [linear; angular] there.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_state, random_tree

import simbodyx as sx

pin = pytest.importorskip("pinocchio")

KINDS = ("Pin", "Slider", "Ball", "Free")


def se3(X):
    return pin.SE3(np.asarray(X.R), np.asarray(X.p))


def pinocchio_model(bodies):
    model = pin.Model()
    frames = {}
    for b in bodies[1:]:
        kind = type(b).__name__
        joint = {"Pin": pin.JointModelRZ, "Slider": pin.JointModelPX,
                 "Ball": pin.JointModelSpherical, "Free": pin.JointModelFreeFlyer}[kind]()
        X_PF = b.get_default_inboard_frame()
        parent = b.parent
        placement = X_PF if parent.is_ground() else parent.get_default_outboard_frame().inverse() @ X_PF
        jid = model.addJoint(parent.index, joint, se3(placement), b.name)
        assert jid == b.index
        # Body inertia in the joint frame M: mass center X_MB com, central inertia rotated by R_MB.
        mp = b.get_default_mass_properties()
        X_MB = b.get_default_outboard_frame().inverse()
        R_MB = np.asarray(X_MB.R)
        I_c = R_MB @ np.asarray(mp.calc_central_inertia().matrix) @ R_MB.T
        model.appendBodyToJoint(jid, pin.Inertia(float(mp.mass), np.asarray(X_MB @ mp.com), I_c), pin.SE3.Identity())
        frame = pin.Frame(b.name + "_B", jid, se3(b.get_default_outboard_frame().inverse()), pin.FrameType.OP_FRAME)
        frames[b.index] = model.addFrame(frame)
    return model, frames


def pinocchio_q_v(bodies, state, X_FM):
    q, v = [], []
    for b in bodies[1:]:
        qb = np.asarray(b.get_q_as_vector(state))
        ub = np.asarray(b.get_u_as_vector(state))
        R_MF = np.asarray(X_FM.R[b.index]).T
        kind = type(b).__name__
        if kind in ("Pin", "Slider"):
            q += list(qb)
            v += list(ub)
        elif kind == "Ball":
            quat = qb / np.linalg.norm(qb)
            q += [*quat[1:], quat[0]]
            v += list(R_MF @ ub)
        else:
            quat = qb[:4] / np.linalg.norm(qb[:4])
            q += [*qb[4:], *quat[1:], quat[0]]
            v += [*(R_MF @ ub[3:]), *(R_MF @ ub[:3])]
    return np.array(q), np.array(v)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_kinematics_matches_pinocchio(seed):
    rng = np.random.default_rng(seed)
    kinds = tuple(rng.choice(KINDS, size=12))
    system, matter, bodies = random_tree(kinds, seed=seed)
    model, _ = system.realize_topology()
    state = model.realize(random_state(model, seed=seed), sx.Stage.Velocity)

    pmodel, frames = pinocchio_model(bodies)
    pdata = pmodel.createData()
    q, v = pinocchio_q_v(bodies, state, state.position.X_FM)
    pin.forwardKinematics(pmodel, pdata, q, v)
    pin.updateFramePlacements(pmodel, pdata)
    for b in bodies[1:]:
        fid = frames[b.index]
        X = b.get_body_transform(state)
        np.testing.assert_allclose(X.R, pdata.oMf[fid].rotation, atol=1e-12)
        np.testing.assert_allclose(X.p, pdata.oMf[fid].translation, atol=1e-12)
        V = pin.getFrameVelocity(pmodel, pdata, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        np.testing.assert_allclose(b.get_body_angular_velocity(state), V.angular, atol=1e-12)
        np.testing.assert_allclose(b.get_body_origin_velocity(state), V.linear, atol=1e-12)


def velocity_map(bodies, state):
    """T with v_pin = T u (block diagonal; Ball/Free blocks re-express in M and
    reorder Free's [w; v] to Pinocchio's [v; w])."""
    nu = state.u.shape[0]
    T = np.zeros((nu, nu))
    for b in bodies[1:]:
        i, n = b.first_u_index, b.num_u
        R_MF = np.asarray(state.position.X_FM.R[b.index]).T
        kind = type(b).__name__
        if kind in ("Pin", "Slider"):
            T[i, i] = 1
        elif kind == "Ball":
            T[i:i + 3, i:i + 3] = R_MF
        else:
            T[i:i + 3, i + 3:i + 6] = R_MF
            T[i + 3:i + 6, i:i + 3] = R_MF
    return T


@pytest.mark.parametrize("seed", [3, 4])
def test_dynamics_matches_pinocchio(seed):
    from conftest import with_forces

    rng = np.random.default_rng(seed)
    kinds = tuple(rng.choice(KINDS, size=10))
    system, matter, forces, bodies = with_forces(kinds, seed=seed, depth_first=True)
    model, _ = system.realize_topology()
    state = model.matter.normalize_quaternions(random_state(model, seed=seed))
    state = model.realize(state, sx.Stage.Acceleration)

    pmodel, _ = pinocchio_model(bodies)
    pmodel.gravity = pin.Motion(np.array([0, -9.81, 0]), np.zeros(3))
    pdata = pmodel.createData()
    q, v = pinocchio_q_v(bodies, state, state.position.X_FM)
    T = velocity_map(bodies, state)
    np.testing.assert_allclose(T @ np.asarray(state.u), v, atol=1e-14)

    # Mass matrix: M = T^T M_pin T (Pinocchio fills the upper triangle).
    M_pin = pin.crba(pmodel, pdata, q)
    M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
    M = np.asarray(model.matter.calc_m(state))
    np.testing.assert_allclose(M, T.T @ M_pin @ T, rtol=1e-9, atol=1e-9 * np.abs(M).max())

    # Forward dynamics: Pinocchio's a for a Free joint is d/dt of the local
    # velocity, so a_pin = T udot + dT/dt u, with dT/dt u = [0; -R_MF (w_F x v_F)] per Free.
    udot = np.asarray(state.acceleration.udot)
    a_pin = pin.aba(pmodel, pdata, q, v, np.zeros(pmodel.nv))
    a_ours = T @ udot
    for b in bodies[1:]:
        if type(b).__name__ == "Free":
            i = b.first_u_index
            R_MF = np.asarray(state.position.X_FM.R[b.index]).T
            w, vel = np.asarray(state.u[i:i + 3]), np.asarray(state.u[i + 3:i + 6])
            a_ours[i:i + 3] -= R_MF @ np.cross(w, vel)
    np.testing.assert_allclose(a_ours, a_pin, rtol=1e-9, atol=1e-9 * np.abs(a_pin).max())

    # Inverse dynamics of a random acceleration: f_ours = T^T tau_pin.
    udot2 = rng.normal(size=model.topology.nu)
    a2 = T @ udot2 + (a_ours - T @ udot)
    tau = pin.rnea(pmodel, pdata, q, v, a2)
    f = model.matter.calc_residual_force_ignoring_constraints(
        state, None, state.dynamics.body_forces, jnp.asarray(udot2))
    np.testing.assert_allclose(f, T.T @ tau, rtol=1e-9, atol=1e-9 * np.abs(tau).max())


@pytest.mark.parametrize("seed", [5, 6])
def test_frame_and_station_jacobians_match_pinocchio(seed):
    rng = np.random.default_rng(seed)
    kinds = tuple(rng.choice(KINDS, size=10))
    system, matter, bodies = random_tree(kinds, seed=seed)
    model, _ = system.realize_topology()
    state = model.realize(model.matter.normalize_quaternions(random_state(model, seed=seed)), sx.Stage.Position)
    pmodel, _ = pinocchio_model(bodies)
    task_bodies = [int(b) for b in rng.integers(1, len(bodies), size=4)]
    stations = rng.normal(size=(4, 3))
    fids = []
    for b, p in zip(task_bodies, stations):
        placement = bodies[b].get_default_outboard_frame().inverse() @ sx.Transform(p)
        fids.append(pmodel.addFrame(pin.Frame(f"task{len(fids)}", b, se3(placement), pin.FrameType.OP_FRAME)))
    pdata = pmodel.createData()
    q, _ = pinocchio_q_v(bodies, state, state.position.X_FM)
    pin.computeJointJacobians(pmodel, pdata, q)
    pin.updateFramePlacements(pmodel, pdata)
    T = velocity_map(bodies, state)
    JF = np.asarray(model.matter.calc_frame_jacobian(state, task_bodies, stations))
    JS = np.asarray(model.matter.calc_station_jacobian(state, task_bodies, stations))
    for t, fid in enumerate(fids):
        J_pin = pin.getFrameJacobian(pmodel, pdata, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        expected = np.vstack([J_pin[3:], J_pin[:3]]) @ T  # [angular; linear], per our u
        np.testing.assert_allclose(JF[6 * t:6 * t + 6], expected, atol=1e-12)
        np.testing.assert_allclose(JS[3 * t:3 * t + 3], expected[3:], atol=1e-12)
