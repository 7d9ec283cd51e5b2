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
into its parent's mass properties (``merge_fixed``) or a Weld. Limits,
friction loss and contact become Simbody's elements fitted to the file's
MuJoCo settings (``simbodyx.io.mjcf_fit``), or MuJoCo's own constraint
model with ``physics="mujoco"`` (``simbodyx.io.mjcf_soft``).
"""

from __future__ import annotations

import dataclasses
import pathlib
import warnings

import numpy as np

from simbodyx import functions
from simbodyx.builder import Body, GeneralForceSubsystem, MobilizedBody, MultibodySystem, SimbodyMatterSubsystem
from simbodyx.constraints import Constraint
from simbodyx.contact.geometry import grid_triangles
from simbodyx.forces import Force
from simbodyx.io.mjcf_fit import (
    ContactGeoms,
    _ball_passive,
    _colliding_pairs,
    _cone_stop,
    _contact,
    _friction,
    _isotropic,
    _pose,
    _stop,
)
from simbodyx.io.mjcf_soft import as_coordinates, equality_frames, soft_constraints
from simbodyx.io.robot import Geometry, Robot, aligning, combined_mass_properties, pose, rotation_about, transform
from simbodyx.spatial import MassProperties, Transform

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


@dataclasses.dataclass(frozen=True)
class MjcfOptions:
    """What :func:`load_mjcf` models of a file: its keyword arguments, as
    one record (``robot.options`` of a loaded robot)."""

    merge_fixed: bool = True
    damping: bool = True
    springs: bool = True
    armature: bool = True
    frictionloss: bool = True
    contact: bool = True
    limits: bool = True
    actuators: bool = True
    physics: str = "mujoco"

    def __post_init__(self):
        if self.physics not in ("simbody", "mujoco"):
            raise ValueError(f"load_mjcf: physics must be 'simbody' or 'mujoco', got {self.physics!r}")

    @property
    def soft(self) -> bool:
        """Whether MuJoCo's soft constraints model the constraints (``physics="mujoco"``)."""
        return self.physics == "mujoco"


@dataclasses.dataclass(frozen=True)
class _NotModelled:
    """What the loaded system leaves out, for :func:`_report_dropped`:
    ``uncovered`` the contact pairs without a kernel (None: contact not
    asked for), ``fitted`` the mesh geoms that touch as MuJoCo's fitted
    primitives, ``left_out`` what the soft constraints leave out (None on
    the Simbody path), ``unactuated`` the actuators and ``unmapped`` the
    equalities not modelled."""

    uncovered: list | None
    fitted: list
    left_out: list | None
    unactuated: list
    unmapped: list


