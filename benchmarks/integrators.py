"""Adaptive integration side by side.

    python benchmarks/integrators.py [--models chain7,humanoid] [--accuracy 1e-6]
                                     [--batch 64] [--repeats 5] [--no-diffrax] [--no-grad]

For each model, 1 s of motion from a random State under gravity:

* simbodyx: ``sx.simulate`` with ``Integrator.RungeKuttaMerson(accuracy)``,
  one trajectory (cold compile, latency, steps) and a batch of trajectories
  through ``jit(simbodyx.parallel.batched(...))`` (trajectories per second),
  and ``jax.grad`` of the final q through the rollout (compile, latency,
  XLA's planned peak memory); on jaxlib 0.6, where ``sx.simulate``
  compiles with ``sx.xla_setup.loop_compiler_options()`` (XLA's earlier
  CPU runtime), also the one trajectory inside a ``jax.jit`` of one's own,
  which compiles with XLA's own options;
* MuJoCo C: ``mujoco.rollout`` with its RK4 integrator at the largest fixed
  step (1 / N s) whose error at 1 s is no larger than simbodyx's, one
  trajectory and the same batch over one thread per core;
* diffrax (models without quaternions): ``diffeqsolve`` with Merson's
  tableau as a diffrax solver and a ``PIDController`` at rtol = atol =
  accuracy, and with diffrax's Tsit5, on the same vector field (simbodyx's
  forward dynamics); the same figures as simbodyx's, the gradient through
  diffrax's ``RecursiveCheckpointAdjoint``.

Errors are the largest difference in MuJoCo's coordinates (qpos, qvel) from
a reference run of simbodyx at accuracy 1e-12, after checking that MuJoCo
computes simbodyx's accelerations. Every time is the minimum of several runs
(see run.py).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from run import MODELS, best_time, program_memory_mib, random_states
from simbodyx.parallel import batched, shard_batch, use_cpu_cores, usable_cores


def cold(f, *args):
    """(seconds of the first call, its result)."""
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    return time.perf_counter() - t, out


def simbodyx_rows(sx, model, states, accuracy, repeats, grad):
    """Figures for sx.simulate and (the final States of the batch, simbodyx's error function)."""
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=accuracy)
    times = jnp.array([1.0], model.dtype)

    def final(s, compiler_options=None):
        _, trajectory, stats = sx.simulate(model, s, integrator, times, throw=False,
                                           compiler_options=compiler_options)
        return trajectory.q[-1], trajectory.u[-1], stats.num_steps_taken

    def loss(q, u, s):
        return jnp.sum(final(s.with_q(q).with_u(u))[0])

    one = jax.tree.map(lambda x: x[0], states)
    compile_s, (q, u, steps) = cold(final, one)  # sx.simulate compiles its own program
    fb = jax.jit(batched(final))
    sharded = shard_batch(states)
    batch_s = best_time(fb, sharded, repeats=repeats, inner=1)
    row = {"engine": "simbodyx", "compile_s": compile_s, "latency_ms": 1e3 * best_time(final, one, repeats=repeats),
           "steps": int(steps), "per_second": states.q.shape[0] / batch_s}
    if grad:
        g = jax.jit(jax.grad(loss, argnums=(0, 1)))
        row["grad_compile_s"], _ = cold(g, one.q, one.u, one)
        row["grad_ms"] = 1e3 * best_time(g, one.q, one.u, one, repeats=repeats)
        row["grad_mib"] = program_memory_mib(g, one.q, one.u, one)
    return row, final


def diffrax_rows(sx, model, one, accuracy, repeats, reference, grad):
    """Merson's tableau and Tsit5 in diffrax on simbodyx's vector field."""
    import diffrax

    class Merson(diffrax.AbstractERK):
        tableau = diffrax.ButcherTableau(
            c=np.array([1 / 3, 1 / 3, 1 / 2, 1.0]),
            a_lower=(np.array([1 / 3]), np.array([1 / 6, 1 / 6]), np.array([1 / 8, 0.0, 3 / 8]),
                     np.array([1 / 2, 0.0, -3 / 2, 2.0])),
            b_sol=np.array([1 / 6, 0.0, 0.0, 2 / 3, 1 / 6]),
            b_error=np.array([-1 / 15, 0.0, 3 / 10, -4 / 15, 1 / 30]))
        interpolation_cls = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

        def order(self, terms):
            return 4

    def field(t, y, _):
        s = model.realize(one.with_time(t).with_q(y[0]).with_u(y[1]), sx.Stage.Acceleration)
        return s.velocity.qdot, s.acceleration.udot

    rows = []
    for name, solver in (("diffrax Merson", Merson()), ("diffrax Tsit5", diffrax.Tsit5())):
        def solve(q, u, solver=solver):
            sol = diffrax.diffeqsolve(diffrax.ODETerm(field), solver, 0.0, 1.0, 0.01, (q, u),
                                      stepsize_controller=diffrax.PIDController(rtol=accuracy, atol=accuracy),
                                      saveat=diffrax.SaveAt(t1=True), max_steps=10_000)
            return sol.ys[0][-1], sol.ys[1][-1], sol.stats["num_accepted_steps"]

        f = jax.jit(solve)
        compile_s, (q, u, steps) = cold(f, one.q, one.u)
        row = {"engine": name, "compile_s": compile_s, "latency_ms": 1e3 * best_time(f, one.q, one.u, repeats=repeats),
               "steps": int(steps), "error": float(jnp.max(jnp.abs(jnp.concatenate([q, u]) - reference)))}
        if grad:
            g = jax.jit(jax.grad(lambda q, u: jnp.sum(solve(q, u)[0]), argnums=(0, 1)))
            row["grad_compile_s"], _ = cold(g, one.q, one.u)
            row["grad_ms"] = 1e3 * best_time(g, one.q, one.u, repeats=repeats)
            row["grad_mib"] = program_memory_mib(g, one.q, one.u)
        rows.append(row)
    return rows


