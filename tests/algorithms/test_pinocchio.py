"""Against Pinocchio (an independent C++ engine) on random trees of Pin,
Slider, Ball and Free joints, float64: forward kinematics and frame/station
Jacobians to 1e-12; mass matrix, forward and inverse dynamics (with and
without armature) to 1e-9 relative. The model and state mapping is simbodyx.interop.pinocchio."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_state, random_tree, with_forces

import simbodyx as sx

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.smoke
from simbodyx.interop.pinocchio import configuration, to_pinocchio, velocity_map  # noqa: E402

KINDS = ("Pin", "Slider", "Ball", "Free")


def random_kinds(seed, n=12):
    return tuple(str(k) for k in np.random.default_rng(seed).choice(KINDS, size=n))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forward_kinematics_matches_pinocchio(seed):
    system, matter, bodies = random_tree(random_kinds(seed), seed=seed)
    model, _ = system.realize_topology()
    state = model.realize(random_state(model, seed=seed), sx.Stage.Velocity)
    pmodel, frames = to_pinocchio(matter)
    pdata = pmodel.createData()
    q, v = configuration(matter, state)
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


def set_random_armature(bodies, rng):
    """Armature on every mobility Pinocchio's can match: Ball and Free
    rotations equal per axis, Free translations none (interop.pinocchio)."""
    for b in bodies[1:]:
        a = rng.uniform(0.05, 0.5)
        b.set_armature({"Ball": [a] * 3, "Free": [a] * 3 + [0.0] * 3}.get(type(b).__name__, [a]))


@pytest.mark.parametrize("seed, armature", [(3, False), (4, True)])
def test_dynamics_matches_pinocchio(seed, armature):
    """seed 4 with armature on every joint: M + diag(armature) in all three."""
    rng = np.random.default_rng(seed)
    system, matter, forces, bodies = with_forces(random_kinds(seed, 10), seed=seed, depth_first=True)
    if armature:
        set_random_armature(bodies, rng)
    model, _ = system.realize_topology()
    state = model.matter.normalize_quaternions(random_state(model, seed=seed))
    state = model.realize(state, sx.Stage.Acceleration)
    pmodel, _ = to_pinocchio(matter)
    pdata = pmodel.createData()
    q, v = configuration(matter, state)
    T = velocity_map(matter, state)

    # Mass matrix: M = T^T M_pin T (Pinocchio fills the upper triangle).
    M_pin = pin.crba(pmodel, pdata, q)
    M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
    M = np.asarray(model.matter.calc_m(state))
    np.testing.assert_allclose(M, T.T @ M_pin @ T, rtol=1e-9, atol=1e-9 * np.abs(M).max())

    # Forward dynamics: Pinocchio's a for a Free joint is d/dt of the local
    # velocity, so a_pin = T udot + dT/dt u, with dT/dt u = [-R_MF (w_F x v_F); 0] per Free.
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
    tau = pin.rnea(pmodel, pdata, q, v, T @ udot2 + (a_ours - T @ udot))
    f = model.matter.calc_residual_force_ignoring_constraints(state, None, state.dynamics.body_forces, jnp.asarray(udot2))
    np.testing.assert_allclose(f, T.T @ tau, rtol=1e-9, atol=1e-9 * np.abs(tau).max())


@pytest.mark.parametrize("seed", [5, 6])
def test_frame_and_station_jacobians_match_pinocchio(seed):
    rng = np.random.default_rng(seed)
    system, matter, bodies = random_tree(random_kinds(seed, 10), seed=seed)
    model, _ = system.realize_topology()
    state = model.realize(model.matter.normalize_quaternions(random_state(model, seed=seed)), sx.Stage.Position)
    pmodel, _ = to_pinocchio(matter)
    task_bodies = [int(b) for b in rng.integers(1, len(bodies), size=4)]
    stations = rng.normal(size=(4, 3))
    fids = []
    for b, p in zip(task_bodies, stations):
        X = bodies[b].get_default_outboard_frame().inverse() @ sx.Transform(p)
        placement = pin.SE3(np.asarray(X.R), np.asarray(X.p))
        fids.append(pmodel.addFrame(pin.Frame(f"task{len(fids)}", b, placement, pin.FrameType.OP_FRAME)))
    pdata = pmodel.createData()
    q, _ = configuration(matter, state)
    pin.computeJointJacobians(pmodel, pdata, q)
    pin.updateFramePlacements(pmodel, pdata)
    T = velocity_map(matter, state)
    JF = np.asarray(model.matter.calc_frame_jacobian(state, task_bodies, stations))
    JS = np.asarray(model.matter.calc_station_jacobian(state, task_bodies, stations))
    for t, fid in enumerate(fids):
        J_pin = pin.getFrameJacobian(pmodel, pdata, fid, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        expected = np.vstack([J_pin[3:], J_pin[:3]]) @ T  # [angular; linear], per our u
        np.testing.assert_allclose(JF[6 * t:6 * t + 6], expected, atol=1e-12)
        np.testing.assert_allclose(JS[3 * t:3 * t + 3], expected[3:], atol=1e-12)


def test_unsupported_joint_is_named():
    system, matter, bodies = random_tree(("Pin", "Gimbal"), seed=1)
    with pytest.raises(ValueError, match="Gimbal.*no Pinocchio joint"):
        to_pinocchio(matter)
