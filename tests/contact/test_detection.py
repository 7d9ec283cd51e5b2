"""The collision kernels against closed forms (depth, normal, point,
effective radius), and the pair table's build-time rules."""

import inspect
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import FD_STEP
from simbodyx.contact import detection as detection_module
from simbodyx.contact.geometry import ContactGeometry as CG
from simbodyx.contact.kernels import box, convex, ellipsoid, height_field, primitive

#: The kernels' and the detection module's functions, each compiled whole, as
#: the contact forces' programs hold them: called eagerly, JAX compiles every
#: operation on its own, and a search loop again at every call.
detection = types.SimpleNamespace(**{
    name: jax.jit(f) if inspect.isfunction(f) and f.__module__ == module.__name__ else f
    for module in (primitive, ellipsoid, box, convex, height_field, detection_module)
    for name, f in vars(module).items()})

UP = sx.Transform(sx.Rotation.about_y(0.5 * np.pi), np.zeros(3))  # half-space z < 0: its x axis onto -z
ATOL = 1e-12


def _pose(R=None, p=(0.0, 0.0, 0.0)):
    return sx.Transform(np.eye(3) if R is None else R, np.asarray(p, float))


def _random_rotation(seed):
    q = np.random.default_rng(seed).normal(size=4)
    return sx.Rotation.from_quaternion(q / np.linalg.norm(q)).matrix


def test_half_space_sphere_is_simbodys():
    c = detection.half_space_sphere(CG.HalfSpace(), UP, CG.Sphere(0.3), _pose(p=[0.4, -0.2, 0.25]))
    np.testing.assert_allclose(c.depth, [0.05], atol=ATOL)
    np.testing.assert_allclose(c.normal, [[0, 0, 1]], atol=ATOL)
    np.testing.assert_allclose(c.location, [[0.4, -0.2, -0.025]], atol=ATOL)  # mid-overlap
    np.testing.assert_allclose(c.radius, [0.3], atol=ATOL)


def test_a_capsule_lying_flat_touches_at_both_ends():
    along_x = sx.Rotation.about_y(0.5 * np.pi).matrix
    c = detection.half_space_capsule(CG.HalfSpace(), UP, CG.Capsule(0.1, 0.5), _pose(along_x, [0, 0, 0.08]))
    np.testing.assert_allclose(c.depth, [0.02, 0.02], atol=ATOL)
    np.testing.assert_allclose(sorted(np.asarray(c.location[:, 0])), [-0.5, 0.5], atol=ATOL)
    np.testing.assert_allclose(c.normal, [[0, 0, 1]] * 2, atol=ATOL)


def test_sphere_capsule_and_capsule_capsule_use_the_closest_points():
    c = detection.sphere_capsule(CG.Sphere(0.2), _pose(p=[0.3, 0.25, 0]), CG.Capsule(0.1, 0.5), _pose())
    np.testing.assert_allclose(c.depth, [0.3 - np.hypot(0.3, 0.25)], atol=ATOL)
    np.testing.assert_allclose(c.normal, [[-0.3, -0.25, 0] / np.hypot(0.3, 0.25)], atol=ATOL)
    np.testing.assert_allclose(c.radius, [0.2 * 0.1 / 0.3], atol=ATOL)
    beyond_end = detection.sphere_capsule(CG.Sphere(0.2), _pose(p=[0, 0, 0.75]), CG.Capsule(0.1, 0.5), _pose())
    np.testing.assert_allclose(beyond_end.depth, [0.05], atol=ATOL)

    along_x = sx.Rotation.about_y(0.5 * np.pi).matrix
    crossing = detection.capsule_capsule(CG.Capsule(0.1, 0.5), _pose(p=[0.1, 0.2, 0.3]),
                                         CG.Capsule(0.15, 0.5), _pose(along_x, [0.0, 0.4, 0.1]))
    np.testing.assert_allclose(crossing.depth, [0.25 - 0.2], atol=ATOL)
    np.testing.assert_allclose(crossing.normal, [[0, 1, 0]], atol=ATOL)
    parallel = detection.capsule_capsule(CG.Capsule(0.1, 0.5), _pose(), CG.Capsule(0.1, 0.5), _pose(p=[0.15, 0, 0.3]))
    np.testing.assert_allclose(parallel.depth, [0.05], atol=ATOL)
    np.testing.assert_allclose(parallel.normal, [[1, 0, 0]], atol=ATOL)
    # axes crossing at a point: full overlap along the common perpendicular (x cross z = -y)
    crossing = detection.capsule_capsule(CG.Capsule(0.1, 0.5), _pose(along_x), CG.Capsule(0.15, 0.5), _pose())
    np.testing.assert_allclose(crossing.depth, [0.25], atol=ATOL)
    np.testing.assert_allclose(crossing.normal, [[0, -1, 0]], atol=ATOL)
    on_axis = detection.sphere_capsule(CG.Sphere(0.2), _pose(p=[0, 0, 0.1]), CG.Capsule(0.1, 0.5), _pose())
    np.testing.assert_allclose(on_axis.depth, [0.3], atol=ATOL)
    assert abs(float(on_axis.normal[0] @ np.array([0, 0, 1.0]))) < ATOL


@pytest.mark.parametrize("seed", range(4))
def test_half_space_ellipsoid_depth_is_the_support_and_radius_the_true_curvature(seed):
    radii = np.array([0.3, 0.2, 0.1])
    R = _random_rotation(seed)
    height = 0.05
    c = detection.half_space_ellipsoid(CG.HalfSpace(), UP, CG.Ellipsoid(radii), _pose(R, [0.1, -0.3, height]))
    down = R.T @ np.array([0, 0, -1.0])  # the half-space's inward normal in the ellipsoid's frame
    support = np.sqrt(np.sum((radii * down) ** 2))
    np.testing.assert_allclose(c.depth, [support - height], atol=ATOL)
    np.testing.assert_allclose(c.normal, [[0, 0, 1]], atol=ATOL)
    if seed == 0:  # axis-aligned: radii of curvature a^2/c and b^2/c at the pole
        c = detection.half_space_ellipsoid(CG.HalfSpace(), UP, CG.Ellipsoid(radii), _pose(p=[0, 0, height]))
        np.testing.assert_allclose(c.radius, [radii[0] * radii[1] / radii[2]], atol=ATOL)
        np.testing.assert_allclose(c.location, [[0, 0, -(radii[2] - height) / 2]], atol=ATOL)


def test_coincident_spheres_do_not_touch_and_have_finite_gradients():
    def depth(p):
        return detection.sphere_sphere(CG.Sphere(0.1), _pose(), CG.Sphere(0.2), sx.Transform(np.eye(3), p)).depth[0]

    assert float(depth(jnp.zeros(3))) < 0
    assert np.all(np.isfinite(jax.grad(depth)(jnp.zeros(3))))


def _system_with(*shapes):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.01)))
    for i, shape in enumerate(shapes):
        mobod = matter.Ground() if isinstance(shape, CG.HalfSpace) else sx.MobilizedBody.Free(
            matter.Ground(), body, name=f"b{i}")
        contacts.add_body(contact_set, mobod, shape)
    return system, forces, contacts, contact_set


def test_candidate_pairs_skip_one_body_ground_and_excluded_pairs_and_name_unsupported_ones():
    system, forces, contacts, contact_set = _system_with(CG.HalfSpace(), CG.HalfSpace(), CG.Sphere(0.1))
    body = contacts.get_body(contact_set, 2)
    contacts.add_body(contact_set, body, CG.Capsule(0.1, 0.2))  # same body as the sphere: never a pair
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    contacts.exclude_pair(contact_set, 3, 1)
    with pytest.raises(ValueError, match="exclude_pair: surface 2 twice"):
        contacts.exclude_pair(contact_set, 2, 2)
    model, _ = system.realize_topology()
    groups = hc.element(model).groups
    assert {(g.kinds, g.first, g.second) for g in groups} == {
        (("HalfSpace", "Sphere"), (0, 1), (2, 2)), (("HalfSpace", "Capsule"), (0,), (3,))}

    system, forces, contacts, contact_set = _system_with(CG.HalfSpace(), CG.Sphere(0.1))
    contacts.add_body(contact_set, contacts.get_body(contact_set, 1), CG.HalfSpace())  # a half-space on a Free body
    sx.HuntCrossleyForce(forces, contacts, contact_set)
    with pytest.raises(ValueError, match=r"between surface 0 \(HalfSpace on Ground \(body 0\)\) and surface 2 "
                                         r"\(HalfSpace"):
        system.realize_topology()


