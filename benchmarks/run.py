"""Timings of realize(Velocity) (kinematics) and realize(Acceleration)
(forces + articulated-body forward dynamics) for a 7-link Pin chain and a
floating-base humanoid-like tree: single jitted call and vmapped batches.

    python benchmarks/run.py [--dtype float64|float32] [--repeats N]

Prints a table and one JSON line. Each figure is the best (minimum) of
several timed runs after warm-up: on a shared 2-core machine the median
moves by 2-5x between runs, the minimum much less.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np


def build_chain(sx, n):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02, 0.01, 0.02)))
    parent = matter.Ground()
    for i in range(n):
        X_PF = sx.Transform(sx.Rotation.about_x(0.3 * (i % 2)), [0, -1.0 if i else 0.0, 0])
        parent = sx.MobilizedBody.Pin(parent, X_PF, body, sx.Transform())
    add_gravity(sx, system)
    return system.realize_topology()[0]


def add_gravity(sx, system):
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, system.get_matter_subsystem(), [0, -9.81, 0])


def build_humanoid(sx):
    """Free pelvis, waist Ball, two legs (Ball hip, Pin knee, Universal ankle,
    Pin toe), two arms (Ball shoulder), head Pin: 25 u."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties.from_central(2.0, [0, -0.2, 0], sx.Inertia(0.05, 0.03, 0.05)))
    T = sx.Transform
    MB = sx.MobilizedBody
    pelvis = MB.Free(matter.Ground(), body)
    torso = MB.Ball(pelvis, T([0, 0.2, 0]), body, T())
    MB.Pin(torso, T([0, 0.5, 0]), body, T())
    for side in (-1, 1):
        hip = MB.Ball(pelvis, T([0.1 * side, -0.1, 0]), body, T())
        knee = MB.Pin(hip, T([0, -0.45, 0]), body, T())
        ankle = MB.Universal(knee, T([0, -0.45, 0]), body, T())
        MB.Pin(ankle, T([0, -0.05, 0.1]), body, T())
        MB.Ball(torso, T([0.2 * side, 0.4, 0]), body, T())
    add_gravity(sx, system)
    return system.realize_topology()[0]


def median_time(fn, *args, repeats=7, inner=20):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t) / inner)
    return min(times)


def random_states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    base = model.default_state()
    q = np.asarray(base.q)[None] + 0.3 * rng.normal(size=(n, base.q.shape[0]))
    u = rng.normal(size=(n, base.u.shape[0]))
    return jax.vmap(lambda q, u: base.with_q(q).with_u(u))(jnp.asarray(q, model.dtype), jnp.asarray(u, model.dtype))


OPS = {
    "realize_velocity": lambda sx, m, s: m.realize(s, sx.Stage.Velocity).velocity.V_GB,
    "forward_dynamics": lambda sx, m, s: m.realize(s, sx.Stage.Acceleration).acceleration.udot,
}


def run(sx, model, name, batches, repeats):
    rows = []
    one = jax.tree.map(lambda x: x[0], random_states(model, 1))
    for op, fn in OPS.items():
        f = jax.jit(lambda m, s, fn=fn: fn(sx, m, s))
        t = time.perf_counter()
        jax.block_until_ready(f(model, one))
        compile_s = time.perf_counter() - t
        rows.append({"model": name, "op": op, "batch": 1, "compile_s": compile_s,
                     "latency_us": 1e6 * median_time(f, model, one, repeats=repeats)})
        fb = jax.jit(jax.vmap(lambda s, fn=fn: fn(sx, model, s)))
        for n in batches:
            states = random_states(model, n)
            dt = median_time(fb, states, repeats=repeats, inner=max(1, 2000 // n))
            rows.append({"model": name, "op": op, "batch": n, "latency_us": 1e6 * dt, "per_second": n / dt})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batches", default="64,1024,4096")
    args = parser.parse_args()
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import simbodyx as sx

    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    for name, model in (("chain7", build_chain(sx, 7)), ("humanoid", build_humanoid(sx))):
        rows += run(sx, model, name, batches, args.repeats)
    print(f"jax {jax.__version__}, {args.dtype}, {platform.machine()}, {jax.devices()[0].platform}")
    print(f"{'model':10} {'op':18} {'batch':>6} {'latency us':>12} {'per second':>14} {'compile s':>10}")
    for r in rows:
        print(f"{r['model']:10} {r['op']:18} {r['batch']:>6} {r['latency_us']:>12.1f} {r.get('per_second', 1e6 / r['latency_us']):>14,.0f} {r.get('compile_s', float('nan')):>10.2f}")
    print(json.dumps({"jax": jax.__version__, "dtype": args.dtype, "rows": rows}))


if __name__ == "__main__":
    main()