def mujoco_rows(sx, matter, model, states, target_error, reference_mj, repeats):
    """MuJoCo C RK4 at the largest step 1/N s whose error is within ``target_error``."""
    import mujoco
    from mujoco import rollout

    from simbodyx.interop.mujoco import configuration, to_mjcf

    xml, order = to_mjcf(matter)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    datas = [mujoco.MjData(m) for _ in range(usable_cores())]

    def initial(s):
        d = datas[0]
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = configuration(matter, model.realize(s, sx.Stage.Position), order)
        x = np.empty(mujoco.mj_stateSize(m, spec))
        mujoco.mj_getState(m, d, x, spec)
        return x

    x0 = np.stack([initial(jax.tree.map(lambda a, i=i: a[i], states)) for i in range(states.q.shape[0])])
    nq = m.nq
    for n in (50, 100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600):
        m.opt.timestep = 1.0 / n
        out, _ = rollout.rollout(m, datas[0], x0[:1], nstep=n)
        error = np.abs(out[0, -1, 1:1 + nq + m.nv] - reference_mj).max()
        if error <= target_error:
            break
    single = best_time(lambda: rollout.rollout(m, datas[0], x0[:1], nstep=n), repeats=repeats, inner=1)
    batch = best_time(lambda: rollout.rollout(m, datas, x0, nstep=n), repeats=repeats, inner=1)
    return {"engine": "MuJoCo C RK4", "latency_ms": 1e3 * single, "steps": n, "error": float(error),
            "per_second": x0.shape[0] / batch}


def adaptive_rows(sx, system, matter, model, accuracy=1e-6, batch=64, repeats=5, with_diffrax=True, grad=True,
                  in_jit=True):
    """Every engine's row for one model: simbodyx (and, when ``in_jit``, its one
    trajectory inside a jit of one's own where ``sx.simulate``'s options,
    the loop compiler options, differ from XLA's own), MuJoCo C RK4 at
    simbodyx's error, and (models without quaternions) the diffrax
    solvers."""
    from simbodyx.interop.mujoco import configuration, to_mjcf

    states = random_states(model, batch)
    one = jax.tree.map(lambda x: x[0], states)
    exact = sx.simulate(model, one, sx.Integrator.RungeKuttaMerson(accuracy=1e-12), jnp.array([1.0]))[1]
    _, order = to_mjcf(matter)
    to_mj = lambda q, u: np.concatenate(configuration(  # noqa: E731
        matter, model.realize(one.with_q(q).with_u(u), sx.Stage.Position), order))
    reference_mj = to_mj(exact.q[-1], exact.u[-1])
    ours, final = simbodyx_rows(sx, model, states, accuracy, repeats, grad)
    def error(q, u, _):
        return float(np.abs(to_mj(q, u) - reference_mj).max())

    ours["error"] = error(*final(one))
    rows = [ours, mujoco_rows(sx, matter, model, states, ours["error"], reference_mj, repeats)]
    if in_jit and sx.xla_setup.loop_compiler_options():  # sx.simulate compiles its stepping loop with these
        jitted = jax.jit(final)  # a jit of one's own: its options, XLA's own, rule
        compile_s, out = cold(jitted, one)
        rows.insert(1, {"engine": "simbodyx inside jax.jit", "compile_s": compile_s, "steps": int(out[2]),
                        "latency_ms": 1e3 * best_time(jitted, one, repeats=repeats), "error": error(*out)})
    if with_diffrax and not model.topology.quaternion_bodies:
        rows += diffrax_rows(sx, model, one, accuracy, repeats, jnp.concatenate([exact.q[-1], exact.u[-1]]), grad)
    return rows


def print_table(name, model, rows, batch):
    print(f"\n{name} (nu {model.topology.nu})")
    print("| engine | compile s | one trajectory ms | steps | error at 1 s | trajectories/s at "
          f"{batch} | grad compile s | grad ms | grad memory MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = [r["engine"]] + [("" if r.get(k) is None else fmt % r[k]) for k, fmt in (
            ("compile_s", "%.1f"), ("latency_ms", "%.2f"), ("steps", "%d"), ("error", "%.1e"),
            ("per_second", "%.0f"), ("grad_compile_s", "%.1f"), ("grad_ms", "%.1f"), ("grad_mib", "%.2f"))]
        print("| " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="chain7,humanoid")
    parser.add_argument("--accuracy", type=float, default=1e-6)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-diffrax", action="store_true", help="skip the diffrax rows")
    parser.add_argument("--no-grad", action="store_true", help="skip the gradients")
    parser.add_argument("--no-in-jit", action="store_true",
                        help="skip the one trajectory inside a jax.jit of one's own (jaxlib 0.6, where "
                             "sx.simulate compiles with sx.xla_setup.loop_compiler_options())")
    args = parser.parse_args()
    use_cpu_cores()
    jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    print(f"jax {jax.__version__}, float64, {len(jax.devices())} CPU devices, accuracy {args.accuracy}, "
          f"batch {args.batch}, 1 s of motion")
    for name in args.models.split(","):
        system, matter = MODELS[name](sx)
        model, _ = system.realize_topology()
        rows = adaptive_rows(sx, system, matter, model, args.accuracy, args.batch, args.repeats,
                             not args.no_diffrax, not args.no_grad, not args.no_in_jit)
        print_table(name, model, rows, args.batch)


if __name__ == "__main__":
    main()