def test_bad_contact_input_is_a_clear_error():
    for make, match in ((lambda: CG.Sphere(0.0), "Sphere: radius must be positive"),
                        (lambda: CG.Sphere(-1.0), "radius must be positive"),
                        (lambda: CG.Capsule(0.1, float("nan")), "half_length must be positive"),
                        (lambda: CG.Ellipsoid([1.0, 2.0]), r"radii must have shape \(3,\)"),
                        (lambda: CG.HeightField(np.zeros(4), [1.0, 1.0]), r"heights must be a \(nrow, ncol\)"),
                        (lambda: CG.HeightField(np.full((2, 3), np.inf), [1.0, 1.0]), "heights must be finite"),
                        (lambda: CG.HeightField(np.zeros((2, 3)), [1.0, 0.0]), "half_lengths must be positive")):
        with pytest.raises(ValueError, match=match):
            make()
    system, forces, contacts, contact_set = _system_with(CG.HalfSpace(), CG.Sphere(0.1))
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    with pytest.raises(ValueError, match="surface 1's stiffness must be >= 0"):
        hc.set_body_parameters(1, -1.0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="dynamic friction 0.8 is above its static friction 0.5"):
        hc.set_body_parameters(1, 1e6, 0, 0.5, 0.8, 0)
    with pytest.raises(IndexError, match="has no surface 2"):
        hc.set_body_parameters(2, 1e6, 0, 0.5, 0.4, 0)
    with pytest.raises(ValueError, match="transition velocity must be positive"):
        hc.set_transition_velocity(0.0)
    with pytest.raises(IndexError, match="no contact set 3"):
        contacts.add_body(3, contacts.get_body(contact_set, 0), CG.Sphere(0.1))
    with pytest.raises(TypeError, match="expected a MobilizedBody"):
        contacts.add_body(contact_set, "pelvis", CG.Sphere(0.1))
    with pytest.raises(TypeError, match="geometry must be a ContactGeometry shape"):
        contacts.add_body(contact_set, contacts.get_body(contact_set, 1), 0.1)
    smooth = sx.SmoothSphereHalfSpaceForce(forces)
    with pytest.raises(ValueError, match="radius must be positive"):
        smooth.set_contact_sphere_radius(0.0)
    with pytest.raises(ValueError, match="call set_contact_sphere_body, set_contact_half_space_body"):
        system.realize_topology()


def test_capsule_kernels_have_finite_derivatives_in_degenerate_poses():
    """Parallel, coincident, crossing and end-to-end segments: every output of
    the capsule kernels and its derivative with respect to both poses is
    finite (sphere-sphere's coincident centres are covered above)."""
    along_x = sx.Rotation.about_y(0.5 * np.pi).matrix
    poses = [(np.eye(3), [0.0, 0.0, 0.0]), (np.eye(3), [0.1, 0.0, 0.0]), (np.eye(3), [0.0, 0.0, 1.0]),
             (along_x, [0.0, 0.0, 0.0]), (along_x, [0.0, 0.05, 0.5]), (_random_rotation(7), [0.02, -0.01, 0.03])]

    def outputs(p1, p2, R2, kernel):
        c = kernel(CG.Capsule(0.1, 0.5), sx.Transform(np.eye(3), p1), CG.Capsule(0.05, 0.5), sx.Transform(R2, p2))
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth, c.radius])

    def sphere_capsule(capsule1, X1, capsule2, X2):
        return detection.sphere_capsule(CG.Sphere(0.1), X1, capsule2, X2)

    for kernel in (detection.capsule_capsule, sphere_capsule):
        for R2, p2 in poses:
            args = (jnp.zeros(3), jnp.asarray(p2), jnp.asarray(R2))
            values = outputs(*args, kernel)
            jacobians = jax.jacfwd(outputs, argnums=(0, 1, 2))(*args, kernel)
            assert np.all(np.isfinite(np.asarray(values))), (kernel, p2)
            assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians), (kernel, p2)


def test_half_space_brick_takes_the_face_toward_the_half_space():
    """Simbody's HalfSpace-Brick: the four vertices of the face most
    antiparallel to the half-space's outward normal, each at its own depth
    (negative: not touching), in any pose; the face follows the brick as it
    turns over."""
    half = np.array([0.3, 0.2, 0.1])
    for seed in range(4):
        R, p = np.asarray(_random_rotation(seed)), np.array([0.1, -0.2, 0.05])
        c = detection.half_space_brick(CG.HalfSpace(), UP, CG.Brick(half), _pose(R, p))
        corners = np.array([[sx_, sy, sz] for sx_ in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
        # the face whose outward normal R e points most down (the floor's outward normal is +z)
        axis, side = min(((a, s) for a in range(3) for s in (-1, 1)), key=lambda f: f[1] * R[2, f[0]])
        vertices = corners[np.sign(corners[:, axis]) == side] @ R.T + p
        got = np.asarray(c.location) - np.asarray(c.depth)[:, None] / 2 * np.asarray(c.normal)  # back to the vertices
        assert sorted(map(tuple, np.round(got, 12))) == sorted(map(tuple, np.round(vertices, 12)))
        np.testing.assert_allclose(np.sort(np.asarray(c.depth)), np.sort(-vertices[:, 2]), atol=ATOL)
        np.testing.assert_allclose(np.max(np.asarray(c.depth)), np.max(-(corners @ R.T + p)[:, 2]), atol=ATOL)  # the deepest
        np.testing.assert_allclose(c.normal, [[0, 0, 1]] * 4, atol=ATOL)
        np.testing.assert_allclose(c.radius, np.zeros(4), atol=ATOL)


def test_sphere_brick_uses_the_closest_point_or_the_nearest_face():
    half = np.array([0.3, 0.2, 0.1])
    above = detection.sphere_brick(CG.Sphere(0.1), _pose(p=[0.1, 0.05, 0.15]), CG.Brick(half), _pose())
    np.testing.assert_allclose(above.depth, [0.05], atol=ATOL)
    np.testing.assert_allclose(above.normal, [[0, 0, -1]], atol=ATOL)  # the brick is pushed down
    np.testing.assert_allclose(above.radius, [0.1], atol=ATOL)
    corner = detection.sphere_brick(CG.Sphere(0.1), _pose(p=[0.35, 0.25, 0.1]), CG.Brick(half), _pose())
    np.testing.assert_allclose(corner.depth, [0.1 - np.hypot(0.05, 0.05)], atol=ATOL)
    np.testing.assert_allclose(corner.normal, [[-1 / np.sqrt(2), -1 / np.sqrt(2), 0]], atol=ATOL)
    inside = detection.sphere_brick(CG.Sphere(0.1), _pose(p=[0.05, 0.17, 0.0]), CG.Brick(half), _pose())
    np.testing.assert_allclose(inside.depth, [0.1 + 0.03], atol=ATOL)  # out through the nearest face, +y
    np.testing.assert_allclose(inside.normal, [[0, -1, 0]], atol=ATOL)

    def outputs(p):
        c = detection.sphere_brick(CG.Sphere(0.1), sx.Transform(np.eye(3), p), CG.Brick(half), _pose())
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth])

    for p in ([0.3, 0.05, 0.05], [0.3, 0.2, 0.1], [0.0, 0.0, 0.0], [0.3, 0.0, 0.0]):  # on a face, an edge, centre
        assert np.all(np.isfinite(np.asarray(jax.jacfwd(outputs)(jnp.asarray(p)))))


def test_half_space_cylinder_touches_at_its_rims():
    """Lying, a cylinder touches at the lowest point of each rim; standing, at
    four points of the lower rim; tilted, its deepest point is the rim
    point of the support function, p + h |a_z| + r sqrt(1 - a_z^2) deep,
    and every output has finite derivatives, upright (where the deepest rim
    direction is undefined) included."""
    cylinder, r, h = CG.Cylinder(0.1, 0.3), 0.1, 0.3
    lying = detection.half_space_cylinder(CG.HalfSpace(), UP, cylinder,
                                          _pose(sx.Rotation.about_x(0.5 * np.pi).matrix, [0, 0, 0.09]))
    depth = np.sort(np.asarray(lying.depth))
    np.testing.assert_allclose(depth[-2:], [0.01, 0.01], atol=ATOL)
    assert depth[-3] < 0
    standing = detection.half_space_cylinder(CG.HalfSpace(), UP, cylinder, _pose(p=[0, 0, 0.29]))
    np.testing.assert_allclose(np.sort(np.asarray(standing.depth))[-4:], [0.01] * 4, atol=ATOL)
    for seed in range(3):
        R = np.asarray(_random_rotation(seed))
        tilted = detection.half_space_cylinder(CG.HalfSpace(), UP, cylinder, _pose(R, [0.0, 0.0, 0.05]))
        a_z = R[2, 2]
        np.testing.assert_allclose(np.max(np.asarray(tilted.depth)),
                                   -0.05 + h * abs(a_z) + r * np.sqrt(1 - a_z ** 2), atol=ATOL)
    np.testing.assert_allclose(lying.normal, [[0, 0, 1]] * 8, atol=ATOL)

    def outputs(R, p):
        c = detection.half_space_cylinder(CG.HalfSpace(), UP, cylinder, sx.Transform(R, p))
        return jnp.concatenate([c.location.ravel(), c.depth])

    for R in (np.eye(3), np.asarray(sx.Rotation.about_x(0.5 * np.pi).matrix), np.asarray(_random_rotation(5))):
        jacobians = jax.jacfwd(outputs, argnums=(0, 1))(jnp.asarray(R), jnp.array([0.0, 0.0, 0.2]))
        assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians)


