"""MuJoCo's constraint model for MJCF robots (``load_mjcf(physics="mujoco")``,
``simbodyx.soft_constraints``), checked against MuJoCo C itself.

The oracle is MuJoCo run with its Newton solver to a tight tolerance (the
Humanoid's file asks for 50 PGS iterations, which stop short of the
optimum): the constrained accelerations of the same convex problem, at
random states with contacts and limits in play, agree to 1e-9 of their
size; a rollout at the file's own time step with the file's integrator
follows MuJoCo's step for step (root heights within 1e-6 m over a second,
where both engines run the same arithmetic in another order, so their
difference grows only with the motion's sensitivity). Gradients through
the step are checked against central differences.
"""

import pathlib
import warnings

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import simbodyx as sx
from simbodyx.interop import mujoco as interop

ASSETS = pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
ROBOTS = ("ant", "hopper", "walker2d", "half_cheetah", "humanoid")
_LOADED = {}


def loaded(robot):
    """(model, default State, matter, robot, MjModel with Newton's solver,
    the moving bodies in MuJoCo's joint order), loaded once per robot."""
    if robot not in _LOADED:
        path = ASSETS / f"{robot}.xml"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            system, matter, _, handles = sx.io.load_mjcf(path, physics="mujoco")
            m = mujoco.MjModel.from_xml_path(str(path))
        model, state = system.realize_topology()
        m.opt.solver, m.opt.iterations, m.opt.tolerance = mujoco.mjtSolver.mjSOL_NEWTON, 100, 1e-12
        _LOADED[robot] = model, state, matter, handles, m, [b.index for b in handles.joint_bodies.values()]
    return _LOADED[robot]


def root_height(m, qpos):
    """The root's height: a free joint's z, else the first slide along z."""
    if m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        return qpos[2]
    return qpos[[j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE
                 and abs(m.jnt_axis[j][2]) == 1][0]]


def perturbed(m, rng, angles=0.3, speeds=1.0):
    """qpos, qvel near the file's pose: joint angles moved by up to
    ``angles`` (rad, limits not respected), speeds N(0, ``speeds``)."""
    qpos = np.array(m.qpos0)
    free = m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    start = 7 if free else 0
    qpos[start:] += rng.uniform(-angles, angles, m.nq - start) * (np.arange(start, m.nq) >= (0 if free else 3))
    return qpos, rng.normal(0.0, speeds, m.nv)


@pytest.mark.parametrize("robot", ROBOTS)
def test_constrained_accelerations_are_mujocos(robot):
    """The same problem, solved: qacc at three states (from the file's pose,
    dropped onto the floor and perturbed) equals MuJoCo's within 1e-9 of
    its largest entry, with contacts, limits and (the Humanoid's) fixed
    tendon limits in play."""
    model, state, matter, handles, m, bodies = loaded(robot)
    d = mujoco.MjData(m)
    accelerations = jax.jit(lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot)
    rng = np.random.default_rng(7)
    rows = 0
    for drop in (0.0, 0.1, 0.2):
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = perturbed(m, rng) if drop else (m.qpos0, np.zeros(m.nv))
        d.qpos[2 if m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE else 1] -= drop
        mujoco.mj_normalizeQuat(m, d.qpos)
        mujoco.mj_forward(m, d)
        rows += d.nefc
        s = model.realize(interop.state_from(model, matter, state, d.qpos, d.qvel, bodies), sx.Stage.Velocity)
        qacc = interop.velocity_map(matter, s, bodies) @ np.asarray(accelerations(s))
        np.testing.assert_allclose(qacc, d.qacc, rtol=0, atol=1e-9 * np.abs(d.qacc).max())
    assert rows > 0


def _rollout_heights(robot, seconds, qpos=None, qvel=None):
    """(ours, MuJoCo's) root heights after each step at the file's time step."""
    model, state, matter, handles, m, bodies = loaded(robot)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 if qpos is None else qpos
    d.qvel[:] = 0.0 if qvel is None else qvel
    mujoco.mj_forward(m, d)
    start = interop.state_from(model, matter, state, d.qpos, d.qvel, bodies)
    n = int(round(seconds / m.opt.timestep))
    theirs = []
    for _ in range(n):
        mujoco.mj_step(m, d)
        theirs.append(root_height(m, d.qpos))
    _, trajectory = sx.integrate.rollout(model, start, handles.timestep, n, method=handles.stepper, energy=False)
    ours = [root_height(m, interop.configuration(matter, model.realize(start.with_q(q), sx.Stage.Position),
                                                 bodies)[0]) for q in np.asarray(trajectory.q[1:])]
    return np.array(ours), np.array(theirs)


