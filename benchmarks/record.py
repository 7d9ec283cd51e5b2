"""A benchmark run's results as JSON, with what it ran on.

Each script that feeds the benchmark page saves its results with
:func:`save` to ``benchmarks/results/<name>.json``: the rows, and the run's
command, date, machine and library versions, which ``render.py`` prints
above the tables.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import sys
from importlib import metadata

RESULTS = pathlib.Path(__file__).parent / "results"

#: The libraries whose versions a run records, when installed.
LIBRARIES = ("jax", "jaxlib", "mujoco", "mujoco-mjx", "pin", "diffrax")


def machine() -> str:
    """The CPU's model name and core count, the memory, and the accelerator JAX sees."""
    model = platform.processor() or platform.machine()
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
        model = next(line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = ""
    try:
        kib = int(next(line.split()[1] for line in pathlib.Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")))
        memory = f", {kib / 2 ** 20:.0f} GiB"
    except (OSError, StopIteration):
        pass
    import jax

    device = jax.devices()[0]
    accelerator = "" if device.platform == "cpu" else f", {device.device_kind}"
    return f"{model}, {os.cpu_count()} cores{memory}{accelerator}"


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def save(name: str, results, path=None) -> pathlib.Path:
    """Write ``results`` (JSON-able) with this run's command, date, machine
    and versions to ``path`` (default ``benchmarks/results/<name>.json``)."""
    path = pathlib.Path(path) if path else RESULTS / f"{name}.json"
    run = {"command": " ".join(["python", f"benchmarks/{pathlib.Path(sys.argv[0]).name}", *sys.argv[1:]]),
           "date": datetime.date.today().isoformat(), "machine": machine(), "versions": versions()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run": run, "results": results}, indent=1) + "\n")
    return path


def load(name: str) -> dict:
    """``{"run": ..., "results": ...}`` of ``benchmarks/results/<name>.json``."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def header(run: dict) -> str:
    """The line above a run's tables: its command, date, machine and versions."""
    libraries = ", ".join(f"{k} {v}" for k, v in run["versions"].items())
    return f"`{run['command']}`, {run['date']}, {run['machine']}; {libraries}."