def _random_poses(mujoco, model, count, spread, seed):
    """(R (count, 3, 3), p (count, 3), MuJoCo's signed distance of geoms 0
    and 1 (mj_geomDistance)) for random poses of the first free joint's
    body, which carries geom 1 (its position normal with standard
    deviation ``spread``, m)."""
    data, rng = mujoco.MjData(model), np.random.default_rng(seed)
    R, p, distance = [], [], []
    for _ in range(count):
        quaternion = rng.normal(size=4)
        data.qpos[:7] = np.concatenate([spread * rng.normal(size=3), quaternion / np.linalg.norm(quaternion)])
        mujoco.mj_forward(model, data)
        distance.append(mujoco.mj_geomDistance(model, data, 0, 1, 2.0, np.zeros(6)))
        R.append(data.geom_xmat[1].reshape(3, 3).copy())
        p.append(data.geom_xpos[1].copy())
    return np.array(R), np.array(p), np.array(distance)


def test_capsule_brick_rests_on_two_points_and_its_deepest_point_is_mujocos():
    """Lying on a face, a capsule touches at the two ends of its part over
    the face (its own ends, or the face's edges), the deepest point adding
    nothing; across an edge, the deepest point alone; with a margin m, the
    rows touch from m apart and the deepest point still adds nothing; and
    for 200 random poses whose segment is outside the brick, the deepest
    point's depth is MuJoCo's signed distance (mj_geomDistance), negated,
    to 1e-12."""
    mujoco = pytest.importorskip("mujoco")
    half, kernel = np.array([0.3, 0.2, 0.1]), detection.capsule_brick
    along_x, along_y = sx.Rotation.about_y(0.5 * np.pi).matrix, sx.Rotation.about_x(0.5 * np.pi).matrix
    long = kernel(CG.Capsule(0.05, 0.5), _pose(along_x, [0.0, 0.0, 0.14]), CG.Brick(half), _pose())
    np.testing.assert_allclose(long.depth, [0.01, 0.01, 0.0], atol=ATOL)
    np.testing.assert_allclose(long.location[:2], [[-0.3, 0, 0.095], [0.3, 0, 0.095]], atol=ATOL)
    np.testing.assert_allclose(long.normal[:2], [[0, 0, -1]] * 2, atol=ATOL)  # the brick is pushed down
    short = kernel(CG.Capsule(0.05, 0.1), _pose(along_x, [0.05, 0.0, 0.14]), CG.Brick(half), _pose())
    np.testing.assert_allclose(short.location[:2, 0], [-0.05, 0.15], atol=ATOL)
    edge = kernel(CG.Capsule(0.05, 0.5), _pose(along_y, [0.33, 0.0, 0.13]), CG.Brick(half), _pose())
    np.testing.assert_allclose(edge.depth, [-1, -1, 0.05 - np.hypot(0.03, 0.03)], atol=ATOL)
    np.testing.assert_allclose(edge.normal[2], [-np.sqrt(0.5), 0, -np.sqrt(0.5)], atol=1e-7)
    margin = kernel(CG.Capsule(0.05, 0.5), _pose(along_x, [0.0, 0.0, 0.16]), CG.Brick(half), _pose(), 0.02)
    np.testing.assert_allclose(margin.depth + 0.02, [0.01, 0.01, 0.0], atol=ATOL)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="box" size="0.3 0.2 0.1"/>'
        '<body><freejoint/><geom type="capsule" size="0.05 0.4"/></body></worldbody></mujoco>')
    R, p, distance = _random_poses(mujoco, model, 200, 0.5, seed=0)
    depth = np.asarray(jax.jit(jax.vmap(lambda R, p: kernel(CG.Capsule(0.05, 0.4), sx.Transform(R, p), CG.Brick(half),
                                                             _pose()).depth))(R, p))
    deepest = depth[:, 2] + np.maximum(np.maximum(depth[:, 0], depth[:, 1]), 0.0)
    outside = deepest < 0.05  # the segment outside the brick (MuJoCo's penetration depth is its own inside)
    np.testing.assert_allclose(deepest[outside], -distance[outside], atol=1e-12)
    assert outside.sum() > 100

    def outputs(p, R):
        c = kernel(CG.Capsule(0.05, 0.4), sx.Transform(R, p), CG.Brick(half), _pose())
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth])

    jacobian = jax.jit(jax.jacfwd(outputs, argnums=(0, 1)))  # one compile
    for R, p in ((along_x, [0.0, 0.0, 0.14]), (along_y, [0.3, 0.0, 0.1]), (np.eye(3), [0.0, 0.0, 0.0]),
                 (along_x, [0.0, 0.2, 0.1]), (_random_rotation(3), [0.1, 0.2, 0.12])):
        jacobians = jacobian(jnp.asarray(p, float), jnp.asarray(R, float))
        assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians), p


