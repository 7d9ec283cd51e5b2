"""The benchmark scripts run end to end (tiny settings) and report
simbodyx and, when installed, Pinocchio rows in its JSON line, with each
JAX program's planned peak memory."""

import importlib
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _benchmark(name):
    """A script of benchmarks/ as a module (the scripts import each other by name)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_benchmark_script_smoke():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--models", "chain7",
         "--ops", "forward_dynamics,grad_forward_dynamics", "--mjx-ops", "forward_dynamics", "--batches", "8",
         "--repeats", "2", "--adaptive-batch", "0", "--rollout-grad-steps", "0", "--trajopt-iterations", "0",
         "--contact-steps", "0"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    engines = {(r["engine"], r["op"], r["batch"]) for r in result["rows"]}
    assert ("simbodyx", "forward_dynamics", 8) in engines and ("simbodyx", "grad_forward_dynamics", 1) in engines
    timed = [r for r in result["rows"] if r["engine"] == "simbodyx" and "latency_us" in r and r["op"] in (
        "forward_dynamics", "grad_forward_dynamics")]
    assert len(timed) == 4 and all(r["memory_mib"] > 0 for r in timed)  # XLA's plan: at least the arguments
    (ratio,) = [r for r in result["rows"] if r["op"] == "grad_forward_dynamics/forward_dynamics"]
    assert ratio["batch"] == 8 and len(ratio["ratio_per_round"]) == 2 and ratio["ratio"] > 0
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return
    assert ("pinocchio", "forward_dynamics", 1) in engines
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return
    assert ("mjx", "forward_dynamics", 8) in engines and ("mjx", "grad_forward_dynamics", 1) not in engines


def test_time_ratio_alternates_and_reports_each_round():
    run = _benchmark("run")
    import jax
    import jax.numpy as jnp

    x = jnp.ones((8, 64))
    cheap = jax.jit(lambda x: x + 1.0)
    dear = jax.jit(lambda x: jnp.linalg.matrix_power(x @ x.T + 1.0, 5))
    row = run.time_ratio("m", ("dear", (dear, (x,))), ("cheap", (cheap, (x,))), batch=8, rounds=3)
    assert row["op"] == "dear/cheap" and row["batch"] == 8 and len(row["ratio_per_round"]) == 3
    assert all(r > 0 for r in row["ratio_per_round"])
    assert row["ratio"] == sorted(row["ratio_per_round"])[1]  # the median of the rounds


def test_profile_script_attributes_kernels_to_stages():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "profile_kernels.py"), "--model", "chain7", "--op",
         "grad_forward_dynamics", "--states", "8", "--calls", "2", "--top", "3"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    stages = {tuple(line.split()[:2]) for line in out.splitlines()}
    for stage in [("realize_position", "forward"), ("realize_position", "reverse"),
                  ("articulated_body_method", "forward"), ("linearized_inverse_dynamics", "reverse")]:
        assert stage in stages, out
    assert "costliest kernels (3)" in out


def test_program_memory_counts_arguments_and_outputs():
    run = _benchmark("run")
    import jax
    import jax.numpy as jnp

    x = jnp.ones((256, 1024), jnp.float32)  # 1 MiB
    f = jax.jit(lambda x: x * 2.0)
    f(x)
    assert run.program_memory_mib(f, x) == 2.0  # argument and output, nothing else


def test_integrator_benchmark_smoke():
    """benchmarks/integrators.py's adaptive rows (run.py prints the same):
    simbodyx's steps, and MuJoCo C's RK4 at a step reaching simbodyx's error."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "integrators.py"), "--models", "chain7", "--batch", "4",
         "--repeats", "1", "--no-diffrax", "--no-grad", "--no-in-jit"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("| simbodyx") or line.startswith("| MuJoCo")]
    assert rows[0].startswith("| simbodyx")
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return
    errors = {row.split("|")[1].strip(): row.split("|") for row in rows}
    assert int(errors["simbodyx"][4]) > 0 and float(errors["MuJoCo C RK4"][5]) <= float(errors["simbodyx"][5])