@pytest.mark.parametrize("robot,seconds", [("ant", 1.0), ("hopper", 1.0), ("walker2d", 0.5),
                                           ("half_cheetah", 1.0), ("humanoid", 0.5)])
def test_a_rollout_at_the_files_time_step_follows_mujoco(robot, seconds):
    """From the file's pose, with the file's integrator (RK4, or the
    HalfCheetah's semi-implicit Euler) at its time step (2 to 10 ms), the
    robot falls, lands and settles as MuJoCo's does: root heights within
    1e-6 m at every step."""
    ours, theirs = _rollout_heights(robot, seconds)
    assert np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


def test_every_integrator_steps_the_soft_constraints():
    """The Model's Acceleration stage solves the constraints, so any
    integrator steps them: on the Hopper (planar, no quaternion) plain
    RK4 (``rollout``'s default) is MuJoCo's RK4 to the last bit, the
    vector field ``sx.integrate.derivatives`` is realize's, and ``sx.simulate``
    with Merson at accuracy 1e-6 follows RK4 at a quarter of the file's
    step within 3e-5 over the fall and landing (0.3 s; RK4 at that step is
    itself within about 1e-5 of converged)."""
    model, state, _, handles, _, _ = loaded("hopper")
    h = handles.timestep
    plain, _ = sx.integrate.rollout(model, state, h, 150, energy=False)
    mujocos, _ = sx.integrate.rollout(model, state, h, 150, method=sx.integrate.MuJoCoStepper(integrator="rk4"),
                                      energy=False)
    np.testing.assert_array_equal(plain.q, mujocos.q)
    s = model.realize(plain, sx.Stage.Acceleration)
    np.testing.assert_array_equal(sx.integrate.derivatives(model, plain)[1], s.acceleration.udot)
    times = jnp.linspace(0.0, 0.3, 4)
    _, fine = sx.integrate.rollout(model, state, h / 4, 600, save_every=200, energy=False)
    _, reported, _ = sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(accuracy=1e-6), times,
                                 energy=False)
    np.testing.assert_allclose(reported.q, fine.q, rtol=0, atol=3e-5)


def test_the_ant_landing_outside_its_limits_follows_mujoco():
    """The file's pose starts the Ant's ankles 30 degrees outside their
    limits; perturbed further and thrown (speeds N(0, 1)), it lands as
    MuJoCo's does (the limit rows push the ankles back in): root heights
    within 3 mm over a second (1.0 mm measured). Not to 1e-6 m here: a
    spinning torso's orientation after an RK4 step differs from MuJoCo
    4.0.1's by about 1e-7 rad (``MuJoCoStepper``), and the landing's
    contacts amplify it."""
    _, _, _, _, m, _ = loaded("ant")
    qpos, qvel = perturbed(m, np.random.default_rng(3), angles=0.5)
    ours, theirs = _rollout_heights("ant", 1.0, qpos, qvel)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=3e-3)


def test_perturbed_ants_stay_finite_at_the_files_time_step():
    """32 Ants started with joint angles up to 0.5 rad off (many outside
    their limits) and speeds N(0, 1), stepped together under vmap at the
    file's 10 ms for 3 s: every state finite, every torso above the floor."""
    model, state, matter, handles, m, bodies = loaded("ant")
    rng = np.random.default_rng(11)
    starts = [interop.state_from(model, matter, state, *perturbed(m, rng, angles=0.5), bodies) for _ in range(32)]
    batch = jax.tree.map(lambda *a: jnp.stack(a), *starts)
    run = jax.jit(jax.vmap(lambda s: sx.integrate.rollout(model, s, handles.timestep, 300,
                                                          method=handles.stepper, energy=False)[0]))
    final = run(batch)
    assert np.all(np.isfinite(np.asarray(final.q))) and np.all(np.isfinite(np.asarray(final.u)))
    heights = [root_height(m, interop.configuration(matter, model.realize(jax.tree.map(lambda a: a[i], final),
                                                                          sx.Stage.Position), bodies)[0])
               for i in range(32)]
    assert min(heights) > 0.0


