"""What a loaded robot file gives besides its system: name lookup
(``Robot``) and the shapes kept for drawing (``Geometry``); and the frame
and mass-property arithmetic both loaders share (4x4 numpy poses in
float64 whatever JAX's precision, exact at build time)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from simbodyx.forces.discrete import with_controls
from simbodyx.spatial import Inertia, MassProperties, Transform


#: The plain-strain modulus (Pa) the loaders give a floor or any shape fixed to
#: the world: stiff enough that the moving shape's material decides the contact.
RIGID = 1e12


@dataclasses.dataclass(frozen=True)
class Geometry:
    """A visual or collision shape, kept for drawing only (``sx.viz``): its
    ``link``, its pose in the link (``origin``, (4, 4)), ``kind`` (URDF's
    "box", "cylinder", "sphere", "mesh"; MJCF's geom types: "plane",
    "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh")
    and the element's attributes (URDF: ``size``, ``radius``, ``length``,
    ``filename`` as written, ``scale``; MJCF: ``size``, ``name``,
    ``group``); ``rgba`` its colour (None: the file gives none); ``mesh``
    an MJCF mesh's or height field's compiled triangles, (vertices (n, 3)
    in the geom's frame, m; faces (k, 3) vertex indices), else None."""

    link: str
    origin: np.ndarray
    kind: str
    attributes: dict
    rgba: tuple | None = None
    mesh: tuple | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Robot(Mapping):
    """Name lookup for a loaded robot: ``robot["link or joint name"]`` is the
    MobilizedBody that carries the link (a link merged into its parent by a
    fixed joint maps to the parent's body; the root of a fixed-base robot to
    Ground) or that the joint moves.

    ``links[name]`` = (MobilizedBody, X_BL): the link frame L on its body;
    ``joint_bodies[name]`` the MobilizedBody each moving joint moves, in
    the q and u order (Pinocchio's joints for URDF, MuJoCo's for MJCF: the
    order ``simbodyx.interop.mujoco.configuration`` takes as
    ``[b.index for b in robot.joint_bodies.values()]``);
    ``joints[name]`` the file's joint record (URDF: :class:`Joint`; MJCF:
    :class:`MjcfJoint`); ``visuals`` and ``collisions`` the shapes
    (:class:`Geometry`); ``root`` the root link's name; ``couplers`` the
    coupling constraint of each mimic joint or equality, ``dampers`` and
    ``springs`` the mobility force elements made for a joint's damping or
    stiffness (a ball's or free joint's dampers: a tuple, one per
    mobility), ``stops`` the MobilityLinearStop made for a joint's limits
    (a ball's cone limit: a Force.Custom),
    ``frictions`` the MobilityCoulombFriction made for a joint's friction
    (a ball's or free joint's stiffness and friction: one Force.Custom, in
    both ``springs`` and ``frictions``);
    ``contact`` the HuntCrossleyForce made for the file's contacts (None:
    none); ``actuators`` the MobilityActuator of each actuator modelled, in
    the file's order (``set_controls``); ``stepper`` the
    ``sx.integrate.MuJoCoStepper`` of an MJCF file loaded with
    ``physics="mujoco"`` (else None; its constraints are the Model's
    ``model.soft_constraints``), ``timestep`` the file's time step
    (s; None for URDF) and ``options`` what ``load_mjcf`` was asked to
    model (``simbodyx.io.MjcfOptions``; None for URDF); ``contact_links``
    the link (MuJoCo body) of each of ``model.soft_constraints``' contact
    surfaces, in their order (empty without soft constraints);
    ``directory`` the folder of the file read (None for a string), where
    ``sx.viz`` looks for a URDF's meshes."""

    root: str
    links: dict
    joints: dict
    joint_bodies: dict
    visuals: list = dataclasses.field(default_factory=list)
    collisions: list = dataclasses.field(default_factory=list)
    couplers: dict = dataclasses.field(default_factory=dict)
    dampers: dict = dataclasses.field(default_factory=dict)
    springs: dict = dataclasses.field(default_factory=dict)
    stops: dict = dataclasses.field(default_factory=dict)
    frictions: dict = dataclasses.field(default_factory=dict)
    contact: object = None
    actuators: dict = dataclasses.field(default_factory=dict)
    stepper: object = None
    timestep: float | None = None
    options: object = None
    contact_links: tuple = ()
    directory: str | None = None

    def __getitem__(self, name):
        if name in self.links:
            return self.links[name][0]
        if name in self.joint_bodies:
            return self.joint_bodies[name]
        if name in self.joints:
            raise KeyError(f"joint {name!r} is fixed and merged: it moves no body (use its child link's name)")
        raise KeyError(f"no link or joint named {name!r}")

    def __iter__(self):
        return iter([*self.links, *self.joint_bodies])

    def __len__(self):
        return len(self.links) + len(self.joint_bodies)

    def set_controls(self, state, controls):
        """A new State whose actuators (``actuators``, in order) hold
        ``controls`` (one number each; MuJoCo's ctrl when every actuator is
        modelled)."""
        controls = np.asarray(controls) if not hasattr(controls, "shape") else controls
        if controls.shape != (len(self.actuators),):
            raise ValueError(f"set_controls: expected {len(self.actuators)} controls (one per modelled actuator: "
                             f"{', '.join(self.actuators)}), got shape {controls.shape}")
        return with_controls(self.actuators.values(), state, controls)

    def get_link_transform(self, state, name):
        """X_GL, the pose of link ``name``'s frame in Ground (Position)."""
        if name not in self.links:
            raise KeyError(f"no link named {name!r}")
        body, X_BL = self.links[name]
        return body.get_body_transform(state) @ X_BL

    def coordinate_names(self, state):
        """(q names (nq,), u names (nu,)) of a State of this robot's system:
        one per coordinate, the moving joint's name with a suffix for
        multi-coordinate joints (Free: quaternion qw, qx, qy, qz or Euler
        angles ax, ay, az, then x, y, z; speeds wx, wy, wz, vx, vy, vz in
        the parent frame; Ball: the quaternion or angles, speeds wx, wy,
        wz; Planar: rz, x, y)."""
        q_names, u_names = [""] * state.topology.nq, [""] * state.topology.nu
        for joint, body in self.joint_bodies.items():
            nq, nu = body.get_num_q(state), body.get_num_u(state)
            kind = type(body).__name__
            q_suffix = {("Free", 7): ["qw", "qx", "qy", "qz", "x", "y", "z"],
                        ("Free", 6): ["ax", "ay", "az", "x", "y", "z"],
                        ("Ball", 4): ["qw", "qx", "qy", "qz"], ("Ball", 3): ["ax", "ay", "az"],
                        ("Planar", 3): ["rz", "x", "y"]}.get((kind, nq), [""])
            u_suffix = {"Free": ["wx", "wy", "wz", "vx", "vy", "vz"], "Ball": ["wx", "wy", "wz"],
                        "Planar": ["rz", "x", "y"]}.get(kind, [""])
            first_q, first_u = body.get_first_q_index(state), body.get_first_u_index(state)
            for k, suffix in enumerate(q_suffix[:nq]):
                q_names[first_q + k] = f"{joint}.{suffix}" if suffix else joint
            for k, suffix in enumerate(u_suffix[:nu]):
                u_names[first_u + k] = f"{joint}.{suffix}" if suffix else joint
        return q_names, u_names


def aligning(a, b):
    """A rotation taking unit a onto unit b (the smallest one; half a turn
    about an axis perpendicular to a when they are opposite)."""
    v, c = np.cross(a, b), float(a @ b)
    if c < -1 + 1e-12:
        perpendicular = np.cross(a, [1.0, 0, 0] if abs(a[0]) < 0.9 else [0, 1.0, 0])
        k = perpendicular / np.linalg.norm(perpendicular)
        return 2 * np.outer(k, k) - np.eye(3)
    V = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + V + V @ V / (1 + c)


def rotation_about(axis, angle):
    """The rotation by ``angle`` (rad) about the coordinate axis "x", "y" or "z"."""
    c, s = math.cos(angle), math.sin(angle)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def pose(R=np.eye(3), p=(0.0, 0.0, 0.0)):
    """The 4x4 pose (R, p)."""
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, p
    return X


def transform(X):
    """A Transform from a 4x4 pose."""
    return Transform(X[:3, :3], X[:3, 3])


def combined_mass_properties(parts):
    """Mass properties about a body's origin, in B, of parts (X_BC: the
    4x4 pose of a part's mass-center frame C in B, mass, central inertia
    (3, 3) in C)."""
    mass, first, second = 0.0, np.zeros(3), np.zeros((3, 3))  # sum m, sum m c, inertia about Bo
    for X_BC, m, I_C in parts:
        R, c = X_BC[:3, :3], X_BC[:3, 3]
        mass += m
        first += m * c
        second += R @ I_C @ R.T + m * ((c @ c) * np.eye(3) - np.outer(c, c))
    return MassProperties(mass, first / mass if mass > 0 else np.zeros(3), Inertia(second))