def test_rollout_gradient_rows_on_a_slider():
    """benchmarks/rollout_grad.py's comparison (run.py's rows too) on a 1-dof
    slider, 8 steps: the three checkpoint settings and MJX, single and
    batched, and checkpointing planning no more memory than keeping every
    step's internals (the quarter-horizon rows are the same code at
    another length: left to the script)."""
    rollout_grad = _benchmark("rollout_grad")
    import simbodyx as sx
    from conftest import new_system

    try:
        import mujoco  # noqa: F401
        from mujoco import mjx  # noqa: F401
        peers = [("mjx (Euler)", 8, 2)]
    except ImportError:
        peers = []
    system, matter, _ = new_system()
    sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.1))))
    rows = rollout_grad.compare(sx, "slider", steps=8, batch=2, repeats=1, quarter=False, mjx=bool(peers),
                                build=lambda sx: (system, matter))
    assert [(r["engine"], r["steps"], r.get("batch")) for r in rows] == [
        ("simbodyx", 8, 2), ("simbodyx, sqrt segments", 8, 2), ("simbodyx (no checkpoint)", 8, 2)] + peers
    assert all(r["latency_ms"] > 0 and r["memory_mib"] > 0 and r["compile_s"] > 0 for r in rows)
    assert rows[0]["memory_mib"] <= rows[2]["memory_mib"] and rows[0]["per_second"] > 0
    assert [rollout_grad.segment_steps(n) for n in (1000, 250, 8, 7)] == [25, 10, 2, 1]


def test_trajopt_rows_agree_with_their_peers():
    """benchmarks/trajopt.py's batch-1 rows (run.py's too), tiny: the
    closed-form cart-pole equals simbodyx's accelerations, the swing-up loss
    agrees between them and with a loop of one's own (checked inside), and
    MuJoCo C's RK4 rollout ends
    where simbodyx's does (checked inside)."""
    trajopt = _benchmark("trajopt")
    import jax.numpy as jnp
    import numpy as np

    import simbodyx as sx

    example = trajopt._example()
    model, state = example.cartpole()
    x = np.array([0.3, 2.0, -0.7, 1.1])
    s = model.realize(state.with_q(x[:2]).with_u(x[2:]), sx.Stage.Velocity)
    tau, F = model.forces.calc_forces(s)
    udot, _ = model.matter.calc_acceleration_ignoring_constraints(s, tau + jnp.array([1.5, 0.0]), F)
    f = trajopt.closed_form_cartpole(example.CART_MASS, example.POLE_MASS, example.POLE_LENGTH)
    np.testing.assert_allclose(f(jnp.asarray(x), 1.5)[2:], udot, rtol=1e-12)
    try:
        import mujoco  # noqa: F401
        peers = True
    except ImportError:
        peers = False
    rows, note = trajopt.trajopt_rows(sx, iterations=2, rollout_steps=20, repeats=1, mujoco=peers, array_path=False)
    assert note is None
    assert [(r["engine"], r["op"]) for r in rows] == [
        ("closed_form", "swing_up_iteration"), ("simbodyx", "swing_up_iteration"),
        ("simbodyx_own_loop", "swing_up_iteration"), ("simbodyx", "rk4_rollout"),
        ("simbodyx_in_jit", "rk4_rollout")] + [("mujoco", "rk4_rollout")] * peers
    assert all(r["step_us"] > 0 for r in rows)


def test_contact_scene_rows_settle_and_time():
    """The rigid brick steps (batch 1 and a small batch) and stays on the
    floor; MuJoCo's brick too, where MuJoCo is installed."""
    import simbodyx as sx

    contact = _benchmark("contact")
    rows = contact.simbodyx_rows(sx, "brick", "rigid", steps=500, batch=4, repeats=1)
    assert [r["batch"] for r in rows] == [1, 4] and all(r["step_us"] > 0 for r in rows)
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return
    assert contact.mujoco_rows("brick", 100, 1)[0]["step_us"] > 0


def test_checks_mode_rows_time_both():
    """benchmarks/checks.py, tiny: chain7's forward dynamics with the checks
    off and on, single and batched."""
    import simbodyx as sx

    rows = _benchmark("checks").checks_rows(sx, ["chain7"], batch=4, rounds=1, repeats=1)
    assert [r["batch"] for r in rows] == [1, 4] and all(r["off_us"] > 0 and r["on_us"] > 0 for r in rows)


def test_progress_rows_time_both():
    """benchmarks/progress.py, tiny: chain7's rollout with the bar off and on."""
    import simbodyx as sx

    rows = _benchmark("progress").progress_rows(sx, ["chain7"], steps=20, batch=4, rounds=1, repeats=1)
    assert [r["batch"] for r in rows] == [1, 4] and all(r["off_ms"] > 0 and r["on_ms"] > 0 for r in rows)


def test_viewer_rows_build_each_scene():
    """benchmarks/viewer.py without the browser: each scene's page builds."""
    import simbodyx as sx

    rows = _benchmark("viewer").viewer_rows(sx, frames=2, video=False)
    assert [r["frames"] for r in rows] == [3, 3, 3, 30] and all(r["page_mb"] > 0.69 for r in rows)


