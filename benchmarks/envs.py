"""The environments in a batch: ``sx.envs``' tasks reset and stepped with
random actions under ``jax.jit(jax.vmap(...))``, float64.

    python benchmarks/envs.py [--envs hopper,ant,...] [--batch 1024 | --batch 1024,64,...]
                              [--steps 1000] [--chunk 50] [--out PATH]

Per environment: ``--batch`` environments (one number, or one per
environment) reset from one key each, then
``--steps`` steps with actions uniform within the actuators' control
ranges (no automatic reset: a fallen robot keeps stepping), ``--chunk``
steps per jitted ``lax.scan``. Reports the first call's time (compile and
run of one chunk), the environment steps per second after it, the
simulated seconds per second of wall time, and how many of the batch are
finite at the end and ended an episode (done) on the way.

Prints one markdown table and saves the rows as JSON
(``benchmarks/results/envs.json``, or ``--out``; ``render.py`` puts them on
the benchmark page).
"""

from __future__ import annotations

import argparse
import time

NAMES = ("hopper", "walker2d", "half_cheetah", "ant", "humanoid")


def measure(name: str, batch: int, steps: int, chunk: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import simbodyx as sx

    jax.config.update("jax_enable_x64", True)
    env = sx.envs.make(name)
    ranges = np.array([np.asarray(a.ctrl_range) for a in sx.integrate.actuators(env.model)])
    low, high = np.maximum(ranges[:, 0], -1.0), np.minimum(ranges[:, 1], 1.0)

    @jax.jit
    def run(states, key):
        def one(carry, k):
            states, ended = carry
            actions = jax.random.uniform(k, (batch, env.action_size), minval=low, maxval=high)
            states = jax.vmap(env.step)(states, actions)
            return (states, ended | (states.done > 0)), None

        return jax.lax.scan(one, states, jax.random.split(key, chunk))[0]

    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), batch))
    carry = (states, jnp.zeros(batch, bool))
    start = time.perf_counter()
    carry = jax.block_until_ready(run(carry, jax.random.PRNGKey(1)))
    first = time.perf_counter() - start
    start = time.perf_counter()
    for k in range(1, steps // chunk):
        carry = run(carry, jax.random.PRNGKey(1 + k))
    jax.block_until_ready(carry)
    wall = time.perf_counter() - start
    states, ended = carry
    finite = np.all(np.isfinite(np.asarray(states.pipeline_state.q)), axis=1) & np.all(
        np.isfinite(np.asarray(states.pipeline_state.u)), axis=1)
    measured = batch * (steps // chunk - 1) * chunk
    return {"env": name, "batch": batch, "steps": steps // chunk * chunk, "dt": env.dt, "first_call_s": first,
            "steps_per_s": measured / wall, "simulated_per_s": measured * env.dt / wall,
            "finite": int(finite.sum()), "ended": int(np.asarray(ended).sum())}


HEADER = ("| environment | batch | steps | env step (ms) | first call (s) | env steps/s | simulated s/s "
          "| finite at the end | ended an episode |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def row(r: dict) -> str:
    return (f"| {r['env']} | {r['batch']} | {r['steps']} | {1e3 * r['dt']:g} | {r['first_call_s']:.1f} | "
            f"{r['steps_per_s']:,.0f} | {r['simulated_per_s']:,.0f} | {r['finite']} of {r['batch']} | "
            f"{r['ended']} |")


def render(rows) -> str:
    """The benchmark page's table."""
    return "\n".join([HEADER, *map(row, rows)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(NAMES))
    parser.add_argument("--batch", default="1024")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    print(HEADER)
    names, batches = args.envs.split(","), [int(b) for b in args.batch.split(",")]
    for name, batch in zip(names, batches * len(names) if len(batches) == 1 else batches, strict=True):
        rows.append(measure(name, batch, args.steps, args.chunk))
        print(row(rows[-1]), flush=True)
    import record

    record.save("envs", rows, args.out)


if __name__ == "__main__":
    main()
