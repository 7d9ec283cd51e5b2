"""The gradient of a rollout with respect to its controls, side by side.

    python benchmarks/rollout_grad.py [--models chain7,humanoid] [--steps 1000] [--batch 16] [--repeats 5]

For each model, 1 s of motion (``--steps`` RK4 steps of 1 / steps s) from a
random State under gravity, with a mobility force per step and mobility
(zero-order hold), and the loss |q_final|^2:

* simbodyx: ``jax.grad`` of the loss through ``sx.integrate.rollout(...,
  controls=)`` with respect to the controls (steps, nu), with
  ``checkpoint=True`` (the default: one (q, u) kept per step), in segments
  of about sqrt(steps) steps (``checkpoint=k``), and False;
* MJX: ``jax.grad`` through a ``lax.scan`` of ``mjx.step`` at the same
  step, the controls as ``qfrc_applied``, with MuJoCo's default
  semi-implicit Euler integrator: one dynamics evaluation per step against
  RK4's four. MJX's RK4 is out of reach on this machine: compiling the
  forward pass of a 10-step scan of chain7 with ``mjINT_RK4`` took 88 s and
  13 GB, and its gradient did not fit in 24 GB.

Each engine: cold compile time, one gradient's latency, a batch of
gradients (different initial States, ``jit(simbodyx.parallel.batched)``)
per second, and XLA's planned peak memory of each program (arguments,
outputs and temporaries) and its working memory (temporaries alone: what
the derivative keeps), at the full horizon and at a quarter of it, so the
memory's growth with the horizon shows. Times are minima over runs (see run.py).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from run import MODELS, best_time, program_memory_mib, random_states
from simbodyx.parallel import batched, shard_batch, use_cpu_cores


def rows_for(engine, name, loss, first, batch_args, steps, nu, repeats):
    """Compile, latency and batched throughput of grad(loss)(controls, *state)."""
    controls = jnp.asarray(np.random.default_rng(2).normal(size=(steps, nu)))
    grad = jax.jit(jax.grad(loss))
    t = time.perf_counter()
    jax.block_until_ready(grad(controls, *first))
    compile_s = time.perf_counter() - t
    row = {"engine": engine, "model": name, "steps": steps, "compile_s": compile_s,
           "latency_ms": 1e3 * best_time(grad, controls, *first, repeats=repeats, inner=1),
           "memory_mib": program_memory_mib(grad, controls, *first),
           "working_mib": grad.lower(controls, *first).compile().memory_analysis().temp_size_in_bytes / 2**20}
    if batch_args is not None:
        many = jax.jit(batched(jax.grad(loss), (None,) + (0,) * len(first)))
        args = (controls,) + tuple(shard_batch(a) for a in batch_args)
        n = batch_args[0].shape[0]
        dt = best_time(many, *args, repeats=repeats, inner=1)
        row.update(batch=n, per_second=n / dt, batch_memory_mib=program_memory_mib(many, *args))
    return row


def segment_steps(steps):
    """The divisor of ``steps`` nearest sqrt(steps): checkpoint segments whose
    kept states grow with the square root of the horizon."""
    return min((d for d in range(1, steps + 1) if steps % d == 0), key=lambda d: abs(d - steps**0.5))


CHECKPOINTS = (("", True), (", sqrt segments", "sqrt"), (" (no checkpoint)", False))


def simbodyx_rows(sx, model, name, steps, batch, repeats, checkpoints=CHECKPOINTS, quarter=True):
    """Rows per checkpoint setting (label suffix, ``checkpoint`` or "sqrt"),
    at a quarter of the horizon (when ``quarter``) and the full one."""
    states = random_states(model, max(batch, 1))
    rows = []
    for label, checkpoint in checkpoints:
        for horizon in ((steps // 4,) if quarter else ()) + (steps,):
            def loss(controls, q, u, checkpoint=segment_steps(horizon) if checkpoint == "sqrt" else checkpoint):
                s = model.default_state().with_q(q).with_u(u)
                final, _ = sx.integrate.rollout(model, s, 1.0 / steps, controls=controls, checkpoint=checkpoint,
                                                energy=False)
                return jnp.sum(final.q**2)

            rows.append(rows_for(f"simbodyx{label}", name, loss, (states.q[0], states.u[0]),
                                 (states.q, states.u) if horizon == steps and batch else None, horizon,
                                 model.topology.nu, repeats))
    return rows


def mjx_rows(sx, matter, model, name, steps, batch, repeats, quarter=True):
    import mujoco
    from mujoco import mjx

    from simbodyx.interop.mujoco import configuration, to_mjcf

    xml, order = to_mjcf(matter)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    m.opt.timestep = 1.0 / steps
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)
    states = jax.vmap(lambda s: model.realize(s, sx.Stage.Position))(random_states(model, max(batch, 1)))
    qpos, qvel = (jnp.asarray(np.stack(a)) for a in zip(*[
        configuration(matter, jax.tree.map(lambda x, i=i: x[i], states), order) for i in range(max(batch, 1))]))

    def loss(controls, qpos, qvel):
        def step(d, tau):
            return mjx.step(mx, d.replace(qfrc_applied=tau)), None

        final, _ = jax.lax.scan(step, d0.replace(qpos=qpos, qvel=qvel), controls)
        return jnp.sum(final.qpos**2)

    return [rows_for("mjx (Euler)", name, loss, (qpos[0], qvel[0]), (qpos, qvel) if horizon == steps and batch else None,
                     horizon, m.nv, repeats) for horizon in ((steps // 4,) if quarter else ()) + (steps,)]


def compare(sx, name, steps, batch, repeats, checkpoints=CHECKPOINTS, quarter=True, mjx=True, build=None):
    """Build model ``name`` (``build(sx)`` -> (system, matter), default
    run.MODELS[name]), time its rows and MJX's, print the table; the rows."""
    system, matter = (build or MODELS[name])(sx)
    model, _ = system.realize_topology()
    rows = simbodyx_rows(sx, model, name, steps, batch, repeats, checkpoints, quarter)
    if mjx:
        rows += mjx_rows(sx, matter, model, name, steps, batch, repeats, quarter)
    print_table(name, model, rows)
    return rows


def print_table(name, model, rows):
    print(f"\n{name}: nq={model.topology.nq}, nu={model.topology.nu}")
    print(f"{'engine':30} {'steps':>6} {'compile s':>10} {'latency ms':>11} {'memory MiB':>11} "
          f"{'working MiB':>12} {'batch':>6} {'grads/s':>9} {'batch MiB':>10}")
    for r in rows:
        batched_part = (f"{r['batch']:>6} {r['per_second']:>9.1f} {r['batch_memory_mib']:>10.3g}"
                        if "batch" in r else "")
        print(f"{r['engine']:30} {r['steps']:>6} {r['compile_s']:>10.1f} {r['latency_ms']:>11.1f} "
              f"{r['memory_mib']:>11.3g} {r['working_mib']:>12.3g} {batched_part}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="chain7,humanoid")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=16, help="gradients per batched call (0: none)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-mjx", action="store_true")
    args = parser.parse_args()
    use_cpu_cores()
    jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    print(f"jax {jax.__version__}, float64, {len(jax.devices())} CPU device(s); gradient of |q(1 s)|^2 with "
          f"respect to the controls of {args.steps} RK4 steps")
    for name in args.models.split(","):
        compare(sx, name, args.steps, args.batch, args.repeats, mjx=not args.no_mjx)


if __name__ == "__main__":
    main()
