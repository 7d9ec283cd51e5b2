"""The README's and the docs pages' examples run as written (the notebooks:
test_notebooks.py), the README stays short and states behaviour, not
measurements, the documentation site builds in its four parts, and CI's
oldest JAX is the supported one."""

import ast
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(source: str) -> dict:
    """The namespace a block leaves behind."""
    namespace = {"__name__": "__doc_example__"}
    exec(compile(source, "<doc>", "exec"), namespace)
    return namespace


def _close(x, expected, tol):
    return np.allclose(np.asarray(x, float), expected, rtol=0, atol=tol)


#: The pages whose python blocks run: the README and every docs page.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: What each comment on a printed result claims, checked on the block's
#: namespace (to the digits the comment shows).
CLAIMS = {
    "# (8, 11)": lambda ns: ns["states"].obs.shape == (8, 11),
    "# (8, 11) (8,)": lambda ns: ns["states"].obs.shape == (8, 11) and ns["states"].reward.shape == (8,),
    "# gymnasium's reward terms, the x position and velocity": lambda ns: sorted(ns["states"].metrics) == [
        "reward_ctrl", "reward_forward", "reward_survive", "x_position", "x_velocity"],
    "# inverse dynamics: ~0 here": lambda ns: _close(ns["tau"], 0.0, 1e-4),
    "# perr (3,)": lambda ns: ns["tip"].get_position_errors_as_vector(ns["state"]).shape == (3,)
    and _close(ns["tip"].get_position_errors_as_vector(ns["state"]), 0.0, 1e-4),
    "# lambda (3,), z row 0": lambda ns: ns["tip"].get_multipliers_as_vector(ns["state"]).shape == (3,)
    and _close(ns["tip"].get_multipliers_as_vector(ns["state"])[2], 0.0, 1e-6),
    "# G udot - b = 0": lambda ns: _close(ns["model"].matter.calc_constraint_acceleration_errors(
        ns["state"], ns["state"].acceleration.udot), 0.0, 1e-4),
    "# d udot_0 / d q": lambda ns: np.all(np.isfinite(np.asarray(jax.grad(
        lambda q: ns["udot"](ns["state"].with_q(q))[0])(ns["state"].q)))),
    "# Succeeded, q / |q|, 0": lambda ns: str(ns["sx"].ProjectStatus(int(ns["results"].status))) == "Succeeded"
    and _close(np.linalg.norm(np.asarray(ns["s"].q)), 1.0, 1e-6),
    "# 0: tangent to the sphere": lambda ns: _close(ns["q_err"] @ ns["s"].q, 0.0, 1e-6),
    "# ~470 steps, |dE| < 1e-6 J": lambda ns: 440 <= int(ns["stats"].num_steps_taken) <= 500
    and abs(float(ns["trajectory"].energy[-1] - ns["trajectory"].energy[0])) < 1e-6,
    "# 3 [0.4515 1.1740 1.7519] s": lambda ns: int(ns["stats"].num_events) == 3
    and _close(ns["stats"].event_times[:3], [0.4515, 1.1740, 1.7519], 5e-5),
    "# 0.0990 m up, rolling at 0.709 m/s, 1.03 mm deep, carrying 9.81 N": lambda ns: _close(
        [ns["final"].q[5], ns["final"].u[3], 1e3 * ns["contact"].depth[0], np.linalg.norm(ns["contact"].force[0])],
        [0.0990, 0.709, 1.03, 9.81], [5e-5, 5e-4, 5e-3, 5e-3]),
    "# 0.01 (101, 15)": lambda ns: ns["robot"].timestep == 0.01 and ns["trajectory"].q.shape == (101, 15)
    and bool(np.all(np.isfinite(np.asarray(ns["trajectory"].q)))),
    "# 0.2501 m (e^2 h = 0.25); u_x 0: the impact's friction stopped the slide": lambda ns: _close(
        float(ns["trajectory"].q[ns["bounced"], 1].max() - 0.1), 0.2501, 5e-5) and _close(ns["final"].u[0], 0.0, 1e-6),
    "# (256,) True": lambda ns: ns["angles"].shape == (256,) and bool(np.all(np.isfinite(np.asarray(ns["angles"])))),
    "# body 1 ('body1', Ball): zero quaternion (checks mode); ... (at t = 0 s, in step 1)": lambda ns: (
        ns["message"].startswith("body 1 ('body1', Ball): zero quaternion (checks mode)")
        and ns["message"].endswith("(at t = 0 s, in step 1)")),
    "# (2000,) (2,)": lambda ns: ns["angles"].shape == (2000,) and bool(np.all(np.isfinite(np.asarray(ns["d_cost"])))),
}


def test_the_examples_of_the_readme_and_the_docs_run_and_their_printed_claims_hold():
    """Every python block of the README and of the docs pages runs; each
    comment that states a result (on a print, or on an inverse-dynamics
    line) is in CLAIMS and holds."""
    blocks = [block for page in PAGES for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]
    assert len(blocks) > 10, "the README and the docs pages have too few python examples"
    stated = {comment.strip() for block in blocks for comment in re.findall(r"^print\(.*\)\s+(#.*)$", block, re.M)}
    stated.add("# inverse dynamics: ~0 here")
    assert stated == set(CLAIMS), "each comment on a printed result needs its check in CLAIMS"
    for block in blocks:
        namespace = run(block)
        for comment, holds in CLAIMS.items():
            if comment in block:
                assert holds(namespace), f"claim not met: {comment}"


