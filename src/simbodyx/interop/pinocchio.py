"""The same tree as a Pinocchio model (``pip install pin``).

Supported joints: Pin (RZ), Slider (PX), Ball (spherical), Free (free-flyer).
Pinocchio's joint placement is relative to the parent *joint* frame (our
parent's M), so it is X_BM(parent)^-1 X_PF; body B is a Pinocchio frame at
X_MB = X_BM^-1 on its joint. Its quaternions are [x, y, z, w]; its Ball and
free-flyer velocities are expressed in the child (M) frame (ours in F), and
its spatial vectors are [linear; angular].

Ball and Weld constraints map to Pinocchio's 3-D and 6-D rigid constraints
(``rigid_constraints``) for ``pin.constraintDynamics``; on States where the
constraints hold at position and velocity level both engines solve the same
acceleration-level equations.
"""

from __future__ import annotations

import numpy as np

from simbodyx.stage import Stage

JOINTS = {"Pin": "JointModelRZ", "Slider": "JointModelPX", "Ball": "JointModelSpherical", "Free": "JointModelFreeFlyer"}


def _se3(pin, X):
    return pin.SE3(np.asarray(X.R, dtype=float), np.asarray(X.p, dtype=float))


def to_pinocchio(matter, gravity=(0.0, -9.81, 0.0)):
    """(pinocchio.Model, {body index: frame id of B}) for a built matter
    subsystem, its armature included."""
    import pinocchio as pin

    model = pin.Model()
    model.gravity = pin.Motion(np.asarray(gravity, dtype=float), np.zeros(3))
    frames, armature = {}, []
    for i in range(1, matter.get_num_bodies()):
        b = matter.get_mobilized_body(i)
        kind = type(b).__name__
        if kind not in JOINTS:
            raise ValueError(f"{b._label}: no Pinocchio joint for {kind}; supported: {sorted(JOINTS)}")
        if b.is_reversed():
            raise ValueError(f"{b._label}: no Pinocchio joint for a reversed {kind}")
        parent = b.parent
        placement = b.get_default_inboard_frame()
        if not parent.is_ground():
            placement = parent.get_default_outboard_frame().inverse() @ placement
        jid = model.addJoint(parent.index, getattr(pin, JOINTS[kind])(), _se3(pin, placement), b.name)
        mp = b.get_default_mass_properties()
        X_MB = b.get_default_outboard_frame().inverse()
        R_MB = np.asarray(X_MB.R)
        I_c = R_MB @ np.asarray(mp.calc_central_inertia().matrix) @ R_MB.T
        model.appendBodyToJoint(jid, pin.Inertia(float(mp.mass), np.asarray(X_MB @ mp.com), I_c), pin.SE3.Identity())
        frames[i] = model.addFrame(pin.Frame(b.name + "_B", jid, _se3(pin, X_MB), pin.FrameType.OP_FRAME))
        armature.extend(_armature(b, kind))
    model.armature = np.array(armature)
    return model, frames


def _armature(b, kind):
    """Pinocchio's armature of one joint (its v order). A Ball's or Free's
    angular velocity is ours rotated, so equal values on its three axes map;
    a Free's linear velocity is Pinocchio's in the moving M frame (its rate
    carries w x v), so only zero maps there."""
    a = b.get_armature()
    if kind in ("Pin", "Slider"):
        return a
    if np.ptp(a[:3]) != 0 or (kind == "Free" and np.any(a[3:] != 0)):
        raise ValueError(f"{b._label}: no Pinocchio armature for {a.tolist()} (a Ball's or Free's "
                         f"three rotations need equal values, a Free's translations none)")
    return a if kind == "Ball" else np.concatenate([a[3:], a[:3]])


def velocity_map(matter, state):
    """T (nu, nu) with v_pinocchio = T u: Ball and Free blocks re-express in M
    and Free's [w; v] becomes [v; w]."""
    nu = state.u.shape[0]
    T = np.zeros((nu, nu))
    for i in range(1, matter.get_num_bodies()):
        b = matter.get_mobilized_body(i)
        k, kind = b.get_first_u_index(state), type(b).__name__
        R_MF = np.asarray(state.position.X_FM.R[i]).T
        if kind in ("Pin", "Slider"):
            T[k, k] = 1
        elif kind == "Ball":
            T[k:k + 3, k:k + 3] = R_MF
        else:
            T[k:k + 3, k + 3:k + 6] = R_MF
            T[k + 3:k + 6, k:k + 3] = R_MF
    return T


def configuration(matter, state):
    """(q, v) for Pinocchio from a State realized to Position (quaternions normalized)."""
    q = []
    for i in range(1, matter.get_num_bodies()):
        b = matter.get_mobilized_body(i)
        qb = np.asarray(b.get_q_as_vector(state), dtype=float)
        kind = type(b).__name__
        if kind == "Ball":
            quat = qb / np.linalg.norm(qb)
            qb = np.array([*quat[1:], quat[0]])
        elif kind == "Free":
            quat = qb[:4] / np.linalg.norm(qb[:4])
            qb = np.array([*qb[4:], *quat[1:], quat[0]])
        q.extend(qb)
    return np.array(q), velocity_map(matter, state) @ np.asarray(state.u, dtype=float)


def state_from(model, matter, state, q, v):
    """The State (realized to Position) whose :func:`configuration` is
    Pinocchio's (q, v): the inverse map, for States that come from
    Pinocchio (its quaternions [x, y, z, w] reordered, its velocities
    mapped back by the inverse of :func:`velocity_map`)."""
    q, ours, k = np.asarray(q, dtype=float), [], 0
    for i in range(1, matter.get_num_bodies()):
        b = matter.get_mobilized_body(i)
        kind, n = type(b).__name__, b.get_num_q(state)
        qb = q[k:k + n]
        k += n
        if kind == "Ball":
            qb = qb[[3, 0, 1, 2]]
        elif kind == "Free":
            qb = qb[[6, 3, 4, 5, 0, 1, 2]]
        ours.extend(qb)
    placed = model.realize(state.with_q(np.array(ours)), Stage.Position)
    return placed.with_u(np.linalg.solve(velocity_map(matter, placed), np.asarray(v, dtype=float)))


def rigid_constraints(pmodel, matter, constraints=None):
    """(StdVec_RigidConstraintModel, StdVec_RigidConstraintData) for
    ``pin.initConstraintDynamics`` and ``pin.constraintDynamics``: a CONTACT_3D
    per Ball and a CONTACT_6D per Weld, in the LOCAL frame of the first body's
    station or frame.
    ``constraints`` are the Model's (``model.params.constraints``, whose
    numbers may differ from the handles'); default the handles'."""
    import pinocchio as pin

    from simbodyx.interop import loop_frames

    if constraints is None:
        constraints = [matter.get_constraint(i) for i in range(matter.get_num_constraints())]
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for kind, ((b1, X1), (b2, X2)) in loop_frames(matter, constraints, "Pinocchio rigid constraint"):
        contact = pin.ContactType.CONTACT_6D if kind == "Weld" else pin.ContactType.CONTACT_3D
        cm = pin.RigidConstraintModel(contact, pmodel, b1.index, _se3(pin, X1), b2.index, _se3(pin, X2),
                                      pin.ReferenceFrame.LOCAL)
        models.append(cm)
        datas.append(cm.createData())
    return models, datas
