"""MJCF into the Simbody-style builder: ``load_mjcf``, through MuJoCo's own
compiler (``pip install mujoco``), so defaults, includes, frames and
inertias from geoms are resolved by the reference implementation and
simbodyx reads the compiled ``MjModel``.

MuJoCo moves a body by its joints in order, each about or along an axis
through an anchor, both fixed in the body: B = P X_PB0 J_1(q_1) J_2(q_2) ...
with J(q) = T(p) Rot(a, q - ref) T(-p). One joint maps to one mobilizer
(hinge: Pin, slide: Slider, ball: Ball, free: Free), the anchor and the
rotation R taking the mobilizer's own axis onto a carried by the frames:
X_PF = X_PB0 T(p) R and X_BM = T(p) R Rz(ref) (a slide: Tx(ref)), exactly.
A body with several joints becomes a chain of mobilizers through massless
bodies, the last carrying its mass. A body with no joint is welded: merged
into its parent's mass properties (``merge_fixed``) or a Weld.
"""

from __future__ import annotations

import dataclasses
import pathlib
import warnings

import jax.numpy as jnp
import numpy as np

from simbodyx import functions
from simbodyx.builder import (
    Body,
    GeneralContactSubsystem,
    GeneralForceSubsystem,
    HuntCrossleyForce,
    MobilizedBody,
    MultibodySystem,
    SimbodyMatterSubsystem,
)
from simbodyx.constraints import Constraint
from simbodyx.contact import ContactGeometry
from simbodyx.contact.detection import KERNELS, VERTEX_KERNELS
from simbodyx.forces import Force
from simbodyx.io.mjcf_soft import soft_constraint_stepper
from simbodyx.io.robot import (
    RIGID,
    Geometry,
    Robot,
    aligning,
    combined_mass_properties,
    pose,
    rotation_about,
    transform,
)
from simbodyx.spatial import MassProperties, Transform, safe_norm
from simbodyx.spatial.rotation import matrix_to_rotation_vector, quaternion_to_matrix

#: MuJoCo joint type (mjtJoint) -> (mobilizer, its own axis or None)
MOBILIZERS = {0: ("Free", None), 1: ("Ball", None), 2: ("Slider", (1.0, 0.0, 0.0)), 3: ("Pin", (0.0, 0.0, 1.0))}
TYPE_NAMES = {0: "free", 1: "ball", 2: "slide", 3: "hinge"}


@dataclasses.dataclass(frozen=True)
class MjcfJoint:
    """One compiled MuJoCo joint: ``type`` (free, ball, slide, hinge), its
    ``body``, ``anchor`` and unit ``axis`` in the body frame, ``ref``,
    ``range`` (None when unlimited), per-dof ``damping`` and ``armature``,
    ``stiffness`` with its spring reference ``spring_ref`` (hinge and
    slide)."""

    name: str
    type: str
    body: str
    anchor: np.ndarray
    axis: np.ndarray
    ref: float
    range: tuple[float, float] | None
    damping: tuple[float, ...]
    armature: tuple[float, ...]
    stiffness: float
    spring_ref: float