def test_sphere_ellipsoid_is_the_closest_point_with_the_curvatures_there():
    """An ellipsoid with equal radii is sphere-sphere; on the ellipsoid's x
    axis the relative curvatures are a / b^2 + 1/r and a / c^2 + 1/r; for
    300 random centres outside, the depth is MuJoCo's signed distance
    (mj_geomDistance), negated, to MuJoCo's ccd_tolerance (1e-6); the depth
    is continuous through the surface, its gradient there minus the
    normal, and elsewhere central differences (outside, inside, centre)."""
    mujoco = pytest.importorskip("mujoco")
    kernel, origin = detection.sphere_ellipsoid, _pose()
    p = np.array([0.2, -0.15, 0.1])
    as_sphere = kernel(CG.Sphere(0.05), _pose(p=p), CG.Ellipsoid([0.2] * 3), origin)
    reference = detection.sphere_sphere(CG.Sphere(0.05), _pose(p=p), CG.Sphere(0.2), origin)
    for got, want in zip(jax.tree.leaves(as_sphere), jax.tree.leaves(reference)):
        np.testing.assert_allclose(got, want, atol=ATOL)
    radii, r = np.array([0.3, 0.15, 0.08]), 0.05
    on_axis = kernel(CG.Sphere(r), _pose(p=[0.33, 0, 0]), CG.Ellipsoid(radii), origin)
    k1, k2 = 0.3 / 0.15 ** 2 + 1 / r, 0.3 / 0.08 ** 2 + 1 / r
    np.testing.assert_allclose(on_axis.depth, [0.02], atol=ATOL)
    np.testing.assert_allclose(on_axis.normal, [[-1, 0, 0]], atol=ATOL)
    np.testing.assert_allclose(on_axis.radius, [(k1 * k2) ** -0.5], rtol=1e-12)
    np.testing.assert_allclose(on_axis.ratio, [k2 / k1], rtol=1e-12)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="ellipsoid" size="0.3 0.15 0.08"/>'
        '<body><freejoint/><geom type="sphere" size="0.05"/></body></worldbody></mujoco>')
    R, p, distance = _random_poses(mujoco, model, 300, 0.3, seed=1)
    depth = np.asarray(jax.jit(jax.vmap(lambda R, p: kernel(CG.Sphere(r), sx.Transform(R, p), CG.Ellipsoid(radii),
                                                             origin).depth[0]))(R, p))
    outside = np.sum((p / radii) ** 2, axis=1) > 1
    np.testing.assert_allclose(-depth[outside], distance[outside], atol=model.opt.ccd_tolerance)
    assert outside.sum() > 200

    def depth(p):
        return kernel(CG.Sphere(r), sx.Transform(np.eye(3), p), CG.Ellipsoid(radii), origin).depth[0]

    surface = np.array([0.3, 0.0, 0.0]) * np.cos(0.4) + np.array([0.0, 0.15, 0.0]) * np.sin(0.4)
    np.testing.assert_allclose([depth(surface * (1 + e)) for e in (-1e-9, 0.0, 1e-9)], r, atol=1e-9)
    normal = surface / radii ** 2
    np.testing.assert_allclose(jax.grad(depth)(jnp.asarray(surface)), -normal / np.linalg.norm(normal), atol=ATOL)
    for p in (np.array([0.4, 0.1, 0.05]), np.array([0.1, 0.05, 0.02]), np.zeros(3)):
        central = [(depth(p + FD_STEP * e) - depth(p - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(3)]
        np.testing.assert_allclose(jax.grad(depth)(jnp.asarray(p)), central, atol=1e-8)


def test_capsule_ellipsoid_takes_the_deepest_point_of_the_segment():
    """A capsule lying across the top of an ellipsoid touches at the top,
    its relative curvatures c / a^2 + 1/r across its axis and c / b^2 along
    it; for 200 random poses whose segment is outside, the depth is
    MuJoCo's signed distance (mj_geomDistance), negated, to MuJoCo's
    ccd_tolerance (1e-6); the depth's gradient with respect to the capsule's pose matches central
    differences."""
    mujoco = pytest.importorskip("mujoco")
    kernel, origin = detection.capsule_ellipsoid, _pose()
    radii, r = np.array([0.3, 0.15, 0.08]), 0.05
    along_y = sx.Rotation.about_x(0.5 * np.pi).matrix
    across = kernel(CG.Capsule(r, 0.4), _pose(along_y, [0.0, 0.0, 0.12]), CG.Ellipsoid(radii), origin)
    np.testing.assert_allclose(across.depth, [0.01], atol=ATOL)
    np.testing.assert_allclose(across.normal, [[0, 0, -1]], atol=1e-7)  # the search's point: sqrt(eps) along it
    k_across, k_along = 0.08 / 0.3 ** 2 + 1 / r, 0.08 / 0.15 ** 2
    np.testing.assert_allclose(across.radius, [(k_across * k_along) ** -0.5], rtol=1e-9)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="ellipsoid" size="0.3 0.15 0.08"/>'
        '<body><freejoint/><geom type="capsule" size="0.05 0.2"/></body></worldbody></mujoco>')
    R, p, distance = _random_poses(mujoco, model, 200, 0.4, seed=2)
    depth = np.asarray(jax.jit(jax.vmap(lambda R, p: kernel(CG.Capsule(r, 0.2), sx.Transform(R, p), CG.Ellipsoid(radii),
                                                             origin).depth[0]))(R, p))
    outside = depth < r  # the segment outside the ellipsoid
    np.testing.assert_allclose(-depth[outside], distance[outside], atol=model.opt.ccd_tolerance)
    assert outside.sum() > 150

    R = jnp.asarray(_random_rotation(5))

    def depth(p):
        return kernel(CG.Capsule(r, 0.2), sx.Transform(R, p), CG.Ellipsoid(radii), origin).depth[0]

    p = np.array([0.1, 0.1, 0.15])
    central = [(depth(p + FD_STEP * e) - depth(p - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(3)]
    np.testing.assert_allclose(jax.grad(depth)(jnp.asarray(p)), central, atol=1e-8)


def test_brick_brick_is_a_face_patch_or_an_edge_crossing():
    """Stacked bricks touch at the 4 corners of their faces' overlap (the
    whole face; the smaller face; a 45-degree turned one: 4 of the
    octagon's corners); crossed edges at their crossing; and for 300
    random poses whose contact MuJoCo finds shallower than 2 cm, the
    deepest point's depth is MuJoCo's wherever both take the same normal
    (to 1e-9), else within 2e-4 (MuJoCo takes an edge-edge axis within 8
    degrees of a face's normal where this kernel keeps the face); every
    output has finite derivatives, in degenerate poses too."""
    mujoco = pytest.importorskip("mujoco")
    kernel, h = detection.brick_brick, np.array([0.2, 0.15, 0.1])
    stacked = kernel(CG.Brick(h), _pose(p=[0, 0, 0.19]), CG.Brick(h), _pose())
    np.testing.assert_allclose(stacked.depth, [0.01] * 4, atol=ATOL)
    np.testing.assert_allclose(sorted(map(tuple, np.asarray(stacked.location)[:, :2])),
                               [(-0.2, -0.15), (-0.2, 0.15), (0.2, -0.15), (0.2, 0.15)], atol=ATOL)
    np.testing.assert_allclose(stacked.location[:, 2], [0.095] * 4, atol=ATOL)  # halfway up the overlap
    np.testing.assert_allclose(stacked.normal, [[0, 0, -1]] * 4, atol=ATOL)  # the lower brick is pushed down
    small = kernel(CG.Brick(h / 3), _pose(p=[0.05, 0, 0.1 + 0.1 / 3 - 0.01]), CG.Brick(h), _pose())
    big = kernel(CG.Brick(h), _pose(p=[0.05, 0, 0.1 + 0.1 / 3 - 0.01]), CG.Brick(h / 3), _pose())
    for c, centre in ((small, 0.05), (big, 0.0)):  # the smaller face's corners either way round
        np.testing.assert_allclose(c.depth, [0.01] * 4, atol=ATOL)
        np.testing.assert_allclose(np.sort(np.abs(np.asarray(c.location)[:, 0] - centre)), [0.2 / 3] * 4, atol=ATOL)
    turned = kernel(CG.Brick(h), _pose(sx.Rotation.about_z(np.pi / 4).matrix, [0, 0, 0.19]), CG.Brick(h), _pose())
    np.testing.assert_allclose(turned.depth, [0.01] * 4, atol=ATOL)
    outline = np.abs(np.asarray(turned.location)[:, :2])
    assert np.all((np.abs(outline[:, 0] - 0.2) < 1e-12) | (np.abs(outline[:, 1] - 0.15) < 1e-12))  # on the edges
    cube, lifted = CG.Brick([0.1] * 3), 2 * 0.1 * np.sqrt(2) - 0.01  # an edge along x on one along y
    crossed = kernel(cube, _pose(sx.Rotation.about_x(np.pi / 4).matrix, [0.03, 0.02, lifted]),
                     cube, _pose(sx.Rotation.about_y(np.pi / 4).matrix))
    np.testing.assert_allclose(crossed.depth, [0.01, -1, -1, -1], atol=ATOL)
    np.testing.assert_allclose(crossed.location[0], [0.0, 0.02, lifted - 0.1 * np.sqrt(2) + 0.005], atol=ATOL)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="box" size="0.2 0.15 0.1"/>'
        '<body><freejoint/><geom type="box" size="0.12 0.1 0.08"/></body></worldbody></mujoco>')
    data, rng, compared = mujoco.MjData(model), np.random.default_rng(0), []
    for _ in range(300):
        quaternion = rng.normal(size=4)
        data.qpos[:] = np.concatenate([[0.3, 0.3, 0.25] * rng.uniform(-1, 1, 3), quaternion / np.linalg.norm(quaternion)])
        mujoco.mj_forward(model, data)
        deepest = max((c for c in data.contact[:data.ncon]), key=lambda c: -c.dist, default=None)
        if deepest is not None and -deepest.dist < 0.02:
            compared.append((data.geom_xmat[1].reshape(3, 3).copy(), data.geom_xpos[1].copy(), -deepest.dist,
                             deepest.frame[:3].copy()))
    R, p, depth, normal = (np.array(x) for x in zip(*compared))
    c = jax.jit(jax.vmap(lambda R, p: kernel(CG.Brick([0.12, 0.1, 0.08]), sx.Transform(R, p), CG.Brick(h), _pose())))(R, p)
    ours, same = np.max(np.asarray(c.depth), axis=1), np.abs(np.sum(np.asarray(c.normal[:, 0]) * normal, axis=1)) > 1 - 1e-9
    np.testing.assert_allclose(ours[same], depth[same], atol=1e-9)
    np.testing.assert_allclose(ours, depth, atol=2e-4)
    assert len(depth) > 30 and same.sum() > len(depth) / 2

    def outputs(p, R):
        c = kernel(CG.Brick(h), sx.Transform(R, p), CG.Brick(h), _pose())
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth])

    jacobian = jax.jit(jax.jacfwd(outputs, argnums=(0, 1)))  # one compile
    for R, p in ((np.eye(3), [0, 0, 0.19]), (np.eye(3), [0, 0, 0.0]), (np.eye(3), [0.4, 0.3, 0.2]),
                 (sx.Rotation.about_z(np.pi / 4).matrix, [0, 0, 0.19]), (_random_rotation(4), [0.1, 0.05, 0.2])):
        jacobians = jacobian(jnp.asarray(p, float), jnp.asarray(R, float))
        assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians), p


