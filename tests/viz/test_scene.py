"""What sx.viz.view draws, checked without a browser: body poses against
get_body_transform for every body of a URDF and an MJCF robot, geom poses
and colours against MuJoCo's own visualizer, each contact shape's Visual,
a height field's triangles, a URDF's materials and meshes, and clear
errors on bad input."""

import base64
import json

import jax
import numpy as np
import pytest

import simbodyx as sx
from simbodyx.contact.geometry import grid_triangles
from simbodyx.envs.task import gymnasium_asset
from simbodyx.spatial.rotation import quaternion_to_matrix
from simbodyx.viz import scene as scenes

jax.config.update("jax_enable_x64", True)

PANDA = "panda_description/urdf/panda.urdf"


def _X(R, p):
    X = np.eye(4)
    X[:3, :3], X[:3, 3] = R, p
    return X


def _decoded(payload):
    poses = np.frombuffer(base64.b64decode(payload["poses"]), np.float32)
    return poses.reshape(payload["instances"], len(payload["times"]), payload["bodies"], 7)


def _quaternion_matrix(xyzw):
    """R of a quaternion in three.js's order (x, y, z, w)."""
    return np.asarray(quaternion_to_matrix(np.roll(np.asarray(xyzw, float), 1)))


@pytest.fixture(scope="module")
def ant():
    system, matter, _, robot = sx.io.load_mjcf(gymnasium_asset("ant.xml"))
    model, state = system.realize_topology()
    return model, state, robot, matter


@pytest.fixture(scope="module")
def panda():
    system, matter, _, robot = sx.io.load_urdf(sx.io.example_robot_data(PANDA))
    model, state = system.realize_topology()
    return model, state, robot, matter


@pytest.mark.parametrize("robot_name", ["ant", "panda"])
def test_poses_are_get_body_transform_for_every_body(robot_name, request):
    """Every body's pose at every frame is X_GB: 1e-12 as computed (float64),
    1e-6 as the page stores it (float32)."""
    model, state, _, matter = request.getfixturevalue(robot_name)
    rng = np.random.default_rng(0)
    q = np.asarray(state.q) + 0.4 * rng.standard_normal((3, model.topology.nq))
    if robot_name == "ant":  # keep the free joint's quaternion a unit one
        q[:, 3:7] /= np.linalg.norm(q[:, 3:7], axis=1, keepdims=True)
    computed = sx.viz.body_poses(model, state, q)
    stored = _decoded(sx.viz.view(model, state, q).payload)[0]
    for k in range(3):
        s = model.realize(state.with_q(q[k]), sx.Stage.Position)
        for b in range(1, model.topology.num_bodies):
            X = matter.get_mobilized_body(b).get_body_transform(s)
            for poses, tolerance in ((computed, 1e-12), (stored, 1e-6)):
                np.testing.assert_allclose(poses[k, b, :3], X.p, atol=tolerance)
                np.testing.assert_allclose(_quaternion_matrix(poses[k, b, 3:]), X.R, atol=tolerance)


def test_mjcf_geoms_are_where_and_as_mujoco_draws_them(ant):
    """Each drawn geom's pose in Ground (body pose x geom's X_BS) and colour
    equal MuJoCo's visualizer's at the same qpos (mjv_updateScene)."""
    import mujoco

    model, state, robot, _ = ant
    m = mujoco.MjModel.from_xml_path(str(gymnasium_asset("ant.xml")))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    d.qpos[:] = m.qpos0 + 0.3 * rng.standard_normal(m.nq)
    d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
    mujoco.mj_forward(m, d)
    view = sx.envs.MuJoCoView(robot, model, state)
    s = model.realize(view.state(state, d.qpos, np.zeros(m.nv)), sx.Stage.Position)
    X_GB = s.position.X_GB
    scene = mujoco.MjvScene(m, maxgeom=100)
    mujoco.mjv_updateScene(m, d, mujoco.MjvOption(), None, mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scene)
    drawn = {g.objid: g for g in scene.geoms[:scene.ngeom] if g.objtype == mujoco.mjtObj.mjOBJ_GEOM}
    visuals = scenes.robot_visuals(robot)
    assert len(visuals) == len(drawn) == m.ngeom
    for g, v in enumerate(visuals):
        X = _X(np.asarray(X_GB.R[v.body]), np.asarray(X_GB.p[v.body])) @ v.X_BS
        np.testing.assert_allclose(X[:3, 3], drawn[g].pos, atol=1e-6)
        np.testing.assert_allclose(X[:3, :3], np.asarray(drawn[g].mat).reshape(3, 3), atol=1e-6)
        np.testing.assert_allclose(v.rgba, drawn[g].rgba, atol=1e-6)


