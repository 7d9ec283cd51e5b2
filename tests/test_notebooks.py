"""Every notebook runs top to bottom in a fresh kernel (nbclient), with no
outputs committed; the executed copies are written to build/notebooks/."""

import os
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import GC_THRESHOLDS

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks_and_their_outputs_are_stripped():
    assert len(NOTEBOOKS) >= 8
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs committed"
    assert OPTIMIZED | set(CLAIMS) <= {p.stem for p in NOTEBOOKS}


#: Notebooks whose time goes to running batches of long simulations rather
#: than to compiling: their kernels compile with XLA's optimizations, as a
#: user's do (1.1-3x faster end to end here), where the suite's tests compile
#: without them (tests/conftest.py).
OPTIMIZED = {"arm_reaching", "batched_simulation", "contact", "rigid_contact"}

#: What notebooks print that must hold: per notebook, (pattern, check), the
#: check given the pattern's groups as numbers (a group of several numbers
#: as a list). These notebooks run their examples' functions at the
#: examples' settings, so tests/test_examples.py does not run them again.
CLAIMS = {
    "arm_reaching": [
        # Adam: the hand within 1 mm of the target, nearly at rest, the cost down by 500x
        (r"hand (\S+) mm from the target, \|u\| = (\S+); cost (\S+) of the first",
         lambda mm, u, fall: mm < 1 and u < 0.05 and fall < 2e-3),
        # the cross-entropy method: its mean's hand within half the 955 mm of the hanging hand; its best cost falls
        (r"the mean's hand (\S+) mm from the target; best cost (\S+), then (\S+)",
         lambda mm, first, last: mm < 955 / 2 and last < first),
    ],
    "hopper_jump": [
        # the gradient through contact is central differences' (to their truncation and round-off)
        (r"directional derivative (\S+), central differences (\S+)",
         lambda exact, central: abs(exact - central) < 1e-4 * max(1.0, abs(central))),
        # Adam raises the torso's final height by more than 10 cm
        (r"the torso at (\S+) m -> (\S+) m at the end", lambda first, last: last > first + 0.1),
    ],
    "system_identification": [
        # every estimate within 3 standard errors of the truth, the residual within 10% of the noise
        (r"residual RMS (\S+) mrad for noise (\S+) mrad", lambda rms, noise: abs(rms / noise - 1) < 0.1),
        (r"estimate - truth in standard errors: \[([^\]]*)\]", lambda errors: max(map(abs, errors)) < 3),
        (r"largest standard error (\S+)", lambda largest: largest < 0.01),
    ],
}


def _number(text):
    parts = text.replace(",", " ").split()
    return float(parts[0]) if len(parts) == 1 else [float(p) for p in parts]


def _printed(notebook):
    return "".join(o.get("text", "") for c in notebook.cells for o in c.get("outputs", ())
                   if o.get("output_type") == "stream")


def _has_chromium() -> bool:
    from simbodyx.viz import browser

    try:
        return bool(browser.chromium())
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    if "sx.viz.video" in path.read_text() and not _has_chromium() and not os.environ.get("CI"):
        pytest.skip("its videos are rendered in Chromium, which is not installed (apt install chromium)")
    # The kernel shares the suite's persistent compilation cache.
    import jax

    if path.stem in OPTIMIZED:
        monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "0")
    if jax.config.jax_compilation_cache_dir:
        monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", jax.config.jax_compilation_cache_dir)
        monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                           str(jax.config.jax_persistent_cache_min_compile_time_secs))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(path, as_version=4)
    collector = f"import gc; gc.freeze(); gc.set_threshold{GC_THRESHOLDS}"  # as in this process (conftest)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   extra_arguments=[f"--IPKernelApp.exec_lines={collector}"],
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    out = ROOT / "build" / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, out / path.name)
    assert any(o.get("output_type") == "display_data" for c in notebook.cells for o in c.get("outputs", ()))
    printed = _printed(notebook)
    for pattern, check in CLAIMS.get(path.stem, ()):
        found = re.search(pattern, printed)
        assert found, f"{path.name} printed nothing like {pattern!r}:\n{printed}"
        assert check(*map(_number, found.groups())), f"{path.name}: {found.group(0)}"
