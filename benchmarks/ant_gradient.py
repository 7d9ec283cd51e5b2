"""Gradients through contact at a robot's own time step, side by side.

    python benchmarks/ant_gradient.py [--steps 50]

gymnasium's Ant at its file's 10 ms, stepped by semi-implicit Euler (the
integrator MJX differentiates here; its RK4 does not compile in this
machine's memory), settled on its feet for 1 s by MuJoCo C, then
``--steps`` steps under constant motor controls c (8 numbers): the loss is
the torso's x at the end. The reference is MuJoCo C's own central
differences of that loss (step 1e-6, Newton to tolerance 1e-12): the
physics simbodyx's soft constraints reproduce. Beside it:

* simbodyx: ``jax.grad`` through ``sx.integrate.rollout(...,
  method=robot.stepper)`` (the implicit derivative of each solve);
* MJX: ``jax.grad`` through a ``lax.scan`` of ``mjx.step`` with its Newton
  solver limited to one iteration (its reverse mode needs that: more
  iterations are a ``while_loop`` reverse mode cannot enter), and
  ``jax.jacfwd`` (forward mode, one pass per control) with the solver run
  to the file's tolerance as MuJoCo C runs it.

Each: the gradient's relative error (largest entry difference over the
largest entry) against the reference and against central differences of
the engine's own loss (step 1e-6), the loss's difference from MuJoCo C's,
the cold compile and the time per gradient after it (float64, this
machine). Prints the table and saves the rows as JSON
(``benchmarks/results/ant_gradient.json``; ``render.py`` puts them on the
benchmark page).
"""

from __future__ import annotations

import argparse
import copy
import pathlib
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)


def _value_and_jacfwd(f):
    """(f(x), df/dx) by forward mode."""
    return lambda x: (f(x), jax.jacfwd(f)(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()

    import gymnasium
    import mujoco
    from mujoco import mjx

    import simbodyx as sx
    from simbodyx.interop import mujoco as interop

    xml = (pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "ant.xml").read_text()
    xml = xml.replace('integrator="RK4"', 'integrator="Euler"')
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.solver, m.opt.iterations, m.opt.tolerance = mujoco.mjtSolver.mjSOL_NEWTON, 100, 1e-12
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=100)  # settled on its feet
    qpos0, qvel0 = d.qpos.copy(), d.qvel.copy()
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso")
    controls = np.random.default_rng(0).uniform(-0.5, 0.5, m.nu)

    def mujoco_loss(c):
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos0, qvel0, c
        mujoco.mj_forward(m, d)
        mujoco.mj_step(m, d, nstep=args.steps)
        mujoco.mj_kinematics(m, d)
        return float(d.xpos[torso][0])

    eps = 1e-6
    reference = np.array([(mujoco_loss(controls + eps * e) - mujoco_loss(controls - eps * e)) / (2 * eps)
                          for e in np.eye(m.nu)])
    value = mujoco_loss(controls)
    rows = []

    def error(grad, against):
        return np.abs(np.asarray(grad) - against).max() / np.abs(against).max()

    def measure(engine, loss, forward):
        start = time.perf_counter()
        grad = jax.block_until_ready(loss(jnp.asarray(controls)))
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(3):
            jax.block_until_ready(loss(jnp.asarray(controls)))
        per = (time.perf_counter() - start) / 3
        c = jnp.asarray(controls)
        own = np.array([(float(forward(c + eps * e)) - float(forward(c - eps * e))) / (2 * eps) for e in np.eye(m.nu)])
        rows.append({"engine": engine, "reference_error": error(grad[1], reference), "own_error": error(grad[1], own),
                     "loss_difference": abs(float(grad[0]) - value), "compile_s": compile_s, "per_gradient_s": per})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, matter, _, robot = sx.io.load_mjcf(xml)
    model, state = system.realize_topology()
    bodies = [b.index for b in robot.joint_bodies.values()]
    start = interop.state_from(model, matter, state, qpos0, qvel0, bodies)
    body = robot["torso"]

    def simbodyx_loss(c):
        final, _ = sx.integrate.rollout(model, start, robot.timestep, method=robot.stepper,
                                        actuator_controls=jnp.tile(c, (args.steps, 1)), energy=False)
        return body.get_body_transform(model.realize(final, sx.Stage.Position)).p[0]

    measure("simbodyx (implicit derivative of each solve)", jax.jit(jax.value_and_grad(simbodyx_loss)),
            jax.jit(simbodyx_loss))

    for iterations, mode in ((1, jax.value_and_grad), (m.opt.iterations, _value_and_jacfwd)):
        limited = copy.copy(m)
        limited.opt.iterations = iterations
        mx = mjx.put_model(limited)
        d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(qpos0), qvel=jnp.asarray(qvel0))

        def mjx_loss(c, mx=mx, d0=d0):
            def step(data, _):
                return mjx.step(mx, data), None

            final, _ = jax.lax.scan(step, d0.replace(ctrl=c), None, length=args.steps)
            return final.xpos[torso][0]

        label = "1 iteration, reverse mode" if iterations == 1 else "to tolerance, forward mode"
        measure(f"MJX (Newton, {label})", jax.jit(mode(mjx_loss)), jax.jit(mjx_loss))

    print(f"gymnasium Ant, {args.steps} Euler steps of {m.opt.timestep * 1e3:g} ms after 1 s settled; reference: "
          f"MuJoCo C's central differences (step {eps:g})\n")
    print(render(rows))
    import record

    record.save("ant_gradient", rows)


def render(rows) -> str:
    """The benchmark page's table."""
    lines = ["| engine | gradient's error (MuJoCo C's differences) | (its own) | loss's difference (m) | compile (s) "
             "| per gradient (ms) |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['engine']} | {r['reference_error']:.1e} | {r['own_error']:.1e} | {r['loss_difference']:.1e} "
              f"| {r['compile_s']:.1f} | {1e3 * r['per_gradient_s']:.1f} |" for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