def load_mjcf(source, *, merge_fixed: bool = True, damping: bool = True, springs: bool = True,
              armature: bool = True, frictionloss: bool = True, contact: bool = True, limits: bool = True,
              actuators: bool = True, physics: str = "simbody"):
    """(system, matter, forces, robot) built from an MJCF file path or XML
    string through MuJoCo's compiler.

    Joints map to mobilizers as described in this module's docstring, in
    MuJoCo's order, so simbodyx's u is MuJoCo's qvel joint by joint (up to
    the frames of ball and free velocities: ``simbodyx.interop.mujoco``).
    MuJoCo's gravity becomes a UniformGravity element; joint damping
    (``damping``) a MobilityLinearDamper per hinge or slide and per
    mobility of a ball or free joint (``_isotropic``), joint stiffness
    (``springs``) a MobilityLinearSpring, joint armature (``armature``) the
    mobilizer's (``MobilizedBody.set_armature``), joint friction loss
    (``frictionloss``) a MobilityCoulombFriction per hinge or slide whose
    transition velocity follows from the joint's solreffriction and
    solimpfriction (``_friction``); a ball's or free joint's stiffness and
    friction loss are one Force.Custom with MuJoCo's laws in its dofs'
    frames (``_ball_passive``), in ``robot.springs`` and ``robot.frictions``. The free joint's default
    q is the body's pose in the file, a hinge's or slide's its ``ref``.
    With ``contact``, the geoms MuJoCo would collide become contact surfaces
    with a Hunt-Crossley force (``robot.contact``), as ``_contact``
    describes: the contact pairs are MuJoCo's (contype/conaffinity, the
    parent-child filter, ``<exclude>``, ``<pair>``) and each geom's material
    follows from its solref, solimp and friction. With ``limits``, a
    limited hinge or slide gets a MobilityLinearStop (``robot.stops``) whose
    stiffness and dissipation follow from the joint's solreflimit and
    solimplimit (``_stop``), and a limited ball the same law on its
    rotation's angle (``_cone_stop``).
    With ``actuators``, the actuators on a hinge or slide with MuJoCo's
    affine law (motor, position, velocity, and general ones with a fixed
    gain, an affine bias and no activation dynamics) become
    ``Force.MobilityActuator``s (``robot.actuators``; their controls are
    State data: ``robot.set_controls``).
    What Simbody does not model (other actuators, tendons' own forces and limits,
    equality constraints other than those below,
    contact pairs without a kernel: a plane or a height field against
    another) is reported
    in one warning listing it, with the mesh geoms that touch as the
    primitives MuJoCo fits to them (a box where a mesh touches only planes,
    else a capsule); ``robot.joints`` keeps the numbers.
    The equality constraints Simbody has are mapped, exact where MuJoCo's
    are soft: ``connect`` to Ball, ``weld`` to Weld, ``joint`` and
    ``tendon`` (fixed tendons) to CoordinateCoupler.

    ``physics="mujoco"`` models the file's contacts, joint and fixed-tendon
    limits and hinge and slide friction loss as MuJoCo does, as soft
    constraints solved each step (``simbodyx.soft_constraints``), in
    ``robot.stepper``, a time stepper with the file's integrator, to step
    at the file's time step ``robot.timestep``:
    ``sx.integrate.rollout(model, state, robot.timestep, n,
    method=robot.stepper)``. Then ``contact``, ``limits`` and
    ``frictionloss`` say whether the stepper has those rows, and no
    HuntCrossleyForce, stop or Coulomb friction is made; the rest (gravity,
    damping, springs, armature, actuators) is as above. Equality
    constraints are not modelled on this path (a file with any is an
    error).
    """
    if physics not in ("simbody", "mujoco"):
        raise ValueError(f"load_mjcf: physics must be 'simbody' or 'mujoco', got {physics!r}")
    soft = physics == "mujoco"
    try:
        import mujoco
    except ImportError:
        raise ImportError("load_mjcf reads MJCF through MuJoCo's compiler: pip install mujoco "
                          "(or simbodyx[mujoco])") from None
    m = _compile(mujoco, source)

    def name(kind, i):  # MuJoCo's name, or the object's kind and number
        return mujoco.mj_id2name(m, kind, i) or f"{kind.name.removeprefix('mjOBJ_').lower()}{i}"

    body_names = [name(mujoco.mjtObj.mjOBJ_BODY, b) for b in range(m.nbody)]
    joint_names = [name(mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(m.njnt)]
    joints = {}
    for j, joint_name in enumerate(joint_names):
        kind, dof = int(m.jnt_type[j]), int(m.jnt_dofadr[j])
        ndof = {0: 6, 1: 3, 2: 1, 3: 1}[kind]
        joints[joint_name] = MjcfJoint(
            joint_name, TYPE_NAMES[kind], body_names[m.jnt_bodyid[j]],
            np.array(m.jnt_pos[j], float), np.array(m.jnt_axis[j], float) / np.linalg.norm(m.jnt_axis[j]),
            float(m.qpos0[m.jnt_qposadr[j]]) if kind >= 2 else 0.0,
            tuple(map(float, m.jnt_range[j])) if m.jnt_limited[j] else None,
            tuple(map(float, m.dof_damping[dof:dof + ndof])), tuple(map(float, m.dof_armature[dof:dof + ndof])),
            float(m.jnt_stiffness[j]), float(m.qpos_spring[m.jnt_qposadr[j]]) if kind >= 2 else 0.0)

    system = MultibodySystem()
    matter = SimbodyMatterSubsystem(system)
    forces = GeneralForceSubsystem(system)
    if np.any(m.opt.gravity != 0):
        Force.UniformGravity(forces, matter, [float(g) for g in m.opt.gravity])

    placed = {body_names[0]: (matter.Ground(), np.eye(4))}  # MuJoCo body -> (MobilizedBody, X_B,body)
    moved, dampers, spring_elements, stops, frictions = {}, {}, {}, {}, {}
    carried = {}  # MobilizedBody (not Ground) -> the mass parts it carries
    for b in range(1, m.nbody):
        parent_body, X_PP = placed[body_names[m.body_parentid[b]]]
        X_PB0 = X_PP @ _pose(mujoco, m.body_pos[b], m.body_quat[b])
        first, count = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        if count == 0:
            if merge_fixed:
                placed[body_names[b]] = (parent_body, X_PB0)
                if not parent_body.is_ground():
                    carried[parent_body].append(_body_part(mujoco, m, b, X_PB0))
                continue
            carried_parts = [_body_part(mujoco, m, b)]
            handle = MobilizedBody.Weld(parent_body, transform(X_PB0), Body.Rigid(
                combined_mass_properties(carried_parts)), Transform(), name=body_names[b])
            placed[body_names[b]], carried[handle] = (handle, np.eye(4)), carried_parts
            continue
        X_PF_base, handle = X_PB0, parent_body
        for k in range(count):
            joint = joints[joint_names[first + k]]
            kind, own_axis = MOBILIZERS[int(m.jnt_type[first + k])]
            if kind == "Free" and not (handle.is_ground() and count == 1):
                raise ValueError(f"load_mjcf: joint {joint.name!r}: a free joint must be its body's only joint, "
                                 f"on a child of the world")
            R = np.eye(3) if own_axis is None else aligning(np.asarray(own_axis), joint.axis)
            X_JM = pose(R) @ _reference(kind, joint.ref)
            if kind == "Free":  # MuJoCo's qpos is the body's pose in the world
                X_PF, X_BM = np.eye(4), np.eye(4)
            else:
                X_PF = X_PF_base @ pose(p=joint.anchor) @ pose(R)
                X_BM = pose(p=joint.anchor) @ X_JM
            last = k == count - 1
            mass = combined_mass_properties([_body_part(mujoco, m, b)]) if last else MassProperties(0.0)
            handle = getattr(MobilizedBody, kind)(handle, transform(X_PF), Body.Rigid(mass), transform(X_BM),
                                                  name=body_names[b] if last else f"{body_names[b]}.{joint.name}")
            moved[joint.name] = handle
            X_PF_base = np.eye(4)
            if armature and any(joint.armature):  # a ball's or free's is one number per joint, so rotations map
                handle.set_armature(joint.armature[3:] + joint.armature[:3] if kind == "Free" else joint.armature)
            if kind == "Free":
                handle.set_default_q(np.asarray(m.qpos0[m.jnt_qposadr[first + k]:][:7])[[3, 4, 5, 6, 0, 1, 2]])
            elif kind in ("Pin", "Slider"):
                handle.set_default_q([joint.ref])
                if damping and joint.damping[0] > 0:
                    dampers[joint.name] = Force.MobilityLinearDamper(forces, handle, 0, joint.damping[0])
                if springs and joint.stiffness > 0:
                    spring_elements[joint.name] = Force.MobilityLinearSpring(forces, handle, 0, joint.stiffness,
                                                                             joint.spring_ref)
                if limits and not soft and joint.range is not None:
                    stops[joint.name] = _stop(mujoco, m, forces, handle, first + k, joint.range)
                if frictionloss and not soft and m.dof_frictionloss[m.jnt_dofadr[first + k]] > 0:
                    frictions[joint.name] = _friction(mujoco, m, forces, handle, first + k)
            if kind in ("Ball", "Free") and damping and any(joint.damping) and _isotropic(joint.damping):
                coefficients = joint.damping[3:] + joint.damping[:3] if kind == "Free" else joint.damping
                dampers[joint.name] = tuple(Force.MobilityLinearDamper(forces, handle, i, c)
                                            for i, c in enumerate(coefficients) if c > 0)
            if kind == "Ball" and limits and not soft and joint.range is not None:
                stops[joint.name] = _cone_stop(mujoco, m, forces, handle, first + k)
            if kind in ("Ball", "Free"):
                dof, ndof = int(m.jnt_dofadr[first + k]), 6 if kind == "Free" else 3
                spring = springs and joint.stiffness > 0
                friction = frictionloss and not soft and bool(np.any(m.dof_frictionloss[dof:dof + ndof] > 0))
                if spring or friction:
                    element = _ball_passive(mujoco, m, forces, handle, first + k, spring, friction)
                    spring_elements.update({joint.name: element} if spring else {})
                    frictions.update({joint.name: element} if friction else {})
        placed[body_names[b]], carried[handle] = (handle, np.eye(4)), [_body_part(mujoco, m, b)]

    for handle, parts in carried.items():  # welded bodies' masses join their carrier's
        if len(parts) > 1:
            handle.set_default_mass_properties(combined_mass_properties(parts))

    couplers, unmapped = _equalities(mujoco, m, matter, placed, body_names, joint_names, moved, name)
    actuated, unactuated = (_actuators(mujoco, m, forces, joint_names, moved, name) if actuators
                            else ({}, [f"all {m.nu}"] if m.nu else []))
    stepper = None
    if soft:
        if m.neq:
            raise ValueError(f"load_mjcf: physics='mujoco' does not model equality constraints, and this file "
                             f"has {m.neq}; load it with physics='simbody'")
        geom_name = [name(mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(m.ngeom)]
        geometry = ContactGeoms(mujoco, m, source, _colliding_pairs(mujoco, m) if contact else [], geom_name)
        if not limits:
            m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
        if not frictionloss:
            m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
        stepper, left_out = soft_constraint_stepper(mujoco, m, geometry, placed, body_names, geom_name, joint_names)
        hunt_crossley, uncovered = None, geometry.uncovered
        fitted = [f"{geom_name[g]} as a {geometry.kind[g]}" for g in sorted({g for p in geometry.covered for g in p})
                  if g in geometry.fits]
    else:
        hunt_crossley, uncovered, fitted = (_contact(mujoco, m, source, system, forces, placed, body_names, name)
                                            if contact else (None, None, []))
        left_out = None
    _report_dropped(mujoco, m, joints, damping, springs, armature, frictionloss, limits, unmapped, uncovered,
                    unactuated, fitted, left_out)
    geoms = [Geometry(body_names[m.geom_bodyid[g]], _pose(mujoco, m.geom_pos[g], m.geom_quat[g]),
                      mujoco.mjtGeom(m.geom_type[g]).name.removeprefix("mjGEOM_").lower(),
                      {"size": np.array(m.geom_size[g], float), "name": name(mujoco.mjtObj.mjOBJ_GEOM, g)})
             for g in range(m.ngeom)]
    links = {n: (handle, transform(X)) for n, (handle, X) in placed.items()}
    robot = Robot(body_names[0], links, joints, moved, visuals=geoms, couplers=couplers, dampers=dampers,
                  springs=spring_elements, stops=stops, frictions=frictions, contact=hunt_crossley,
                  actuators=actuated, stepper=stepper, timestep=float(m.opt.timestep))
    return system, matter, forces, robot


def _compile(mujoco, source):
    text = str(source)
    try:
        if text.lstrip().startswith("<"):
            return mujoco.MjModel.from_xml_string(text)
        path = pathlib.Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"load_mjcf: no MJCF file at {path}")
        return mujoco.MjModel.from_xml_path(str(path))
    except ValueError as error:  # MuJoCo's compiler error names the element and line
        raise ValueError(f"load_mjcf: MuJoCo could not compile {text[:80]!r}: {error}") from None


def _fitted(mujoco, source, primitives) -> dict:
    """{mesh geom: (size, pos, quat)} of the primitive (``primitives[g]``,
    "box" or "capsule") MuJoCo's compiler fits to each mesh geom g, by the
    file's own compiler settings (the mesh's inertia box, or its bounding
    box with ``fitaabb``): a second compile of the file with those geoms'
    types changed."""
    text = str(source)
    spec = mujoco.MjSpec.from_string(text) if text.lstrip().startswith("<") else mujoco.MjSpec.from_file(text)
    geoms = list(spec.worldbody.find_all(mujoco.mjtObj.mjOBJ_GEOM))
    fitted_types = {"box": mujoco.mjtGeom.mjGEOM_BOX, "capsule": mujoco.mjtGeom.mjGEOM_CAPSULE}
    for g, primitive in primitives.items():  # find_all lists the geoms in the compiled model's order
        geoms[g].type = fitted_types[primitive]
    fitted = spec.compile()
    return {g: (np.array(fitted.geom_size[g], float), fitted.geom_pos[g], fitted.geom_quat[g]) for g in primitives}


def _actuators(mujoco, m, forces, joint_names, moved, name):
    """({actuator name: MobilityActuator}, [actuators left out, with why]):
    MuJoCo's force on a joint transmission, a = gain ctrl + b0 + b1 length
    + b2 velocity (length = gear q, velocity = gear qdot), clamped to the
    force range, drives the joint with gear a; ctrl is clamped to the
    control range first (both when limited)."""
    actuators, left_out = {}, []
    for a in range(m.nu):
        label = name(mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        joint = int(m.actuator_trnid[a][0])
        if int(m.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT) or \
                TYPE_NAMES[int(m.jnt_type[joint])] not in ("hinge", "slide"):
            left_out.append(f"{label} (not on a hinge or slide)")
            continue
        if int(m.actuator_dyntype[a]) != int(mujoco.mjtDyn.mjDYN_NONE) or \
                int(m.actuator_gaintype[a]) != int(mujoco.mjtGain.mjGAIN_FIXED) or \
                int(m.actuator_biastype[a]) not in (int(mujoco.mjtBias.mjBIAS_NONE), int(mujoco.mjtBias.mjBIAS_AFFINE)):
            left_out.append(f"{label} (activation dynamics or a gain or bias other than MuJoCo's affine one)")
            continue
        affine = int(m.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
        unlimited = (-np.inf, np.inf)
        actuators[label] = Force.MobilityActuator(
            forces, moved[joint_names[joint]], 0, gear=float(m.actuator_gear[a][0]),
            gain=float(m.actuator_gainprm[a][0]),
            bias=np.asarray(m.actuator_biasprm[a][:3], float) if affine else np.zeros(3),
            ctrl_range=tuple(m.actuator_ctrlrange[a]) if m.actuator_ctrllimited[a] else unlimited,
            force_range=tuple(m.actuator_forcerange[a]) if m.actuator_forcelimited[a] else unlimited)
    return actuators, left_out


def _impedance(solimp, r):
    """MuJoCo's constraint impedance d(r) for solimp (d0, dmax, width,
    midpoint, power) at violation r >= 0."""
    d0, dmax, width, mid, power = solimp[:5]
    x = min(r / width, 1.0) if width > 0 else 1.0
    if power == 1:
        y = x
    elif x <= mid:
        y = x ** power / mid ** (power - 1)
    else:
        y = 1 - (1 - x) ** power / (1 - mid) ** (power - 1)
    return d0 + y * (dmax - d0)


def _resting_depth(solimp, scale):
    """The depth r at which MuJoCo's soft contact carries a normal force F
    at rest: r = (1 - d) dmax^2 scale / d^2 with d = d(r) and
    ``scale`` = F A c tau^2 z^2 (A: MuJoCo's approximate inverse inertia at
    the contact, the body's translational ``body_invweight0``; c: the
    cone's factor, ``_cone_factor``). At rest the constraint's force is
    its reference acceleration, k d r with k = 1 / (dmax^2 tau^2 z^2),
    over its regularizer R = (1 - d) A c / d, so r does not depend on the
    mass of a free body (F A = g). Past solimp's width d = dmax; below it,
    the root is bisected (r minus the right side grows with r)."""
    dmax, width = solimp[1], solimp[2]
    r = (1 - dmax) * scale
    if r >= width:
        return r

    def excess(r):
        d = _impedance(solimp, r)
        return r - (1 - d) * dmax ** 2 * scale / d ** 2 if d > 0 else -np.inf

    low, high = 0.0, width
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if excess(middle) < 0 else (low, middle)
    return 0.5 * (low + high)


def _time_constant(mujoco, m, solref):
    """(time constant, damping ratio) of a MuJoCo solref as MuJoCo uses it:
    the time constant at least twice the time step (unless the model
    disables that safety), and the direct (-stiffness, -damping) form given
    MuJoCo's default (0.02, 1) instead."""
    tau, ratio = (float(x) for x in solref[:2])
    if tau <= 0:
        tau, ratio = 0.02, 1.0
    if not int(m.opt.disableflags) & mujoco.mjtDisableBit.mjDSBL_REFSAFE:
        tau = max(tau, 2 * float(m.opt.timestep))
    return tau, ratio


def _stop_law(mujoco, m, j, span):
    """(stiffness, dissipation) of a stop for MuJoCo joint j's limit, whose
    range is ``span`` wide. MuJoCo's soft limit (time constant tau and
    damping ratio z from solreflimit, dmax from solimplimit) rests a joint
    of effective inertia I (MuJoCo's own scale, 1 / dof_invweight0) under a
    generalized force f at the excursion (1 - dmax) tau^2 z^2 f / I, so the
    stop's stiffness is k = I / ((1 - dmax) tau^2 z^2); its dissipation d
    damps the stop critically (k x d = 2 sqrt(k I)) at an excursion x of 1%
    of the range."""
    tau, ratio = _time_constant(mujoco, m, m.jnt_solref[j])
    dmax = float(m.jnt_solimp[j][1])
    inertia = 1.0 / float(m.dof_invweight0[m.jnt_dofadr[j]])
    stiffness = inertia / ((1 - dmax) * tau ** 2 * ratio ** 2)
    return stiffness, 2 * np.sqrt(inertia / stiffness) / (0.01 * max(span, 1e-9))


def _stop(mujoco, m, forces, handle, j, bounds):
    """MuJoCo hinge or slide j's limit as a MobilityLinearStop (``_stop_law``)."""
    return Force.MobilityLinearStop(forces, handle, 0, *_stop_law(mujoco, m, j, bounds[1] - bounds[0]), *bounds)


def _cone_stop(mujoco, m, forces, handle, j):
    """MuJoCo ball joint j's limit, on the angle theta of its rotation (the
    norm of ``mju_quat2Vel`` of its quaternion, at most the larger of its
    range's two numbers, theta_max), as one Force.Custom: MobilityLinearStop's
    law on x = theta - theta_max > 0, a torque -k x (1 + d theta_dot) about
    the rotation's axis a, never pulling (theta_dot = a . w, w the angular
    velocity, a being the same in F and M), with potential energy k x^2 / 2;
    k and d from ``_stop_law``. Its numbers are the element's params
    (Model leaves)."""
    angle = float(np.max(m.jnt_range[j]))
    stiffness, dissipation = _stop_law(mujoco, m, j, angle)
    params = {"stiffness": stiffness, "dissipation": dissipation, "angle": angle}

    def excursion(X, p):  # (x, the rotation's unit axis in F; zero at the identity)
        rotation = matrix_to_rotation_vector(X.R)
        theta = safe_norm(rotation)
        return jnp.maximum(theta - p["angle"], 0.0), rotation / jnp.where(theta > 0, theta, 1.0)

    def calc(model, state, p):
        x, axis = excursion(handle.get_mobilizer_transform(state), p)
        rate = axis @ handle.get_u_as_vector(state)
        push = jnp.maximum(0.0, p["stiffness"] * x * (1 + p["dissipation"] * rate))
        first = handle.get_first_u_index(state)
        return jnp.zeros_like(state.u).at[first:first + 3].set(-push * axis), jnp.zeros(0, state.u.dtype)

    def potential_energy(model, state, p):
        return p["stiffness"] / 2 * excursion(handle.get_mobilizer_transform(state), p)[0] ** 2

    return Force.Custom(forces, calc, potential_energy, params)


def _isotropic(damping) -> bool:
    """Whether a joint's per-dof damping is the same on each of its groups
    of three dofs (a ball's rotations; a free joint's translations and its
    rotations): then -c w in MuJoCo's local frame is -c u in any frame, a
    MobilityLinearDamper per mobility. A hinge's or slide's always is."""
    return all(len(set(damping[i:i + 3])) == 1 for i in range(0, len(damping), 3))


def _transition_velocity(mujoco, m, dof):
    """The transition velocity vt of MobilityCoulombFriction's smooth law
    for MuJoCo dof ``dof``'s frictionloss F. MuJoCo's friction row
    (solreffriction's time constant tau; solimpfriction's dmax and its dmin
    d, the impedance at zero velocity) lets a dof of effective inertia I
    (1 / dof_invweight0) under a generalized force |f| < F creep at
    u = (1 - d) f / (d b I), b = 2 / (dmax tau): a damper c = d b I / (1 - d)
    up to F. The smooth law's slope at rest, F / vt, is that c, so both
    creep alike under small forces and both slide against F."""
    tau, _ = _time_constant(mujoco, m, m.dof_solref[dof])
    d, dmax = (float(x) for x in m.dof_solimp[dof][:2])
    damping = d * 2 / (dmax * tau) / ((1 - d) * float(m.dof_invweight0[dof]))
    return float(m.dof_frictionloss[dof]) / damping


def _friction(mujoco, m, forces, handle, j):
    """MuJoCo hinge or slide j's frictionloss as a MobilityCoulombFriction
    (``_transition_velocity``)."""
    dof = int(m.jnt_dofadr[j])
    return Force.MobilityCoulombFriction(forces, handle, 0, float(m.dof_frictionloss[dof]),
                                         _transition_velocity(mujoco, m, dof))


def _ball_passive(mujoco, m, forces, handle, j, spring: bool, friction: bool):
    """MuJoCo's stiffness (if ``spring``) and frictionloss (if ``friction``)
    of ball or free joint j as one Force.Custom, MuJoCo's per-dof laws in
    its dofs' frames (the rotation's in M, a free joint's translation's in
    G = F): the spring -k (p_FM - p_spring) and -k log(R_spring' R_FM)
    (``mju_subQuat``, in M) with energy k |.|^2 / 2; each dof's friction
    the smooth law of MobilityCoulombFriction with that dof's transition
    velocity (``_transition_velocity``). Its numbers are the element's
    params (Model leaves)."""
    free, dof, adr = int(m.jnt_type[j]) == 0, int(m.jnt_dofadr[j]), int(m.jnt_qposadr[j])
    ndof = 6 if free else 3
    reference = np.asarray(m.qpos_spring[adr:adr + ndof + 1], float)
    ours = [3, 4, 5, 0, 1, 2] if free else [0, 1, 2]  # MuJoCo's dofs in our order: rotation first
    loss = np.asarray(m.dof_frictionloss[dof:dof + ndof], float)[ours] * friction
    params = {"stiffness": float(m.jnt_stiffness[j]) * spring,
              "R_spring": np.asarray(quaternion_to_matrix(reference[-4:])), "p_spring": reference[:3 * free],
              "friction": loss,
              "transition_velocity": np.array([_transition_velocity(mujoco, m, dof + i) if f > 0 else 1.0
                                               for i, f in zip(ours, loss)])}

    def error(X, p):  # the springs' stretch, rotation first (in M), then a free joint's translation (in G = F)
        rotation = matrix_to_rotation_vector(p["R_spring"].T @ X.R)
        return jnp.concatenate([rotation, X.p - p["p_spring"]]) if free else rotation

    def calc(model, state, p):
        X, u = handle.get_mobilizer_transform(state), handle.get_u_as_vector(state)
        local = jnp.concatenate([X.R.T @ u[:3], u[3:]])  # MuJoCo's dof velocities, rotation first
        slip = -p["friction"] * local / jnp.sqrt(local * local + p["transition_velocity"] ** 2)
        f = slip - p["stiffness"] * error(X, p)
        first = handle.get_first_u_index(state)
        mobility = jnp.zeros_like(state.u).at[first:first + ndof].set(jnp.concatenate([X.R @ f[:3], f[3:]]))
        return mobility, jnp.zeros(0, state.u.dtype)

    def potential_energy(model, state, p):
        e = error(handle.get_mobilizer_transform(state), p)
        return p["stiffness"] / 2 * jnp.sum(e * e)

    return Force.Custom(forces, calc, potential_energy, params)


def _pose(mujoco, pos, quat):
    """The 4x4 pose of a MuJoCo (pos, quat [w, x, y, z])."""
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, np.asarray(quat, float))
    return pose(R.reshape(3, 3), pos)


def _reference(kind, ref):
    """The joint's motion from its zero to ``ref`` (MuJoCo's body pose is at q = ref)."""
    if kind == "Pin":
        return pose(rotation_about("z", ref))
    if kind == "Slider":
        return pose(p=(ref, 0.0, 0.0))
    return np.eye(4)


def _body_part(mujoco, m, b, X_B=np.eye(4)):
    """Body b's mass as a part of a body whose frame holds b's at X_B:
    (X_BC, mass, central inertia in C), C its principal-axes frame."""
    return X_B @ _pose(mujoco, m.body_ipos[b], m.body_iquat[b]), float(m.body_mass[b]), np.diag(m.body_inertia[b])


def _equalities(mujoco, m, matter, placed, body_names, joint_names, moved, name):
    """({equality name: Constraint}, [unmapped equalities]): an active
    ``connect`` becomes a Ball constraint at its two points (between bodies
    MuJoCo's compiler places the second where the first is in the file's
    pose; between sites, the sites), a ``weld`` a Weld of the frames MuJoCo
    makes coincide (between bodies: body 1's at ``relpose`` and body 2's at
    ``anchor``, unrotated; between sites, the sites'; a Ball at their
    origins when ``torquescale`` is 0), a ``joint`` equality of hinges or
    slides a CoordinateCoupler q1 - q1_0 = poly(q2 - q2_0) (q_0 the file's
    pose), a ``tendon`` equality of fixed tendons the same of their lengths
    (sums of coef q over their joints). The rest are listed as unmapped."""
    couplers, unmapped = {}, []

    def frame(obj, by_body, X_OF):  # (MobilizedBody, X_BF): the frame at X_OF on a body, or a site's
        if by_body:
            body, X = placed[body_names[obj]]
            return body, X @ X_OF
        body, X = placed[body_names[m.site_bodyid[obj]]]
        return body, X @ _pose(mujoco, m.site_pos[obj], m.site_quat[obj])

    for e in range(m.neq):
        label = name(mujoco.mjtObj.mjOBJ_EQUALITY, e)
        kind, data = mujoco.mjtEq(m.eq_type[e]), np.asarray(m.eq_data[e], float)
        first, second = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        by_body = int(m.eq_objtype[e]) == int(mujoco.mjtObj.mjOBJ_BODY)
        if not m.eq_active0[e]:
            unmapped.append(f"{label} (inactive)")
        elif kind == mujoco.mjtEq.mjEQ_CONNECT:
            (body1, X1), (body2, X2) = (frame(first, by_body, pose(p=data[:3])),
                                        frame(second, by_body, pose(p=data[3:6])))
            couplers[label] = Constraint.Ball(body1, X1[:3, 3], body2, X2[:3, 3], name=label)
        elif kind == mujoco.mjtEq.mjEQ_WELD:
            relpose = _pose(mujoco, data[3:6], data[6:10] / np.linalg.norm(data[6:10])) if by_body else np.eye(4)
            (body1, X1), (body2, X2) = frame(first, by_body, relpose), frame(second, by_body, pose(p=data[:3]))
            if data[10] == 0:  # no torque: the frames' origins only
                couplers[label] = Constraint.Ball(body1, X1[:3, 3], body2, X2[:3, 3], name=label)
            else:
                couplers[label] = Constraint.Weld(body1, transform(X1), body2, transform(X2), name=label)
        elif kind in (mujoco.mjtEq.mjEQ_JOINT, mujoco.mjtEq.mjEQ_TENDON) and all(
                _as_coordinates(mujoco, m, kind, j) is not None for j in (first, second) if j >= 0):
            (w1, l1_0), c = _as_coordinates(mujoco, m, kind, first), data[:5]
            w2, l2_0 = _as_coordinates(mujoco, m, kind, second) if second >= 0 else ({}, 0.0)
            used = sorted(set(w1) | set(w2))  # MuJoCo joint ids
            a1, a2 = (np.array([w.get(j, 0.0) for j in used]) for w in (w1, w2))
            if second < 0 or not np.any(c[2:]):  # linear: its numbers stay Model leaves
                function = functions.Linear((*(a1 - c[1] * a2), c[1] * l2_0 - l1_0 - c[0]))
            else:
                function = functions.FromCallable(
                    lambda x, a1=a1, a2=a2, c=c, l1_0=l1_0, l2_0=l2_0: a1 @ x - l1_0 - sum(
                        c[k] * (a2 @ x - l2_0) ** k for k in range(5)), len(used))
            bodies = [moved[joint_names[j]] for j in used]
            couplers[label] = Constraint.CoordinateCoupler(matter, function, bodies, [0] * len(bodies), name=label)
        else:
            unmapped.append(f"{label} ({kind.name.removeprefix('mjEQ_').lower()})")
    return couplers, unmapped


def _as_coordinates(mujoco, m, kind, obj):
    """A hinge's or slide's q, or a fixed tendon's length, as ({joint id:
    weight}, value at qpos0); None for other joints and spatial tendons."""
    if kind == mujoco.mjtEq.mjEQ_JOINT:
        if TYPE_NAMES[int(m.jnt_type[obj])] not in ("hinge", "slide"):
            return None
        return {obj: 1.0}, float(m.qpos0[m.jnt_qposadr[obj]])
    wraps = range(m.tendon_adr[obj], m.tendon_adr[obj] + m.tendon_num[obj])
    if any(m.wrap_type[w] != mujoco.mjtWrap.mjWRAP_JOINT for w in wraps):
        return None
    weights = {}
    for w in wraps:  # MuJoCo's compiler allows only hinges and slides here
        weights[int(m.wrap_objid[w])] = weights.get(int(m.wrap_objid[w]), 0.0) + float(m.wrap_prm[w])
    return weights, float(m.tendon_length0[obj])


def _report_dropped(mujoco, m, joints, damping, springs, armature, frictionloss, limits, unmapped, uncovered,
                    unactuated, fitted, left_out=None):
    """One warning naming what the loaded system does not model;
    ``uncovered``: the contact pairs left out (None: contact not asked for);
    ``fitted``: the mesh geoms that touch as MuJoCo's fitted primitives;
    ``left_out``: what ``physics="mujoco"``'s constraints leave out (None on
    the Simbody path); on the MuJoCo path fixed tendons' limits are
    modelled."""
    soft = left_out is not None
    dropped = []
    if fitted:
        shown = ", ".join(fitted[:6]) + (f" and {len(fitted) - 6} more" if len(fitted) > 6 else "")
        dropped.append(f"mesh geoms' shapes (they touch as the primitives MuJoCo fits to them: {shown})")
    if uncovered is None:
        pairs = _colliding_pairs(mujoco, m)
        if pairs:
            dropped.append(f"contacts ({len(pairs)} colliding geom pairs)")
    elif uncovered:
        shown = ", ".join(uncovered[:6]) + (f" and {len(uncovered) - 6} more" if len(uncovered) > 6 else "")
        dropped.append(f"contact pairs without a kernel: {shown}")
    if left_out:
        shown = ", ".join(left_out[:6]) + (f" and {len(left_out) - 6} more" if len(left_out) > 6 else "")
        dropped.append(f"constraints: {shown}")
    if unactuated:
        dropped.append(f"actuators {', '.join(unactuated)}")
    if unmapped:
        dropped.append(f"equality constraints {', '.join(unmapped)}")
    by_kind = {
        "joint limits": [j.name for j in joints.values()
                         if j.range is not None and not limits],
        "armature": [j.name for j in joints.values() if any(j.armature) and not armature],
        "friction loss": [j.name for j, d in zip(joints.values(), m.jnt_dofadr) if m.dof_frictionloss[d] > 0
                          and not frictionloss],
        "damping": [j.name for j in joints.values() if any(j.damping) and not (damping and _isotropic(j.damping))],
        "stiffness": [j.name for j in joints.values() if j.stiffness and not springs],
        "tendon forces or limits": [  # a tendon with none of these acts only through equalities
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, t) or f"tendon{t}" for t in range(m.ntendon)
            if (m.tendon_limited[t] and not soft)
            or any(np.any(getattr(m, f"tendon_{what}", np.zeros((m.ntendon, 1)))[t])
                   for what in ("stiffness", "stiffnesspoly", "damping", "dampingpoly", "frictionloss", "armature"))
        ],  # some newer than 3.3
    }
    for what, names in by_kind.items():
        if names:
            names = sorted(set(names))
            dropped.append(f"{what} on {', '.join(names[:6])}{f' and {len(names) - 6} more' if len(names) > 6 else ''}")
    if dropped:
        warnings.warn("load_mjcf: not modelled by the loaded system: " + "; ".join(dropped), stacklevel=3)


#: MuJoCo geom types simbodyx has contact shapes for
SHAPES = {"plane": "HalfSpace", "sphere": "Sphere", "capsule": "Capsule", "ellipsoid": "Ellipsoid", "box": "Brick",
          "cylinder": "Cylinder"}


def _colliding_pairs(mujoco, m) -> list:
    """The geom pairs (g1 < g2) MuJoCo's collision detection can report:
    the dynamic ones (contype of one & conaffinity of the other, not on one
    body or welded bodies, not parent and child unless the parent is the
    world, not in ``<exclude>``) and the explicit ``<pair>``s."""
    if int(m.opt.disableflags) & mujoco.mjtDisableBit.mjDSBL_CONTACT:
        return []
    filter_parent = not int(m.opt.disableflags) & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    weld = np.asarray(m.body_weldid)
    excluded = set(int(x) for x in np.asarray(m.exclude_signature).ravel())
    pairs = {tuple(sorted((int(a), int(b)))) for a, b in zip(m.pair_geom1, m.pair_geom2)}
    for g1 in range(m.ngeom):
        for g2 in range(g1 + 1, m.ngeom):
            if not (m.geom_contype[g1] & m.geom_conaffinity[g2] or m.geom_contype[g2] & m.geom_conaffinity[g1]):
                continue
            b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
            w1, w2 = int(weld[b1]), int(weld[b2])
            if w1 == w2:
                continue
            p1, p2 = int(weld[m.body_parentid[w1]]), int(weld[m.body_parentid[w2]])
            if filter_parent and w1 and w2 and (w1 == p2 or w2 == p1):
                continue
            if ((min(b1, b2) << 16) + max(b1, b2)) in excluded or ((w1 << 16) + w2) in excluded \
                    or ((w2 << 16) + w1) in excluded:
                continue
            pairs.add((g1, g2))
    return sorted(pairs)


def _cone_factor(mujoco, m, friction: float, condim: int) -> float:
    """How much softer MuJoCo's friction cone makes a contact's normal
    direction at rest than a frictionless one (the c of ``_resting_depth``).
    A pyramidal cone splits the normal force over 2 (condim - 1) edges
    J_n +- mu J_t, each regularized by 2 mu^2 (1 + mu^2) times a
    frictionless contact's R: c = mu^2 (1 + mu^2) / (condim - 1) (checked
    against MuJoCo's resting contacts for condim 3, to 0.5%); a
    frictionless contact or an elliptic cone's normal row: c = 1."""
    if condim == 1 or m.opt.cone != mujoco.mjtCone.mjCONE_PYRAMIDAL:
        return 1.0
    return friction ** 2 * (1 + friction ** 2) / (condim - 1)


def _resting_on_world(mujoco, m, seconds: float = 5.0, max_steps: int = 10_000) -> set:
    """The geoms that carry a normal force from a geom fixed to the world
    after MuJoCo has moved the model for ``seconds`` from its initial pose
    (qpos0, at rest, no control), in at most ``max_steps`` of its steps (a
    model of small steps moves for less, which bounds the time loading
    takes): the feet a robot stands on, or the side a body lies on."""
    d = mujoco.MjData(m)
    for _ in range(min(int(round(seconds / m.opt.timestep)), max_steps)):
        mujoco.mj_step(m, d)
    world = np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)] == 0
    force, carrying = np.zeros(6), set()
    for i in range(d.ncon):
        contact = d.contact[i]
        mujoco.mj_contactForce(m, d, i, force)
        if force[0] > 0 and np.all(np.isfinite(force)) and world[contact.geom1] != world[contact.geom2]:
            carrying.add(int(contact.geom2 if world[contact.geom1] else contact.geom1))
    return carrying


