"""URDF import against Pinocchio built from the same file (an independent
parser and engine): the robots shipped by example-robot-data (Panda, UR5,
Solo-12 and Talos on a floating base), at 20 random states each: every
link's pose, the mass matrix, forward and inverse dynamics to 1e-10
relative (float64 rounding over 40 bodies). Then mimic joints as couplers,
damping, name maps, and the errors bad files get."""

import functools
import pathlib
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx

pin = pytest.importorskip("pinocchio")
from simbodyx.interop.pinocchio import configuration, state_from as pin_state_from, velocity_map  # noqa: E402

try:
    ROBOTS = sx.io.example_robot_data()
except ImportError:
    ROBOTS = None
needs_robots = pytest.mark.skipif(ROBOTS is None, reason="example-robot-data is not installed")

TOL = 1e-10
CASES = {"panda": ("panda_description/urdf/panda.urdf", False), "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
         "solo12": ("solo_description/robots/solo12.urdf", True),
         "talos": ("talos_data/robots/talos_reduced.urdf", True)}


@functools.lru_cache(maxsize=None)
def _loaded(name):
    path, floating = CASES[name]
    system, matter, forces, robot = sx.io.load_urdf(ROBOTS / path, floating_base=floating, mimic=False)
    model, state = system.realize_topology()
    build = pin.buildModelFromUrdf
    pmodel = build(str(ROBOTS / path), pin.JointModelFreeFlyer()) if floating else build(str(ROBOTS / path))
    return matter, robot, model, state, pmodel


def _random_states(model, state, n, seed):
    rng = np.random.default_rng(seed)
    q = jnp.asarray(np.asarray(state.q) + rng.uniform(-1.0, 1.0, size=(n, model.topology.nq)))
    u = jnp.asarray(rng.normal(size=(n, model.topology.nu)))
    return q, u


@needs_robots
@pytest.mark.parametrize("name", list(CASES))
def test_urdf_robot_matches_pinocchio(name):
    matter, robot, model, state, pmodel = _loaded(name)
    assert [pmodel.names[j] for j in range(1, pmodel.njoints)] == list(robot.joint_bodies)  # the same joint order
    assert (model.topology.nq, model.topology.nu) == (pmodel.nq, pmodel.nv)
    pdata = pmodel.createData()
    q, u = _random_states(model, state, 20, seed=len(name))
    taus = jnp.asarray(np.random.default_rng(1).normal(size=u.shape))

    @jax.jit
    @jax.vmap
    def ours(q, u, tau):
        s = model.realize(model.matter.normalize_quaternions(state.with_q(q)).with_u(u), sx.Stage.Acceleration)
        udot, _ = model.matter.calc_acceleration_ignoring_constraints(s, tau, s.dynamics.body_forces)  # + gravity
        return s, model.matter.calc_m(s), udot

    states, masses, udots = ours(q, u, taus)
    for k in range(len(q)):
        s = jax.tree.map(lambda x, k=k: x[k], states)
        qp, vp = configuration(matter, s)
        T = velocity_map(matter, s)
        if k == 0:  # and back from Pinocchio's vectors
            back = pin_state_from(model, matter, state, qp, vp)
            np.testing.assert_allclose(back.q, s.q, atol=1e-14)
            np.testing.assert_allclose(back.u, s.u, atol=1e-12)
        pin.forwardKinematics(pmodel, pdata, qp)
        pin.updateFramePlacements(pmodel, pdata)
        for link in robot.links:
            X_GL = robot.get_link_transform(s, link)
            expected = pdata.oMf[pmodel.getFrameId(link)]
            np.testing.assert_allclose(X_GL.R, expected.rotation, atol=TOL, err_msg=link)
            np.testing.assert_allclose(X_GL.p, expected.translation, atol=TOL, err_msg=link)
        M = pin.crba(pmodel, pdata, qp)
        M = np.triu(M) + np.triu(M, 1).T
        np.testing.assert_allclose(masses[k], T.T @ M @ T, rtol=TOL, atol=TOL * np.abs(M).max())
        # forward dynamics; Pinocchio's free-flyer acceleration is the derivative of the velocity in
        # the moving frame: a_pin = T udot + dT/dt u, dT/dt u = [-R_MF (w x v); 0] for the root
        tau_pin = np.linalg.solve(T.T, np.asarray(taus[k]))
        a_pin = pin.aba(pmodel, pdata, qp, vp, tau_pin)
        a_ours = T @ np.asarray(udots[k])
        if "root_joint" in robot.joint_bodies:
            R_MF = np.asarray(s.position.X_FM.R[1]).T
            a_ours[:3] -= R_MF @ np.cross(np.asarray(s.u[:3]), np.asarray(s.u[3:6]))
        np.testing.assert_allclose(a_ours, a_pin, rtol=TOL, atol=TOL * np.abs(a_pin).max())
        # inverse dynamics of that motion returns the applied forces
        np.testing.assert_allclose(T.T @ pin.rnea(pmodel, pdata, qp, vp, a_pin), taus[k], atol=TOL * 10)