#: What a measurement looks like in prose: a time, a speed-up, a machine or a release's figure.
MEASUREMENT = re.compile(r"\d\s?(ms|us|µs|ns)\b|\d(\.\d+)?\s?s\b(?! \()|\d(\.\d+)?x\b|\b(Xeon|EPYC|H100|H200)\b"
                         r"|\bjax \d|\d[- ]cores?\b|\bper (second|call|step)\b")


def test_the_readme_is_short_and_states_behaviour_not_measurements():
    """README.md stays under 200 lines and its prose holds no measurement
    (times, speed-ups, machines, releases' figures): those live in the
    benchmark pages."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found = [m.group(0) for m in MEASUREMENT.finditer(prose)]
    assert not found, found


#: A measurement in a docstring: a time with its unit, a machine, a release's figure.
TIMING = re.compile(r"\b\d+(\.\d+)?(-\d+(\.\d+)?)?\s?(ms|us|µs|ns|s)\b(?!\^)|\b(Xeon|EPYC|H100|H200)\b|\b\d+-core\b"
                    r"|\bjax \d+\.\d+\.\d+")
#: Docstrings whose times are the physics' own (a step, a duration simulated), not measurements.
PHYSICAL_TIMES = {("io/mjcf_fit.py", "_contact")}


def test_docstrings_state_behaviour_not_measurements():
    """No docstring of the package holds a timing, a machine or a release's
    figure: those go stale, and live in benchmarks/README.md."""
    found = []
    for path in sorted((ROOT / "src" / "simbodyx").rglob("*.py")):
        where = path.relative_to(ROOT / "src" / "simbodyx").as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = getattr(node, "name", "<module>")
                found += [(where, name, m.group(0)) for m in TIMING.finditer(ast.get_docstring(node) or "")
                          if (where, name) not in PHYSICAL_TIMES]
    assert not found, found


def test_the_docs_site_has_its_four_parts():
    """mkdocs.yml's navigation: Home, then tutorials, how-to guides,
    reference and explanation, each with its pages."""
    nav = re.findall(r"^  - ([^:\n]+):", (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1], re.M)
    assert nav == ["Home", "Tutorials", "How-to guides", "Reference", "Explanation"], nav


def test_docs_build_with_warnings_as_errors(tmp_path):
    """mkdocs.yml builds in strict mode: a docstring mkdocstrings cannot
    render, a broken link or a README section marker gone fails here. The
    error catalogue it generates lists every raise of the package."""
    spec = importlib.util.spec_from_file_location("hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    errors = (tmp_path / "errors" / "index.html").read_text()
    raises = sum(len(hooks.raise_sites(p)) for p in (ROOT / "src" / "simbodyx").rglob("*.py"))
    assert raises > 200 and errors.count("<tr>") == raises + 1
    assert "load_urdf" in (tmp_path / "api" / "io" / "index.html").read_text()


#: The entry points a user meets first, whose docstrings are in Google's
#: style (mkdocs.yml's docstring_style), so the reference shows their
#: parameters, returns and raises as tables.
ENTRY_POINTS = ("io.mjcf.load_mjcf", "io.urdf.load_urdf", "integrate.rollout", "integrate.MuJoCoStepper",
                "integrate.stable_step", "realize.realize", "simulation.simulate", "optimize.minimize",
                "parallel.batched", "parallel.shard_batch", "envs.make", "envs.base.State", "envs.base.Randomized",
                "envs.locomotion.Locomotion", "envs.runners.Ant", "envs.runners.Humanoid", "envs.task.MuJoCoView",
                "envs.task.GymnasiumTask",
                "viz.page.view", "viz.browser.image", "viz.browser.video", "viz.skeleton.plot",
                "viz.skeleton.animate", "viz.scene.body_poses", "viz.scene.Visual", "progress.Progress",
                "integrate.derivatives", "optimize.augmented_lagrangian", "optimize.multiple_shooting",
                "parallel.use_cpu_cores", "io.urdf.example_robot_data")


def test_the_entry_points_document_every_parameter_in_googles_style():
    """Each entry point's docstring, parsed as mkdocstrings parses it
    (griffe, Google style), names exactly its signature's parameters in
    its Args section and has a Returns section; a class names its fields
    (Attributes) or its constructor's parameters (Args)."""
    import griffe

    package = griffe.load("simbodyx", search_paths=[str(ROOT / "src")])
    for name in ENTRY_POINTS:
        obj = package[name]
        sections = {s.kind.value: s.value for s in obj.docstring.parse("google", warn_missing_types=False)}
        if obj.is_class and "attributes" in sections:
            fields = [a for a in obj.attributes if not a.startswith("_")]
            assert [a.name for a in sections["attributes"]] == fields, name
            continue
        function = obj.members["__init__"] if obj.is_class else obj
        signature = [p.name for p in function.parameters if p.name != "self"]
        assert [p.name.lstrip("*") for p in sections["parameters"]] == signature, name
        assert obj.is_class or sections["returns"], name


def test_ci_tests_the_oldest_supported_jax():
    oldest = re.search(r'"jax>=([\d.]+)', (ROOT / "pyproject.toml").read_text())[1]
    assert f"OLDEST_JAX={oldest} " in (ROOT / ".ci" / "run").read_text()
