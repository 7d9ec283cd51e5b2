"""What a viewer draws: each body's shapes in its own frame (``Visual``),
gathered from a loaded robot's file or from the Model's contact surfaces,
and every body's pose in Ground along a trajectory (``body_poses``). Pure
numpy at build time, one jitted vmap for the poses."""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.contact.geometry import ContactSurface, grid_triangles
from simbodyx.io.robot import aligning
from simbodyx.spatial.rotation import matrix_to_quaternion
from simbodyx.stage import Stage

#: the colour of a shape whose file or surface gives none (rgba)
DEFAULT_COLOR = (0.62, 0.66, 0.74, 1.0)
#: MuJoCo's visible geom groups by default
MUJOCO_GROUPS = (0, 1, 2)

# a plane's frame P (plane z = 0, normal +z) in a HalfSpace's frame S (plane
# x = 0, outward normal -x): R_SP's columns are y_S, -z_S, -x_S
_R_SP_HALFSPACE = np.array([[0.0, 0.0, -1.0], [1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclasses.dataclass(frozen=True)
class Visual:
    """One shape fixed to a body, as the viewer draws it, in its own frame S.

    Attributes:
        body: The body's index (0: Ground).
        kind: "box", "sphere", "ellipsoid", "capsule", "cylinder", "plane"
            or "mesh".
        size: (m) a box's half lengths along S's x, y, z; a sphere's
            (radius,); an ellipsoid's semi-axes; a capsule's or cylinder's
            (radius, half length along S's z); a plane's half extents along
            S's x and y, 0 for unbounded (the plane z = 0 of S, seen from
            +z); () for a mesh.
        X_BS: (4, 4) S's pose in the body's frame B.
        rgba: Its colour, each in [0, 1].
        mesh: A mesh's (vertices (n, 3) in S, m; faces (k, 3) vertex
            indices, counter-clockwise seen from outside); else None.
        name: A label (the file's geom name).
    """

    body: int
    kind: str
    size: tuple
    X_BS: np.ndarray
    rgba: tuple = DEFAULT_COLOR
    mesh: tuple | None = None
    name: str = ""


def _pose(R=np.eye(3), p=np.zeros(3)):
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, p
    return X


def surface_visual(surface: ContactSurface) -> Visual:
    """The Visual of a contact surface (``sx.ContactGeometry``'s shapes)."""
    shape, X = surface.shape, _pose(np.asarray(surface.X_BS.R), np.asarray(surface.X_BS.p))
    kind = shape.kind
    if kind == "HalfSpace":
        return Visual(surface.body, "plane", (0.0, 0.0), X @ _pose(_R_SP_HALFSPACE), name=surface.name)
    if kind == "HeightField":
        mesh = grid_triangles(np.asarray(shape.heights), np.asarray(shape.half_lengths))
        return Visual(surface.body, "mesh", (), X, mesh=mesh, name=surface.name)
    size = {"Sphere": lambda: (shape.radius,), "Ellipsoid": lambda: tuple(shape.radii),
            "Brick": lambda: tuple(shape.half_lengths),
            "Cylinder": lambda: (shape.radius, shape.half_length),
            "Capsule": lambda: (shape.radius, shape.half_length)}[kind]()
    return Visual(surface.body, {"Brick": "box"}.get(kind, kind.lower()), tuple(float(s) for s in size), X,
                  name=surface.name)


def contact_surfaces(model) -> list:
    """Every ContactSurface the Model holds (its force elements, rigid
    contacts and soft constraints), each once, in the order found."""
    found, seen = [], set()
    for leaf in jax.tree_util.tree_leaves(model, is_leaf=lambda x: isinstance(x, ContactSurface)):
        if isinstance(leaf, ContactSurface) and (leaf.body, leaf.name, id(leaf.shape)) not in seen:
            seen.add((leaf.body, leaf.name, id(leaf.shape)))
            found.append(leaf)
    return found


def _mjcf_visual(body, X_BL, geometry) -> Visual | None:
    size, kind = geometry.attributes["size"], geometry.kind
    shape = {"plane": lambda: ("plane", (size[0], size[1])), "sphere": lambda: ("sphere", (size[0],)),
             "capsule": lambda: ("capsule", (size[0], size[1])), "cylinder": lambda: ("cylinder", (size[0], size[1])),
             "ellipsoid": lambda: ("ellipsoid", tuple(size)), "box": lambda: ("box", tuple(size)),
             "mesh": lambda: ("mesh", ()), "hfield": lambda: ("mesh", ())}.get(kind)
    if shape is None:  # MuJoCo's sdf and flex geoms are not drawn
        return None
    kind, size = shape()
    return Visual(body, kind, tuple(float(s) for s in size), X_BL @ geometry.origin, geometry.rgba or DEFAULT_COLOR,
                  geometry.mesh, geometry.attributes.get("name", ""))


def _mesh_file(filename, directory, package_dirs, where):
    """A URDF mesh's path: ``package://name/rest`` under a package folder
    (``package_dirs``, then the URDF's folder and its ancestors), ``file://``
    as given, else relative to the URDF's folder."""
    roots = [pathlib.Path(d) for d in package_dirs]
    if directory is not None:
        roots += [pathlib.Path(directory), *pathlib.Path(directory).parents]
    if filename.startswith("package://"):
        package, _, rest = filename.removeprefix("package://").partition("/")
        candidates = [root / package / rest for root in roots] + [root / rest for root in roots]
    elif filename.startswith("file://"):
        candidates = [pathlib.Path(filename.removeprefix("file://"))]
    else:
        candidates = [pathlib.Path(directory or ".") / filename]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"sx.viz: {where}: mesh {filename!r} not found (looked under "
                            f"{', '.join(str(r) for r in roots) or 'nothing'}; pass package_dirs=)")


def _urdf_visuals(body, X_BL, geometry, directory, package_dirs) -> list:
    a, X = geometry.attributes, X_BL @ geometry.origin
    rgba = geometry.rgba or DEFAULT_COLOR
    where = f"link {geometry.link!r}"
    if geometry.kind == "box":
        return [Visual(body, "box", tuple(float(s) / 2 for s in a["size"].split()), X, rgba)]
    if geometry.kind == "sphere":
        return [Visual(body, "sphere", (float(a["radius"]),), X, rgba)]
    if geometry.kind == "cylinder":
        return [Visual(body, "cylinder", (float(a["radius"]), float(a["length"]) / 2), X, rgba)]
    try:
        import trimesh
    except ImportError:
        raise ImportError("sx.viz draws a URDF's meshes with trimesh: pip install simbodyx[viz]") from None
    path = _mesh_file(a["filename"], directory, package_dirs, where)
    scale = np.array([float(s) for s in a.get("scale", "1 1 1").split()])
    loaded = trimesh.load(str(path))
    parts = loaded.dump(concatenate=False) if isinstance(loaded, trimesh.Scene) else [loaded]
    visuals = []
    for part in parts:
        color = rgba
        if geometry.rgba is None:  # the mesh file's own colour
            visual = part.visual
            main = visual.material.main_color if hasattr(visual, "material") else visual.main_color
            color = tuple(float(c) / 255 for c in main)
        mesh = (np.asarray(part.vertices, float) * scale, np.asarray(part.faces))
        visuals.append(Visual(body, "mesh", (), X, color, mesh, path.name))
    return visuals


def robot_visuals(robot, collision: bool = False, groups=MUJOCO_GROUPS, package_dirs=()) -> list:
    """The Visuals of a robot loaded by ``sx.io.load_urdf`` or ``load_mjcf``:
    a URDF's <visual> shapes (its <collision> ones with ``collision=True``),
    meshes read with trimesh; an MJCF's geoms in ``groups`` that are not
    fully transparent, with MuJoCo's colours and compiled meshes."""
    visuals = []
    shapes = robot.collisions if collision else robot.visuals
    for geometry in shapes:
        body, X_BL = robot.links[geometry.link]
        X_BL = _pose(np.asarray(X_BL.R), np.asarray(X_BL.p))
        if robot.options is not None:  # an MJCF file
            drawn = geometry.attributes.get("group", 0) in groups and (geometry.rgba or (1,) * 4)[3] > 0
            visual = _mjcf_visual(body.index, X_BL, geometry) if drawn else None
            visuals += [visual] if visual is not None else []
        else:
            visuals += _urdf_visuals(body.index, X_BL, geometry, robot.directory, package_dirs)
    return visuals


def segment(body: int, a, b, radius: float, name: str = "bone") -> Visual | None:
    """A thin cylinder fixed to ``body`` from point a to point b (in B, m);
    None when they coincide."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    length = float(np.linalg.norm(b - a))
    if length < 1e-9:
        return None
    X = _pose(aligning(np.array([0.0, 0.0, 1.0]), (b - a) / length), (a + b) / 2)  # the cylinder's z along b - a
    return Visual(body, "cylinder", (radius, length / 2), X, name=name)


def bones(model, radius: float, stations=()) -> list:
    """Each body's skeleton, as ``sx.viz.plot`` draws it, in shapes fixed to
    the bodies: a ball at each body's origin Bo, cylinders from Bo to its
    outboard frame M's origin, from Bo to each child's inboard frame F's
    origin, and from Bo to each station (pairs (body index, p_BS))."""
    params, parent = model.params, np.asarray(model.topology.parent)
    segments = [(b, np.asarray(params.X_BM.p[b])) for b in range(1, len(parent))]
    segments += [(int(parent[b]), np.asarray(params.X_PF.p[b])) for b in range(1, len(parent))]
    segments += [(int(b), p) for b, p in stations]
    visuals = [Visual(b, "sphere", (2 * radius,), _pose(), name="joint") for b in range(1, len(parent))]
    return visuals + [v for b, p in segments if (v := segment(b, np.zeros(3), p, radius)) is not None]


def body_poses(model, state, q) -> np.ndarray:
    """Every body's pose in Ground at each configuration, as the viewer places the bodies.

    Args:
        model: The Model.
        state: A State of it, whose other fields fill in each row.
        q: (..., nq) configurations.

    Returns:
        (..., nb, 7) numpy: [p (m), quaternion as x, y, z, w (three.js's
            order)] of each body, Ground's first, in the State's precision
            (the page stores them as float32): ``get_body_transform``'s.
    """
    q = jnp.asarray(q, state.q.dtype)

    def poses(qk):
        X = model.realize(state.with_q(qk), Stage.Position).position.X_GB
        w_first = matrix_to_quaternion(X.R)
        return jnp.concatenate([X.p, w_first[..., 1:], w_first[..., :1]], axis=-1)

    flat = q.reshape(-1, q.shape[-1])
    out = jax.jit(jax.vmap(poses))(flat)
    return np.asarray(out).reshape(*q.shape[:-1], *out.shape[1:])


def contact_points(model, state, q, u) -> tuple:
    """Every candidate contact point of the Model's contact force elements
    (Hunt-Crossley, elastic foundation) and soft constraints at each row of
    (q (..., nq), u (..., nu)), from each one's ``contact_forces``:
    (location (..., k, 3) in G, m; force (..., k, 3) in G, N, on the pair's
    second surface, or on its first where the second is on Ground; zero
    where the point is apart). k is 0 for a Model without contact."""
    q, u = jnp.asarray(q, state.q.dtype), jnp.asarray(u, state.u.dtype)
    sources = [e for e in model.force_elements if hasattr(e, "contact_forces")]
    sources += [] if model.soft_constraints is None else [model.soft_constraints]

    def at(qk, uk):
        s = model.realize(state.with_q(qk).with_u(uk), Stage.Velocity)
        location, force = [jnp.zeros((0, 3), q.dtype)], [jnp.zeros((0, 3), q.dtype)]
        for source in sources:
            c = source.contact_forces(model, s)
            on_ground = np.array([source.surfaces[i].body == 0 for i in c.surface2], bool)
            location.append(c.location)
            force.append(jnp.where(on_ground[:, None], -c.force, c.force))
        return jnp.concatenate(location), jnp.concatenate(force)

    flat = jax.jit(jax.vmap(at))(q.reshape(-1, q.shape[-1]), u.reshape(-1, u.shape[-1]))
    return tuple(np.asarray(a).reshape(*q.shape[:-1], *a.shape[1:]) for a in flat)


def up_direction(model) -> np.ndarray:
    """The unit vector against the Model's uniform gravity (z when it has none)."""
    for element in model.force_elements:
        down = getattr(element, "down", None)
        if down is None and getattr(element, "gravity", None) is not None:
            down = np.asarray(element.gravity, float)
        if down is not None and np.linalg.norm(np.asarray(down, float)) > 0:
            down = np.asarray(down, float)
            return -down / np.linalg.norm(down)
    return np.array([0.0, 0.0, 1.0])