def test_mjcf_meshes_and_height_fields_are_mujocos_triangles():
    """A mesh geom's vertices in its frame, and a height field's surface,
    are MuJoCo's compiled ones."""
    import mujoco

    xml = """<mujoco><asset>
      <mesh name="wedge" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/>
      <hfield name="hill" nrow="3" ncol="4" size="2 1 0.5 0.1" elevation="0 1 2 3 1 2 3 4 0 0 1 1"/>
      <material name="red" rgba="1 0 0 1"/></asset>
      <worldbody><geom type="hfield" hfield="hill" material="red"/>
        <body pos="0 0 2"><freejoint/><geom type="mesh" mesh="wedge" rgba="0 0 1 0.5"/></body>
      </worldbody></mujoco>"""
    with pytest.warns(UserWarning, match="geom1 as a box"):
        _, _, _, robot = sx.io.load_mjcf(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    field, wedge = robot.visuals
    vertices, faces = field.mesh
    assert field.rgba == (1.0, 0.0, 0.0, 1.0) and wedge.rgba == (0.0, 0.0, 1.0, 0.5)
    np.testing.assert_allclose(vertices[:, 2], m.hfield_data * 0.5)
    np.testing.assert_allclose(vertices[[0, 3, 8, 11], :2], [[-2, -1], [2, -1], [-2, 1], [2, 1]])
    assert faces.shape == (2 * 2 * 3, 3)
    np.testing.assert_allclose(wedge.mesh[0], m.mesh_vert)
    np.testing.assert_array_equal(wedge.mesh[1], m.mesh_face)


def test_grid_triangles_cover_the_grid_facing_up():
    heights = np.arange(12.0).reshape(3, 4) * 0.01
    vertices, faces = grid_triangles(heights, (1.5, 1.0))
    assert vertices.shape == (12, 3) and faces.shape == (12, 3)
    np.testing.assert_allclose(vertices[5], [-0.5, 0.0, 0.05])  # row 1, column 1
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    normals = np.cross(b - a, c - a)
    assert np.all(normals[:, 2] > 0)
    np.testing.assert_allclose(np.abs(normals[:, 2]).sum() / 2, 3.0 * 2.0)  # the rectangle's area


def test_every_contact_shape_has_its_visual():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.01))))
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    shapes = [sx.ContactGeometry.Sphere(0.1), sx.ContactGeometry.Ellipsoid([0.1, 0.2, 0.3]),
              sx.ContactGeometry.Brick([0.1, 0.2, 0.3]), sx.ContactGeometry.Cylinder(0.1, 0.2),
              sx.ContactGeometry.Capsule(0.1, 0.2)]
    at = sx.Transform(sx.Rotation.about_z(0.3), [0.1, 0.2, 0.3])
    for shape in shapes:
        contacts.add_body(surfaces, body, shape, at)
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace())
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HeightField(np.zeros((3, 3)), [1.0, 1.0]))
    sx.HuntCrossleyForce(forces, contacts, surfaces)
    model, state = system.realize_topology()
    visuals = [scenes.surface_visual(s) for s in scenes.contact_surfaces(model)]
    assert [(v.kind, v.size) for v in visuals[:5]] == [
        ("sphere", (0.1,)), ("ellipsoid", (0.1, 0.2, 0.3)), ("box", (0.1, 0.2, 0.3)), ("cylinder", (0.1, 0.2)),
        ("capsule", (0.1, 0.2))]
    np.testing.assert_allclose(visuals[0].X_BS, _X(np.asarray(at.R), np.asarray(at.p)))
    plane, field = visuals[5:]
    assert plane.kind == "plane" and plane.body == 0 and field.kind == "mesh"
    np.testing.assert_allclose(plane.X_BS[:3, 2], [-1, 0, 0])  # the plane's normal: the half-space's outward -x
    assert np.isclose(np.linalg.det(plane.X_BS[:3, :3]), 1.0)
    payload = sx.viz.view(model, state).payload
    assert len(payload["shapes"]) == 7 and payload["up"] == [0.0, 0.0, 1.0]


