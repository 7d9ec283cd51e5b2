"""Every notebook runs top to bottom in a fresh kernel (nbclient), with no
outputs committed; the executed copies are written to build/notebooks/."""

import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_and_their_outputs_are_stripped():
    assert len(NOTEBOOKS) >= 8
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs committed"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    # The kernel shares the suite's persistent compilation cache (the
    # examples' programs compiled by tests/test_examples.py are reused).
    import jax

    if jax.config.jax_compilation_cache_dir:
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", jax.config.jax_compilation_cache_dir)
        monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    out = ROOT / "build" / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out / path.name)
    assert any(o.get("output_type") == "display_data" for c in notebook.cells for o in c.get("outputs", ()))