ARM = """<robot name="arm">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0 0 0.2" rpy="0.1 0 0"/><mass value="2"/>
    <inertia ixx="0.03" iyy="0.02" izz="0.02" ixy="0.001" ixz="0" iyz="0"/></inertial>
    <visual><origin xyz="0 0 0.2"/><geometry><cylinder radius="0.05" length="0.4"/></geometry></visual></link>
  <link name="tool"><inertial><mass value="0.5"/><inertia ixx="0.001" iyy="0.001" izz="0.001"/></inertial>
    <collision><geometry><mesh filename="package://arm/tool.stl" scale="1 1 1"/></geometry></collision></link>
  <link name="finger"><inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4"/></inertial></link>
  <link name="other_finger"><inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1" rpy="0 0.3 0"/><axis xyz="0 1 1"/><limit lower="-1" upper="1" effort="10" velocity="2"/>
    <dynamics damping="0.7" friction="0.1"/></joint>
  <joint name="mount" type="fixed"><parent link="upper"/><child link="tool"/><origin xyz="0 0 0.4"/></joint>
  <joint name="slide" type="prismatic"><parent link="tool"/><child link="finger"/><axis xyz="0 0 -1"/></joint>
  <joint name="slide_mimic" type="prismatic"><parent link="tool"/><child link="other_finger"/><axis xyz="1 0 0"/>
    <mimic joint="slide" multiplier="-2" offset="0.01"/></joint>
</robot>"""


def test_mimic_damping_names_and_welds():
    """A 3-joint arm written inline: the mimic joint becomes a coupler
    (q = -2 q_slide + 0.01), the damper applies -c u, names map to handles
    and coordinates, and welding the fixed joint instead of merging it
    leaves the mass matrix unchanged."""
    system, matter, forces, robot = sx.io.load_urdf(ARM, damping=True)
    model, state = system.realize_topology()
    assert robot["base"].is_ground() and robot["tool"] is robot["upper"] is robot["shoulder"]
    assert list(robot) == [*robot.links, *robot.joint_bodies] and len(robot) == len(robot.links) + 3
    assert robot.joints["shoulder"].lower == -1 and robot.joints["shoulder"].friction == 0.1
    assert [g.kind for g in robot.visuals + robot.collisions] == ["cylinder", "mesh"]
    assert robot.collisions[0].attributes["filename"] == "package://arm/tool.stl"
    assert robot.coordinate_names(state) == (["shoulder", "slide", "slide_mimic"],) * 2
    s = model.realize(state.with_q(jnp.array([0.2, 0.05, 0.3])).with_u(jnp.array([1.5, 0.0, 0.0])),
                      sx.Stage.Dynamics)
    coupler = robot.couplers["slide_mimic"]
    np.testing.assert_allclose(coupler.get_position_errors_as_vector(s), [0.3 + 2 * 0.05 - 0.01], atol=1e-15)
    np.testing.assert_allclose(s.dynamics.mobility_forces, [-0.7 * 1.5, 0.0, 0.0], atol=1e-15)
    # friction=vt: the shoulder's <dynamics friction="0.1"> as dry friction smoothed below vt
    rough_system, _, _, rough = sx.io.load_urdf(ARM, damping=True, friction=0.05)
    assert set(rough.frictions) == {"shoulder"}
    rough_model, _ = rough_system.realize_topology()
    np.testing.assert_allclose(rough_model.realize(s, sx.Stage.Dynamics).dynamics.mobility_forces,
                               [-0.7 * 1.5 - 0.1 * 1.5 / np.hypot(1.5, 0.05), 0.0, 0.0], atol=1e-15)
    with pytest.raises(ValueError, match=r"friction must be a transition velocity > 0, got 0.0"):
        sx.io.load_urdf(ARM, friction=0.0)

    fixed_mimic = ARM.replace('<joint name="mount" type="fixed"><parent link="upper"/><child link="tool"/>',
                              '<joint name="mount" type="fixed"><parent link="upper"/><child link="tool"/>'
                              '<mimic joint="shoulder"/>')
    assert set(sx.io.load_urdf(fixed_mimic)[3].couplers) == {"slide_mimic"}  # a fixed joint's mimic: ignored
    sensor = ARM.replace('</robot>', '<link name="imu"/><joint name="imu_mount" type="fixed"><parent link="tool"/>'
                                     '<child link="imu"/></joint></robot>')
    assert type(sx.io.load_urdf(sensor, merge_fixed=False)[3]["imu"]).__name__ == "Weld"  # massless, welded: fine
    welded_system, _, _, welded = sx.io.load_urdf(ARM, merge_fixed=False, mimic=False)
    welded_model, welded_state = welded_system.realize_topology()
    assert type(welded["mount"]).__name__ == "Weld" and welded["tool"] is welded["mount"]
    q = jnp.array([0.2, 0.05, 0.3])
    M = model.matter.calc_m(model.realize(state.with_q(q), sx.Stage.Position))
    np.testing.assert_allclose(welded_model.matter.calc_m(welded_model.realize(welded_state.with_q(q),
                                                                                sx.Stage.Position)), M, atol=1e-14)
    # the shoulder turns upper about its URDF axis, (0, 1, 1) / sqrt 2 in the joint frame J
    X = robot["upper"].get_body_transform(model.realize(state.with_q(q), sx.Stage.Position))
    J = sx.Rotation.from_body_fixed_xyz(jnp.array([0.0, 0.3, 0.0])).matrix
    axis = jnp.array([0.0, 1.0, 1.0]) / np.sqrt(2)
    np.testing.assert_allclose(X.R, J @ sx.Rotation.from_axis_angle(0.2, axis).matrix, atol=1e-14)


