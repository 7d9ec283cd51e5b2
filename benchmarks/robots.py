"""Robots at robot step sizes: work against precision on gymnasium's Ant,
Hopper, Walker2d, HalfCheetah and Humanoid and dm_control's walker, for
simbodyx (``load_mjcf(physics="mujoco")``: MuJoCo's constraint model,
stepped by ``robot.stepper`` with the file's integrator), MuJoCo C and MJX.

    python benchmarks/robots.py [--robots ant,hopper,...] [--batch 1024] [--accuracy-starts 32]
                                [--seconds 1] [--long 5] [--factors 1,2,4] [--no-mjx] [--out PATH]
                                [--figures docs/images]

Starts: the file's pose, and ``--batch`` perturbed starts (every joint angle
moved by up to 0.5 rad, limits not respected; joint speeds N(0, 1)). Each
engine's error at a step h is the median over ``--accuracy-starts`` of those
starts of |root height at ``--seconds`` - the same engine's converged
answer| (its own RK4 at the file's step / 16), so an engine is measured
against itself; the table also gives simbodyx's converged answer against
MuJoCo's (median and largest over the starts), and at the file's pose the
root height at 0.5, 1 and 3 s of both converged answers. Steps: the
file's time step divided by each of ``--factors``, with the file's
integrator. Wall time per simulated second: batched, the whole batch in one
``jax.vmap`` (simbodyx, MJX) per trajectory; single, one trajectory's
jitted rollout (simbodyx) or ``mj_step`` (MuJoCo C, one core, in
sequence). Non-finite: trajectories of the batch that left the finite
numbers within ``--long`` seconds at the file's step. Passive drop: the
largest rise of total energy above its start (J) over ``--long`` seconds
(simbodyx) from the file's pose with its joints clipped into their ranges
(a soft limit's violation stores no energy the Model counts, so a start
outside a limit gains what the limit's push gives back). MJX runs at the file's step only, float64
like the others (the process enables x64), Newton's solver.

Prints one markdown table per robot and saves the numbers as JSON
(``benchmarks/results/robots.json``, or ``--out``; ``render.py`` puts them
on the benchmark page) and, with ``--figures``, one work-precision figure per robot (error against wall
time per simulated second, log-log).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time
import warnings

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import record  # noqa: E402
import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing
from simbodyx.interop import mujoco as interop  # noqa: E402

ROBOTS = ("ant", "hopper", "walker2d", "half_cheetah", "humanoid", "dmc_walker")
REFERENCE_FACTOR = 16


def path(robot) -> pathlib.Path:
    if robot.startswith("dmc_"):
        import dm_control
        return pathlib.Path(dm_control.__file__).parent / "suite" / f"{robot.removeprefix('dmc_')}.xml"
    import gymnasium
    return pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{robot}.xml"


class Robot:
    """One robot loaded three ways, its starts and its root-height reader."""

    def __init__(self, name, batch, seed=0):
        self.name, file = name, path(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            system, self.matter, _, self.handles = sx.io.load_mjcf(file, physics="mujoco")
            self.m = mujoco.MjModel.from_xml_path(str(file))
        self.model, self.state = system.realize_topology()
        self.m.opt.solver, self.m.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 100
        self.bodies = [b.index for b in self.handles.joint_bodies.values()]
        self.dt = float(self.m.opt.timestep)
        free = self.m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
        self.height_at = 2 if free else int(np.flatnonzero(
            (np.asarray(self.m.jnt_type) == mujoco.mjtJoint.mjJNT_SLIDE) & (np.abs(self.m.jnt_axis[:, 2]) == 1))[0])
        rng = np.random.default_rng(seed)
        first = 7 if free else 0
        moving = np.arange(self.m.nq) >= (first if free else 3)  # a planar robot's root slides and hinge stay
        self.qpos = np.array([np.where(moving, self.m.qpos0 + rng.uniform(-0.5, 0.5, self.m.nq), self.m.qpos0)
                              for _ in range(batch)])
        self.qvel = rng.normal(0.0, 1.0, (batch, self.m.nv))
        self.qpos = np.concatenate([self.m.qpos0[None], self.qpos])  # start 0: the file's pose, at rest
        self.qvel = np.concatenate([np.zeros((1, self.m.nv)), self.qvel])
        for q in self.qpos:
            mujoco.mj_normalizeQuat(self.m, q)
        self.integrator = self.handles.stepper.integrator

    def states(self, indices):
        starts = [interop.state_from(self.model, self.matter, self.state, self.qpos[i], self.qvel[i], self.bodies)
                  for i in indices]
        return jax.tree.map(lambda *a: jnp.stack(a), *starts)

    def heights(self, q_batch):
        """Root heights of a batch of our q."""
        rows = []
        for q in np.asarray(q_batch):
            if not np.all(np.isfinite(q)):
                rows.append(np.nan)
                continue
            s = self.model.realize(self.state.with_q(q), sx.Stage.Position)
            rows.append(interop.configuration(self.matter, s, self.bodies)[0][self.height_at])
        return np.array(rows)


def simbodyx_run(robot: Robot, starts, h, seconds, save_every=None):
    """(final q batch, saved q (batch, samples, nq) or None, wall seconds of the run after compiling)."""
    n = int(round(seconds / h))
    save = save_every or n
    stepper = robot.handles.stepper

    def one(s):
        final, trajectory = sx.integrate.rollout(robot.model, s, h, n, save_every=save, method=stepper, energy=False)
        return final.q, trajectory.q

    run = jax.jit(jax.vmap(one))
    jax.block_until_ready(run(starts))
    begin = time.perf_counter()
    q, saved = jax.block_until_ready(run(starts))
    return np.asarray(q), np.asarray(saved), time.perf_counter() - begin


def simbodyx_single(robot: Robot, h, seconds):
    """Wall seconds of one trajectory's jitted rollout (the file's pose), after compiling."""
    n = int(round(seconds / h))
    start = jax.tree.map(lambda a: a[0], robot.states([0]))
    run = jax.jit(lambda s: sx.integrate.rollout(robot.model, s, h, n, save_every=n, method=robot.handles.stepper,
                                                 energy=False)[0].q)
    jax.block_until_ready(run(start))
    best = np.inf
    for _ in range(3):
        begin = time.perf_counter()
        jax.block_until_ready(run(start))
        best = min(best, time.perf_counter() - begin)
    return best


def mujoco_run(robot: Robot, indices, h, seconds, integrator=None, times=(), tolerance=None):
    """(root heights at ``seconds`` per start, heights at ``times`` per start, wall seconds per trajectory)."""
    m = robot.m
    saved_dt, saved_integrator, saved_tolerance = m.opt.timestep, m.opt.integrator, m.opt.tolerance
    m.opt.timestep = h
    if integrator is not None:
        m.opt.integrator = integrator
    if tolerance is not None:
        m.opt.tolerance = tolerance
    d = mujoco.MjData(m)
    n = int(round(seconds / h))
    marks = {int(round(t / h)): t for t in times}
    final, at, wall = [], [], 0.0
    for i in indices:
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = robot.qpos[i], robot.qvel[i]
        row = []
        begin = time.perf_counter()
        if marks:
            for k in range(1, n + 1):
                mujoco.mj_step(m, d)
                if k in marks:
                    row.append(d.qpos[robot.height_at])
        else:
            mujoco.mj_step(m, d, nstep=n)
        wall += time.perf_counter() - begin
        final.append(d.qpos[robot.height_at] if np.all(np.isfinite(d.qpos)) else np.nan)
        at.append(row)
    m.opt.timestep, m.opt.integrator, m.opt.tolerance = saved_dt, saved_integrator, saved_tolerance
    return np.array(final), np.array(at), wall / len(indices)


def mjx_run(robot: Robot, seconds):
    """(non-finite count, wall seconds of the batch after compiling) of MJX at the file's step."""
    from mujoco import mjx
    mx = mjx.put_model(robot.m)
    n = int(round(seconds / robot.dt))
    data = mjx.make_data(mx)
    batch = jax.vmap(lambda q, v: data.replace(qpos=q, qvel=v))(jnp.asarray(robot.qpos[1:]),
                                                                jnp.asarray(robot.qvel[1:]))
    def step(_, d):  # under x64, mjx.step returns some tendon indices as int64: keep the carry's types
        return jax.tree.map(lambda new, old: new.astype(old.dtype), mjx.step(mx, d), d)

    run = jax.jit(jax.vmap(lambda d: jax.lax.fori_loop(0, n, step, d).qpos))
    jax.block_until_ready(run(batch))
    begin = time.perf_counter()
    q = np.asarray(jax.block_until_ready(run(batch)))
    return int((~np.all(np.isfinite(q), axis=1)).sum()), time.perf_counter() - begin


