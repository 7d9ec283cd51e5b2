"""The README's examples run as written (the notebooks: test_notebooks.py),
the documentation site builds, and CI's oldest JAX is the supported one."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(source: str):
    exec(compile(source, "<doc>", "exec"), {"__name__": "__doc_example__"})


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        run(block)


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


def test_ci_tests_the_oldest_supported_jax():
    oldest = re.search(r'"jax>=([\d.]+)', (ROOT / "pyproject.toml").read_text())[1]
    assert f"OLDEST_JAX={oldest} " in (ROOT / ".ci" / "run").read_text()