def test_sphere_and_capsule_cylinder_rest_on_the_end_or_the_side():
    """A sphere on a cylinder's end touches as on a plane, on its side with
    the relative curvatures 1/r + 1/radius around the axis and 1/r along
    it; a capsule lying on the end rests on the two ends of its part over
    the disk, lying along the side on the two ends of its part between the
    end planes; for random poses whose segment (centre) is outside, the
    deepest point's depth is MuJoCo's signed distance (mj_geomDistance),
    negated, to its ccd_tolerance; derivatives are finite in degenerate
    poses."""
    mujoco = pytest.importorskip("mujoco")
    cylinder, origin, r = CG.Cylinder(0.2, 0.1), _pose(), 0.05
    on_end = detection.sphere_cylinder(CG.Sphere(r), _pose(p=[0.05, 0.02, 0.14]), cylinder, origin)
    np.testing.assert_allclose(on_end.depth, [0.01], atol=ATOL)
    np.testing.assert_allclose(on_end.normal, [[0, 0, -1]], atol=ATOL)
    np.testing.assert_allclose([on_end.radius[0], on_end.ratio[0]], [r, 1.0], atol=ATOL)
    on_side = detection.sphere_cylinder(CG.Sphere(r), _pose(p=[0.0, 0.24, 0.03]), cylinder, origin)
    around = 1 / r + 1 / 0.2
    np.testing.assert_allclose(on_side.depth, [0.01], atol=ATOL)
    np.testing.assert_allclose(on_side.normal, [[0, -1, 0]], atol=ATOL)
    np.testing.assert_allclose([on_side.radius[0], on_side.ratio[0]], [(around / r) ** -0.5, around * r], rtol=1e-12)
    along_x = sx.Rotation.about_y(0.5 * np.pi).matrix
    lying = detection.capsule_cylinder(CG.Capsule(r, 0.4), _pose(along_x, [0.05, 0.0, 0.14]), cylinder, origin)
    np.testing.assert_allclose(lying.depth, [0.01, 0.01, 0.0], atol=ATOL)
    np.testing.assert_allclose(np.sort(np.asarray(lying.location[:2, 0])), [-0.2, 0.2], atol=1e-9)
    along_z = detection.capsule_cylinder(CG.Capsule(r, 0.4), _pose(p=[0.0, 0.24, 0.0]), cylinder, origin)
    np.testing.assert_allclose(along_z.depth, [0.01, 0.01, 0.0], atol=ATOL)
    np.testing.assert_allclose(np.sort(np.asarray(along_z.location[:2, 2])), [-0.1, 0.1], atol=1e-9)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="cylinder" size="0.2 0.1"/>'
        '<body><freejoint/><geom type="capsule" size="0.05 0.2"/></body>'
        '<body><freejoint/><geom type="sphere" size="0.05"/></body></worldbody></mujoco>')
    R, p, distance = _random_poses(mujoco, model, 200, 0.3, seed=3)
    depth = np.asarray(jax.jit(jax.vmap(lambda R, p: detection.capsule_cylinder(
        CG.Capsule(r, 0.2), sx.Transform(R, p), cylinder, origin).depth))(R, p))
    deepest = depth[:, 2] + np.maximum(np.maximum(depth[:, 0], depth[:, 1]), 0.0)
    outside = deepest < r
    np.testing.assert_allclose(deepest[outside], -distance[outside], atol=model.opt.ccd_tolerance)
    assert outside.sum() > 100
    data = mujoco.MjData(model)
    centres = np.random.default_rng(4).normal(size=(200, 3)) * 0.3
    sphere_distance = []
    for centre in centres:
        data.qpos[7:10] = centre
        mujoco.mj_forward(model, data)
        sphere_distance.append(mujoco.mj_geomDistance(model, data, 0, 2, 2.0, np.zeros(6)))
    sphere_depth = np.asarray(jax.jit(jax.vmap(lambda p: detection.sphere_cylinder(
        CG.Sphere(r), sx.Transform(np.eye(3), p), cylinder, origin).depth[0]))(centres))
    outside = (np.hypot(centres[:, 0], centres[:, 1]) > 0.2) | (np.abs(centres[:, 2]) > 0.1)
    np.testing.assert_allclose(-sphere_depth[outside], np.array(sphere_distance)[outside],
                               atol=model.opt.ccd_tolerance)

    def outputs(p, R):
        c = detection.capsule_cylinder(CG.Capsule(r, 0.4), sx.Transform(R, p), cylinder, origin)
        s = detection.sphere_cylinder(CG.Sphere(r), sx.Transform(R, p), cylinder, origin)
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth, s.location.ravel(), s.depth])

    jacobian = jax.jit(jax.jacfwd(outputs, argnums=(0, 1)))  # one compile
    for R, p in ((along_x, [0.05, 0.0, 0.14]), (np.eye(3), [0.0, 0.0, 0.0]), (np.eye(3), [0.0, 0.24, 0.0]),
                 (along_x, [0.0, 0.0, 0.0]), (_random_rotation(6), [0.2, 0.1, 0.12])):
        jacobians = jacobian(jnp.asarray(p, float), jnp.asarray(R, float))
        assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians), p


def test_ellipsoid_ellipsoid_minimizes_the_overlap_of_the_support_functions():
    """Two ellipsoids with equal radii are sphere-sphere; for 300 random
    poses, apart or overlapping by less than 3 cm, the depth is MuJoCo's
    signed distance (mj_geomDistance), negated, to its ccd_tolerance; the
    depth's gradient matches central differences."""
    mujoco = pytest.importorskip("mujoco")
    kernel, origin = detection.ellipsoid_ellipsoid, _pose()
    p = np.array([0.25, 0.1, 0.0])
    as_spheres = kernel(CG.Ellipsoid([0.1] * 3), origin, CG.Ellipsoid([0.2] * 3), _pose(p=p))
    reference = detection.sphere_sphere(CG.Sphere(0.1), origin, CG.Sphere(0.2), _pose(p=p))
    for got, want in zip(jax.tree.leaves(as_spheres), jax.tree.leaves(reference)):
        np.testing.assert_allclose(got, want, atol=ATOL)

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="ellipsoid" size="0.3 0.15 0.08"/>'
        '<body><freejoint/><geom type="ellipsoid" size="0.1 0.2 0.05"/></body></worldbody></mujoco>')
    first, second = CG.Ellipsoid([0.3, 0.15, 0.08]), CG.Ellipsoid([0.1, 0.2, 0.05])
    R, p, distance = _random_poses(mujoco, model, 300, 0.3, seed=5)
    depth = np.asarray(jax.jit(jax.vmap(lambda R, p: kernel(first, origin, second, sx.Transform(R, p)).depth[0]))(R, p))
    near = distance > -0.03  # deeper, each may take a different local minimum of its own
    np.testing.assert_allclose(depth[near], -distance[near], atol=model.opt.ccd_tolerance)
    assert near.sum() > 250 and (distance[near] < 0).sum() > 10

    rotation = jnp.asarray(_random_rotation(8))

    value_and_grad = jax.jit(jax.value_and_grad(lambda p: kernel(first, origin, second,
                                                                  sx.Transform(rotation, p)).depth[0]))
    for p in (np.array([0.2, 0.25, 0.1]), np.array([0.1, 0.1, 0.05])):
        central = [(value_and_grad(p + FD_STEP * e)[0] - value_and_grad(p - FD_STEP * e)[0]) / (2 * FD_STEP)
                   for e in np.eye(3)]
        np.testing.assert_allclose(value_and_grad(p)[1], central, atol=1e-8)


