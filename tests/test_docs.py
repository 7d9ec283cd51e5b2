"""The README's example and the notebook run as written."""

import json
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


def test_notebook_runs():
    nb = json.loads((ROOT / "notebooks" / "tour.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    run(code)
