"""Forward kinematics against Pinocchio (an independent C++ engine) on random
trees of Pin, Slider, Ball and Free joints, float64, to 1e-12.

Mapping: Pinocchio's joint placement is relative to the parent *joint*
frame (our parent's M), so it is X_BM(parent)^-1 X_PF; our body frame B is a
Pinocchio frame at X_MB = X_BM^-1 on the joint. Pinocchio's quaternions are
[x, y, z, w]; its Ball and free-flyer velocities are expressed in the child
(M) frame, ours in F; spatial vectors are [linear; angular] there.
"""

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