@pytest.mark.parametrize("kernel, shape, xml, as_sphere", [
    (detection.brick_ellipsoid, CG.Brick([0.2, 0.15, 0.1]), '<geom type="box" size="0.2 0.15 0.1"/>',
     detection.sphere_brick),
    (detection.cylinder_ellipsoid, CG.Cylinder(0.2, 0.1), '<geom type="cylinder" size="0.2 0.1"/>',
     detection.sphere_cylinder),
], ids=["brick", "cylinder"])
def test_brick_and_cylinder_ellipsoid_take_the_least_overlap_over_every_feature(kernel, shape, xml, as_sphere):
    """An ellipsoid with equal radii is the sphere kernel (the exact closest
    point: faces, edges, vertices, the side and rims alike) in 100 random
    poses, curvatures included; an ellipsoid on the top face touches at its
    lowest point with its curvatures there; for 300 random poses the depth
    is MuJoCo's signed distance (mj_geomDistance), negated, to 1e-9 apart
    and to its ccd_tolerance overlapping by less than 3 cm; the depth's
    gradient matches central differences; derivatives are finite in
    degenerate poses."""
    mujoco = pytest.importorskip("mujoco")
    origin, radii = _pose(), np.array([0.1, 0.2, 0.05])
    ellipsoid, ball = CG.Ellipsoid(radii), CG.Ellipsoid([0.05] * 3)
    R, p, distance = _random_poses(mujoco, mujoco.MjModel.from_xml_string(
        f'<mujoco><worldbody>{xml}<body><freejoint/><geom type="ellipsoid" size="{" ".join(map(str, radii))}"/>'
        '</body></worldbody></mujoco>'), 300, 0.3, seed=5)

    # then: resting on the top face, poses for central differences, degenerate poses; all in one program
    top, rotation = 0.1, _random_rotation(8)  # both shapes' top face is z = 0.1
    bases = [np.array([0.05, 0.1, 0.18]), np.array([0.28, 0.2, 0.1]), np.array([0.25, 0.0, 0.02])]
    extra = [(np.eye(3), np.array([0.03, -0.02, top + 0.05 - 0.004]))]
    extra += [(rotation, base + sign * FD_STEP * e) for base in bases for e in np.eye(3) for sign in (1, -1)]
    extra += [(rotation, base) for base in bases]
    extra += [(np.eye(3), np.array(p)) for p in ([0.0, 0.0, 0.0], [0.0, 0.0, 0.15], [0.0, 0.0, 0.2], [0.3, 0.0, 0.0])]
    R = np.concatenate([R, [r for r, _ in extra]])
    p = np.concatenate([p, [q for _, q in extra]])

    def outputs(p, R):
        c = kernel(shape, origin, ellipsoid, sx.Transform(R, p))
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.radius, c.depth])

    def both(R, p):
        s = kernel(shape, origin, ball, sx.Transform(R, p))
        return (outputs(p, R), jax.jacfwd(outputs, argnums=(0, 1))(p, R),
                (s.depth[0], s.location[0], -s.normal[0], s.radius[0], s.ratio[0]))

    values, jacobians, spheres = jax.jit(jax.vmap(both))(R, p)
    depth = np.asarray(values[:300, -1])
    reference = jax.vmap(lambda p: as_sphere(CG.Sphere(0.05), sx.Transform(np.eye(3), p), shape, origin))(p[:100])
    for got, want in zip(spheres, (reference.depth, reference.location, reference.normal, reference.radius,
                                   reference.ratio)):
        np.testing.assert_allclose(np.asarray(got)[:100], np.asarray(want).reshape(np.shape(got[:100])), atol=1e-9)
    apart, near = distance > 0, (distance <= 0) & (distance > -0.03)
    np.testing.assert_allclose(depth[apart], -distance[apart], atol=1e-9)
    np.testing.assert_allclose(depth[near], -distance[near], atol=1e-6)  # MuJoCo's ccd_tolerance
    assert apart.sum() > 200 and near.sum() > 10

    resting = values[300]
    np.testing.assert_allclose(resting[:6], [0.03, -0.02, top - 0.002, 0, 0, 1], atol=ATOL)
    np.testing.assert_allclose(resting[6:], [radii[0] * radii[1] / radii[2], 0.004], rtol=1e-12)  # ab / c
    shifted = np.asarray(values[301:319, -1]).reshape(3, 3, 2)  # base, axis, sign
    central = (shifted[..., 0] - shifted[..., 1]) / (2 * FD_STEP)
    np.testing.assert_allclose(np.asarray(jacobians[0])[319:322, -1], central, atol=1e-8)
    assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians)


def test_cylinder_brick_and_cylinder_cylinder_take_the_least_overlap_at_the_touching_features():
    """Closed forms: a box lying on a cylinder's end touches at its face's
    centre, a box's edge on it at the edge's middle, a box's corner at the
    corner; two crossed cylinders at the crossing of their sides, a smaller
    cylinder stacked off-axis at its end's centre; each point halfway
    across the overlap, the vertex law. For 300 random poses the depth is
    MuJoCo's signed distance (mj_geomDistance), negated, to 1e-9 apart and
    to its ccd_tolerance overlapping by less than 3 cm; the depth's gradient
    matches central differences; derivatives are finite in degenerate
    poses."""
    mujoco = pytest.importorskip("mujoco")
    cylinder, box, small, origin = CG.Cylinder(0.2, 0.1), CG.Brick([0.1, 0.2, 0.05]), CG.Cylinder(0.1, 0.15), _pose()
    along_x = sx.Rotation.about_y(0.5 * np.pi).matrix
    tilt = sx.Rotation.about_x(0.25 * np.pi).matrix
    corner_down = sx.Rotation.about_x(0.6).matrix @ sx.Rotation.about_y(0.5).matrix  # a corner lowest
    lowest = np.min((corner_down @ (detection.CORNER_SIGNS * [0.1, 0.2, 0.05]).T)[2])
    edge_low = -np.hypot(0.2, 0.05) * np.cos(0.25 * np.pi - np.arctan2(0.05, 0.2))  # the lowest edge's height
    def kernels(X_box, X_small):
        return (detection.cylinder_brick(cylinder, origin, box, X_box),
                detection.cylinder_cylinder(cylinder, origin, small, X_small))

    X_corner = _pose(corner_down, [0.04, -0.03, 0.1 - lowest - 0.002])
    corner = X_corner.apply(detection.CORNER_SIGNS * [0.1, 0.2, 0.05])
    corner = np.asarray(corner[np.argmin(corner[:, 2])])
    cases = [  # (box pose, small cylinder pose, the box's depth and location, the small cylinder's)
        (_pose(p=[0.05, 0.0, 0.147]), _pose(along_x, [0.0, 0.296, 0.0]), 0.003, [0.05, 0.0, 0.0985], 0.004,
         [0.0, 0.198, 0.0]),
        (_pose(tilt, [0.05, 0.02, 0.1 - edge_low - 0.003]), _pose(p=[0.03, 0.0, 0.248]), 0.003,
         [0.05, 0.02 - np.hypot(0.2, 0.05) * np.sin(0.25 * np.pi - np.arctan2(0.05, 0.2)), 0.0985], 0.002,
         [0.03, 0.0, 0.099]),
        (X_corner, _pose(p=[0.03, 0.0, 0.248]), 0.002, corner + [0, 0, 0.001], 0.002, [0.03, 0.0, 0.099]),
    ]

    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="cylinder" size="0.2 0.1"/>'
        '<body><freejoint/><geom type="box" size="0.1 0.2 0.05"/></body>'
        '<body><freejoint/><geom type="cylinder" size="0.1 0.15"/></body></worldbody></mujoco>')
    data, rng = mujoco.MjData(model), np.random.default_rng(5)
    poses, distances = [[(c[0].R, c[0].p), (c[1].R, c[1].p)] for c in cases], []
    for _ in range(300):
        for body in (0, 1):
            quaternion = rng.normal(size=4)
            data.qpos[7 * body:7 * body + 7] = np.concatenate([0.3 * rng.normal(size=3),
                                                               quaternion / np.linalg.norm(quaternion)])
        mujoco.mj_forward(model, data)
        distances.append([mujoco.mj_geomDistance(model, data, 0, g, 2.0, np.zeros(6)) for g in (1, 2)])
        poses.append([(data.geom_xmat[g].reshape(3, 3).copy(), data.geom_xpos[g].copy()) for g in (1, 2)])
    # then poses for central differences (both shapes at once) and degenerate ones, all in one program
    rotation = _random_rotation(8)
    bases = [np.array([0.05, 0.1, 0.25]), np.array([0.3, 0.2, 0.1])]
    for base in bases:
        poses += [[(rotation, base + sign * FD_STEP * e)] * 2 for e in np.eye(3) for sign in (1, -1)]
    degenerate = [(np.eye(3), [0.0, 0.0, 0.0]), (np.eye(3), [0.0, 0.0, 0.15]), (np.eye(3), [0.0, 0.0, 0.25]),
                  (along_x, [0.0, 0.3, 0.0]), (tilt, [0.2, 0.15, 0.1])]
    poses += [[(rotation, base)] * 2 for base in bases] + [[(R, np.array(p))] * 2 for R, p in degenerate]
    R = jnp.asarray(np.array([[np.asarray(pose[0]) for pose in row] for row in poses]))
    p = jnp.asarray(np.array([[np.asarray(pose[1]) for pose in row] for row in poses]))

    def contacts(R_box, p_box, R_small, p_small):
        return kernels(sx.Transform(R_box, p_box), sx.Transform(R_small, p_small))

    def outputs(*pose):
        b, c = contacts(*pose)
        return jnp.concatenate([b.location.ravel(), b.normal.ravel(), c.location.ravel(), c.normal.ravel(),
                                b.depth, c.depth])

    (on_box, on_small), jacobians = jax.jit(jax.vmap(lambda R, p: (
        contacts(R[0], p[0], R[1], p[1]), jax.jacfwd(outputs, argnums=(0, 1, 2, 3))(R[0], p[0], R[1], p[1]))))(R, p)
    for k, (_, _, box_depth, at_box, small_depth, at_small) in enumerate(cases):
        np.testing.assert_allclose([on_box.depth[k, 0], on_small.depth[k, 0]], [box_depth, small_depth], atol=ATOL)
        np.testing.assert_allclose(on_box.location[k, 0], at_box, atol=1e-9)
        np.testing.assert_allclose(on_small.location[k, 0], at_small, atol=1e-9)
        np.testing.assert_allclose(on_box.normal[k, 0], [0, 0, 1], atol=ATOL)
    assert np.all(on_box.radius == 0) and np.all(on_small.radius == 0)  # the vertex law
    random = slice(len(cases), len(cases) + 300)
    depth = np.stack([on_box.depth[random, 0], on_small.depth[random, 0]], axis=1)
    distances = np.array(distances)
    apart, near = distances > 0, (distances <= 0) & (distances > -0.03)
    np.testing.assert_allclose(depth[apart], -distances[apart], atol=1e-9)
    np.testing.assert_allclose(depth[near], -distances[near], atol=1e-6)  # MuJoCo's ccd_tolerance
    assert apart.sum() > 400 and near.sum() > 20

    both = np.stack([on_box.depth[:, 0], on_small.depth[:, 0]], axis=1)
    shifted = both[len(cases) + 300:len(cases) + 312].reshape(2, 3, 2, 2)  # base, axis, sign, (box, small)
    central = (shifted[:, :, 0] - shifted[:, :, 1]) / (2 * FD_STEP)
    exact = [np.asarray(jacobians[1])[-7:-5, -2], np.asarray(jacobians[3])[-7:-5, -1]]  # d depth / d p, per base
    np.testing.assert_allclose(np.stack(exact, axis=-1), central, atol=1e-8)
    assert all(np.all(np.isfinite(np.asarray(j))) for j in jacobians)


