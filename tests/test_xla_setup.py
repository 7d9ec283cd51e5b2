"""simbodyx.xla_setup: importing simbodyx caps XLA's CPU code at AVX2 on
x86-64, unless the user chose a cap or JAX's backends already started."""

import os
import pathlib
import platform
import subprocess
import sys

import pytest

from simbodyx.xla_setup import CPU_ISA_CAP, flags_with_isa_cap

pytestmark = pytest.mark.smoke
ROOT = pathlib.Path(__file__).resolve().parents[1]
CAP = f"--xla_cpu_max_isa={CPU_ISA_CAP}"


@pytest.mark.parametrize("flags, machine, expected", [
    ("", "x86_64", CAP),
    ("", "AMD64", CAP),
    ("--xla_force_host_platform_device_count=2", "x86_64", f"--xla_force_host_platform_device_count=2 {CAP}"),
    ("--xla_cpu_max_isa=AVX512", "x86_64", None),  # the user's choice stays
    ("", "aarch64", None),
    ("", "arm64", None),
])
def test_the_cap_is_added_only_where_it_applies(flags, machine, expected):
    assert flags_with_isa_cap(flags, machine) == expected


def _flags_after(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | env
    environ["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run([sys.executable, "-c", code + "\nimport os; print(repr(os.environ.get('XLA_FLAGS')))"],
                         env=environ, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(flags_with_isa_cap("", platform.machine()) is None, reason="not x86-64")
def test_import_sets_the_cap_before_jax_starts_and_only_then():
    assert _flags_after("import jax; import simbodyx") == repr(CAP)
    assert _flags_after("import simbodyx", XLA_FLAGS="--xla_cpu_max_isa=AVX512") == repr("--xla_cpu_max_isa=AVX512")
    # JAX already computed: XLA has read its flags, so simbodyx leaves them alone.
    assert _flags_after("import jax; jax.numpy.zeros(1); import simbodyx") == "None"
