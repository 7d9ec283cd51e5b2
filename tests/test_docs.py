"""The README's examples run as written (the notebooks: test_notebooks.py)."""

import os
import pathlib
import re
import subprocess

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
    import sys

    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import hooks
    finally:
        sys.path.remove(str(ROOT / "docs"))
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]
    errors = (tmp_path / "errors" / "index.html").read_text()
    raises = sum(len(hooks._raises(p)) for p in (ROOT / "src" / "simbodyx").rglob("*.py"))
    assert raises > 200 and errors.count("<tr>") == raises + 1
    assert "load_urdf" in (tmp_path / "api" / "io" / "index.html").read_text()