def test_limits_become_stops_when_asked():
    """With limits=(stiffness, dissipation) the shoulder's <limit -1 1>
    becomes a MobilityLinearStop that pushes back past 1 rad (and not
    inside); the prismatic joints have no <limit> and get none; without the
    option there is no stop and the q past the limit feels nothing."""
    system, _, _, robot = sx.io.load_urdf(ARM, limits=(500.0, 2.0))
    assert set(robot.stops) == {"shoulder"}
    stop = robot.stops["shoulder"]
    assert (float(stop.q_low), float(stop.q_high), float(stop.stiffness)) == (-1.0, 1.0, 500.0)
    model, state = system.realize_topology()

    past = model.realize(state.with_q(jnp.array([1.1, 0.0, 0.0])), sx.Stage.Velocity)
    inside = model.realize(state.with_q(jnp.array([0.5, 0.0, 0.0])), sx.Stage.Velocity)
    plain_system, _, _, plain = sx.io.load_urdf(ARM)
    plain_model, plain_state = plain_system.realize_topology()
    assert plain.stops == {}
    extra = model.forces.calc_forces(past)[0] - plain_model.forces.calc_forces(
        plain_model.realize(plain_state.with_q(past.q), sx.Stage.Velocity))[0]
    np.testing.assert_allclose(extra, [-500.0 * 0.1, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(model.forces.calc_forces(inside)[0], plain_model.forces.calc_forces(
        plain_model.realize(plain_state.with_q(inside.q), sx.Stage.Velocity))[0], atol=1e-15)
    with pytest.raises(ValueError, match=r"limits must be \(stiffness, dissipation\), both nonnegative"):
        sx.io.load_urdf(ARM, limits=(-1.0, 0.0))


ROVER = """<robot name="rover">
  <link name="base"><inertial><mass value="3"/><inertia ixx="0.03" iyy="0.05" izz="0.06"/></inertial>
    <collision><geometry><box size="0.4 0.3 0.2"/></geometry></collision></link>
  <link name="mast"><inertial><origin xyz="0 0 0.1"/><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.001"/>
    </inertial>
    <collision><origin xyz="0 0 0.2"/><geometry><sphere radius="0.05"/></geometry></collision>
    <collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.02" length="0.2"/></geometry></collision>
    <collision><geometry><mesh filename="package://rover/mast.stl"/></geometry></collision></link>
  <joint name="pan" type="continuous"><parent link="base"/><child link="mast"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/></joint>
</robot>"""


def test_collision_shapes_touch_the_floor_when_asked():
    """With contact=UrdfContact(...), a floating rover's box, sphere and
    cylinder collisions touch the floor and not each other, the mesh is
    named in a warning, and the rover rests on its box's four vertices at
    (total weight) / (4 k) (1e-4)."""
    material = sx.io.UrdfContact(stiffness=1e7, vertex_stiffness=2e5, dissipation=10.0, static_friction=0.8,
                                 dynamic_friction=0.6)
    with pytest.warns(UserWarning, match=r"collision meshes not modelled \(links mast\)"):
        system, _, _, robot = sx.io.load_urdf(ROVER, floating_base=True, contact=material)
    model, state = system.realize_topology()
    element = robot.contact.element(model)
    assert [s.name.split("'")[1] for s in element.surfaces] == ["floor", "base box", "mast sphere", "mast cylinder"]
    pairs = {(g.kinds, i, j) for g in element.groups for i, j in zip(g.first, g.second)}
    assert pairs == {(("HalfSpace", "Brick"), 0, 1), (("HalfSpace", "Sphere"), 0, 2), (("HalfSpace", "Cylinder"), 0, 3)}
    assert float(element.stiffness[1]) == 2e5 and float(element.stiffness[2]) == 1e7
    start = state.with_q(state.q.at[6].set(0.1005))
    final, _ = jax.jit(lambda m, s: sx.integrate.rollout(m, s, 1e-3, 2000, save_every=2000, energy=False))(model, start)
    np.testing.assert_allclose(0.1 - float(final.q[6]), 4.0 * 9.81 / (4 * 2e5), rtol=1e-4)


@pytest.mark.parametrize("change, message", [
    (('type="prismatic"><parent link="tool"/><child link="finger"/>',
      'type="hinge"><parent link="tool"/><child link="finger"/>'), r"joint 'slide': unknown type 'hinge'"),
    (('<axis xyz="0 0 -1"/>', '<axis xyz="0 0 0"/>'), r"joint 'slide': <axis xyz> has zero length"),
    (('<child link="finger"/>', '<child link="fingr"/>'), r"joint 'slide': its child link 'fingr' is not defined"),
    (('<child link="other_finger"/>', '<child link="finger"/>'),
     r"link 'finger' is the child of two joints, 'slide' and 'slide_mimic'"),
    (('<parent link="base"/>', '<parent link="finger"/>'), r"links \['finger', 'other_finger', 'tool', 'upper'\] are joined in a cycle"),
    (('<link name="finger"><inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4"/></inertial></link>',
      '<link name="finger"/>'), r"joint 'slide' moves link 'finger', which has no <inertial> mass"),
    (('<mass value="0.5"/>', '<mass value="-0.5"/>'), r"link 'tool' <inertial>: mass must be finite and >= 0"),
    (('ixx="0.001" iyy="0.001" izz="0.001"', 'ixx="0.001" iyy="0.001" izz="0.01"'), r"link 'tool' <inertial>: .*triangle"),
    (('<mimic joint="slide"', '<mimic joint="elbow"'), r"joint 'slide_mimic' <mimic joint='elbow'>: no joint"),
    (('<origin xyz="0 0 0.4"/>', '<origin xyz="0 0 x"/>'), r"joint 'mount' <origin>: xyz='0 0 x' is not 3 numbers"),
])
def test_bad_files_name_the_element(change, message):
    with pytest.raises(ValueError, match=message):
        sx.io.load_urdf(ARM.replace(*change))


def test_bad_sources():
    with pytest.raises(FileNotFoundError, match="no URDF file at"):
        sx.io.load_urdf("/nonexistent/robot.urdf")
    with pytest.raises(ValueError, match="not well-formed XML"):
        sx.io.load_urdf("<robot><link name='a'></robot>")
    with pytest.raises(ValueError, match="the root element is <sdf>"):
        sx.io.load_urdf("<sdf/>")


def test_hostile_urdf_files_are_refused(tmp_path):
    """A "billion laughs" entity expansion, an external entity reading a
    local file and an oversized file: each refused before any expansion or
    read, in bounded time and memory (each took seconds and gigabytes, or
    read the file, through the standard library's parser)."""
    laughs = '<?xml version="1.0"?>\n<!DOCTYPE robot [\n<!ENTITY lol0 "lol">\n' + "".join(
        f'<!ENTITY lol{k} "{"&lol%d;" % (k - 1) * 10}">\n' for k in range(1, 10)) + ']>\n<robot name="&lol9;"/>'
    secret = tmp_path / "secret.txt"
    secret.write_text("not for robots")
    external = (f'<?xml version="1.0"?>\n<!DOCTYPE robot [<!ENTITY leak SYSTEM "file://{secret}">]>\n'
                '<robot name="r"><link name="&leak;"/></robot>')
    for text in (laughs, external):
        with pytest.raises(ValueError, match="URDF string: refused .*no document type declaration"):
            sx.io.load_urdf(text)
        path = tmp_path / "hostile.urdf"
        path.write_text(text)
        with pytest.raises(ValueError, match="hostile.urdf: refused"):
            sx.io.load_urdf(str(path))
    big = tmp_path / "big.urdf"
    with big.open("wb") as f:
        f.truncate(sx.io.urdf.MAX_URDF_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(ValueError, match=r"big.urdf: 16,777,217 bytes, over load_urdf's limit"):
        sx.io.load_urdf(str(big))


def test_planar_and_floating_joints():
    """A planar joint (normal x) keeps its link in the y-z plane turning
    about x; a floating joint adds a Free mobilizer (quaternion, then
    position)."""
    urdf = """<robot name="p"><link name="world"/>
      <link name="sled"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1"/></inertial></link>
      <link name="drone"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1"/></inertial></link>
      <joint name="plane" type="planar"><parent link="world"/><child link="sled"/><axis xyz="1 0 0"/></joint>
      <joint name="fly" type="floating"><parent link="sled"/><child link="drone"/><origin xyz="0 0 1"/></joint>
    </robot>"""
    system, _, _, robot = sx.io.load_urdf(urdf)
    model, state = system.realize_topology()
    q_names, u_names = robot.coordinate_names(state)
    assert q_names == ["plane.rz", "plane.x", "plane.y", "fly.qw", "fly.qx", "fly.qy", "fly.qz", "fly.x", "fly.y",
                       "fly.z"]
    assert u_names[3:] == ["fly.wx", "fly.wy", "fly.wz", "fly.vx", "fly.vy", "fly.vz"]
    s = model.realize(state.with_q(state.q.at[:3].set(jnp.array([0.4, 0.3, -0.2]))), sx.Stage.Position)
    X = robot["sled"].get_body_transform(s)
    assert float(X.p[0]) == pytest.approx(0.0, abs=1e-15) and float(jnp.linalg.norm(X.p)) == pytest.approx(
        np.hypot(0.3, 0.2), abs=1e-15)
    np.testing.assert_allclose(X.R, sx.Rotation.from_axis_angle(0.4, jnp.array([1.0, 0, 0])).matrix, atol=1e-15)


# -- MJCF -------------------------------------------------------------------------------------

mujoco = pytest.importorskip("mujoco")
from simbodyx.interop.mujoco import (  # noqa: E402
    configuration as mj_configuration,
    state_from as mj_state_from,
    velocity_map as mj_velocity_map,
)

MJX_DATA = pathlib.Path(mujoco.__file__).parent / "mjx" / "test_data"  # published models shipped by mujoco-mjx
MJCF_CASES = {"humanoid": "humanoid/humanoid.xml", "barkour": "barkour_v0/assets/barkour_v0_mjx.xml",
              "shadow_hand": "shadow_hand/right_hand.xml"}
UNMODELLED = ("mjDSBL_CONTACT", "mjDSBL_LIMIT", "mjDSBL_ACTUATION", "mjDSBL_EQUALITY", "mjDSBL_FRICTIONLOSS")


def _against_mujoco(path_or_xml, seed, count, **options):
    """Load through load_mjcf and MuJoCo's compiler; at ``count`` random
    States, MuJoCo's qacc (mj_forward, what simbodyx does not model and the
    equalities switched off on MuJoCo's side) and qfrc_bias (mj_rne)
    against the tree's forward dynamics and the inverse dynamics of zero
    acceleration."""
    quiet = not options.pop("warns", True)  # then any warning is an error
    options = {"contact": False, "limits": False, "actuators": False, "frictionloss": False,
               **options}  # switched off below in MuJoCo
    with warnings.catch_warnings(action="error") if quiet else pytest.warns(UserWarning, match="not modelled"):
        system, matter, _, robot = sx.io.load_mjcf(path_or_xml, **options)
    model, state = system.realize_topology()
    text = str(path_or_xml)
    m = mujoco.MjModel.from_xml_string(text) if text.lstrip().startswith("<") else mujoco.MjModel.from_xml_path(text)
    for flag in UNMODELLED:
        m.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, flag))
    if not options.get("armature", True):
        m.dof_armature[:] = 0
    d = mujoco.MjData(m)
    assert (model.topology.nq, model.topology.nu) == (m.nq, m.nv)
    order = [b.index for b in robot.joint_bodies.values()]
    rng = np.random.default_rng(seed)
    q = state.q + 0.5 * rng.normal(size=(count, model.topology.nq))
    u = rng.normal(size=(count, model.topology.nu))

    @jax.jit
    @jax.vmap
    def ours(q, u):
        s = model.realize(model.matter.normalize_quaternions(state.with_q(q)).with_u(u), sx.Stage.Acceleration)
        bias = model.matter.calc_residual_force_ignoring_constraints(s, None, s.dynamics.body_forces,
                                                                     jnp.zeros_like(u))
        udot, _ = model.matter.calc_acceleration_ignoring_constraints(s, s.dynamics.mobility_forces,
                                                                      s.dynamics.body_forces)
        return s, bias, udot  # the tree's: MuJoCo's equalities are off

    states, biases, udots = ours(jnp.asarray(q), jnp.asarray(u))
    for k in range(count):
        s = jax.tree.map(lambda x, k=k: x[k], states)
        d.qpos[:], d.qvel[:] = mj_configuration(matter, s, order)
        if k == 0:  # and back from MuJoCo's vectors
            back = mj_state_from(model, matter, state, d.qpos, d.qvel, order)
            np.testing.assert_allclose(back.q, s.q, atol=1e-14)
            np.testing.assert_allclose(back.u, s.u, atol=1e-12)
        mujoco.mj_forward(m, d)
        T = mj_velocity_map(matter, s, order)
        np.testing.assert_allclose(T @ np.asarray(udots[k]), d.qacc, rtol=1e-8,
                                   atol=1e-8 * np.abs(d.qacc).max())
        bias = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 0, bias)
        np.testing.assert_allclose(biases[k], T.T @ bias, rtol=1e-8, atol=1e-8 * np.abs(bias).max())
    return robot, model, state, m


