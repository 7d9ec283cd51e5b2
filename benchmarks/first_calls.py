"""What a user waits for first: each of gymnasium's robots in a fresh
process, cold (no persistent compilation cache), with and without
``sx.xla_setup.set_cpu_options()``.

    python benchmarks/first_calls.py [--robots ant,hopper,...] [--options both|on|off]
                                     [--physics mujoco,simbody] [--seconds 0.3] [--dt 1e-3]
                                     [--out PATH]

Per robot and physics (``sx.io.load_mjcf``'s ``physics``: "mujoco", its
default, and "simbody"), from the file's pose: the first eager ``sx.integrate.rollout`` of ``--seconds`` at
``--dt`` by RK4 and a second call of it; the first call of
``jax.jit(jax.grad(loss))``, where ``loss`` is the root body's x at the end
of the same rollout with generalized forces ``controls`` (num_steps, nu)
held over each step, and a second call; the number of XLA compiles of each
first call (JAX's ``/jax/core/compile/backend_compile_duration`` events);
and which path the scalar-path rule took (``model.uses_scalar_path()``).
The targets: first eager rollout under 5 s, first ``jit(grad)`` under 30 s
(the Humanoid under 60 s), one compile each.

Prints one markdown table and saves the rows as JSON
(``benchmarks/results/first_calls.json``, or ``--out``; ``render.py`` puts
them on the benchmark page).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

ROBOTS = ("ant", "hopper", "walker2d", "half_cheetah", "humanoid")


def measure(robot: str, options: bool, seconds: float, dt: float, physics: str = "mujoco") -> dict:
    """The figures of one robot, in this process (call it in a fresh one)."""
    import time
    import warnings

    import simbodyx as sx

    if options:
        sx.xla_setup.set_cpu_options()
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **_: compiles.append(duration)
        if event == "/jax/core/compile/backend_compile_duration" else None)

    import gymnasium

    file = pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{robot}.xml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, _, _, handles = sx.io.load_mjcf(file, physics=physics)
    model, state = system.realize_topology()
    num_steps = round(seconds / dt)
    root = handles[handles.root]

    def timed(fn):
        del compiles[:]
        start = time.perf_counter()
        jax.block_until_ready(fn())
        return time.perf_counter() - start, len(compiles)

    first_rollout, rollout_compiles = timed(lambda: sx.integrate.rollout(model, state, dt, num_steps)[0].q)
    second_rollout, _ = timed(lambda: sx.integrate.rollout(model, state, dt, num_steps)[0].q)

    def loss(controls):
        final, _ = sx.integrate.rollout(model, state, dt, controls=controls, energy=False)
        return root.get_body_transform(model.realize(final, sx.Stage.Position)).p[0]

    gradient = jax.jit(jax.grad(loss))
    controls = jnp.zeros((num_steps, model.topology.nu))
    first_grad, grad_compiles = timed(lambda: gradient(controls))
    second_grad, _ = timed(lambda: gradient(controls))
    return {"robot": robot, "physics": physics, "options": options, "nu": model.topology.nu,
            "scalar_path": model.uses_scalar_path(), "first_rollout_s": first_rollout,
            "rollout_compiles": rollout_compiles, "rollout_s": second_rollout,
            "first_grad_s": first_grad, "grad_compiles": grad_compiles, "grad_s": second_grad}


def in_fresh_process(robot: str, options: bool, seconds: float, dt: float, physics: str) -> dict:
    env = dict(os.environ, JAX_ENABLE_COMPILATION_CACHE="false")
    code = (f"import json, sys; sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r}); "
            f"from first_calls import measure; print('RESULT', json.dumps(measure({robot!r}, {options}, "
            f"{seconds}, {dt}, {physics!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT"))[len("RESULT "):])


HEADER = ("| robot | physics | nu | XLA options | path | first rollout (s) | compiles | rollout after (ms) "
          "| first jit(grad) (s) | compiles | jit(grad) after (ms) |\n"
          "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|")


def row(r: dict) -> str:
    return (f"| {r['robot']} | {r['physics']} | {r['nu']} | {'set' if r['options'] else 'not set'} | "
            f"{'scalar' if r['scalar_path'] else 'array'} | {r['first_rollout_s']:.2f} | "
            f"{r['rollout_compiles']} | {1e3 * r['rollout_s']:.2f} | {r['first_grad_s']:.2f} | "
            f"{r['grad_compiles']} | {1e3 * r['grad_s']:.2f} |")


def render(rows) -> str:
    """The benchmark page's table."""
    return "\n".join([HEADER, *map(row, rows)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--options", choices=("both", "on", "off"), default="both")
    parser.add_argument("--physics", default="mujoco,simbody")
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--out")
    args = parser.parse_args()
    settings = {"both": (True, False), "on": (True,), "off": (False,)}[args.options]
    rows = []
    print(HEADER)
    for robot in args.robots.split(","):
        for physics in args.physics.split(","):
            for options in settings:
                rows.append(in_fresh_process(robot, options, args.seconds, args.dt, physics))
                print(row(rows[-1]), flush=True)
    import record

    record.save("first_calls", rows, args.out)


if __name__ == "__main__":
    main()