def test_float32_follows_float64():
    """The Hopper in float32 (``model.astype``) at the file's 2 ms through its
    fall and landing: the solve keeps float32 and the configuration stays
    within 1e-5 of float64's over 0.5 s (2.4e-7 measured)."""
    model, state, _, handles, _, _ = loaded("hopper")
    single = model.astype("float32")
    assert single.soft_constraints.contact_solref.dtype == np.float32
    _, wide = sx.integrate.rollout(model, state, handles.timestep, 250, save_every=25, method=handles.stepper,
                                   energy=False)
    _, narrow = sx.integrate.rollout(single, single.default_state(), handles.timestep, 250, save_every=25,
                                     method=handles.stepper, energy=False)
    assert narrow.q.dtype == np.float32
    np.testing.assert_allclose(np.asarray(narrow.q, float), wide.q, rtol=0, atol=1e-5)


def test_a_passive_drop_gains_no_energy():
    """The Walker2d dropped from its file's pose (no control): its total
    energy (kinetic plus gravity's) never rises above its start, through
    the landing and the fall, at the file's 2 ms RK4 step."""
    model, state, _, handles, _, _ = loaded("walker2d")
    _, trajectory = sx.integrate.rollout(model, state, handles.timestep, 750, method=handles.stepper)
    energy = np.asarray(trajectory.energy)
    assert np.all(np.isfinite(energy))
    assert energy.max() <= energy[0] + 1e-9 * abs(energy[0])
    assert energy[-1] < energy[0] - 1.0  # the landing dissipated


def test_gradients_through_contact_match_central_differences_and_a_descent_on_them_converges():
    """The root height after 0.1 s of 2 ms steps (the file's) of the Hopper
    standing on its foot (contacts pushing and sticking throughout), as a
    function of its initial speeds and of torques on its thigh, leg and
    foot held over the steps, by reverse mode: its derivatives equal
    central differences within 1e-6 (relative; the implicit derivative of
    each solve is exact while the set of pushing rows holds), and gradient
    descent (Adam) on them raises the torso 3 cm, the squared miss below
    1% of its start in 30 iterations."""
    import optax

    model, state, matter, handles, m, bodies = loaded("hopper")
    settled, _ = sx.integrate.rollout(model, state, handles.timestep, 1000, method=handles.stepper, energy=False)
    rootz = int(np.flatnonzero(np.asarray(m.jnt_type) == mujoco.mjtJoint.mjJNT_SLIDE)[1])
    steps = 50

    def height(u, torques):
        controls = jnp.zeros((steps, settled.u.shape[0])).at[:, 3:].set(torques)
        final, _ = sx.integrate.rollout(model, settled.with_u(u), handles.timestep, steps, method=handles.stepper,
                                        controls=controls, energy=False)
        return final.q[rootz]

    value_and_grad = jax.jit(jax.value_and_grad(height, argnums=(0, 1)))
    u0, torques = settled.u + 0.01, jnp.full(3, 0.1)
    grads = value_and_grad(u0, torques)[1]
    f, h = jax.jit(height), 1e-6
    for k, (x, grad) in enumerate(zip((u0, torques), grads)):
        moved = [lambda dx, i=i: (u0.at[i].add(dx), torques) if k == 0 else (u0, torques.at[i].add(dx))
                 for i in range(x.shape[0])]
        central = np.array([(f(*step(h)) - f(*step(-h))) / (2 * h) for step in moved])
        assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 1e-4  # m per m/s, m per N m
        np.testing.assert_allclose(grad, central, rtol=1e-6, atol=1e-6 * np.abs(central).max())

    target = float(settled.q[rootz]) + 0.03
    optimizer = optax.adam(5.0)
    torques = jnp.zeros(3)
    opt_state = optimizer.init(torques)
    first = (float(f(settled.u, torques)) - target) ** 2
    for _ in range(30):
        value, (_, d_torques) = value_and_grad(settled.u, torques)
        updates, opt_state = optimizer.update(2 * (value - target) * d_torques, opt_state)
        torques = optax.apply_updates(torques, updates)
    assert (float(f(settled.u, torques)) - target) ** 2 < 0.01 * first