@pytest.mark.skipif(not MJX_DATA.is_dir(), reason="mujoco-mjx (which ships the models) is not installed")
@pytest.mark.parametrize("name", list(MJCF_CASES))
def test_mjcf_robot_matches_mujoco(name):
    """MuJoCo's humanoid (free base, damped joints), Google's Barkour
    quadruped and the Shadow hand: 20 random States each, 1e-8 relative."""
    robot, _, _, m = _against_mujoco(MJX_DATA / MJCF_CASES[name], seed=len(name), count=20)
    assert list(robot.joints) == [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
                                  for j in range(m.njnt)]  # unnamed: kind and number


@pytest.mark.parametrize("name", ["cheetah", "walker", "quadruped", "humanoid"])
def test_dm_control_models_match_mujoco(name):
    """dm_control's suite models (planar runners, a quadruped with tendons and
    a height field, a humanoid), shipped by the dm_control package: the
    tree's dynamics at 5 random States, 1e-8 relative."""
    import dm_control

    _against_mujoco(pathlib.Path(dm_control.__file__).parent / "suite" / f"{name}.xml", seed=len(name), count=5)


@needs_robots
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_arms_compiled_by_mujoco_from_urdf(name):
    """MuJoCo's compiler also reads URDF: Panda and UR5 from
    example-robot-data (meshes stripped) through load_mjcf, 20 States each;
    the Panda's mimic finger is MuJoCo's equality, reported and switched off."""
    text = re.sub(r"<(visual|collision)\b.*?</\1>", "", (ROBOTS / CASES[name][0]).read_text(), flags=re.S)
    _, model, _, _ = _against_mujoco(text, seed=len(name), count=20)
    assert model.topology.nu == {"panda": 9, "ur5": 6}[name]


