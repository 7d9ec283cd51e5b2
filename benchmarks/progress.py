"""The cost of a progress bar (``progress=True``) in a rollout, side by side.

    python benchmarks/progress.py [--models chain7,humanoid] [--steps 2000] [--batch 256] [--rounds 2]

Prints the table and saves the rows as JSON (``benchmarks/results/progress.json``;
``render.py`` puts them on the benchmark page).

RK4 rollouts of one State and of a batch under ``jit`` (``vmap`` for the
batch), with the bar off and on, timed in alternation (``--rounds``
rounds, each timing off then on; minima per round), so drift in the
machine's speed falls on both alike. On, the loop makes about a hundred
host callbacks per run and tqdm draws the bar (to a closed stream here,
so the terminal's speed does not count).
"""

from __future__ import annotations

import argparse
import io

import jax

from run import MODELS, best_time, random_states


def progress_rows(sx, models, steps, batch, rounds, repeats=3):
    """Rows (dicts): per model, batch size and round, milliseconds per rollout off and on."""
    rows = []
    for name in models:
        system, _ = MODELS[name](sx)
        model, _ = system.realize_topology()
        states = random_states(model, batch)
        one = jax.tree.map(lambda x: x[0], states)
        programs = {}
        for progress in (False, True):
            def final_q(s, progress=progress):
                return sx.integrate.rollout(model, s, 1e-3, steps, save_every=steps, energy=False,
                                            progress=progress)[0].q
            programs[progress] = {1: (jax.jit(final_q), one), batch: (jax.jit(jax.vmap(final_q)), states)}
        for size in (1, batch):
            for round_ in range(rounds):
                times = {p: 1e3 * best_time(*programs[p][size], repeats=repeats, inner=1) for p in (False, True)}
                rows.append({"model": name, "batch": size, "steps": steps, "round": round_, "off_ms": times[False],
                             "on_ms": times[True]})
    return rows


def render(rows) -> str:
    """The benchmark page's table (ms per rollout)."""
    lines = ["| model | batch | steps | round | off | on | on/off |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['batch']:,} | {r['steps']:,} | {r['round']} | {r['off_ms']:,.1f} | "
              f"{r['on_ms']:,.1f} | {r['on_ms'] / r['off_ms']:.2f} |" for r in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="chain7,humanoid")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    import tqdm.auto

    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing
    drawn = tqdm.auto.tqdm
    tqdm.auto.tqdm = lambda *a, **k: drawn(*a, file=io.StringIO(), **k)  # drawn, but not to the terminal

    rows = progress_rows(sx, args.models.split(","), args.steps, args.batch, args.rounds)
    print(render(rows))
    import record

    record.save("progress", rows)


if __name__ == "__main__":
    main()