def test_physics_must_be_known():
    with pytest.raises(ValueError, match="physics must be 'simbody' or 'mujoco'"):
        sx.io.load_mjcf(ASSETS / "hopper.xml", physics="bullet")


class Scene:
    """An MJCF model loaded by simbodyx (a load warning is an error, unless
    ``warns`` is the pattern it must match) and by MuJoCo C (Newton to
    tolerance 1e-12), with MuJoCo's data ``d`` to set states in."""

    def __init__(self, xml, warns=None):
        with pytest.warns(UserWarning, match=warns) if warns else warnings.catch_warnings(action="error"):
            system, self.matter, _, self.robot = sx.io.load_mjcf(xml)
        self.model, self.state = system.realize_topology()
        self.m = mujoco.MjModel.from_xml_string(xml)
        self.m.opt.solver, self.m.opt.iterations, self.m.opt.tolerance = mujoco.mjtSolver.mjSOL_NEWTON, 100, 1e-12
        self.d = mujoco.MjData(self.m)
        self.bodies = [b.index for b in self.robot.joint_bodies.values()]
        self._accelerations = jax.jit(lambda s: self.model.realize(s, sx.Stage.Acceleration).acceleration.udot)

    def ours(self):
        """The State of MuJoCo's (qpos, qvel), realized to Velocity."""
        return self.model.realize(interop.state_from(self.model, self.matter, self.state, self.d.qpos, self.d.qvel,
                                                     self.bodies), sx.Stage.Velocity)

    def set(self, qpos, qvel):
        """MuJoCo's data at (qpos, qvel) (quaternions normalized), forward."""
        self.d.qpos[:], self.d.qvel[:] = qpos, qvel
        mujoco.mj_normalizeQuat(self.m, self.d.qpos)
        mujoco.mj_forward(self.m, self.d)

    def check_accelerations(self):
        """The constrained accelerations at the data's state equal MuJoCo's
        within 1e-9 of their size."""
        s = self.ours()
        qacc = interop.velocity_map(self.matter, s, self.bodies) @ np.asarray(self._accelerations(s))
        np.testing.assert_allclose(qacc, self.d.qacc, rtol=0, atol=1e-9 * np.abs(self.d.qacc).max())

    def check_rollout(self, steps, atol):
        """``steps`` steps at the file's time step from the data's state, by
        robot.stepper and mj_step: the configurations within ``atol`` (a
        quaternion and its negative turn alike)."""
        final, _ = sx.integrate.rollout(self.model, self.ours(), self.robot.timestep, steps, method=self.robot.stepper,
                                        energy=False)
        mujoco.mj_step(self.m, self.d, nstep=steps)
        ours = interop.configuration(self.matter, self.model.realize(final, sx.Stage.Position), self.bodies)[0]
        m = self.m
        for j in np.flatnonzero(np.asarray(m.jnt_type) <= int(mujoco.mjtJoint.mjJNT_BALL)):
            first = m.jnt_qposadr[j] + 3 * (m.jnt_type[j] == int(mujoco.mjtJoint.mjJNT_FREE))
            ours[first:first + 4] *= np.sign(ours[first:first + 4] @ self.d.qpos[first:first + 4])
        np.testing.assert_allclose(ours, self.d.qpos, rtol=0, atol=atol)

    def check_gradient(self, loss_of_final_q, steps):
        """d loss(final q)/d(initial u) over ``steps`` steps from the data's
        state, by reverse mode, equals central differences (step 1e-6)
        within 1e-6 of its size."""
        start = self.ours()

        def loss(u):
            end, _ = sx.integrate.rollout(self.model, start.with_u(u), self.robot.timestep, steps,
                                          method=self.robot.stepper, energy=False)
            return loss_of_final_q(end.q)

        grad = np.asarray(jax.jit(jax.grad(loss))(start.u))
        f, h = jax.jit(loss), 1e-6
        central = np.array([(f(start.u.at[i].add(h)) - f(start.u.at[i].add(-h))) / (2 * h)
                            for i in range(start.u.shape[0])])
        assert np.abs(grad).max() > 1e-3
        np.testing.assert_allclose(grad, central, rtol=0, atol=1e-6 * np.abs(central).max())