LEG = """<mujoco><compiler angle="radian"/><option gravity="0 0 -9.81"><flag contact="disable"/></option><worldbody>
  <body name="pelvis" pos="0 0 1"><joint name="root" type="free" armature="0.3" damping="0.2"/><geom type="box" size="0.1 0.1 0.1" mass="5"/>
    <body name="thigh" pos="0.1 0 -0.1" euler="0.2 0 0">
      <joint name="hip_x" type="hinge" axis="1 0 0" pos="0 0 0.05" damping="0.3"/>
      <joint name="hip_y" type="hinge" axis="0 1 1" ref="0.4" stiffness="2" springref="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.04" mass="2"/>
      <body name="shin" pos="0 0 -0.4"><joint name="knee" type="slide" axis="0 0.6 -0.8" ref="0.05" armature="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/>
        <body name="foot" pos="0 0.05 -0.42" quat="0.9 0.1 0.3 0"><geom type="box" size="0.1 0.05 0.02" mass="0.5"/>
        </body></body></body>
    <body name="arm" pos="0 0.2 0.1"><joint name="shoulder" type="ball" pos="0 0 0.05" armature="0.02" damping="0.5"/>
      <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03" mass="1"/></body>
  </body></worldbody></mujoco>"""


def test_mjcf_joint_kinds_chains_refs_and_merged_bodies():
    """An inline leg with every joint kind, two hinges in one body (a chain
    through a massless body), refs, dampers on a hinge and the free and
    ball joints, a spring, armature on the free, ball and slide joints and
    a jointless foot: merged (default) and welded, both equal to MuJoCo."""
    robot, model, state, _ = _against_mujoco(LEG, seed=3, count=5, warns=False)
    assert robot["foot"] is robot["shin"] is robot["knee"] and robot["world"].is_ground()
    assert robot["hip_x"].name == "thigh.hip_x" and robot["hip_y"].name == "thigh"
    assert set(robot.dampers) == {"hip_x", "root", "shoulder"} and set(robot.springs) == {"hip_y"}
    assert len(robot.dampers["root"]) == 6 and len(robot.dampers["shoulder"]) == 3
    assert robot.joints["hip_y"].ref == pytest.approx(0.4) and robot.joints["knee"].type == "slide"
    q_names, u_names = robot.coordinate_names(state)
    assert q_names[:7] == ["root.qw", "root.qx", "root.qy", "root.qz", "root.x", "root.y", "root.z"]
    assert u_names[-3:] == ["shoulder.wx", "shoulder.wy", "shoulder.wz"]
    np.testing.assert_allclose(state.q[4:7], [0, 0, 1])  # the free body's default q: its pose in the file
    np.testing.assert_allclose(state.q[8:10], [0.4, 0.05])  # hip_y's and the knee's refs
    robot, _, _, _ = _against_mujoco(LEG, seed=4, count=2, warns=False, merge_fixed=False)
    assert type(robot["foot"]).__name__ == "Weld"


