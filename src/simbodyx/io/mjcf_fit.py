"""Simbody's force elements fitted to a compiled MJCF model's MuJoCo
settings, for ``load_mjcf``'s Simbody physics (``physics="simbody"``): a
joint's limits become a ``MobilityLinearStop`` (a ball's cone limit, a
``Force.Custom``) whose stiffness and damping follow the limit's solref
and solimp, its friction loss a ``MobilityCoulombFriction``, and the
colliding geom pairs a ``HuntCrossleyForce`` on contact shapes
(``ContactGeoms``, which the MuJoCo physics path shares), each geom's
stiffness chosen so that it rests at MuJoCo's depth under its share of
its tree's weight (found by stepping MuJoCo from the file's pose). Poses
and the solref/solimp arithmetic are MuJoCo's own."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx.builder import GeneralContactSubsystem, HuntCrossleyForce
from simbodyx.contact import ContactGeometry
from simbodyx.contact.detection import KERNELS, VERTEX_KERNELS
from simbodyx.forces import Force
from simbodyx.io.robot import RIGID, pose, rotation_about, transform
from simbodyx.spatial import safe_norm
from simbodyx.spatial.rotation import matrix_to_rotation_vector, quaternion_to_matrix


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
    kernel handles and ``uncovered`` the others, described; ``surfaces``
    the geoms of the covered pairs, in order (one contact surface each)."""

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
        self.surfaces = sorted({g for pair in self.covered for g in pair})

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