def test_urdf_materials_and_meshes(panda):
    urdf = """<robot name="r"><material name="blue"><color rgba="0 0 1 1"/></material>
      <link name="a"><visual><geometry><box size="0.2 0.4 0.6"/></geometry><material name="blue"/></visual>
        <visual><geometry><sphere radius="0.1"/></geometry><material name="x"><color rgba="1 0 0 0.5"/></material>
        </visual><visual><geometry><cylinder radius="0.1" length="0.4"/></geometry></visual></link></robot>"""
    _, _, _, robot = sx.io.load_urdf(urdf)
    box, ball, rod = scenes.robot_visuals(robot)
    assert (box.size, box.rgba) == ((0.1, 0.2, 0.3), (0.0, 0.0, 1.0, 1.0))
    assert ball.rgba == (1.0, 0.0, 0.0, 0.5) and rod.size == (0.1, 0.2) and rod.rgba == scenes.DEFAULT_COLOR
    with pytest.raises(ValueError, match="rgba='1 0' is not four numbers"):
        sx.io.load_urdf(urdf.replace('rgba="0 0 1 1"', 'rgba="1 0"'))
    robot = panda[2]
    collision = scenes.robot_visuals(robot, collision=True)
    assert len(collision) == len(robot.collisions) and {v.kind for v in collision} == {"mesh", "box"}
    visual = scenes.robot_visuals(robot)  # Collada files: one part per material, each in its colour
    assert len(visual) > len(robot.visuals) and len({v.rgba for v in visual}) >= 3
    link7 = robot.links["panda_link7"][0].index
    extent = np.ptp(np.concatenate([v.mesh[0] for v in collision if v.body == link7]), axis=0)
    assert np.all((extent > 0.05) & (extent < 0.3))  # metres, not millimetres


def test_view_batches_and_refuses_bad_input(ant):
    model, state, robot, _ = ant
    q = np.broadcast_to(np.asarray(state.q), (4, 2, model.topology.nq))
    payload = sx.viz.view(model, state, q, t=[0.0, 0.01], robot=robot, spacing=3.0).payload
    offsets = np.array(payload["offsets"])
    assert payload["instances"] == 4 and _decoded(payload).shape == (4, 2, model.topology.num_bodies, 7)
    assert np.allclose(offsets[:, 2], 0) and np.allclose(sorted(np.abs(offsets[:, :2]).ravel()), 1.5)
    overlaid = sx.viz.view(model, state, q, layout="overlay").payload
    assert overlaid["opacity"] == 0.35 and not np.any(overlaid["offsets"])
    json.dumps(payload)
    with pytest.raises(ValueError, match="q must be"):
        sx.viz.view(model, state, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="t must be"):
        sx.viz.view(model, state, q, t=[0.1, 0.0])
    with pytest.raises(ValueError, match="layout must be"):
        sx.viz.view(model, state, layout="row")
    _, _, _, panda_robot = sx.io.load_urdf(sx.io.example_robot_data(PANDA).read_text())  # no folder to look in
    with pytest.raises(FileNotFoundError, match="link0.dae' not found"):
        scenes.robot_visuals(panda_robot)


def test_contact_arrows_carry_the_weight_on_the_moving_body():
    """A 1 kg ball resting on a Hunt-Crossley floor (gravity -y): one
    touching point, under the ball, pushing it up with its weight; the page
    scales it to 0.3 of the scene by default, or by force_scale."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    ball = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.004))))
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    contacts.add_body(surfaces, ball, sx.ContactGeometry.Sphere(0.1))
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace(),
                      sx.Transform(sx.Rotation.about_z(-np.pi / 2), [0, 0, 0]))
    hc = sx.HuntCrossleyForce(forces, contacts, surfaces)
    for surface in (0, 1):
        hc.set_body_parameters(surface, 2e6, 1.0, 0.8, 0.5, 0.0)
    model, state = system.realize_topology()
    start = state.with_q([1, 0, 0, 0, 0, 0.5, 0])
    _, trajectory = sx.integrate.rollout(model, start, 2.5e-4, 8000, save_every=4000)
    points, force = scenes.contact_points(model, start, trajectory.q, trajectory.u)
    assert points.shape == force.shape == (3, 1, 3) and np.all(force[0] == 0)  # dropped from apart
    np.testing.assert_allclose(force[-1, 0], [0, 9.81, 0], atol=2e-3)
    np.testing.assert_allclose(points[-1, 0], [trajectory.q[-1, 4], 0, trajectory.q[-1, 6]], atol=2e-3)
    payload = sx.viz.view(model, start, trajectory, contacts=True, force_scale=0.01).payload
    arrows = np.frombuffer(base64.b64decode(payload["contacts"]["forces"]), np.float32).reshape(1, 3, 1, 3)
    np.testing.assert_allclose(arrows[0, -1, 0], [0, 0.0981, 0], atol=1e-4)
    assert sx.viz.view(model, start, trajectory).payload["contacts"] is None