def load_mjcf(source, *, merge_fixed: bool = True, damping: bool = True, springs: bool = True,
              armature: bool = True, frictionloss: bool = True, contact: bool = True, limits: bool = True,
              actuators: bool = True, physics: str = "mujoco"):
    """Build a system from an MJCF file through MuJoCo's compiler.

    Joints map to mobilizers as the module's docstring describes, in
    MuJoCo's order, so simbodyx's u is MuJoCo's qvel joint by joint (up to
    the frames of ball and free velocities: ``simbodyx.interop.mujoco``).
    The free joint's default q is the body's pose in the file, a hinge's or
    slide's its ``ref``. Gravity becomes a UniformGravity element.

    With ``physics="mujoco"`` (the default) the file's contacts, joint
    (hinge, slide, ball) and fixed-tendon limits, every dof's friction loss
    and its equality constraints (connect, weld, joint and fixed-tendon
    couplings) are MuJoCo's soft constraints, which the Model's
    Acceleration stage solves (``model.soft_constraints``), and
    ``robot.stepper`` is the file's integrator
    (:class:`simbodyx.integrate.MuJoCoStepper`): the robot moves as MuJoCo
    moves it at the file's time step,
    ``sx.integrate.rollout(model, state, robot.timestep, n, method=robot.stepper)``.

    With ``physics="simbody"`` they are Simbody's elements fitted to the
    file's settings (``simbodyx.io.mjcf_fit``): a Hunt-Crossley contact
    force between the geoms MuJoCo would collide (``robot.contact``), a
    MobilityLinearStop per limited joint (``robot.stops``), a
    MobilityCoulombFriction per friction loss (``robot.frictions``), and
    the equalities as exact constraints (``connect``: Ball, ``weld``:
    Weld, ``joint`` and ``tendon``: CoordinateCoupler, in
    ``robot.couplers``).

    A mesh geom that touches is the primitive MuJoCo fits to it (a box
    where it touches only planes, else a capsule). What neither physics
    models (other actuators, spatial tendons, tendons' own forces, flex,
    inactive equalities, contact pairs without a kernel) is named in one
    warning; ``robot.joints`` keeps the file's joint numbers.

    Args:
        source: An MJCF file's path, or its XML as a string.
        merge_fixed: Merge a body with no joint into its parent's mass
            properties; False welds it (a Weld mobilizer).
        damping: Joint damping as a MobilityLinearDamper per dof
            (``robot.stepper`` takes it implicitly, as MuJoCo does).
        springs: Joint stiffness as a MobilityLinearSpring (a ball's or free
            joint's as one Force.Custom in its dofs' frames, ``robot.springs``).
        armature: Joint armature as the mobilizer's
            (``MobilizedBody.set_armature``).
        frictionloss: Joint friction loss (soft rows, or Coulomb friction
            with the "simbody" physics).
        contact: The contacts between geoms (soft rows, or Hunt-Crossley).
        limits: Joint and tendon limits (soft rows, or stops).
        actuators: Actuators with MuJoCo's affine law (motor, position,
            velocity, and general ones with a fixed gain, an affine bias and
            no activation dynamics) on a hinge or slide, as
            ``Force.MobilityActuator`` (``robot.actuators``; their controls
            are State data: ``robot.set_controls``).
        physics: "mujoco" or "simbody", as above.

    Returns:
        (system, matter, forces, robot): the MultibodySystem, ready for
            ``system.realize_topology()``, its SimbodyMatterSubsystem and
            GeneralForceSubsystem, and a :class:`simbodyx.io.Robot` naming the
            file's joints, bodies, actuators and elements.

    Raises:
        ValueError: An unknown ``physics``, or a file MuJoCo's compiler
            refuses (its message, with the element it names).
        FileNotFoundError: ``source`` is neither XML nor a file's path.
        ImportError: MuJoCo is not installed (``pip install simbodyx[mujoco]``).
    """
    options = MjcfOptions(merge_fixed, damping, springs, armature, frictionloss, contact, limits, actuators, physics)
    soft = options.soft
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
    if np.any(m.opt.gravity != 0) and not int(m.opt.disableflags) & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
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

    couplers, unmapped = (({}, []) if soft  # the soft constraints hold them
                          else _equalities(mujoco, m, matter, placed, body_names, joint_names, moved, name))
    actuated, unactuated = (_actuators(mujoco, m, forces, joint_names, moved, name) if actuators
                            else ({}, [f"all {m.nu}"] if m.nu else []))
    stepper = None
    if soft:
        geom_name = [name(mujoco.mjtObj.mjOBJ_GEOM, g) for g in range(m.ngeom)]
        geometry = ContactGeoms(mujoco, m, source, _colliding_pairs(mujoco, m) if contact else [], geom_name)
        if not limits:
            m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_LIMIT
        if not frictionloss:
            m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
        if not damping:  # then the stepper takes no damping implicitly either
            m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_DAMPER
        constraints, stepper, left_out = soft_constraints(mujoco, m, geometry, placed, body_names, name)
        matter.set_soft_constraints(constraints)
        hunt_crossley, uncovered = None, geometry.uncovered
        fitted = [f"{geom_name[g]} as a {geometry.kind[g]}" for g in geometry.surfaces if g in geometry.fits]
        contact_links = tuple(body_names[m.geom_bodyid[g]] for g in geometry.surfaces)
    else:
        hunt_crossley, uncovered, fitted = (_contact(mujoco, m, source, system, forces, placed, body_names, name)
                                            if contact else (None, None, []))
        left_out, contact_links = None, ()
    _report_dropped(mujoco, m, joints, options, _NotModelled(uncovered, fitted, left_out, unactuated, unmapped))
    geoms = [_drawn(mujoco, m, g, body_names, name(mujoco.mjtObj.mjOBJ_GEOM, g)) for g in range(m.ngeom)]
    links = {n: (handle, transform(X)) for n, (handle, X) in placed.items()}
    robot = Robot(root=body_names[0], links=links, joints=joints, joint_bodies=moved, visuals=geoms,
                  couplers=couplers, dampers=dampers,
                  springs=spring_elements, stops=stops, frictions=frictions, contact=hunt_crossley,
                  actuators=actuated, stepper=stepper, timestep=float(m.opt.timestep), options=options,
                  contact_links=contact_links,
                  directory=None if str(source).lstrip().startswith("<") else str(pathlib.Path(source).parent))
    return system, matter, forces, robot