def test_mjcf_reports_what_it_drops_and_bad_sources():
    """One warning names what is not modelled; the robot records what was
    asked (``robot.options``); a missing file and MuJoCo's compiler errors
    are raised with the source named."""
    with pytest.warns(UserWarning, match=r"not modelled by the loaded system: equality constraints equality0 "
                                         r"\(inactive\); armature on a; friction loss on a; "
                                         r"tendon forces or limits on tt$"):
        robot = sx.io.load_mjcf("""<mujoco><worldbody><body name="x">
            <joint name="a" range="-1 1" armature="0.1" frictionloss="1"/>
            <geom size="0.1" contype="0" conaffinity="0"/><body pos="0 0 -1"><joint name="b" type="ball" damping="1" range="0 1"/>
            <geom size="0.1" contype="0" conaffinity="0"/></body></body></worldbody>
            <actuator><motor joint="a"/></actuator><equality><weld body1="x" active="false"/></equality>
            <tendon><fixed name="tt" stiffness="1"><joint joint="a" coef="1"/></fixed></tendon></mujoco>""",
            armature=False, frictionloss=False, physics="simbody")[3]
    assert sorted(robot.stops) == ["a", "b"]  # the hinge's range and the ball's cone
    assert robot.options == sx.io.MjcfOptions(armature=False, frictionloss=False, physics="simbody")
    assert not robot.options.soft
    with pytest.raises(FileNotFoundError, match="no MJCF file at"):
        sx.io.load_mjcf("/nonexistent/robot.xml")
    with pytest.raises(ValueError, match=r"MuJoCo could not compile .*invalid keyword: 'hinje'\nElement 'joint'"):
        sx.io.load_mjcf("<mujoco><worldbody><body><joint type='hinje'/><geom size='1'/></body></worldbody></mujoco>")