def _with_axis(k, axis):
    """A rotation matrix whose column k is the unit ``axis``."""
    other = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
    columns = [axis, other / np.linalg.norm(other)]
    columns.append(np.cross(columns[0], columns[1]))
    return np.stack(columns[-k:] + columns[:-k] if k else columns, axis=1)


def _random_terrain(mujoco, rng, geom):
    """(MjModel, MjData, HeightField): a 5 x 6 height field of random
    elevations over 2 m x 1.6 m (0.3 m high) and a free body with ``geom``
    (a margin of 1 m, so that MuJoCo reports distances apart too)."""
    nrow, ncol = 5, 6
    xml = (f'<mujoco><asset><hfield name="h" nrow="{nrow}" ncol="{ncol}" size="1 0.8 0.3 0.1" elevation="'
           f'{" ".join(map(str, rng.uniform(0, 1, nrow * ncol)))}"/></asset><worldbody><geom type="hfield" '
           f'hfield="h"/><body><freejoint/><geom {geom} margin="1"/></body></worldbody></mujoco>')
    model = mujoco.MjModel.from_xml_string(xml)
    field = CG.HeightField(model.hfield_data.reshape(nrow, ncol) * model.hfield_size[0][2], [1.0, 0.8])
    return model, mujoco.MjData(model), field


@jax.jit
def _heights_below(field, points):
    """(n,) the height field's surface height under each point."""
    return jax.vmap(lambda p: detection._terrain_below(field, p)[0])(jnp.asarray(points))


def test_height_field_is_mujocos_triangulated_terrain():
    """On a planar height field a sphere, a brick, a cylinder (standing
    and lying) and a lying capsule touch as on the half-space of that
    plane; in a V-shaped crease a sphere rests on both sides; for 300
    sphere centres over a random field the deepest row is MuJoCo's distance
    (its hfield contacts' least dist), negated, to 1e-12; derivatives are
    finite where the sphere sits over a grid point, an edge or exactly
    touches."""
    mujoco = pytest.importorskip("mujoco")
    slope = np.array([0.2, -0.1])  # dz/dx, dz/dy
    x, y = np.meshgrid(np.linspace(-1.0, 1.0, 6), np.linspace(-0.8, 0.8, 5))
    plane = CG.HeightField(0.3 + slope[0] * x + slope[1] * y, [1.0, 0.8])
    up = np.array([-slope[0], -slope[1], 1.0]) / np.linalg.norm([slope[0], slope[1], 1.0])
    tilt = sx.Transform(_with_axis(0, -up), [0.0, 0.0, 0.3])  # its x into the ground: the half-space below the plane
    crease = CG.HeightField(np.tile(np.abs(np.linspace(-1.0, 1.0, 5)) * 0.5, (5, 1)), [1.0, 0.8])  # a V along y
    r = 0.1
    centre = np.array([0.13, 0.21, 0.3 + slope @ [0.13, 0.21]]) + (r - 0.004) * up
    brick_pose = sx.Transform(_with_axis(2, up), centre + 0.05 * up - 0.003 * up)  # a face on the plane, 3 mm deep

    def kernels(field, p):
        X = sx.Transform(np.eye(3), p)
        return detection.height_field_sphere(field, _pose(), CG.Sphere(r), X)

    on_plane = jax.jit(kernels)(plane, jnp.asarray(centre))
    reference = detection.half_space_sphere(CG.HalfSpace(), tilt, CG.Sphere(r), _pose(p=centre))
    k = int(np.argmax(on_plane.depth))
    np.testing.assert_allclose(on_plane.depth[k], 0.004, atol=ATOL)
    for got, want in ((on_plane.location[k], reference.location[0]), (on_plane.normal[k], reference.normal[0])):
        np.testing.assert_allclose(got, want, atol=ATOL)
    assert np.sum(np.asarray(on_plane.depth) > 0) == 1
    brick = CG.Brick([0.08, 0.06, 0.05])
    on_brick = detection.height_field_brick(plane, _pose(), brick, brick_pose)
    vertex = detection.half_space_brick(CG.HalfSpace(), tilt, brick, brick_pose)
    np.testing.assert_allclose(np.sort(np.asarray(on_brick.depth))[-4:], np.sort(np.asarray(vertex.depth)), atol=ATOL)
    cylinder = CG.Cylinder(0.1, 0.05)
    for axis in (up, _with_axis(1, up)[:, 0]):  # standing and lying
        X_cylinder = sx.Transform(_with_axis(2, axis), centre - (r - 0.004) * up + (0.05 if axis is up else 0.1) * up
                                  - 0.003 * up)  # 3 mm into the plane
        on_rims = detection.height_field_cylinder(plane, _pose(), cylinder, X_cylinder)
        rims = detection.half_space_cylinder(CG.HalfSpace(), tilt, cylinder, X_cylinder)
        np.testing.assert_allclose(np.sort(np.asarray(on_rims.depth)), np.sort(np.asarray(rims.depth)), atol=ATOL)
        assert np.sum(np.asarray(on_rims.depth) > 0) == (4 if axis is up else 2)
    capsule = CG.Capsule(0.05, 0.1)  # lying, its ends 3 mm into the plane
    X_capsule = sx.Transform(_with_axis(2, _with_axis(1, up)[:, 0]), centre - (r - 0.004) * up + 0.047 * up)
    on_ends = detection.height_field_capsule(plane, _pose(), capsule, X_capsule)
    ends = detection.half_space_capsule(CG.HalfSpace(), tilt, capsule, X_capsule)
    np.testing.assert_allclose(np.sort(np.asarray(on_ends.depth))[-2:], np.sort(np.asarray(ends.depth)), atol=ATOL)
    assert np.sum(np.asarray(on_ends.depth) > 0) == 2
    np.testing.assert_allclose(np.asarray(ends.depth), 0.003, atol=ATOL)
    in_crease = jax.jit(kernels)(crease, jnp.array([0.0, 0.1, r / np.cos(np.arctan(0.5)) - 0.003]))
    touching = np.asarray(in_crease.depth) > 0
    assert touching.sum() == 2  # one triangle on each side
    np.testing.assert_allclose(np.asarray(in_crease.depth)[touching], 0.003 * np.cos(np.arctan(0.5)), atol=ATOL)

    rng = np.random.default_rng(0)
    model, data, field = _random_terrain(mujoco, rng, f'type="sphere" size="{r}"')
    centres, distance = [], []
    for _ in range(300):
        data.qpos[:3] = [rng.uniform(-0.8, 0.8), rng.uniform(-0.6, 0.6), rng.uniform(0.0, 0.6)]
        mujoco.mj_forward(model, data)
        if data.ncon:
            centres.append(data.qpos[:3].copy())
            distance.append(min(data.contact[i].dist for i in range(data.ncon)))

    def outputs(p):
        c = kernels(field, p)
        return jnp.concatenate([c.location.ravel(), c.normal.ravel(), c.depth])

    degenerate = [[-0.6, 0.0, 0.4], [-0.5, -0.2, 0.4], [0.1, 0.2, 0.5], [-0.6, 0.0, 0.0]]  # over a grid point, an edge
    depth, jacobians = jax.jit(jax.vmap(lambda p: (kernels(field, p).depth,
                                                   jax.jacfwd(outputs)(p))))(jnp.asarray(centres + degenerate))
    below = np.asarray(_heights_below(field, np.array(centres)))
    over = np.array(centres)[:, 2] > below  # MuJoCo's prisms measure a centre under the surface their own way
    np.testing.assert_allclose(np.max(depth[:len(centres)], axis=1)[over], -np.array(distance)[over], atol=ATOL)
    assert over.sum() > 150 and np.all(np.isfinite(np.asarray(jacobians)))