#: Every equality MuJoCo has between rigid bodies: a connect and welds by
#: body and by site (with relpose, an anchor and torquescale, 0 on a ball
#: joint's body), joint couplings by a polynomial and alone, a fixed tendon
#: held, and one inactive weld.
EQUALITIES = """<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
<site name="w" pos="0.3 0.1 1.2" quat="0.9 0.1 0.3 0.2"/>
<body name="a" pos="0 0 1"><joint name="ja" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 .4 0 0" size=".05"/>
 <body name="b" pos=".4 0 0"><joint name="jb" axis="0 1 0"/><joint name="jb2" axis="1 0 0"/>
  <geom type="capsule" fromto="0 0 0 .4 0 0" size=".05"/>
  <site name="s" pos=".4 0 0" quat="0.8 0.2 0.1 0.3"/></body></body>
<body name="c" pos="0.5 0.5 1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
<body name="d" pos="-0.5 0.5 1"><joint name="jd" type="slide" axis="0 0 1"/><geom type="sphere" size=".1"/></body>
<body name="e" pos="0 -0.5 1"><joint type="ball"/><geom size=".1"/></body>
</worldbody><tendon><fixed name="t"><joint joint="ja" coef="1"/><joint joint="jb" coef="-0.5"/></fixed></tendon>
<equality><connect body1="c" body2="b" anchor="0.1 0 0"/><weld site1="s" site2="w" torquescale="2"/>
<weld body1="c" body2="a" relpose="0.2 0.3 0 0.9 0 0.1 0.2"/><joint joint1="jd" joint2="ja" polycoef="0.1 0.5 0.2 0 0"/>
<joint joint1="jb2"/><tendon tendon1="t" polycoef="0.05 0 0 0 0"/><weld name="off" body1="a" active="false"/>
<weld body1="e" body2="c" anchor="0.1 0 0.2" torquescale="0"/>
</equality></mujoco>"""


def test_equality_constraints_are_mujocos():
    """Connect, weld (by body and by site), joint and tendon equalities as
    soft rows: the constrained accelerations equal MuJoCo's (Newton, tol
    1e-12) within 1e-9 of their size at three states (the velocity
    products MuJoCo subtracts from a connect's and a weld's reference
    acceleration included); a rollout at the file's 2 ms follows MuJoCo's
    step for step (configurations within 1e-9 over 0.2 s); the gradient
    through it equals central differences; the inactive equality is named
    in the load warning."""
    scene = Scene(EQUALITIES, warns="equality off")
    m, rng = scene.m, np.random.default_rng(0)
    for k in range(3):
        scene.set(m.qpos0 + rng.uniform(-0.2, 0.2, m.nq) * (k > 0), rng.normal(0, 1, m.nv) * (k == 2))
        assert scene.d.ne == 24
        scene.check_accelerations()
    scene.check_gradient(lambda q: q[-1], 10)
    scene.check_rollout(100, atol=1e-9)


#: A ball joint with a 30 degree cone limit and friction loss, a hinge with
#: friction loss, and free bodies with and without it (on the floor, not on
#: each other: MuJoCo's capsule-box collider can report one contact twice).
BALLS = """<mujoco><worldbody><geom type="plane" size="2 2 .1" conaffinity="3"/>
<body name="a" pos="0 0 1"><joint name="ba" type="ball" range="0 30" frictionloss="0.3" damping="0.1"/>
 <geom type="capsule" fromto="0 0 0 .4 0 0" size=".05"/>
 <body name="b" pos=".4 0 0"><joint name="jb" axis="0 1 0" frictionloss="0.2"/>
  <geom type="capsule" fromto="0 0 0 .4 0 0" size=".05"/></body></body>
<body name="c" pos="0.5 0.5 0.3"><joint type="free" frictionloss="0.5"/><geom type="box" size=".1 .1 .1"/></body>
<body name="e" pos="0.5 -0.5 1"><freejoint/><geom type="capsule" size=".1 .2" contype="2" conaffinity="2"/></body>
</worldbody></mujoco>"""


