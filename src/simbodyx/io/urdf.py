"""URDF into the Simbody-style builder: ``load_urdf``.

URDF places each joint frame J in its parent link's frame (``<origin>``),
the child link's frame coincides with J, and the joint moves about or along
``<axis>`` (in J). Simbody's mobilizers move about fixed axes (Pin: z,
Slider: x, Planar: z normal), so a rotation R_JM taking the mobilizer's axis
onto the URDF axis is carried by both frames: X_PF = X_{P,J} R_JM and
X_BM = R_JM, which gives X_PB(q) = X_{P,J} Rot(axis, q) exactly.

Parsed with ``defusedxml`` (the standard library's ``xml.etree`` behind
guards), so a file from anywhere is safe to load: a document type
declaration, and with it every entity, is refused (URDF needs none; an
entity-expansion "billion laughs" file or an external entity reading a
local file fails before any expansion), and so is a file over
``MAX_URDF_BYTES``. Mesh filenames are kept as given in ``robot.links``'
geometries and never opened. The third-party URDF parsers compared
(``yourdfpy``, ``urdf-parser-py``) add dependencies without the checks the
loader needs.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import pathlib
import warnings
import xml.etree.ElementTree as ET

import defusedxml
import defusedxml.ElementTree
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
from simbodyx.forces import Force
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
from simbodyx.spatial import Inertia, MassProperties, Transform

#: URDF joint type -> (simbodyx mobilizer, the mobilizer's own axis, or None)
MOBILIZERS = {"revolute": ("Pin", (0, 0, 1)), "continuous": ("Pin", (0, 0, 1)),
              "prismatic": ("Slider", (1, 0, 0)), "planar": ("Planar", (0, 0, 1)),
              "floating": ("Free", None), "fixed": ("Weld", None)}


@dataclasses.dataclass(frozen=True)
class Joint:
    """One URDF joint as written: its frame in the parent link (``origin``),
    its unit ``axis`` in that frame, and the metadata simbodyx keeps but does
    not apply unless asked (limits, dynamics, mimic)."""

    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray  # (4, 4) X_{parent link, J}
    axis: np.ndarray  # (3,) unit, in J
    lower: float | None = None
    upper: float | None = None
    effort: float | None = None
    velocity: float | None = None
    damping: float = 0.0
    friction: float = 0.0
    mimic: tuple[str, float, float] | None = None  # (joint, multiplier, offset): q = m q_joint + offset


@dataclasses.dataclass(frozen=True)
class UrdfContact:
    """What ``load_urdf(contact=...)`` models: each ``<collision>`` sphere,
    box and cylinder against a floor, the half-space z < ``floor_height``
    (m) of Ground (URDF's z is up), with one HuntCrossleyForce. URDF gives
    no material, so these numbers are the caller's, the same for every
    shape: ``stiffness`` (Pa, Hertz's, for spheres), ``vertex_stiffness``
    (N/m at each of a box's vertices or a cylinder's rim points, Simbody's
    BrickHalfSpacePenalty), ``dissipation`` (s/m) and the friction
    coefficients. The floor is rigid (1e12), so the shapes' numbers decide."""

    stiffness: float
    vertex_stiffness: float
    dissipation: float
    static_friction: float
    dynamic_friction: float
    viscous_friction: float = 0.0
    floor_height: float = 0.0


def load_urdf(source, *, floating_base: bool = False, gravity=(0.0, 0.0, -9.81), merge_fixed: bool = True,
              mimic: bool = True, damping: bool = False, friction=None, limits=None,
              contact: UrdfContact | None = None):
    """Build a system from a URDF file.

    Joints map to mobilizers: revolute and continuous to Pin, prismatic to
    Slider, planar to Planar, floating to Free, fixed to a merge or a Weld.
    Bodies are added depth first, siblings sorted by joint name:
    Pinocchio's joint order, so q and u follow Pinocchio's layout joint by
    joint. Limits and friction the file gives but does not apply are kept
    in ``robot.joints``.

    Args:
        source: A URDF file's path, or its XML as a string.
        floating_base: The root link floats on a Free mobilizer; False: the
            root link is Ground.
        gravity: (3,) m/s^2 in Ground (z up, as URDF assumes), a
            UniformGravity element; None: no gravity.
        merge_fixed: Merge a fixed joint's child into its parent's mass
            properties (as Pinocchio and MuJoCo do); False welds it.
        mimic: Mimic joints as CoordinateCoupler constraints; False:
            independent joints, as Pinocchio builds them by default (a fixed
            joint's mimic tag is ignored).
        damping: A MobilityLinearDamper per joint with ``<dynamics damping>``.
        friction: vt (m/s or rad/s, > 0): a MobilityCoulombFriction per joint
            with ``<dynamics friction>`` (``robot.frictions``), smoothed
            below the transition velocity vt, which URDF does not give; None:
            none.
        limits: (stiffness, dissipation) (N/m or N m/rad, s/m or s/rad): each
            revolute or prismatic joint's ``<limit lower upper>`` as a
            ``Force.MobilityLinearStop`` (``robot.stops``); URDF gives the
            range but no stiffness. None: none.
        contact: A :class:`UrdfContact`: the ``<collision>`` spheres, boxes
            and cylinders of moving links touch a floor (``robot.contact``, a
            HuntCrossleyForce whose set holds the floor, surface 0, and the
            shapes in file order); links do not touch each other (URDF's
            collision shapes often overlap at the joints), and meshes are
            left out with a warning naming them. None: no contact.

    Returns:
        (system, matter, forces, robot): the MultibodySystem, ready for
            ``system.realize_topology()``, its SimbodyMatterSubsystem and
            GeneralForceSubsystem, and a :class:`simbodyx.io.Robot` naming the
            file's joints, links and elements.

    Raises:
        ValueError: A malformed or oversized file (an unknown parent or
            joint type, a non-physical inertia, a cycle, a document type
            declaration), or bad ``limits`` or ``friction``, naming the
            offending element.
        FileNotFoundError: ``source`` is neither XML nor a file's path.
    """
    root_element, where = _parse(source)
    links, joints, visuals, collisions = _read(root_element, where)
    children, root = _tree(links, joints, where)

    system = MultibodySystem()
    matter = SimbodyMatterSubsystem(system)
    forces = GeneralForceSubsystem(system)
    if gravity is not None:
        Force.UniformGravity(forces, matter, list(gravity))

    # each body is a moving link plus the links fixed to it (when merging)
    def group(link):
        members, frontier = [(link, np.eye(4))], [(link, np.eye(4))]
        while frontier and merge_fixed:
            name, X_BL = frontier.pop()
            for joint in children[name]:
                if joint.type == "fixed":
                    member = (joint.child, X_BL @ joint.origin)
                    members.append(member)
                    frontier.append(member)
        return members

    placed, moved = {}, {}  # link -> (MobilizedBody, X_BL); joint -> MobilizedBody

    def add(parent_link, joint, members):
        parent_body, X_PL = placed[parent_link]
        kind, own_axis = MOBILIZERS[joint.type]
        R_JM = np.eye(3) if own_axis is None else aligning(np.asarray(own_axis, float), joint.axis)
        X_PF = transform(X_PL @ joint.origin @ pose(R_JM))
        body = Body.Rigid(_mass_properties(members, links))
        b = getattr(MobilizedBody, kind)(parent_body, X_PF, body, transform(pose(R_JM)), name=joint.child)
        moved[joint.name] = b
        for link, X_BL in members:
            placed[link] = (b, X_BL)

    root_members = group(root)
    if floating_base:
        b = MobilizedBody.Free(matter.Ground(), Transform(),
                               Body.Rigid(_mass_properties(root_members, links)), Transform(),
                               name=root)
        moved["root_joint"] = b
        for link, X_BL in root_members:
            placed[link] = (b, X_BL)
    else:
        for link, X_BL in root_members:
            placed[link] = (matter.Ground(), X_BL)

    def descend(link):
        for joint in children[link]:
            if joint.child not in placed:  # merged members were placed with their body
                add(link, joint, group(joint.child))
            descend(joint.child)

    descend(root)
    _check_massless_leaves(placed, moved, links, where)

    if limits is not None:
        if len(limits) != 2 or not all(np.isfinite(x) and x >= 0 for x in map(float, limits)):
            raise ValueError(f"{where}: limits must be (stiffness, dissipation), both nonnegative, got {limits!r}")
    if friction is not None and not (np.isfinite(float(friction)) and float(friction) > 0):
        raise ValueError(f"{where}: friction must be a transition velocity > 0, got {friction!r}")
    couplers, dampers, frictions, stops = {}, {}, {}, {}
    for joint in joints.values():
        if joint.mimic is not None and mimic and joint.type != "fixed":  # a fixed joint follows nothing
            couplers[joint.name] = _coupler(matter, joint, joints, moved, where)
        if damping and joint.damping > 0 and joint.type in ("revolute", "continuous", "prismatic"):
            dampers[joint.name] = Force.MobilityLinearDamper(forces, moved[joint.name], 0, joint.damping)
        if friction is not None and joint.friction > 0 and joint.type in ("revolute", "continuous", "prismatic"):
            frictions[joint.name] = Force.MobilityCoulombFriction(forces, moved[joint.name], 0, joint.friction,
                                                                  friction)
        if limits is not None and joint.type in ("revolute", "prismatic") and None not in (joint.lower, joint.upper):
            stops[joint.name] = Force.MobilityLinearStop(forces, moved[joint.name], 0, *map(float, limits),
                                                         joint.lower, joint.upper)
    hunt_crossley = None if contact is None else _floor_contact(system, matter, forces, placed, collisions, contact,
                                                                 where)
    links_on_bodies = {link: (body, transform(X_BL)) for link, (body, X_BL) in placed.items()}
    robot = Robot(root=root, links=links_on_bodies, joints=joints, joint_bodies=moved, visuals=visuals,
                  collisions=collisions, couplers=couplers, dampers=dampers, stops=stops, frictions=frictions,
                  contact=hunt_crossley,
                  directory=None if where == "URDF string" else str(pathlib.Path(where).resolve().parent))
    return system, matter, forces, robot


def _floor_contact(system, matter, forces, placed, collisions, contact: UrdfContact, where):
    """The HuntCrossleyForce of ``load_urdf(contact=...)``: the floor, then each
    collision primitive of a moving link, every link-link pair excluded."""
    contacts = GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    floor = pose(rotation_about("y", np.pi / 2))  # S's x (into the half-space) onto -z
    floor[2, 3] = float(contact.floor_height)
    contacts.add_body(contact_set, matter.Ground(), ContactGeometry.HalfSpace(), transform(floor), name="floor")
    stiffness, meshes = [RIGID], []  # per surface, the floor's first
    for g in collisions:
        body, X_BL = placed[g.link]
        if body.is_ground():
            continue
        what = f"{where}: link {g.link!r} <collision> {g.kind}"
        try:
            if g.kind == "sphere":
                shape, law = ContactGeometry.Sphere(float(g.attributes["radius"])), "stiffness"
            elif g.kind == "box":
                size = [float(x) for x in g.attributes["size"].split()]
                shape, law = ContactGeometry.Brick(np.asarray(size) / 2), "vertex_stiffness"
            elif g.kind == "cylinder":
                radius, length = float(g.attributes["radius"]), float(g.attributes["length"])
                shape, law = ContactGeometry.Cylinder(radius, length / 2), "vertex_stiffness"
            else:
                meshes.append(g.link)
                continue
        except (KeyError, ValueError) as error:
            raise ValueError(f"{what}: {error}") from None
        contacts.add_body(contact_set, body, shape, transform(X_BL @ g.origin), name=f"{g.link} {g.kind}")
        stiffness.append(getattr(contact, law))
    if meshes:
        warnings.warn(f"load_urdf: collision meshes not modelled (links {', '.join(meshes)})", stacklevel=3)
    for i in range(1, len(stiffness)):
        for j in range(i + 1, len(stiffness)):
            contacts.exclude_pair(contact_set, i, j)
    hunt_crossley = HuntCrossleyForce(forces, contacts, contact_set)
    for surface, k in enumerate(stiffness):
        hunt_crossley.set_body_parameters(surface, k, contact.dissipation, contact.static_friction,
                                          contact.dynamic_friction, contact.viscous_friction)
    return hunt_crossley


def example_robot_data(path: str = "") -> pathlib.Path:
    """A file or folder of the robots the ``example-robot-data`` package ships.

    Args:
        path: Its path under the package's ``robots`` folder, e.g.
            "panda_description/urdf/panda.urdf"; "" for the folder.

    Returns:
        The path on this machine.

    Raises:
        ImportError: example-robot-data is not installed (``simbodyx[robots]``).
        FileNotFoundError: No such file or folder there.
    """
    try:
        robots = importlib.metadata.distribution("example-robot-data").locate_file(
            "cmeel.prefix/share/example-robot-data/robots")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("example_robot_data: the example-robot-data package is not installed "
                          "(pip install example-robot-data, or simbodyx[robots])") from None
    found = pathlib.Path(str(robots)) / path
    if not found.exists():
        raise FileNotFoundError(f"example_robot_data: no {path!r} under {robots}")
    return found


# -- reading -----------------------------------------------------------------------------------

#: the largest URDF load_urdf reads (bytes); published robots are well under 1 MB
MAX_URDF_BYTES = 16 * 2**20


def _parse(source):
    """(the <robot> element, a label for messages) from a path or XML text."""
    text = str(source)
    if text.lstrip().startswith("<"):
        where = "URDF string"
        _check_size(len(text.encode()), where)
    else:
        path = pathlib.Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"load_urdf: no URDF file at {path}")
        where = str(path)
        _check_size(path.stat().st_size, where)
        text = path.read_text()
    try:
        element = defusedxml.ElementTree.fromstring(text, forbid_dtd=True)
    except ET.ParseError as error:
        raise ValueError(f"{where}: not well-formed XML ({error})") from None
    except defusedxml.DefusedXmlException as error:
        raise ValueError(f"{where}: refused ({error}): a URDF needs no document type declaration "
                         "or entities") from None
    if element.tag != "robot":
        raise ValueError(f"{where}: the root element is <{element.tag}>, not <robot>")
    return element, where


def _check_size(size: int, where: str) -> None:
    if size > MAX_URDF_BYTES:
        raise ValueError(f"{where}: {size:,} bytes, over load_urdf's limit of {MAX_URDF_BYTES:,} "
                         "(simbodyx.io.urdf.MAX_URDF_BYTES)")


def _floats(element, attribute, count, default, what):
    text = element.get(attribute) if element is not None else None
    if text is None:
        return np.asarray(default, float)
    try:
        values = np.array([float(v) for v in text.split()])
    except ValueError:
        raise ValueError(f"{what}: {attribute}={text!r} is not {count} numbers") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise ValueError(f"{what}: {attribute}={text!r} must be {count} finite numbers")
    return values


def _origin(element, what):
    """(4, 4) pose of an <origin xyz rpy> (fixed-axis roll, pitch, yaw)."""
    origin = element.find("origin") if element is not None else None
    xyz = _floats(origin, "xyz", 3, (0, 0, 0), f"{what} <origin>")
    r, p, y = _floats(origin, "rpy", 3, (0, 0, 0), f"{what} <origin>")
    return pose(rotation_about("z", y) @ rotation_about("y", p) @ rotation_about("x", r), xyz)


def _number(element, attribute, what, default=None):
    text = element.get(attribute) if element is not None else None
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what}: {attribute}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{what}: {attribute}={text!r} is not finite")
    return value