def test_height_field_ellipsoid_is_the_sphere_in_its_scaled_norm():
    """Equal radii give the sphere's 19 rows (any rotation) to 1e-12; on a
    planar field one row, the half-space kernel's; over a random field,
    the deepest row is MuJoCo's distance (its prisms' least dist) to 1e-9
    for every pose within 5 cm apart, and for overlaps under 2 cm whose
    deepest row is a face's, no less and at most 2e-5 more than MuJoCo's
    (its overlap of one prism can leave sideways through the prism's
    walls; a ridge poking in is compared with nothing, as MuJoCo's prisms
    measure it their own way); derivatives finite over a grid point and
    an edge."""
    mujoco = pytest.importorskip("mujoco")
    rng, radii = np.random.default_rng(0), [0.12, 0.07, 0.05]
    model, data, field = _random_terrain(mujoco, rng, f'type="ellipsoid" size="{" ".join(map(str, radii))}"')
    poses, distance = [], []
    for _ in range(300):
        data.qpos[:3] = [rng.uniform(-0.8, 0.8), rng.uniform(-0.6, 0.6), rng.uniform(0.0, 0.45)]
        data.qpos[3:7] = rng.normal(size=4)
        data.qpos[3:7] /= np.linalg.norm(data.qpos[3:7])
        mujoco.mj_forward(model, data)
        if data.ncon:
            poses.append((data.xmat[1].reshape(3, 3).copy(), data.qpos[:3].copy()))
            distance.append(min(data.contact[i].dist for i in range(data.ncon)))
    degenerate = [(np.eye(3), [-0.6, 0.0, 0.4]), (np.eye(3), [-0.5, -0.2, 0.4])]  # over a grid point, an edge
    R, p = (jnp.asarray(np.stack(a)) for a in zip(*poses + degenerate))
    slope = np.array([0.2, -0.1])
    x, y = np.meshgrid(np.linspace(-1.0, 1.0, 6), np.linspace(-0.8, 0.8, 5))
    plane = CG.HeightField(0.3 + slope[0] * x + slope[1] * y, [1.0, 0.8])
    up = np.array([-slope[0], -slope[1], 1.0]) / np.linalg.norm([slope[0], slope[1], 1.0])
    ellipsoid, ball = CG.Ellipsoid(radii), CG.Ellipsoid(np.full(3, 0.1))

    def outputs(contact):
        return jnp.concatenate([contact.location.ravel(), contact.normal.ravel(), contact.depth])

    @jax.jit
    def run(R, p):
        on = lambda shape, field, p: detection.height_field_ellipsoid(field, _pose(), shape, sx.Transform(R, p))
        sphere = detection.height_field_sphere(field, _pose(), CG.Sphere(0.1), sx.Transform(jnp.eye(3), p))
        tilted = sx.Transform(R, jnp.array([0.13, 0.21, 0.3 + slope @ [0.13, 0.21]]) + 0.06 * up)
        return (on(ellipsoid, field, p), on(ball, field, p), sphere,
                detection.height_field_ellipsoid(plane, _pose(), ellipsoid, tilted),
                detection.half_space_ellipsoid(CG.HalfSpace(), sx.Transform(_with_axis(0, -up), [0.0, 0.0, 0.3]),
                                               ellipsoid, tilted),
                jax.jacfwd(lambda p: outputs(on(ellipsoid, field, p)))(p))

    rows, round_rows, sphere_rows, on_plane, reference, jacobian = jax.vmap(run)(R, p)
    touching = np.asarray(sphere_rows.depth) > -1
    np.testing.assert_array_equal(np.asarray(round_rows.depth) > -1, touching)
    for name in ("depth", "location", "normal", "radius", "ratio"):
        np.testing.assert_allclose(np.asarray(getattr(round_rows, name))[touching],
                                   np.asarray(getattr(sphere_rows, name))[touching], atol=ATOL)
    assert np.all(np.sum(np.asarray(on_plane.depth) > -1, axis=1) == 1)
    k = np.argmax(np.asarray(on_plane.depth), axis=1)
    for name in ("depth", "location", "normal", "radius", "ratio"):
        np.testing.assert_allclose(np.take_along_axis(np.asarray(getattr(on_plane, name)).reshape(len(k), 19, -1),
                                                      k[:, None, None], 1)[:, 0],
                                   np.asarray(getattr(reference, name)).reshape(len(k), -1), atol=ATOL)
    n = len(poses)
    depth = np.asarray(rows.depth)[:n]
    deepest, face = depth.max(axis=1), depth.argmax(axis=1) < 18
    centres = np.array([c for _, c in poses])
    over = np.asarray(_heights_below(field, centres)) < centres[:, 2]
    apart = over & (deepest < 0) & (deepest > -0.05)
    overlapping = over & (deepest > 0) & (deepest < 0.02) & face
    excess = deepest + np.array(distance)  # ours less MuJoCo's depth
    np.testing.assert_allclose(excess[apart], 0.0, atol=1e-9)
    assert np.all((excess[overlapping] > -1e-9) & (excess[overlapping] < 2e-5))
    assert apart.sum() > 30 and overlapping.sum() > 8 and np.all(np.isfinite(np.asarray(jacobian)))


#: A small bumpy terrain (m) for the float32 test
TERRAIN = 0.02 * np.sin(np.arange(20.0).reshape(4, 5))


@pytest.mark.parametrize("kernel, first, second", [
    (detection.capsule_brick, CG.Capsule(0.05, 0.2), CG.Brick([0.2, 0.15, 0.1])),
    (detection.sphere_ellipsoid, CG.Sphere(0.05), CG.Ellipsoid([0.3, 0.15, 0.08])),
    (detection.capsule_ellipsoid, CG.Capsule(0.05, 0.2), CG.Ellipsoid([0.3, 0.15, 0.08])),
    (detection.ellipsoid_ellipsoid, CG.Ellipsoid([0.1, 0.2, 0.05]), CG.Ellipsoid([0.3, 0.15, 0.08])),
    (detection.brick_brick, CG.Brick([0.1, 0.08, 0.06]), CG.Brick([0.2, 0.15, 0.1])),
    (detection.sphere_cylinder, CG.Sphere(0.05), CG.Cylinder(0.2, 0.1)),
    (detection.capsule_cylinder, CG.Capsule(0.05, 0.2), CG.Cylinder(0.2, 0.1)),
    (detection.brick_ellipsoid, CG.Brick([0.2, 0.15, 0.1]), CG.Ellipsoid([0.1, 0.2, 0.05])),
    (detection.cylinder_ellipsoid, CG.Cylinder(0.2, 0.1), CG.Ellipsoid([0.1, 0.2, 0.05])),
    (detection.cylinder_brick, CG.Cylinder(0.2, 0.1), CG.Brick([0.1, 0.2, 0.05])),
    (detection.cylinder_cylinder, CG.Cylinder(0.2, 0.1), CG.Cylinder(0.1, 0.15)),
    (detection.height_field_sphere, CG.HeightField(TERRAIN, [0.3, 0.2]), CG.Sphere(0.05)),
    (detection.height_field_capsule, CG.HeightField(TERRAIN, [0.3, 0.2]), CG.Capsule(0.03, 0.05)),
    (detection.height_field_cylinder, CG.HeightField(TERRAIN, [0.3, 0.2]), CG.Cylinder(0.05, 0.03)),
    (detection.height_field_ellipsoid, CG.HeightField(TERRAIN, [0.3, 0.2]), CG.Ellipsoid([0.05, 0.03, 0.02])),
], ids=lambda x: getattr(x, "__name__", ""))
def test_the_search_kernels_run_in_float32(kernel, first, second):
    """In float32 under jit, each kernel returns float32 depths equal to its
    float64 ones to float32 rounding on 0.1 m (the row order aside: ties
    between equally good patch points may break either way)."""
    as32 = lambda tree: jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)
    X1, X2 = _pose(_random_rotation(0), [0.05, 0.02, 0.12]), _pose()
    single = kernel(as32(first), as32(X1), as32(second), as32(X2))
    double = kernel(first, X1, second, X2)
    assert single.depth.dtype == jnp.float32 and single.location.dtype == jnp.float32
    np.testing.assert_allclose(np.sort(single.depth), np.sort(double.depth), atol=20 * 1.2e-7 * 0.1)
