"""The compile-time targets, each in a fresh process, cold and then warm.

    python benchmarks/compile_times.py [--targets main,chain7,humanoid_gradient,chain256,fourbar]

Every target runs in a Python process of its own, first with an empty JAX
persistent compilation cache (cold: what a first run pays), then again with
the cache that run filled (warm: docs/concepts.md, "Compile once across runs").

* ``main``: ``python examples/main.py`` end to end, imports included
  (the README's first model: realize, gradient, batch); limit 10 s.
* ``chain7``: chain7's forward dynamics (``run.py``'s operation, one
  State): ``jax.jit(f).trace``, ``.lower()``, ``.compile()`` and the first
  call, timed apart, after the imports and the model's build; limit 1 s.
* ``humanoid_gradient``: the same for the humanoid's reverse-mode gradient
  of forward dynamics; limit 10 s.
* ``chain256``: pin_chain256's forward dynamics as ``chain7``, limit 10x
  chain7's time in the same run.
* ``fourbar``: ``python examples/fourbar_control.py`` end to end; limit 60 s.

Prints one row per target and one JSON line. ``run.py``'s compile column
differs: there each operation is the first call of a new ``jax.jit`` in a
process that has already compiled the model's earlier operations, whose
traced sub-programs it shares.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: target -> (what runs: an example script or (model, operation), limit in s or None for a ratio)
TARGETS = {
    "main": ("examples/main.py", 10.0),
    "chain7": (("chain7", "forward_dynamics"), 1.0),
    "humanoid_gradient": (("humanoid", "grad_forward_dynamics"), 10.0),
    "chain256": (("pin_chain256", "forward_dynamics"), None),
    "fourbar": ("examples/fourbar_control.py", 60.0),
}
#: chain256's limit: this many times chain7's time.
CHAIN256_RATIO = 10.0


def time_operation(model_name: str, op_name: str) -> dict:
    """Seconds to trace, lower, compile and first call ``jax.jit`` of one of
    ``run.py``'s operations on one State (this process's imports and the
    model's build not counted)."""
    import jax

    sys.path.insert(0, str(Path(__file__).parent))
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing
    from run import MODELS, _inputs, make_ops, random_states

    jax.config.update("jax_enable_x64", True)
    op = make_ops(sx)[op_name]
    model, _ = MODELS[model_name](sx)[0].realize_topology()
    state = jax.tree.map(lambda x: x[0], random_states(model, 1))
    args = jax.block_until_ready((state, *_inputs(model, state)))
    f = jax.jit(lambda s, tau, F: op(model, s, tau, F))
    t = [time.perf_counter()]
    traced = f.trace(*args)
    t.append(time.perf_counter())
    lowered = traced.lower()
    t.append(time.perf_counter())
    compiled = lowered.compile()
    t.append(time.perf_counter())
    jax.block_until_ready(compiled(*args))
    t.append(time.perf_counter())
    return {"trace_s": t[1] - t[0], "lower_s": t[2] - t[1], "compile_s": t[3] - t[2], "first_call_s": t[4] - t[3],
            "total_s": t[4] - t[0]}


def run_target(name: str, cache: str) -> dict:
    """One run of target ``name`` in a fresh process with JAX's persistent
    compilation cache in the folder ``cache``."""
    what, _ = TARGETS[name]
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    command = [sys.executable, str(ROOT / what)] if isinstance(what, str) else [
        sys.executable, __file__, "--operation", *what]
    t0 = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    total_s = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"target {name}: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return {"total_s": total_s} if isinstance(what, str) else json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated, of: " + ", ".join(TARGETS))
    parser.add_argument("--operation", nargs=2, metavar=("MODEL", "OP"), help=argparse.SUPPRESS)  # a child run
    args = parser.parse_args()
    if args.operation:
        print(json.dumps(time_operation(*args.operation)))
        return
    names = args.targets.split(",")
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="simbodyx_compile_") as cache:
            cold, warm = run_target(name, cache), run_target(name, cache)
        limit = TARGETS[name][1]
        if limit is None:  # chain256: against chain7's time in this run
            chain7 = next((r for r in rows if r["target"] == "chain7"), None)
            limit = None if chain7 is None else CHAIN256_RATIO * chain7["cold"]["total_s"]
        rows.append({"target": name, "limit_s": limit, "cold": cold, "warm": warm})
    print(f"{'target':18} {'cold s':>8} {'warm s':>8} {'limit s':>8} {'cold/limit':>10}  cold: trace, lower, XLA (s)")
    for r in rows:
        cold, limit = r["cold"], r["limit_s"]
        parts = ", ".join(f"{cold[k]:.2f}" for k in ("trace_s", "lower_s", "compile_s") if k in cold)
        shown = ("", "") if limit is None else (f"{limit:.2f}", f"{cold['total_s'] / limit:.2f}")
        print(f"{r['target']:18} {cold['total_s']:8.2f} {r['warm']['total_s']:8.2f} {shown[0]:>8} {shown[1]:>10}",
              f" {parts}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