def test_ball_limits_and_ball_and_free_friction_loss_are_mujocos():
    """A ball joint's cone limit (one row on its rotation's angle) and the
    friction loss of a ball's and a free joint's dofs (rows about the
    body's turning axes): loaded without a warning, the constrained
    accelerations equal MuJoCo's within 1e-9 of their size at four states
    (the limit reached at three), and a rollout at the file's 2 ms follows
    MuJoCo's (configurations within 1e-9 over 0.2 s)."""
    scene = Scene(BALLS)
    m, rng, limited = scene.m, np.random.default_rng(0), 0
    for k in range(4):
        scene.set(m.qpos0 + rng.uniform(-0.6, 0.6, m.nq) * (k > 0), rng.normal(0, 1, m.nv) * (k >= 2))
        limited += scene.d.nl
        scene.check_accelerations()
    assert limited == 3 and scene.d.nf == 10
    scene.check_rollout(100, atol=1e-9)


#: Elliptic friction cones (impratio 10): a capsule and a ball on the floor,
#: a pendulum whose tip touches it.
ELLIPTIC = """<mujoco><option cone="elliptic" impratio="10"/><worldbody>
<geom type="plane" size="2 2 .1" friction="0.8"/>
<body name="c" pos="0 0 0.1"><freejoint/><geom type="capsule" size=".05 .2" euler="0 90 0"/></body>
<body name="s" pos="0.5 0.5 0.1"><freejoint/><geom type="sphere" size=".1"/></body>
<body name="a" pos="-0.5 0 0.3"><joint axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.32" size=".03"/></body>
</worldbody></mujoco>"""


def test_elliptic_cones_are_mujocos():
    """MuJoCo's elliptic cone (normal and tangent rows, zero cost inside the
    cone, the cone's surface cost where a contact slides, all rows
    quadratic where it pulls): the constrained accelerations equal
    MuJoCo's within 1e-9 of their size at four states with contacts in
    every zone, the contact forces equal mj_contactForce's, a rollout at
    the file's 2 ms follows MuJoCo's within 1e-6 over 0.5 s of sliding,
    rolling and settling, and the gradient through 20 steps of sliding
    and rolling equals central differences."""
    scene = Scene(ELLIPTIC)
    m, d, rng, zones = scene.m, scene.d, np.random.default_rng(0), set()
    for k in range(1, 5):
        qpos = m.qpos0 + rng.uniform(-0.02, 0.02, m.nq)
        qpos[[2, 9]] -= 0.01 * k  # into the floor
        scene.set(qpos, rng.normal(0, 0.3, m.nv) * (k >= 2))
        zones |= set(np.asarray(d.efc_state).tolist())
        scene.check_accelerations()
    assert {int(mujoco.mjtConstraintState.mjCNSTRSTATE_QUADRATIC),
            int(mujoco.mjtConstraintState.mjCNSTRSTATE_CONE)} <= zones
    theirs = np.zeros(3)
    for i in range(d.ncon):
        local = np.zeros(6)
        mujoco.mj_contactForce(m, d, i, local)
        theirs += np.asarray(d.contact[i].frame).reshape(3, 3).T @ local[:3]
    ours = np.asarray(scene.model.soft_constraints.contact_forces(scene.model, scene.ours()).force).sum(axis=0)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8 * np.abs(theirs).max())
    scene.check_rollout(250, atol=1e-6)

    qpos, qvel = np.array(m.qpos0), np.zeros(m.nv)  # sliding and rolling on the floor, pressed 2 mm in
    qpos[[2, 9]] -= 0.002
    qvel[[0, 7, 12]] = 0.5, 0.3, 1.0
    scene.set(qpos, qvel)
    scene.check_gradient(lambda q: q[4] + q[11] + q[-1], 20)


