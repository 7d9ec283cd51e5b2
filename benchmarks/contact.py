"""Contact scenes stepping, side by side: rigid contact (Simbody's
semi-explicit Euler time stepper), compliant contact (Hunt-Crossley, RK4)
and MuJoCo C (``mj_step``, its soft contact and semi-implicit Euler), at the
same step on the same scene.

    python benchmarks/contact.py [--steps 1000] [--batch 1024] [--repeats 5] [--scenes brick,spheres3]
                                 [--robots ant,humanoid] [--loop-options] [--dtype float64]

Rigid contact runs with each impulse solver: PGS (``simbodyx_rigid``, the
default) and Simbody's PLUS (``simbodyx_rigid_plus``).

Scenes, under gravity, dropped onto a floor and settling on it:

* **brick**: a 2 kg box (0.4 x 0.1 x 0.2 m) dropped from 0.3 m with a
  tilt. Rigid: a PointPlaneContact at each bottom corner. Compliant: a
  5 mm sphere at each bottom corner against a half-space. MuJoCo: a box
  geom on a plane.
* **spheres3**: three 0.1 m spheres (1 kg) dropped side by side, touching
  one another on the way down. Rigid: a SpherePlaneContact for each and a
  SphereSphereContact for each pair. Compliant and MuJoCo: the spheres and
  the floor in one contact set (every pair).
* **ant**, **humanoid** (``--robots ant,humanoid``): gymnasium's Ant and
  Humanoid from their MJCF files, dropped from the file's pose with random
  joint speeds: simbodyx's import (Hunt-Crossley contact, its joint
  stops), MuJoCo C and MJX (``mjx.step``) on the same XML at the same
  1 ms step, RK4 in all three (the Ant's file's integrator; the
  Humanoid's file asks for Euler, set to RK4 here so that the engines do
  the same work per step; its PGS contact solver, which MJX does not
  have, becomes MuJoCo's default Newton), controls zero. The Ant lands on
  its legs, the Humanoid falls and lies on the floor.

Reported per engine and scene: compile time, the time per step of one
trajectory of ``--steps`` steps of 1 ms (one jitted rollout; MuJoCo's
``mj_step(nstep=)``, no Python per step), and the throughput of
``--batch`` trajectories of 200 steps in one ``jax.vmap`` (MuJoCo: one
core, its single-trajectory rate). The engines use different contact laws,
so states are not compared; each run checks that after 3 s every body is
on the floor (its centre within 1 cm of its resting height or above) and
every speed finite. Times are minima over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

DT = 1e-3
G = 9.81
HALF = np.array([0.2, 0.05, 0.1])
BOX_MASS = 2.0
RADIUS = 0.1
CORNER_RADIUS = 0.005
SPHERES = np.array([[-0.12, 0.4, 0.0], [0.12, 0.45, 0.0], [0.0, 0.65, 0.05]])  # centres (y up)
TILT = 0.2  # rad about x and z, the brick's drop


def _system(sx):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    return system, matter, forces


def _resting(scene):
    """The lowest a body's centre rests above the floor (m): the brick on its
    largest face, or a sphere."""
    return HALF[1] if scene == "brick" else RADIUS


def _box(sx, matter):
    inertia = BOX_MASS / 3 * np.array([HALF[1] ** 2 + HALF[2] ** 2, HALF[0] ** 2 + HALF[2] ** 2,
                                       HALF[0] ** 2 + HALF[1] ** 2])
    body = sx.Body.Rigid(sx.MassProperties(BOX_MASS, [0, 0, 0], sx.Inertia(*inertia)))
    return sx.MobilizedBody.Free(matter.Ground(), body, name="brick")


def _ball(sx, matter, i):
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.4 * RADIUS ** 2)))
    return sx.MobilizedBody.Free(matter.Ground(), body, name=f"sphere{i}")


CORNERS = [[x * HALF[0], -HALF[1], z * HALF[2]] for x in (-1, 1) for z in (-1, 1)]


def rigid(sx, scene):
    system, matter, _ = _system(sx)
    if scene == "brick":
        box = _box(sx, matter)
        for corner in CORNERS:
            matter.adopt_unilateral_contact(sx.PointPlaneContact(matter.Ground(), [0, 1, 0], 0.0, box, corner, 0.3,
                                                                 0.6, 0.5, 0.0))
    else:
        balls = [_ball(sx, matter, i) for i in range(3)]
        for b in balls:
            matter.adopt_unilateral_contact(sx.SpherePlaneContact(matter.Ground(), [0, 1, 0], 0.0, b, [0, 0, 0],
                                                                  RADIUS, 0.3, 0.6, 0.5, 0.0))
        for i in range(3):
            for j in range(i + 1, 3):
                matter.adopt_unilateral_contact(sx.SphereSphereContact(balls[i], [0, 0, 0], RADIUS, balls[j], [0, 0, 0],
                                                                       RADIUS, 0.3, 0.6, 0.5, 0.0))
    return system


def compliant(sx, scene):
    system, matter, forces = _system(sx)
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    floor = sx.Transform(sx.Rotation.about_z(-np.pi / 2), np.zeros(3))  # the half-space y < 0
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace(), floor)
    if scene == "brick":
        box = _box(sx, matter)
        for corner in CORNERS:
            contacts.add_body(surfaces, box, sx.ContactGeometry.Sphere(CORNER_RADIUS), sx.Transform(np.eye(3), corner))
    else:
        for i in range(3):
            contacts.add_body(surfaces, _ball(sx, matter, i), sx.ContactGeometry.Sphere(RADIUS))
    hc = sx.HuntCrossleyForce(forces, contacts, surfaces)
    for surface in range(contacts.get_num_bodies(surfaces)):
        hc.set_body_parameters(surface, 2e7, 1.0, 0.6, 0.5, 0.0)
    hc.set_transition_velocity(0.1)
    return system


def start_state(sx, model, state, scene):
    if scene == "brick":
        c, s = np.cos(TILT / 2), np.sin(TILT / 2)
        quat = np.array([c * c, s * c, s * s, c * s])  # about x, then z (up to normalization)
        return state.with_q(jnp.concatenate([jnp.asarray(quat / np.linalg.norm(quat)), jnp.array([0.0, 0.3, 0.0])]))
    q = np.concatenate([np.concatenate([[1.0, 0, 0, 0], p]) for p in SPHERES])
    return state.with_q(jnp.asarray(q))


def mujoco_model(scene):
    import mujoco

    half = HALF[[0, 2, 1]]  # z up in MuJoCo
    if scene == "brick":
        c, s = np.cos(TILT / 2), np.sin(TILT / 2)
        bodies = (f'<body pos="0 0 0.3" quat="{c * c} {s * c} {c * s} {s * s}"><freejoint/>'
                  f'<geom type="box" size="{half[0]} {half[1]} {half[2]}" mass="{BOX_MASS}" friction="0.6"/></body>')
    else:
        bodies = "".join(f'<body pos="{p[0]} {-p[2]} {p[1]}"><freejoint/><geom type="sphere" size="{RADIUS}" '
                         f'mass="1" friction="0.6"/></body>' for p in SPHERES)
    xml = (f'<mujoco><option timestep="{DT}"/><worldbody><geom type="plane" size="5 5 0.1"/>{bodies}'
           f'</worldbody></mujoco>')
    return mujoco.MjModel.from_xml_string(xml)


def best(fn, repeats):
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def _on_floor(heights, resting, speeds, what):
    if not (np.all(np.isfinite(speeds)) and np.min(heights - resting) > -0.01):
        raise AssertionError(f"{what}: a body fell through the floor (centre {np.min(heights - resting):.3g} m "
                             "from its resting height)")


def _timed(fn, arg, repeats):
    """(compile seconds: ``fn``'s first call on ``arg``, best seconds per call after it)."""
    t = time.perf_counter()
    jax.block_until_ready(fn(arg))
    return time.perf_counter() - t, best(lambda: fn(arg), repeats)


def _rollout_rows(engine, scene, rollout, start, starts, steps, repeats, compiler_options=None):
    """(rows, the State after at least 3 s from ``start``) for ``rollout(s,
    n)``, the State n steps of DT after s: one trajectory of ``steps`` from
    ``start`` (compiled with ``compiler_options``, if any: the engine's name
    then ends in ``_loop_options``, the only ones passed), and with ``starts``
    (a batch of States; None: none) their trajectories of 200 steps in one
    vmap."""
    one = jax.jit(lambda s: rollout(s, steps), compiler_options=compiler_options or None)
    compile_s, seconds = _timed(one, start, repeats)
    rows = [{"engine": engine + ("_loop_options" if compiler_options else ""), "scene": scene, "batch": 1,
             "compile_s": compile_s, "step_us": 1e6 * seconds / steps}]
    if starts is not None:
        batch = starts.q.shape[0]
        compile_s, seconds = _timed(jax.jit(jax.vmap(lambda s: rollout(s, 200))), starts, repeats)
        rows.append({"engine": engine, "scene": scene, "batch": batch, "compile_s": compile_s,
                     "step_us": 1e6 * seconds / (200 * batch)})
    settle = start
    for _ in range(-(-3000 // steps)):
        settle = one(settle)
    return rows, settle


def _mujoco_step_us(m, d, steps, repeats):
    """MuJoCo C's best time per ``mj_step`` over ``repeats`` trajectories of ``steps`` from the model's reset."""
    import mujoco

    times = []
    for _ in range(repeats):
        mujoco.mj_resetData(m, d)
        t = time.perf_counter()
        mujoco.mj_step(m, d, nstep=steps)
        times.append(time.perf_counter() - t)
    return 1e6 * min(times) / steps


#: the simbodyx kinds: rigid contact with either impulse solver, compliant contact with RK4
KINDS = {"rigid": "PGS", "rigid_plus": "PLUS", "compliant": None}


def simbodyx_rows(sx, scene, kind, steps, batch, repeats):
    system = compliant(sx, scene) if kind == "compliant" else rigid(sx, scene)
    model, state = system.realize_topology()
    start = start_state(sx, model, state, scene)
    method = "rk4" if kind == "compliant" else sx.SemiExplicitEulerTimeStepper(impulse_solver_type=KINDS[kind])

    def rollout(s, n):
        return sx.integrate.rollout(model, s, DT, n, n, method=method, energy=False)[0]

    noise = jax.random.normal(jax.random.PRNGKey(0), (batch, state.u.shape[0])) * 0.3
    starts = jax.vmap(lambda du: start.with_u(start.u + du))(noise) if batch else None
    rows, settle = _rollout_rows(f"simbodyx_{kind}", scene, rollout, start, starts, steps, repeats)
    positions = np.asarray(settle.q).reshape(-1, 7)[:, 4:]
    _on_floor(positions[:, 1], _resting(scene), np.asarray(settle.u), f"simbodyx {kind} {scene}")
    return rows


def mujoco_rows(scene, steps, repeats):
    import mujoco

    m = mujoco_model(scene)
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=3000)
    _on_floor(d.xpos[1:, 2], _resting(scene), d.qvel, f"mujoco {scene}")
    return [{"engine": "mujoco", "scene": scene, "batch": 1, "step_us": _mujoco_step_us(m, d, steps, repeats)}]


#: gymnasium's robots: the lowest torso height (m) that counts as on the floor
#: after 3 s (the Ant stands at about 0.5 m, the Humanoid lies at about 0.1 m)
ROBOTS = {"ant": 0.2, "humanoid": 0.05}


def _robot_xml(name):
    """The MJCF file gymnasium ships for ``name`` (found without importing gymnasium)."""
    import importlib.util
    import pathlib

    package = pathlib.Path(importlib.util.find_spec("gymnasium").submodule_search_locations[0])
    return package / "envs" / "mujoco" / "assets" / f"{name}.xml"


def robot_rows(sx, name, steps, batch, repeats, mujoco=True, loop_options=False):
    """gymnasium robot ``name``'s rows: simbodyx (one trajectory, with
    ``sx.xla_setup.loop_compiler_options()`` if ``loop_options``, and
    ``batch`` of 200 steps in one vmap), MuJoCo C (one trajectory) and MJX
    (``batch`` of 200 steps in one vmap); each engine's torso on the floor
    (at least ``ROBOTS[name]`` high) after 3 s."""
    import warnings

    with warnings.catch_warnings(action="error"):  # everything in the file is modelled
        system, _, _, _ = sx.io.load_mjcf(_robot_xml(name), physics="simbody")
    model, state = system.realize_topology()
    noise = jax.random.normal(jax.random.PRNGKey(0), (max(batch, 1), state.u.shape[0])).at[:, :6].set(0.0)

    def rollout(s, n):
        return sx.integrate.rollout(model, s, DT, n, n, energy=False)[0]

    starts = jax.vmap(lambda du: state.with_u(du))(noise) if batch else None
    rows, settle = _rollout_rows("simbodyx_compliant", name, rollout, state, starts, steps, repeats,
                                 sx.xla_setup.loop_compiler_options() if loop_options else None)
    if not (np.all(np.isfinite(np.asarray(settle.u))) and float(settle.q[6]) > ROBOTS[name]):
        raise AssertionError(f"simbodyx {name}: the torso is at {float(settle.q[6]):.3g} m after 3 s")
    if not mujoco:
        return rows
    import mujoco as mj

    m = mj.MjModel.from_xml_path(str(_robot_xml(name)))
    m.opt.timestep, m.opt.integrator = DT, mj.mjtIntegrator.mjINT_RK4
    m.opt.solver = mj.mjtSolver.mjSOL_NEWTON  # MuJoCo's default (the Humanoid's file asks for PGS, which MJX lacks)
    d = mj.MjData(m)
    mj.mj_step(m, d, nstep=3000)
    if not (np.all(np.isfinite(d.qvel)) and d.qpos[2] > ROBOTS[name]):
        raise AssertionError(f"mujoco {name}: the torso is at {d.qpos[2]:.3g} m after 3 s")
    rows.append({"engine": "mujoco", "scene": name, "batch": 1, "step_us": _mujoco_step_us(m, d, steps, repeats)})
    if batch:
        from mujoco import mjx

        mx = mjx.put_model(m)
        d0 = mjx.make_data(mx)
        qvel = jnp.asarray(noise, d0.qvel.dtype)  # u is qvel joint by joint; the free joint's 0

        def step(d, _):  # under x64 mjx.step returns the Humanoid's int32 tendon-wrap fields as int64: keep d's
            return jax.tree.map(lambda new, old: new.astype(old.dtype), mjx.step(mx, d), d), None

        def trajectory(v):
            return jax.lax.scan(step, d0.replace(qvel=v), None, length=200)[0].qpos

        compile_s, seconds = _timed(jax.jit(jax.vmap(trajectory)), qvel, repeats)
        rows.append({"engine": "mjx", "scene": name, "batch": batch, "compile_s": compile_s,
                     "step_us": 1e6 * seconds / (200 * batch)})
    return rows


def contact_rows(sx, steps=1000, batch=1024, repeats=5, mujoco=True, scenes=("brick", "spheres3")):
    rows, note = [], None
    for scene in scenes:
        for kind in KINDS:
            rows += simbodyx_rows(sx, scene, kind, steps, batch, repeats)
        if mujoco:
            try:
                rows += mujoco_rows(scene, steps, repeats)
            except ImportError as e:
                note = f"contact scenes: MuJoCo not timed ({e})"
    return rows, note


def print_table(rows, header=True):
    if header:
        print(f"{'engine':20} {'scene':9} {'batch':>6} {'compile s':>10} {'per step us':>12} {'steps per s':>13}")
    for r in rows:
        print(f"{r['engine']:20} {r['scene']:9} {r['batch']:>6} {r.get('compile_s', float('nan')):>10.2f} "
              f"{r['step_us']:>12.2f} {1e6 / r['step_us']:>13,.0f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=1024, help="trajectories in the batched rows (0: skip them)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-mujoco", action="store_true")
    parser.add_argument("--scenes", default="brick,spheres3", help="the scenes to run (comma-separated; '' for none)")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--robots", default="", help="also these of gymnasium's robots, with MJX: "
                        f"a comma-separated list of {', '.join(ROBOTS)}")
    parser.add_argument("--loop-options", action="store_true", help="compile the robots' single trajectory with "
                        "sx.xla_setup.loop_compiler_options() (XLA's earlier CPU runtime; jaxlib 0.6 only)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", args.dtype == "float64")
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    print(f"jax {jax.__version__}, {args.dtype}, {jax.devices()[0].platform}, step {DT * 1e3:g} ms")
    rows, note = contact_rows(sx, args.steps, args.batch, args.repeats, not args.no_mujoco,
                              tuple(filter(None, args.scenes.split(","))))
    print_table(rows)
    for name in filter(None, args.robots.split(",")):  # each robot's rows as soon as they are measured
        print_table(robot_rows(sx, name, args.steps, args.batch, args.repeats, not args.no_mujoco, args.loop_options),
                    header=False)
    if note:
        print(note)


if __name__ == "__main__":
    main()