class ContactGeoms:
    """How a compiled model's colliding geom pairs (``pairs``) become
    simbodyx contact shapes: ``kind[g]`` each geom's MuJoCo type, a mesh's
    the primitive MuJoCo's compiler fits to it (a box where it touches
    only planes and height fields, else a capsule; its (size, pos, quat)
    in ``fits``), ``shape_kind(g)`` the ContactGeometry kind (a flat height
    field: the HalfSpace of its base), ``covered`` the pairs a detection
    kernel handles and ``uncovered`` the others, described."""

    def __init__(self, mujoco, m, source, pairs, geom_name):
        self.m = m
        kind = [mujoco.mjtGeom(t).name.removeprefix("mjGEOM_").lower() for t in m.geom_type]
        partners = {}  # each colliding mesh geom's partners
        for a, b in pairs:
            for g, other in ((a, b), (b, a)):
                if kind[g] == "mesh":
                    partners.setdefault(g, []).append(other)
        primitives = {g: "box" if all(kind[o] in ("plane", "hfield") for o in others) else "capsule"
                      for g, others in partners.items()}
        self.fits = _fitted(mujoco, source, primitives) if primitives else {}
        self.kind = [primitives.get(g, k) for g, k in enumerate(kind)]
        self.covered, self.uncovered = [], []
        for g1, g2 in pairs:
            shapes = (self.shape_kind(g1), self.shape_kind(g2))
            if None in shapes or (shapes not in KERNELS and shapes[::-1] not in KERNELS):
                self.uncovered.append(f"{geom_name[g1]}-{geom_name[g2]} ({self.kind[g1]}-{self.kind[g2]})")
            else:
                self.covered.append((g1, g2))

    def heights(self, g):
        """A height field geom's heights (nrow, ncol; m)."""
        m, field = self.m, int(self.m.geom_dataid[g])
        start, nrow, ncol = int(m.hfield_adr[field]), int(m.hfield_nrow[field]), int(m.hfield_ncol[field])
        return m.hfield_data[start:start + nrow * ncol].reshape(nrow, ncol) * float(m.hfield_size[field][2])

    def shape_kind(self, g):
        if self.kind[g] == "hfield":  # a flat one (MuJoCo's elevations all 0) is its geom frame's plane z = 0
            return "HeightField" if np.any(self.heights(g)) else "HalfSpace"
        return SHAPES.get(self.kind[g])

    def pose(self, mujoco, g):
        """The geom's (fitted primitive's) pose in its MuJoCo body, 4x4."""
        _, pos, quat = self.fits.get(g, (None, self.m.geom_pos[g], self.m.geom_quat[g]))
        return _pose(mujoco, pos, quat)

    def size(self, g):
        return self.fits[g][0] if g in self.fits else np.asarray(self.m.geom_size[g], float)

    def shape(self, g):
        """(ContactGeometry shape of geom g, its frame S in the geom's, 4x4):
        MuJoCo's plane (z = 0, normal +z) is Simbody's HalfSpace (x > 0)
        turned about y."""
        size, kind = self.size(g), self.kind[g]
        if self.shape_kind(g) == "HeightField":
            field = int(self.m.geom_dataid[g])
            return ContactGeometry.HeightField(self.heights(g), self.m.hfield_size[field][:2]), np.eye(4)
        if kind in ("plane", "hfield"):
            return ContactGeometry.HalfSpace(), pose(rotation_about("y", np.pi / 2))
        shapes = {"sphere": lambda: ContactGeometry.Sphere(size[0]),
                  "capsule": lambda: ContactGeometry.Capsule(size[0], size[1]),
                  "box": lambda: ContactGeometry.Brick(size),
                  "cylinder": lambda: ContactGeometry.Cylinder(size[0], size[1]),
                  "ellipsoid": lambda: ContactGeometry.Ellipsoid(size)}
        return shapes[kind](), np.eye(4)