#: Torsional and rolling friction (condim 4 and 6; a priority geom's
#: friction and condim win), under either cone.
CONDIMS = """<mujoco><option cone="CONE" impratio="3"/><worldbody>
<geom type="plane" size="2 2 .1" friction="0.8 0.02 0.01"/>
<body name="c" pos="0 0 0.1"><freejoint/>
 <geom type="box" size=".1 .08 .05" condim="4" friction="0.9 0.05 0.002"/></body>
<body name="s" pos="0.5 0.5 0.1"><freejoint/>
 <geom type="sphere" size=".1" condim="6" priority="1" friction="0.7 0.03 0.02"/></body>
<body name="a" pos="-0.5 0 0.3"><joint axis="0 1 0"/>
 <geom type="capsule" fromto="0 0 0 0 0 -0.32" size=".03" condim="6"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_torsional_and_rolling_friction_are_mujocos(cone):
    """Contacts of condim 4 and 6 (rows or cone dimensions turning about the
    normal and the tangents, with MuJoCo's torsional and rolling friction
    and, in the elliptic cone, their regularizers R_1 mu_1^2 / mu_j^2):
    the constrained accelerations equal MuJoCo's within 1e-9 of their size
    at four states, and a rollout at the file's 2 ms follows MuJoCo's
    within 1e-8 over 0.5 s."""
    scene = Scene(CONDIMS.replace("CONE", cone))
    m, rng, dims = scene.m, np.random.default_rng(0), set()
    for k in range(1, 5):
        qpos = m.qpos0 + rng.uniform(-0.02, 0.02, m.nq)
        qpos[[2, 9]] -= 0.005 * k + np.array([0.05, 0.0])  # the box into the floor, the ball onto it
        scene.set(qpos, rng.normal(0, 0.3, m.nv) * (k >= 2))
        dims |= {int(c.dim) for c in scene.d.contact[:scene.d.ncon]}
        scene.check_accelerations()
    assert dims == {4, 6}
    scene.check_rollout(250, atol=1e-8)


def test_contact_forces_are_mujocos():
    """The contact points' forces (the pyramid edges' forces put together,
    on the robot, in G) add up to MuJoCo's (``mj_contactForce`` in each
    contact's frame) within 1e-8 of their size, for the Ant dropped onto
    the floor at a perturbed pose; points apart carry none; the rows'
    generalized forces are MuJoCo's qfrc_constraint."""
    model, state, matter, handles, m, bodies = loaded("ant")
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = perturbed(m, np.random.default_rng(5))
    d.qpos[2] = 0.18
    mujoco.mj_forward(m, d)
    theirs = np.zeros(3)
    for i in range(d.ncon):
        local = np.zeros(6)
        mujoco.mj_contactForce(m, d, i, local)
        theirs += np.asarray(d.contact[i].frame).reshape(3, 3).T @ local[:3]
    s = model.realize(interop.state_from(model, matter, state, d.qpos, d.qvel, bodies), sx.Stage.Velocity)
    contact = jax.jit(lambda s: model.soft_constraints.contact_forces(model, s))(s)
    ours = np.asarray(contact.force).sum(axis=0)
    assert d.ncon >= 2
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8 * np.abs(theirs).max())
    apart = np.asarray(contact.depth) < -0.02  # beyond the pair's margin
    assert np.all(np.asarray(contact.force)[apart] == 0)
    generalized = np.asarray(model.soft_constraints.constraint_forces(model, s))  # u . f = qvel . qfrc_constraint
    T = interop.velocity_map(matter, s, bodies)
    np.testing.assert_allclose(generalized, T.T @ d.qfrc_constraint, rtol=0,
                               atol=1e-8 * np.abs(d.qfrc_constraint).max())


def test_the_converged_ant_is_mujocos_converged_ant():
    """RK4 at a sixteenth of the file's step (converged to 1e-3 m), from a
    perturbed start outside the ankle limits: the torso height and every
    joint angle at 0.5 and 1 s equal MuJoCo C's converged answer (its RK4
    at the same step) within 1 mm and 0.02 rad (0.22 mm and 0.0073 rad
    here), the agreement asked of simbodyx's MuJoCo physics: the thrown
    torso's spin is where the two RK4s differ (the frame its stages'
    angular velocities are combined in), and the landing's contacts
    amplify that."""
    import dataclasses

    model, state, matter, handles, m, bodies = loaded("ant")
    qpos, qvel = perturbed(m, np.random.default_rng(9), angles=0.5)
    h = handles.timestep / 16
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    start = interop.state_from(model, matter, state, qpos, qvel, bodies)
    stepper = dataclasses.replace(handles.stepper, integrator="rk4")
    _, trajectory = sx.integrate.rollout(model, start, h, 1600, save_every=800, method=stepper, energy=False)
    saved = m.opt.timestep
    m.opt.timestep = h
    try:
        for k in (1, 2):
            mujoco.mj_step(m, d, nstep=800)
            ours = interop.configuration(matter, model.realize(start.with_q(trajectory.q[k]), sx.Stage.Position),
                                         bodies)[0]
            assert abs(ours[2] - d.qpos[2]) < 1e-3
            np.testing.assert_allclose(ours[7:], d.qpos[7:], rtol=0, atol=0.02)
    finally:
        m.opt.timestep = saved