def _named(element, kind, where):
    name = element.get("name")
    if not name:
        raise ValueError(f"{where}: a <{kind}> has no name")
    return name


def _color(material, named, what):
    """A <material>'s rgba: its own <color>, else the top-level material it names."""
    if material is None:
        return None
    color = material.find("color")
    if color is None:
        return named.get(material.get("name"))
    values = (color.get("rgba") or "").split()
    try:
        rgba = tuple(float(v) for v in values)
    except ValueError:
        rgba = ()
    if len(rgba) != 4 or not all(math.isfinite(v) for v in rgba):
        raise ValueError(f"{what} <color>: rgba={color.get('rgba')!r} is not four numbers")
    return rgba


def _read(robot, where):
    links, joints, visuals, collisions = {}, {}, [], []
    named = {m.get("name"): _color(m, {}, f"{where}: material {m.get('name')!r}") for m in robot.findall("material")}
    for element in robot.findall("link"):
        name = _named(element, "link", where)
        if name in links:
            raise ValueError(f"{where}: two links named {name!r}")
        what = f"{where}: link {name!r}"
        inertial = element.find("inertial")
        if inertial is None:
            links[name] = None
        else:
            mass = _number(inertial.find("mass"), "value", f"{what} <mass>")
            if mass is None:
                raise ValueError(f"{what}: <inertial> has no <mass value>")
            moments = inertial.find("inertia")
            values = [_number(moments, k, f"{what} <inertia>", 0.0)
                      for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")]
            xx, yy, zz, xy, xz, yz = values
            central = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            MassProperties.from_central(mass, np.zeros(3), Inertia(central)).check(where=f"{what} <inertial>")
            links[name] = (mass, _origin(inertial, f"{what} <inertial>"), central)
        for tag, out in (("visual", visuals), ("collision", collisions)):
            for shape in element.findall(tag):
                geometry = shape.find("geometry")
                for kind in ("box", "cylinder", "sphere", "mesh"):
                    found = geometry.find(kind) if geometry is not None else None
                    if found is not None:
                        out.append(Geometry(name, _origin(shape, f"{what} <{tag}>"), kind, dict(found.attrib),
                                            _color(shape.find("material"), named, f"{what} <{tag}>")))
    for element in robot.findall("joint"):
        name = _named(element, "joint", where)
        what = f"{where}: joint {name!r}"
        if name in joints:
            raise ValueError(f"{where}: two joints named {name!r}")
        kind = element.get("type")
        if kind not in MOBILIZERS:
            raise ValueError(f"{what}: unknown type {kind!r}; URDF's types are {sorted(MOBILIZERS)}")
        ends = []
        for end in ("parent", "child"):
            found = element.find(end)
            link = found.get("link") if found is not None else None
            if link is None:
                raise ValueError(f"{what}: no <{end} link=...>")
            if link not in links:
                raise ValueError(f"{what}: its {end} link {link!r} is not defined")
            ends.append(link)
        axis = _floats(element.find("axis"), "xyz", 3, (1, 0, 0), f"{what} <axis>")
        if MOBILIZERS[kind][1] is not None:
            length = np.linalg.norm(axis)
            if length < 1e-12:
                raise ValueError(f"{what}: <axis xyz> has zero length")
            axis = axis / length
        limit, dynamics, mimic = element.find("limit"), element.find("dynamics"), element.find("mimic")
        if mimic is not None:
            if mimic.get("joint") is None:
                raise ValueError(f"{what}: <mimic> names no joint")
            mimic = (mimic.get("joint"), _number(mimic, "multiplier", f"{what} <mimic>", 1.0),
                     _number(mimic, "offset", f"{what} <mimic>", 0.0))
        joints[name] = Joint(name, kind, ends[0], ends[1], _origin(element, what), axis,
                             _number(limit, "lower", what), _number(limit, "upper", what),
                             _number(limit, "effort", what), _number(limit, "velocity", what),
                             _number(dynamics, "damping", what, 0.0), _number(dynamics, "friction", what, 0.0),
                             mimic)
    if not links:
        raise ValueError(f"{where}: no <link>")
    return links, joints, visuals, collisions


def _tree(links, joints, where):
    """(joints by parent link, sorted by name; the root link), checking that
    the links form one tree."""
    children = {name: [] for name in links}
    parent_of = {}
    for joint in joints.values():
        if joint.child in parent_of:
            raise ValueError(f"{where}: link {joint.child!r} is the child of two joints, "
                             f"{parent_of[joint.child]!r} and {joint.name!r} (URDF is a tree; "
                             f"close loops with constraints after loading)")
        parent_of[joint.child] = joint.name
        children[joint.parent].append(joint)
    for siblings in children.values():
        siblings.sort(key=lambda joint: joint.name.encode())  # urdfdom's (so Pinocchio's) order
    roots = [name for name in links if name not in parent_of]
    if len(roots) != 1:
        if not roots:
            raise ValueError(f"{where}: every link is some joint's child: the joints form a cycle")
        raise ValueError(f"{where}: {len(roots)} root links {roots}: the links do not form one tree")
    reached, frontier = {roots[0]}, [roots[0]]
    while frontier:
        for joint in children[frontier.pop()]:
            reached.add(joint.child)
            frontier.append(joint.child)
    if len(reached) != len(links):
        cycle = sorted(set(links) - reached)
        raise ValueError(f"{where}: links {cycle} are joined in a cycle, unreachable from the root {roots[0]!r}")
    return children, roots[0]


# -- mapping -----------------------------------------------------------------------------------

def _mass_properties(members, links):
    """The members' (link, X_BL) combined mass properties; links without
    <inertial> count nothing."""
    return combined_mass_properties([(X_BL @ links[link][1], links[link][0], links[link][2])
                                     for link, X_BL in members if links[link] is not None])


def _check_massless_leaves(placed, moved, links, where):
    """A moving body with no mass and nothing massive outboard makes the
    mass matrix singular: refuse it by name (a massless Weld is harmless)."""
    massive = {body.index for link, (body, _) in placed.items() if links[link] is not None and links[link][0] > 0}
    for body in sorted(moved.values(), key=lambda b: -b.index):  # outboard first
        if body.index in massive:
            massive.add(body.parent.index)
    for joint, body in moved.items():
        if body.index not in massive and type(body).__name__ != "Weld":
            raise ValueError(f"{where}: joint {joint!r} moves link {body.name!r}, which has no <inertial> mass and "
                             f"carries nothing massive: its motion would have no inertia")


def _coupler(matter, joint, joints, moved, where):
    leader, multiplier, offset = joint.mimic
    what = f"{where}: joint {joint.name!r} <mimic joint={leader!r}>"
    if leader not in joints:
        raise ValueError(f"{what}: no joint of that name")
    for name in (joint.name, leader):
        if joints[name].type not in ("revolute", "continuous", "prismatic"):
            raise ValueError(f"{what}: {name!r} is {joints[name].type}; mimic couples one-coordinate joints")
    return Constraint.CoordinateCoupler(matter, functions.Linear((1.0, -multiplier, -offset)),
                                        [moved[joint.name], moved[leader]], [0, 0], name=f"mimic {joint.name}")