def _drawn(mujoco, m, g, body_names, name) -> Geometry:
    """Geom g as drawn: MuJoCo's colour rule (a material's rgba unless the
    geom sets its own) and a mesh's or height field's compiled triangles."""
    kind = mujoco.mjtGeom(m.geom_type[g]).name.removeprefix("mjGEOM_").lower()
    rgba, material = m.geom_rgba[g], m.geom_matid[g]
    if material >= 0 and tuple(rgba) == (0.5, 0.5, 0.5, 1.0):
        rgba = m.mat_rgba[material]
    mesh, data = None, m.geom_dataid[g]
    if kind == "mesh":
        vertices = m.mesh_vert[m.mesh_vertadr[data]:m.mesh_vertadr[data] + m.mesh_vertnum[data]]
        mesh = (np.array(vertices, float), np.array(m.mesh_face[m.mesh_faceadr[data]:
                                                                m.mesh_faceadr[data] + m.mesh_facenum[data]]))
    elif kind == "hfield":
        rows, columns = m.hfield_nrow[data], m.hfield_ncol[data]
        sx, sy, top, _ = m.hfield_size[data]
        heights = m.hfield_data[m.hfield_adr[data]:m.hfield_adr[data] + rows * columns].reshape(rows, columns)
        mesh = grid_triangles(heights * top, (sx, sy))
    return Geometry(body_names[m.geom_bodyid[g]], _pose(mujoco, m.geom_pos[g], m.geom_quat[g]), kind,
                    {"size": np.array(m.geom_size[g], float), "name": name, "group": int(m.geom_group[g])},
                    tuple(float(c) for c in rgba), mesh)


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
    for e in range(m.neq):
        label = name(mujoco.mjtObj.mjOBJ_EQUALITY, e)
        kind, data = mujoco.mjtEq(m.eq_type[e]), np.asarray(m.eq_data[e], float)
        first, second = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        if not m.eq_active0[e]:
            unmapped.append(f"{label} (inactive)")
        elif kind in (mujoco.mjtEq.mjEQ_CONNECT, mujoco.mjtEq.mjEQ_WELD):
            (body1, X1), (body2, X2) = equality_frames(mujoco, m, placed, body_names, e)
            if kind == mujoco.mjtEq.mjEQ_CONNECT or data[10] == 0:  # a weld without torque: the origins only
                couplers[label] = Constraint.Ball(body1, X1[:3, 3], body2, X2[:3, 3], name=label)
            else:
                couplers[label] = Constraint.Weld(body1, transform(X1), body2, transform(X2), name=label)
        elif kind in (mujoco.mjtEq.mjEQ_JOINT, mujoco.mjtEq.mjEQ_TENDON) and all(
                as_coordinates(mujoco, m, kind, j) is not None for j in (first, second) if j >= 0):
            (w1, l1_0), c = as_coordinates(mujoco, m, kind, first), data[:5]
            w2, l2_0 = as_coordinates(mujoco, m, kind, second) if second >= 0 else ({}, 0.0)
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


def _report_dropped(mujoco, m, joints, options: MjcfOptions, left: _NotModelled):
    """One warning naming what the loaded system does not model (on the
    MuJoCo path fixed tendons' limits are modelled)."""
    dropped = []
    if left.fitted:
        dropped.append(f"mesh geoms' shapes (they touch as the primitives MuJoCo fits to them: {_listed(left.fitted)})")
    if left.uncovered is None:
        pairs = _colliding_pairs(mujoco, m)
        if pairs:
            dropped.append(f"contacts ({len(pairs)} colliding geom pairs)")
    elif left.uncovered:
        dropped.append(f"contact pairs without a kernel: {_listed(left.uncovered)}")
    if left.left_out:
        dropped.append(f"constraints: {_listed(left.left_out)}")
    if left.unactuated:
        dropped.append(f"actuators {', '.join(left.unactuated)}")
    if left.unmapped:
        dropped.append(f"equality constraints {', '.join(left.unmapped)}")
    by_kind = {
        "joint limits": [j.name for j in joints.values()
                         if j.range is not None and not options.limits],
        "armature": [j.name for j in joints.values() if any(j.armature) and not options.armature],
        "friction loss": [j.name for j, d in zip(joints.values(), m.jnt_dofadr) if m.dof_frictionloss[d] > 0
                          and not options.frictionloss],
        "damping": [j.name for j in joints.values()
                    if any(j.damping) and not (options.damping and _isotropic(j.damping))],
        "stiffness": [j.name for j in joints.values() if j.stiffness and not options.springs],
        "tendon forces or limits": [  # a tendon with none of these acts only through equalities
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_TENDON, t) or f"tendon{t}" for t in range(m.ntendon)
            if (m.tendon_limited[t] and not options.soft)
            or any(np.any(getattr(m, f"tendon_{what}", np.zeros((m.ntendon, 1)))[t])
                   for what in ("stiffness", "stiffnesspoly", "damping", "dampingpoly", "frictionloss", "armature"))
        ],  # some newer than 3.3
    }
    for what, names in by_kind.items():
        if names:
            names = sorted(set(names))
            dropped.append(f"{what} on {_listed(names)}")
    if dropped:
        warnings.warn("load_mjcf: not modelled by the loaded system: " + "; ".join(dropped), stacklevel=3)


def _listed(names, shown: int = 6) -> str:
    """The first ``shown`` names, comma-separated, and how many more there are."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