def benchmark(name, args):
    robot = Robot(name, args.batch)
    seconds, accuracy = args.seconds, list(range(1, args.accuracy_starts + 1))
    integrator = robot.m.opt.integrator
    result = {"robot": name, "dt": robot.dt, "integrator": robot.integrator, "batch": args.batch, "rows": []}

    # converged answers: each engine's RK4 at dt / 16
    h_ref = robot.dt / REFERENCE_FACTOR
    ref_mj, _, _ = mujoco_run(robot, accuracy, h_ref, seconds, mujoco.mjtIntegrator.mjINT_RK4, tolerance=1e-10)
    handles = robot.handles
    robot.handles = dataclasses.replace(handles, stepper=eqx_replace(handles.stepper, integrator="rk4"))
    ref_q, _, _ = simbodyx_run(robot, robot.states(accuracy), h_ref, seconds)
    robot.handles = handles
    ref_sx = robot.heights(ref_q)
    diff = np.abs(ref_sx - ref_mj)
    result["converged_vs_mujoco"] = {"median": float(np.nanmedian(diff)), "max": float(np.nanmax(diff))}

    # the file's pose: both converged answers at 1, 2 and 6 times pose_every (0.5 s; to the nearest step)
    every = max(1, int(round(args.pose_every / h_ref)))
    times = (every * h_ref, 2 * every * h_ref, 6 * every * h_ref)
    _, pose_mj, _ = mujoco_run(robot, [0], h_ref, max(times), mujoco.mjtIntegrator.mjINT_RK4, times, 1e-10)
    robot.handles = dataclasses.replace(handles, stepper=eqx_replace(handles.stepper, integrator="rk4"))
    _, saved, _ = simbodyx_run(robot, robot.states([0]), h_ref, max(times), save_every=every)
    robot.handles = handles
    pose_sx = robot.heights(saved[0][[1, 2, 6]])
    result["file_pose"] = {"times": times, "simbodyx": pose_sx.tolist(), "mujoco": pose_mj[0].tolist()}

    for factor in args.factors:
        h = robot.dt / factor
        final_mj, _, wall_mj = mujoco_run(robot, accuracy, h, seconds, integrator)
        q, _, _ = simbodyx_run(robot, robot.states(accuracy), h, seconds)
        error_sx = np.nanmedian(np.abs(robot.heights(q) - ref_sx))
        batch_q, _, wall_batch = simbodyx_run(robot, robot.states(range(1, args.batch + 1)), h, seconds)
        row = {"h": h, "mujoco_error": float(np.nanmedian(np.abs(final_mj - ref_mj))),
               "mujoco_wall_per_s": wall_mj / seconds,
               "simbodyx_error": float(error_sx),
               "simbodyx_batched_wall_per_s": wall_batch / args.batch / seconds,
               "simbodyx_single_wall_per_s": simbodyx_single(robot, h, seconds) / seconds,
               "simbodyx_nonfinite": int((~np.all(np.isfinite(batch_q), axis=1)).sum())}
        if factor == 1 and args.mjx:
            nonfinite, wall = mjx_run(robot, seconds)
            row.update(mjx_batched_wall_per_s=wall / args.batch / seconds, mjx_nonfinite=nonfinite)
        result["rows"].append(row)
        print(f"  {name} h={h:.5f}: {row}", flush=True)

    # stability and energy over the long horizon at the file's step
    long_q, _, _ = simbodyx_run(robot, robot.states(range(1, args.batch + 1)), robot.dt, args.long)
    result["long_nonfinite"] = int((~np.all(np.isfinite(long_q), axis=1)).sum())
    n = int(round(args.long / robot.dt))
    m, qpos = robot.m, np.array(robot.m.qpos0)
    for j in np.flatnonzero(m.jnt_limited & np.isin(m.jnt_type, (mujoco.mjtJoint.mjJNT_SLIDE,
                                                                   mujoco.mjtJoint.mjJNT_HINGE))):
        qpos[m.jnt_qposadr[j]] = np.clip(qpos[m.jnt_qposadr[j]], *m.jnt_range[j])
    start = interop.state_from(robot.model, robot.matter, robot.state, qpos, np.zeros(m.nv), robot.bodies)
    _, trajectory = jax.jit(lambda s: sx.integrate.rollout(robot.model, s, robot.dt, n,
                                                            method=robot.handles.stepper))(start)
    energy = np.asarray(trajectory.energy)
    result["energy_rise"] = float(np.max(energy - energy[0]))
    return result


