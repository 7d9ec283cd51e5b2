"""simbodyx._xla: importing simbodyx leaves XLA_FLAGS alone;
``set_cpu_options()`` adds XLA's CPU options where they apply (the AVX2
cap on x86-64, the older fusion emitters on jaxlib 0.7 to 0.10, no YNNPACK
fusions on jaxlib >= 0.8.1, small loops compiled into one function on
jaxlib >= 0.7), unless the user chose them or JAX's backends already
started; simbodyx's own programs carry the per-program ones; each use of
JAX's private modules has a working fallback where a release lacks them."""

import os
import pathlib
import platform
import subprocess
import sys

import pytest
from jaxlib.version import __version__ as JAXLIB

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla import jax_compat, releases, trace_context, xla_setup
from simbodyx._xla.releases import release
from simbodyx._xla.xla_setup import CPU_ISA_CAP, SMALL_LOOP_BYTES, flags_with_cpu_options, loop_options_for, options_for

pytestmark = pytest.mark.smoke
ROOT = pathlib.Path(__file__).resolve().parents[2]
CAP = f"--xla_cpu_max_isa={CPU_ISA_CAP}"
NO_YNN = "--xla_cpu_experimental_ynn_fusion_type="
OLD_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
LOOPS = f"--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}"


@pytest.mark.parametrize("flags, machine, jaxlib, expected", [
    ("", "x86_64", "0.6.2", CAP),  # jaxlib 0.6 crashes in some small loops compiled as one function
    ("", "AMD64", "0.6.2", CAP),
    ("--xla_force_host_platform_device_count=2", "x86_64", "0.6.2",
     f"--xla_force_host_platform_device_count=2 {CAP}"),
    ("--xla_cpu_max_isa=AVX512", "x86_64", "0.6.2", None),  # the user's choice stays
    ("", "aarch64", "0.6.2", None),
    ("--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024", "aarch64", "0.7.0",
     f"--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024 {OLD_EMITTERS}"),
    ("", "x86_64", "0.7.0", f"{CAP} {OLD_EMITTERS} {LOOPS}"),
    ("", "x86_64", "0.8.0", f"{CAP} {OLD_EMITTERS} {LOOPS}"),
    ("", "x86_64", "0.8.1", f"{CAP} {NO_YNN} {OLD_EMITTERS} {LOOPS}"),
    ("", "x86_64", "0.10.2.dev20260301", f"{CAP} {NO_YNN} {OLD_EMITTERS} {LOOPS}"),
    ("", "arm64", "0.10.2", f"{NO_YNN} {OLD_EMITTERS} {LOOPS}"),
    ("", "x86_64", "0.11.2", f"{CAP} {NO_YNN} {LOOPS}"),  # 0.11 has no older emitters (XLA aborts on the flag)
    ("", "x86_64", "0.12.0.1", f"{CAP} {NO_YNN} {LOOPS}"),
    ("--xla_cpu_experimental_ynn_fusion_type=reduce --xla_cpu_use_fusion_emitters=true", "x86_64", "0.10.2",
     f"--xla_cpu_experimental_ynn_fusion_type=reduce --xla_cpu_use_fusion_emitters=true {CAP} {LOOPS}"),
])
def test_options_are_added_only_where_they_apply(flags, machine, jaxlib, expected):
    assert flags_with_cpu_options(flags, machine, jaxlib) == expected


def test_loop_options_choose_the_earlier_runtime_only_where_it_exists():
    earlier = {"xla_cpu_use_thunk_runtime": False}
    assert loop_options_for("0.6.2", "--xla_cpu_max_isa=AVX2", "cpu") == earlier
    assert loop_options_for("0.6.2", "--xla_cpu_use_thunk_runtime=true", "cpu") == {}  # the user's choice
    assert loop_options_for("0.6.2", "", "gpu") == {}
    assert loop_options_for("0.7.0", "", "cpu") == loop_options_for("0.12.0.1", "", "cpu") == {}


def test_kept_out_of_one_function_is_the_identity_eagerly_and_under_jit_vmap_and_grad():
    f = xla_setup.kept_out_of_one_function
    x = jnp.array([0.3, -2.0, 0.0, 1e-300])
    assert float(f(x[0])) == 0.3 and float(jax.jit(f)(x[1])) == -2.0
    assert (jax.vmap(f)(x) == x).all() and float(jax.grad(lambda y: 3.0 * f(y))(0.7)) == 3.0
    single = jnp.float32(0.3)
    assert f(single).dtype == jnp.float32 and f(single) == single