def test_the_ant_rows_time_simbodyx_and_mujoco_c():
    """benchmarks/contact.py --robots ant at 10-step trajectories, without the
    batched rows (MJX's compile alone takes 20 s): the imported Ant stands
    after 3 s in both engines."""
    import simbodyx as sx

    rows = _benchmark("contact").robot_rows(sx, "ant", steps=10, batch=0, repeats=1)
    assert [r["engine"] for r in rows] == ["simbodyx_compliant", "mujoco"] and all(r["step_us"] > 0 for r in rows)


def test_contact_gradient_rows_report_errors_and_failures():
    """benchmarks/contact_gradient.py's row logic on a toy rollout (its
    scenes compile for tens of seconds: left to the script): a Jacobian
    that matches its central differences, and a differentiation that
    raises, reported as a row."""
    import jax
    import jax.numpy as jnp

    contact_gradient = _benchmark("contact_gradient")

    def final(v):
        return jnp.sin(v) * v[0]

    reference = contact_gradient.central_differences(final)
    good = contact_gradient.row("toy", "reverse", final, jax.jacrev, reference)
    assert good["finite"] and good["relative_error"] < 1e-8

    def refuse(f):
        def raising(v):
            raise ValueError("Reverse-mode differentiation does not work here")
        return raising

    bad = contact_gradient.row("toy", "reverse", final, refuse, reference)
    assert bad["error"].startswith("ValueError: Reverse-mode")
    assert "| toy | reverse |" in contact_gradient.render([good, bad])


def test_compile_times_run_each_target_cold_then_warm():
    """benchmarks/compile_times.py on chain7 alone: two fresh processes
    sharing one persistent cache folder, each timing trace, lowering, XLA
    and the first call apart."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compile_times.py"), "--targets", "chain7"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    (row,) = json.loads(out.strip().splitlines()[-1])
    assert row["target"] == "chain7" and row["limit_s"] == 1.0
    for run in (row["cold"], row["warm"]):
        parts = [run[k] for k in ("trace_s", "lower_s", "compile_s", "first_call_s")]
        assert all(p > 0 for p in parts) and abs(sum(parts) - run["total_s"]) < 1e-6


def test_robot_rows_compare_each_engine_with_its_converged_answer():
    """benchmarks/robots.py on the Hopper at tiny settings (2 starts, 20 ms,
    the file's pose to 12 ms, the file's step, no MJX): simbodyx's converged answer is MuJoCo's, its
    error at the file's step is MuJoCo C's, nothing goes non-finite, and
    the table prints."""
    import argparse

    robots = _benchmark("robots")
    args = argparse.Namespace(batch=2, accuracy_starts=2, seconds=0.02, long=0.02, factors=[1], mjx=False,
                              pose_every=0.002)
    result = robots.benchmark("hopper", args)
    assert result["converged_vs_mujoco"]["max"] < 1e-8
    row = result["rows"][0]
    assert abs(row["simbodyx_error"] - row["mujoco_error"]) <= 1e-8 and row["simbodyx_nonfinite"] == 0
    assert result["long_nonfinite"] == 0 and result["energy_rise"] < 1e-9
    assert "| 2 |" in robots.table(result)


def test_environment_rows_step_a_batch_and_count_the_finite():
    """benchmarks/envs.py on two Hoppers for four steps (two chunks of two):
    both finite, a throughput, and the row prints."""
    envs = _benchmark("envs")
    row = envs.measure("hopper", batch=2, steps=4, chunk=2)
    assert (row["batch"], row["steps"], row["finite"]) == (2, 4, 2) and row["steps_per_s"] > 0
    assert "| hopper | 2 | 4 |" in envs.render([row])


def test_the_benchmark_page_is_its_json_rendered():
    """benchmarks/README.md's result blocks are what ``render.py`` makes of
    benchmarks/results/*.json, each headed by its run's command, date,
    machine and versions."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "render.py"), "--check"], check=True, timeout=300)
    page = (ROOT / "benchmarks" / "README.md").read_text()
    blocks = re.findall(r"<!-- results: (\w+) -->\n`python benchmarks/(\w+)\.py[^`]*`, (\d{4}-\d\d-\d\d), ([^;]+); "
                        r"python [\d.]+, jax [\d.]+", page)
    assert {b[0] for b in blocks} == {p.stem for p in (ROOT / "benchmarks" / "results").glob("*.json")}
    assert all(name == script for name, script, *_ in blocks), blocks
