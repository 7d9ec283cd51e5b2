"""The benchmark script runs end to end (tiny settings) and reports
simbodyx and, when installed, Pinocchio rows in its JSON line."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_benchmark_script_smoke():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--models", "chain7",
         "--ops", "forward_dynamics,inverse_dynamics", "--batches", "8", "--repeats", "1"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    engines = {(r["engine"], r["op"], r["batch"]) for r in result["rows"]}
    assert ("simbodyx", "forward_dynamics", 8) in engines and ("simbodyx", "inverse_dynamics", 1) in engines
    try:
        import pinocchio  # noqa: F401
    except ImportError:
        return
    assert ("pinocchio", "forward_dynamics", 1) in engines