def test_release_numbers():
    assert release("0.10.2") == (0, 10, 2) > release("0.8.1") > release("0.8") == (0, 8, 0)
    assert release("0.8.1.dev20251020") == (0, 8, 1)
    assert release("0.12.0.1") == (0, 12, 0)


def _printed(code, **env) -> list:
    """The lines ``code`` prints in a fresh Python, its XLA_FLAGS ``env``'s only."""
    environ = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | env
    environ["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()


#: Printing the process's XLA_FLAGS, the last line of a fresh Python's code.
PRINT_FLAGS = "\nimport os; print(repr(os.environ.get('XLA_FLAGS')))"


def _flags_after(code, **env):
    return _printed(code + PRINT_FLAGS, **env)[-1]


def test_import_leaves_the_flags_alone():
    assert _flags_after("import simbodyx") == "None"
    mine = "--xla_cpu_max_isa=AVX512"
    assert _flags_after("import jax; import simbodyx; jax.numpy.zeros(1)", XLA_FLAGS=mine) == repr(mine)


@pytest.mark.skipif(flags_with_cpu_options("", platform.machine(), JAXLIB) is None, reason="no option applies")
def test_set_cpu_options_sets_them_before_jax_starts_and_only_then():
    expected = flags_with_cpu_options("", platform.machine(), JAXLIB)
    assert _flags_after("import jax, simbodyx; simbodyx.xla_setup.set_cpu_options()") == repr(expected)
    mine = f"--xla_cpu_max_isa=AVX512 {NO_YNN}reduce --xla_cpu_use_fusion_emitters=true {LOOPS}"
    assert _flags_after("import simbodyx; simbodyx.xla_setup.set_cpu_options()", XLA_FLAGS=mine) == repr(mine)
    # JAX already computed: XLA has read its flags, so they stay, with a warning.
    started = "import jax, simbodyx, warnings; jax.numpy.zeros(1)\nwith warnings.catch_warnings(record=True) as w:\n" \
              "    warnings.simplefilter('always'); simbodyx.xla_setup.set_cpu_options()\nprint(w[0].message)"
    printed = _printed(started + PRINT_FLAGS)
    assert "call it before computing with JAX" in printed[0] and printed[-1] == "None"


def test_per_program_options_are_all_but_the_loop_threshold():
    assert options_for("x86_64", "0.9.2", "") == {"xla_cpu_max_isa": CPU_ISA_CAP,
                                                  "xla_cpu_experimental_ynn_fusion_type": "",
                                                  "xla_cpu_use_fusion_emitters": False}
    assert options_for("aarch64", "0.12.0", "") == {"xla_cpu_experimental_ynn_fusion_type": ""}
    assert options_for("x86_64", "0.6.2", "--xla_cpu_max_isa=AVX512") == {}  # the process's choice stays
    assert set(xla_setup.program_options()) <= set(xla_setup.eager_compiler_options())
    assert set(xla_setup.program_options()) <= set(xla_setup.loop_compiler_options())
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(jax.jit(jnp.cumsum, compiler_options=xla_setup.program_options())(x),
                                  jnp.cumsum(x))  # XLA takes each


def test_each_private_jax_import_has_its_fallback(monkeypatch):
    """Without ``jax._src.xla_bridge`` the options are set as if JAX had not
    started; without JAX's trace state every trace sums with reductions and
    says nothing of tracing; JAX >= 0.7 leaves custom_linear_solve alone."""
    jnp.zeros(1).block_until_ready()
    assert xla_setup._backends_started()
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", None)  # import raises ImportError
    assert not xla_setup._backends_started()
    monkeypatch.setattr(trace_context, "trace_ctx", None)
    assert trace_context.tracing() is None and trace_context.traced_in_loop_body()
    assert jax.jit(lambda x: trace_context.traced_in_loop_body() + x)(jnp.zeros(())) == 1
    assert jax_compat.instantiate_linear_solve_cotangents() is (releases.JAX < (0, 7, 0))