def eqx_replace(stepper, **changes):
    """The stepper with other static settings (its integrator)."""
    return dataclasses.replace(stepper, **changes)


def table(result) -> str:
    name, dt = result["robot"], result["dt"]
    c, pose = result["converged_vs_mujoco"], result["file_pose"]
    lines = [f"**{name}** (file step {dt * 1e3:g} ms, {result['integrator']}; batch {result['batch']}; "
             f"converged simbodyx - MuJoCo root height: median {c['median']:.1e} m, largest {c['max']:.1e} m; "
             f"from the file's pose at " + ", ".join(
                 f"{t:.3g} s {a:.4f} / {b:.4f} m" for t, a, b in zip(pose["times"], pose["simbodyx"], pose["mujoco"]))
             + " (simbodyx / MuJoCo); "
             f"{result['long_nonfinite']} of {result['batch']} non-finite over the long run; "
             f"passive drop's largest energy rise {result['energy_rise']:.1e} J)", "",
             "| step (ms) | MuJoCo C error (m) | MuJoCo C single (s per s) | simbodyx error (m) | "
             "simbodyx single (s per s) | simbodyx batched (s per s per trajectory) | MJX batched | non-finite |",
             "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        mjx = (f"{row['mjx_batched_wall_per_s']:.2e} ({row['mjx_nonfinite']} non-finite)"
               if "mjx_batched_wall_per_s" in row else "")
        lines.append(f"| {row['h'] * 1e3:g} | {row['mujoco_error']:.1e} | {row['mujoco_wall_per_s']:.2e} | "
                     f"{row['simbodyx_error']:.1e} | {row['simbodyx_single_wall_per_s']:.2e} | "
                     f"{row['simbodyx_batched_wall_per_s']:.2e} | {mjx} | {row['simbodyx_nonfinite']} |")
    return "\n".join(lines)


