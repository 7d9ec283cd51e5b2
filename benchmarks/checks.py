"""The cost of the checks mode (``model.with_checks()``), side by side.

    python benchmarks/checks.py [--models chain7,humanoid] [--batch 1024] [--rounds 2]

Prints the table and saves the rows as JSON (``benchmarks/results/checks.json``;
``render.py`` puts them on the benchmark page).

Forward dynamics (``realize`` to Acceleration, udot) of one State and of a
batch, with the checks off and on, timed in alternation (``--rounds``
rounds, each timing off then on; minima per round), so drift in the
machine's speed falls on both alike. With the checks off the program is the
one without the mode (no check is added), so its figures are the plain
forward dynamics'.
"""

from __future__ import annotations

import argparse

import jax

from run import MODELS, best_time, random_states


def checks_rows(sx, models, batch, rounds, repeats=5):
    """Rows (dicts): per model, batch size and round, microseconds per call off and on."""
    rows = []
    for name in models:
        system, _ = MODELS[name](sx)
        model, _ = system.realize_topology()
        states = random_states(model, batch)
        one = jax.tree.map(lambda x: x[0], states)
        programs = {}
        for checks in (False, True):
            m = model.with_checks(checks)
            udot = lambda s, m=m: m.realize(s, sx.Stage.Acceleration).acceleration.udot  # noqa: E731
            programs[checks] = {1: (jax.jit(udot), one), batch: (jax.jit(jax.vmap(udot)), states)}
        for size in (1, batch):
            for round_ in range(rounds):
                times = {checks: 1e6 * best_time(*programs[checks][size], repeats=repeats) for checks in (False, True)}
                rows.append({"model": name, "batch": size, "round": round_, "off_us": times[False],
                             "on_us": times[True]})
    return rows


def _number(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.1f}"


def render(rows) -> str:
    """The benchmark page's table (us per call)."""
    lines = ["| model | batch | round | off | on | on/off |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['batch']:,} | {r['round']} | {_number(r['off_us'])} | {_number(r['on_us'])} | "
              f"{r['on_us'] / r['off_us']:.2f} |" for r in rows]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="chain7,humanoid")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    rows = checks_rows(sx, args.models.split(","), args.batch, args.rounds)
    print(render(rows))
    import record

    record.save("checks", rows)


if __name__ == "__main__":
    main()
