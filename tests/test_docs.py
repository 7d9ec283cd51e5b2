"""The README's examples run as written (the notebooks: test_notebooks.py)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(source: str):
    exec(compile(source, "<doc>", "exec"), {"__name__": "__doc_example__"})


def test_readme_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        run(block)

