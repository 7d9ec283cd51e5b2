"""Where a batched operation's time goes, kernel by kernel.

    python benchmarks/profile_kernels.py --model humanoid --op grad_forward_dynamics

Compiles ``jit(vmap(op))`` for one chunk of states (the suite's models and
operations, one CPU device), runs it under JAX's profiler with XLA's
per-kernel trace events switched on (``--xla_cpu_enable_xprof_traceme``),
and adds up each kernel's time by the stage that emitted it: the named
scopes in the compiled program's metadata (``realize_position``,
``realize_velocity``, ``articulated_body_method``,
``linearized_inverse_dynamics``, ``solve_with_m``, ...), split into the
forward pass and the reverse (``transpose``) pass; kernels outside every
named stage (the loss, and kernels whose metadata lost its scope inside a
custom derivative rule) count as ``other``. Prints a table per stage
and the costliest kernels with their source lines. Kernel times are
summed over the profiled calls and divided by calls x states; with XLA's
thread pool running kernels side by side their sum can exceed the wall
time, which is printed too. The trace events add their own cost, so the
figures are for comparing stages, not for absolute speed (use run.py).
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile

#: Stages recognised in the HLO metadata (innermost wins), in report order.
STAGES = ("realize_position", "realize_velocity", "realize_dynamics", "articulated_body_method",
          "linearized_inverse_dynamics", "joint_local_tangents", "tangent_sweeps", "solve_with_m",
          "realize_acceleration", "articulated_mass_matrix", "tree_accelerations", "constraint_matrix",
          "constraint_multipliers")


def instruction_sources(hlo_text):
    """{HLO instruction name: (op_name, "file:line")} for the compiled module,
    an outlined parallel ``call`` taking its callee's metadata."""
    bodies = {m.group(1): m.group(2) for m in re.finditer(r"\n%([\w.\-]+) [^\n]*\{\n(.*?)\n\}", hlo_text, re.S)}
    sources = {}
    for line in hlo_text.splitlines():
        m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = ", line)
        if not m:
            continue
        text = line
        callee = re.search(r"to_apply=%([\w.\-]+)", line)
        if "op_name=" not in line and callee:
            text = bodies.get(callee.group(1), "")
        op = re.search(r'op_name="([^"]*)"', text)
        src = re.search(r'source_file="(?:[^"]*/)?([^"/]*)" source_line=(\d+)', text)
        sources[m.group(1)] = (op.group(1) if op else "", f"{src.group(1)}:{src.group(2)}" if src else "?")
    return sources


def stage_of(op_name):
    """(stage, pass) of a kernel from its op_name."""
    found = [(op_name.rfind(s), s) for s in STAGES if s in op_name]
    stage = max(found)[1] if found else "other"
    return stage, "reverse" if "transpose(" in op_name else "forward"


def kernel_times(trace_dir):
    """{event name: total microseconds} from the trace JAX's profiler wrote."""
    path = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True))[-1]
    totals = collections.Counter()
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    for event in events:
        if event.get("ph") == "X":
            totals[event["name"].removesuffix(".clone")] += event.get("dur", 0)
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="humanoid")
    parser.add_argument("--op", default="grad_forward_dynamics")
    parser.add_argument("--states", type=int, default=128, help="states per call (the suite's chunk size)")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=20, help="costliest kernels to list")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    args = parser.parse_args()
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true"

    import jax

    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing
    from run import MODELS, _inputs, make_ops, random_states

    system, _ = MODELS[args.model](sx)
    model, _ = system.realize_topology()
    states = random_states(model, args.states)
    tau, F = _inputs(model, jax.tree.map(lambda x: x[0], states))
    op = make_ops(sx)[args.op]
    compiled = jax.jit(jax.vmap(lambda s: op(model, s, tau, F))).lower(states).compile()
    sources = instruction_sources(compiled.as_text())
    for _ in range(3):
        jax.block_until_ready(compiled(states))
    options = jax.profiler.ProfileOptions()
    options.host_tracer_level = 3  # XLA's per-kernel events
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir, profiler_options=options)
        for _ in range(args.calls):
            jax.block_until_ready(compiled(states))
        jax.profiler.stop_trace()
        totals = kernel_times(trace_dir)

    per_state = 1.0 / (args.calls * args.states)
    kernels = {name: us * per_state for name, us in totals.items() if name in sources}
    wall = totals["ThunkExecutor::Execute (wait for completion)"] * per_state
    total = sum(kernels.values())
    print(f"{args.model} {args.op}, {args.states} states per call, {args.calls} calls, jax {jax.__version__}: "
          f"{len(kernels)} kernels, {total:.2f} us/state summed, {wall:.2f} us/state wall")
    stages = {name: stage_of(sources[name][0]) for name in kernels}
    by_stage = collections.Counter()
    count = collections.Counter(stages.values())
    for name, us in kernels.items():
        by_stage[stages[name]] += us
    print(f"{'stage':30} {'pass':8} {'us/state':>9} {'share':>6} {'kernels':>8}")
    order = {s: i for i, s in enumerate(STAGES + ("other",))}
    for (stage, direction), us in sorted(by_stage.items(), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        print(f"{stage:30} {direction:8} {us:9.2f} {us / total:6.1%} {count[stage, direction]:8}")
    print(f"\ncostliest kernels ({args.top}):")
    for name, us in sorted(kernels.items(), key=lambda kv: -kv[1])[:args.top]:
        stage, direction = stages[name]
        print(f"  {us:7.3f} us/state  {name[:36]:36} {sources[name][1]:20} {stage} ({direction})")


if __name__ == "__main__":
    main()