def _contact(mujoco, m, source, system, forces, placed, body_names, name):
    """(HuntCrossleyForce or None, [the colliding pairs left out], [the mesh
    geoms modelled as fitted primitives, with the primitive]).

    Each geom of a supported type (plane, sphere, capsule, ellipsoid; a
    box against a plane, a sphere, a capsule, a box, an ellipsoid or a
    cylinder; a cylinder against any of these; a flat height field, as the
    plane of its base; any other height field, as a
    ``ContactGeometry.HeightField`` against spheres, capsules, ellipsoids,
    boxes and cylinders; a mesh, as the primitive MuJoCo's compiler fits to it,
    ``_fitted``: a box where it touches only planes, else a capsule) that
    is in one of
    MuJoCo's colliding pairs becomes a
    surface of one contact set on its body; the set's other pairs are
    excluded. Material, from the
    geom's solref (time constant tau, damping ratio z), solimp, friction
    and condim and its body's ``body_invweight0`` A: MuJoCo rests a
    contact that carries a normal force F at the depth ``_resting_depth``
    gives, set by F A and the cone's factor (``_cone_factor``): a free
    body's depth does not depend on its mass; a foot at the end of a leg,
    or a geom of high friction in a pyramidal cone, sinks further. A
    factor below 1 (friction under 1, condim 3) would make MuJoCo's contact
    stiffer than a frictionless one, and the springs that matching it
    takes too stiff to integrate through a fall (dm_control's walker,
    friction 0.7, bounces away under RK4 at 1 ms): it is taken as 1, a
    frictionless contact's depth. The load is the geom's share W of its
    tree's weight (the tree's mass times |g|, over the number of its geoms
    MuJoCo rests it on after 5 s from its initial pose,
    ``_resting_on_world``, or where none, of those that can touch the
    world), on 1 contact (a box's 4, a cylinder's 3, as MuJoCo's). The
    geom's stiffness E is the one at which a sphere of the geom's radius
    (an ellipsoid: its radii's geometric mean) carries W at MuJoCo's
    depth d for it:
    E = 3 W / (4 sqrt(r) d^(3/2)). Its dissipation makes Hunt-Crossley's
    damping at rest, 3/2 c g per unit mass, MuJoCo's 2 / (dmax tau):
    c = 4 / (3 g dmax tau). A box rests on 4 vertices, each k d (1 + c v)
    (Simbody's BrickHalfSpacePenalty) carrying W / 4, and MuJoCo rests each
    of its 4 contacts at the depth d of W / 4: k = W / (4
    d), and c = 2 / (g dmax tau) gives MuJoCo's damping at rest. A
    cylinder's rim points take a box's rule at the depth MuJoCo stands it
    at, on 3 contacts of an end: 4 rim points carry it there (lying on its
    side, 2 carry it, about 1.4x MuJoCo's depth on its 2 contacts). Two
    boxes' patch points take the vertex law too (a box stacked on a box
    rests within 5% of MuJoCo's depths). A box or cylinder touching spheres
    or capsules gets a second surface for those pairs, of Hertz's law, its
    E that of a sphere of their smallest radius carrying the geom's share
    of weight on one contact (a rod across a box rests within 1.5x MuJoCo's
    overlap). Geoms on the world are rigid (E = 1e12 Pa), so
    the moving geom's numbers decide. Friction: static = dynamic = the
    geom's sliding friction (0 with condim 1); Simbody combines two geoms'
    by their harmonic mean where MuJoCo takes the larger (equal when the
    geoms' frictions are). Each geom's margin less its gap is its
    surface's margin, so a pair touches from MuJoCo's distance apart (the
    sum of the margins less the sum of the gaps). Explicit pairs use their
    geoms' numbers too."""
    pairs = _colliding_pairs(mujoco, m)
    geom_name = [name(mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(m.ngeom)]
    geometry = ContactGeoms(mujoco, m, source, pairs, geom_name)
    kind, fits, shape_kind = geometry.kind, geometry.fits, geometry.shape_kind
    covered, uncovered = geometry.covered, geometry.uncovered
    if not covered:
        return None, uncovered, []

    gravity = float(np.linalg.norm(m.opt.gravity)) or 9.81
    root = list(range(m.nbody))  # each body's tree: the child of the world it hangs from
    for b in range(1, m.nbody):
        root[b] = b if m.body_parentid[b] == 0 else root[m.body_parentid[b]]
    tree_mass = {}
    for b in range(1, m.nbody):
        tree_mass[root[b]] = tree_mass.get(root[b], 0.0) + float(m.body_mass[b])

    def on_world(g):  # fixed to the world (on it, or welded to it)
        return m.body_weldid[m.geom_bodyid[g]] == 0

    world_partners = {}  # each moving geom's partners fixed to the world
    for g1, g2 in covered:
        for g, other in ((g1, g2), (g2, g1)):
            if not on_world(g) and on_world(other):
                world_partners.setdefault(g, []).append(other)
    touching_world = {}  # each tree's geoms that can touch the world
    for g in world_partners:
        touching_world.setdefault(root[m.geom_bodyid[g]], set()).add(g)
    carrying = {}  # each tree's geoms MuJoCo rests it on
    for g in _resting_on_world(mujoco, m) & world_partners.keys():
        carrying.setdefault(root[m.geom_bodyid[g]], set()).add(g)

    # A pair's force law: a box's vertices or a cylinder's rim points on a
    # plane, and two boxes' patch points (stiffness N/m), else Hertz's (Pa).
    # A box or cylinder in pairs of both laws gets a surface for each, its
    # Hertz one stiff as a sphere of its partners' smallest radius.
    def law(g1, g2):
        pair = (shape_kind(g1), shape_kind(g2))
        return "vertex" if pair in VERTEX_KERNELS or pair[::-1] in VERTEX_KERNELS else "hertz"

    def shape(g, pair_law):  # (shape, X_GS, the radius its Hertz stiffness is for; 0: vertices, None: rigid)
        geom_shape, X_GS = geometry.shape(g)
        size = geometry.size(g)
        if kind[g] in ("plane", "hfield"):
            radius = None
        elif kind[g] in ("sphere", "capsule"):
            radius = size[0]
        elif kind[g] in ("box", "cylinder"):  # radius 0: its vertices or rim points
            radius = 0.0 if pair_law == "vertex" else partner_radius[g]
        else:
            radius = float(np.prod(size) ** (1 / 3))
        return geom_shape, X_GS, radius

    partner_radius = {}  # a box's or cylinder's Hertz partners (spheres, capsules, ellipsoids): their smallest radius
    for g1, g2 in covered:
        for g, other in ((g1, g2), (g2, g1)):
            if law(g1, g2) == "hertz" and kind[g] in ("box", "cylinder"):
                partner_radius[g] = min(partner_radius.get(g, np.inf), shape(other, "hertz")[2])

    def material(g, radius):
        tau, ratio = _time_constant(mujoco, m, m.geom_solref[g])
        dmax = float(m.geom_solimp[g][1])
        friction = 0.0 if m.geom_condim[g] == 1 else float(m.geom_friction[g][0])
        vertices = 4 if radius == 0.0 else 1  # the points this geom rests on here
        dissipation = (2 if vertices > 1 else 4 / 3) / (gravity * dmax * tau)
        if radius is None or on_world(g):
            return RIGID, dissipation, friction
        tree = root[m.geom_bodyid[g]]
        # its share of its tree's weight, on the contacts MuJoCo rests it on
        load = tree_mass[tree] * gravity / max(len(carrying.get(tree) or touching_world.get(tree, ())), 1)
        contacts = {"box": 4, "cylinder": 3}.get(kind[g], 1) if vertices > 1 else 1
        # A MuJoCo contact takes its geoms' larger friction and condim. A cone
        # factor below 1 would ask for springs too stiff to integrate through
        # a fall (dm_control's walker, as the docstring says): never stiffer
        # than a frictionless contact.
        geoms = [g, *world_partners.get(g, ())]
        cone = max(_cone_factor(mujoco, m, max(float(m.geom_friction[x][0]) for x in geoms),
                                max(int(m.geom_condim[x]) for x in geoms)), 1.0)
        scale = load / contacts * float(m.body_invweight0[m.geom_bodyid[g]][0]) * cone * tau ** 2 * ratio ** 2
        depth = _resting_depth(np.asarray(m.geom_solimp[g], float), scale)
        if vertices > 1:
            return load / (vertices * depth), dissipation, friction
        return 3 * load / (4 * np.sqrt(radius) * depth ** 1.5), dissipation, friction

    def key(g, pair_law):  # a box's or cylinder's surface for the law; any other geom's one surface
        return (g, pair_law if kind[g] in ("box", "cylinder") else None)

    keys = sorted({key(g, law(g1, g2)) for g1, g2 in covered for g in (g1, g2)}, key=lambda k: (k[0], k[1] or ""))
    both = {g for g, pair_law in keys if pair_law == "hertz"} & {g for g, pair_law in keys if pair_law == "vertex"}
    contacts = GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    surface = {}
    hunt_crossley = HuntCrossleyForce(forces, contacts, contact_set)
    for g, pair_law in keys:
        body, X_B = placed[body_names[m.geom_bodyid[g]]]
        geom_shape, X_GS, radius = shape(g, pair_law)
        label = geom_name[g] + (f" ({'vertices' if pair_law == 'vertex' else 'faces'})" if g in both else "")
        surface[g, pair_law] = contacts.add_body(
            contact_set, body, geom_shape, transform(X_B @ geometry.pose(mujoco, g) @ X_GS), name=label,
            margin=max(float(m.geom_margin[g] - m.geom_gap[g]), 0.0))
        stiffness, dissipation, friction = material(g, radius)
        hunt_crossley.set_body_parameters(surface[g, pair_law], stiffness, dissipation, friction, friction, 0.0)
    wanted = {frozenset((surface[key(a, law(a, b))], surface[key(b, law(a, b))])) for a, b in covered}
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            if frozenset((i, j)) not in wanted:
                contacts.exclude_pair(contact_set, i, j)
    used = sorted({g for g, _ in keys})
    return hunt_crossley, uncovered, [f"{geom_name[g]} as a {kind[g]}" for g in used if g in fits]