def test_mjcf_equalities_become_constraints():
    """connect -> Ball, joint (quadratic and single-joint lock) and fixed
    tendon (linear, cubic, one tendon held) -> CoordinateCoupler, their
    position errors equal MuJoCo's equality rows (efc_pos; the Ball's with
    the opposite sign: anchor 2 - anchor 1) at random poses; a weld becomes
    a Weld (``test_mjcf_welds_and_sites``)."""
    xml = """<mujoco><compiler angle="radian"/><option><flag contact="disable"/></option><worldbody>
      <body name="a" pos="0 0 1"><joint name="j1" axis="0 1 0"/><geom size="0.1" mass="1"/>
        <body name="b" pos="0.5 0 0"><joint name="j2" axis="0 1 0"/><geom size="0.1" mass="1"/></body></body>
      <body name="c" pos="1 0 1"><joint name="j3" axis="0 1 0"/><geom size="0.1" mass="1"/></body>
      <body name="d" pos="2 0 1"><joint name="j4" type="slide" axis="1 0 0"/><geom size="0.1" mass="1"/></body>
      <body name="e" pos="3 0 1"><joint name="j5" axis="0 0 1"/><geom size="0.1" mass="1"/></body>
    </worldbody><equality><connect name="loop" body1="b" body2="c" anchor="0.5 0 0"/>
      <joint name="gear" joint1="j4" joint2="j1" polycoef="0.1 2 0.5 0 0"/><joint name="lock" joint1="j5"/>
      <tendon name="tie" tendon1="t1" tendon2="t2" polycoef="0.05 0.7 0 0 0"/>
      <tendon name="cubic" tendon1="t2" tendon2="t3" polycoef="-0.1 0.3 0 0.4 0"/><tendon name="hold" tendon1="t3"/>
      <weld body1="e"/></equality><tendon><fixed name="t1"><joint joint="j1" coef="1"/><joint joint="j3" coef="0.5"/>
      </fixed><fixed name="t2"><joint joint="j4" coef="2"/><joint joint="j2" coef="-1"/><joint joint="j1" coef="0.3"/>
      </fixed><fixed name="t3"><joint joint="j5" coef="1.5"/></fixed></tendon></mujoco>"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # everything is mapped
        system, _, _, robot = sx.io.load_mjcf(xml, physics="simbody")
    assert list(robot.couplers) == ["loop", "gear", "lock", "tie", "cubic", "hold", "equality6"]
    assert type(robot.couplers["equality6"]).__name__ == "Weld"
    model, state = system.realize_topology()
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for q in np.random.default_rng(5).uniform(-0.5, 0.5, size=(3, 5)):
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        s = model.realize(state.with_q(jnp.asarray(q)), sx.Stage.Position)
        ours = np.concatenate([c.get_position_errors_as_vector(s) for c in list(robot.couplers.values())[:6]])
        np.testing.assert_allclose(ours, np.concatenate([-d.efc_pos[:3], d.efc_pos[3:8]]), atol=1e-14)


def test_mjcf_welds_and_sites():
    """weld between bodies (relpose from the file's pose or given, an
    anchor, to the world) -> Weld, with torquescale 0 -> Ball; connect and
    weld between sites -> Ball and Weld. At random poses each constraint's
    two frames are those MuJoCo's equality rows make coincide (1e-14), its
    translational errors are minus MuJoCo's (efc_pos), and at the file's
    pose the body welds without a given relpose hold."""
    xml = """<mujoco><option><flag contact="disable"/></option><worldbody>
      <body name="a" pos="0 0 1"><joint type="ball"/><geom size="0.1" mass="1"/>
        <site name="sa" pos="0.2 0 0" euler="10 20 30"/>
        <body name="b" pos="0.5 0 0" euler="0 0 30"><joint axis="0 1 0"/><geom size="0.1" mass="1"/>
          <site name="sb" pos="0 0.1 0" euler="0 45 0"/></body></body>
      <body name="c" pos="1 0 1"><freejoint/><geom size="0.1" mass="1"/><site name="sc" pos="0 0 0.3"/></body>
    </worldbody><equality>
      <weld name="bodies" body1="a" body2="c" anchor="0.1 0.2 0.3"/>
      <weld name="given" body1="b" body2="c" relpose="0.3 0 0.1 0.9 0.1 0.2 0.3" anchor="0 0 0.2"/>
      <weld name="world" body1="b"/>
      <weld name="no_torque" body1="c" body2="b" anchor="0.1 0 0" torquescale="0"/>
      <connect name="c_sites" site1="sa" site2="sc"/>
      <weld name="w_sites" site1="sb" site2="sc" torquescale="2"/>
    </equality></mujoco>"""
    system, matter, _, robot = sx.io.load_mjcf(xml, physics="simbody")
    kinds = {label: type(c).__name__ for label, c in robot.couplers.items()}
    assert kinds == {"bodies": "Weld", "given": "Weld", "world": "Weld", "no_torque": "Ball", "c_sites": "Ball",
                     "w_sites": "Weld"}
    model, state = system.realize_topology()
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    s0 = model.realize(state, sx.Stage.Position)
    for label in ("bodies", "world", "no_torque"):  # relpose from the file's pose
        np.testing.assert_allclose(robot.couplers[label].get_position_errors_as_vector(s0), 0, atol=1e-14)

    def mujoco_frames(e):  # the two frames (R, p) in the world that MuJoCo's equality e makes coincide
        one, two = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        if m.eq_objtype[e] == mujoco.mjtObj.mjOBJ_SITE:
            return [(d.site_xmat[k].reshape(3, 3), d.site_xpos[k]) for k in (one, two)]
        data = m.eq_data[e]
        rel = np.zeros(9)
        mujoco.mju_quat2Mat(rel, data[6:10] / np.linalg.norm(data[6:10]))
        R1, R2 = d.xmat[one].reshape(3, 3), d.xmat[two].reshape(3, 3)
        second = data[3:6] if m.eq_type[e] == mujoco.mjtEq.mjEQ_CONNECT else data[:3]
        first = data[:3] if m.eq_type[e] == mujoco.mjtEq.mjEQ_CONNECT else data[3:6]
        return [(R1 @ rel.reshape(3, 3), d.xpos[one] + R1 @ first), (R2, d.xpos[two] + R2 @ second)]

    order = [b.index for b in robot.joint_bodies.values()]
    for q in m.qpos0 + np.random.default_rng(6).uniform(-0.6, 0.6, size=(3, m.nq)):
        q[0:4] /= np.linalg.norm(q[0:4])  # the ball's and the free joint's quaternions
        q[8:12] /= np.linalg.norm(q[8:12])
        d.qpos[:] = q
        mujoco.mj_forward(m, d)
        s = mj_state_from(model, matter, state, q, np.zeros(m.nv), order)
        row = 0
        for e, (label, c) in enumerate(robot.couplers.items()):
            X_GB = [s.position.X_GB[b] for b in c.bodies]
            frames = ([c.get_default_frame_on_body1(), c.get_default_frame_on_body2()] if kinds[label] == "Weld"
                      else [sx.Transform(p=c.get_default_point_on_body1()),
                            sx.Transform(p=c.get_default_point_on_body2())])
            for X, F, (R, p) in zip(X_GB, frames, mujoco_frames(e)):
                np.testing.assert_allclose(X.apply(F.p), p, atol=1e-14)
                if kinds[label] == "Weld":
                    np.testing.assert_allclose(X.R @ F.R, R, atol=1e-14)
            np.testing.assert_allclose(c.get_position_errors_as_vector(s)[-3:], -d.efc_pos[row:row + 3], atol=1e-14)
            row += 6 if m.eq_type[e] == mujoco.mjtEq.mjEQ_WELD else 3


def test_mjcf_actuators_drive_the_joints_as_mujocos():
    """Motor, position and velocity actuators (gear, control and force
    ranges): MuJoCo's qacc with its actuators on, against forward dynamics
    with the controls set through robot.set_controls, controls beyond
    their range included; a filtered actuator is left out and named."""
    xml = """<mujoco><option gravity="0 0 -9.81"><flag contact="disable" limit="disable"/></option><worldbody>
      <body name="a"><joint name="j1" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
        <body name="b" pos="0.5 0 0"><joint name="j2" axis="0 1 0" damping="0.1"/>
          <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
          <body name="c" pos="0.5 0 0"><joint name="j3" type="slide" axis="1 0 0"/><geom size="0.1"/></body></body></body>
      </worldbody><actuator><motor name="m" joint="j1" gear="2" ctrlrange="-1 1"/>
      <position name="p" joint="j2" kp="10" forcerange="-3 3"/><velocity name="v" joint="j3" kv="2" gear="1.5"/>
      <general name="filtered" joint="j1" dyntype="filter" dynprm="0.1"/></actuator></mujoco>"""
    with pytest.warns(UserWarning, match=r"actuators filtered \(activation dynamics"):
        system, matter, _, robot = sx.io.load_mjcf(xml)
    model, state = system.realize_topology()
    m = mujoco.MjModel.from_xml_string(xml)
    m.actuator_gainprm[3, 0] = 0.0  # the filtered actuator's force off on MuJoCo's side
    d = mujoco.MjData(m)
    assert list(robot.actuators) == ["m", "p", "v"]
    rng = np.random.default_rng(4)
    q, u, ctrl = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), 2 * rng.normal(size=(5, 3))

    @jax.jit
    @jax.vmap
    def udot(q, u, ctrl):
        s = robot.set_controls(state.with_q(q).with_u(u), ctrl)
        return model.realize(s, sx.Stage.Acceleration).acceleration.udot

    ours = udot(jnp.asarray(q), jnp.asarray(u), jnp.asarray(ctrl))
    for k in range(5):
        d.qpos[:], d.qvel[:], d.ctrl[:] = q[k], u[k], np.append(ctrl[k], 0.0)
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(ours[k], d.qacc, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match=r"expected 3 controls \(one per modelled actuator: m, p, v\)"):
        robot.set_controls(state, [1.0, 2.0])


@pytest.mark.parametrize("physics", ["mujoco", "simbody"])
def test_mjcf_gravity_switched_off_by_its_flag_is_off(physics):
    """A file whose <flag gravity="disable"/> keeps opt.gravity's numbers
    has no gravity: a hinge at rest off the vertical stays at rest."""
    xml = """<mujoco><option><flag gravity="disable"/></option><worldbody><body>
             <joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/></body></worldbody></mujoco>"""
    system, _, _, _ = sx.io.load_mjcf(xml, physics=physics)
    model, state = system.realize_topology()
    assert float(jnp.abs(model.realize(state, sx.Stage.Acceleration).acceleration.udot).max()) == 0.0