def render(results) -> str:
    """The benchmark page's block: each robot's table and figure."""
    return "\n\n".join(f"{table(r)}\n\n![work against precision, {r['robot']}]"
                         f"(../docs/images/work_precision_{r['robot']}.png)" for r in results)


def figure(result, folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.6))
    rows = result["rows"]
    floor = 1e-12  # an error of exactly zero, drawn at the axis' floor
    for key, wall, label in (("mujoco_error", "mujoco_wall_per_s", "MuJoCo C (one trajectory)"),
                             ("simbodyx_error", "simbodyx_single_wall_per_s", "simbodyx (one trajectory)"),
                             ("simbodyx_error", "simbodyx_batched_wall_per_s", "simbodyx (per trajectory of a batch)")):
        ax.loglog([r[wall] for r in rows], [max(r[key], floor) for r in rows], "o-", label=label)
    if "mjx_batched_wall_per_s" in rows[0]:
        ax.loglog([rows[0]["mjx_batched_wall_per_s"]], [max(rows[0]["mujoco_error"], floor)], "s",
                  label="MJX (per trajectory of a batch; MuJoCo's error)")
    ax.set_xlabel("wall time per simulated second (s)")
    ax.set_ylabel("root height error at 1 s (m)")
    factors = ", ".join(f"{result['dt'] / r['h']:.0f}" for r in rows)
    ax.set_title(f"{result['robot']}: steps of {result['dt'] * 1e3:g} ms / {factors}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / f"work_precision_{result['robot']}.png", dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--accuracy-starts", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--long", type=float, default=5.0)
    parser.add_argument("--pose-every", type=float, default=0.5)
    parser.add_argument("--factors", default="1,2,4")
    parser.add_argument("--no-mjx", dest="mjx", action="store_false")
    parser.add_argument("--out", default=None)
    parser.add_argument("--figures", default=None)
    args = parser.parse_args()
    args.factors = [int(f) for f in args.factors.split(",")]
    print(f"jax {jax.__version__}, mujoco {mujoco.__version__}, {jax.devices()[0].platform}, float64")
    results = []
    for name in args.robots.split(","):
        result = benchmark(name, args)
        results.append(result)
        print(table(result), "\n", flush=True)
        if args.figures:
            figure(result, pathlib.Path(args.figures))
        record.save("robots", results, args.out)  # after each robot: a long run's finished robots are kept


if __name__ == "__main__":
    main()
