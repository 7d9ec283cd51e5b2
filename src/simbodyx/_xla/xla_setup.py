"""XLA's CPU options for simbodyx's programs: set per program where XLA
takes them, and process-wide only when you call :func:`set_cpu_options`.

Importing simbodyx sets no option: every other JAX program of the process
runs as it would without it. simbodyx's own compiled programs (its entry
points called eagerly, an eager ``sx.integrate.rollout``, ``sx.simulate``,
``sx.optimize``) carry the options XLA accepts per program
(:func:`program_options`):

- ``xla_cpu_max_isa="AVX2"`` on x86-64: on a CPU with AVX-512, XLA emits
  512-bit code for the dynamics' small fused kernels, which runs slower
  than AVX2 code; on a CPU without AVX-512 the cap changes nothing.
- ``xla_cpu_experimental_ynn_fusion_type=""`` on jaxlib 0.8.1 and later:
  XLA otherwise hands fusions of the dynamics' small reductions and
  elementwise kernels to the YNNPACK library, which runs them slower than
  XLA's own.
- ``xla_cpu_use_fusion_emitters=False`` on jaxlib 0.7 to 0.10, where the
  older fusion emitters still exist: the newer ones give each fusion its
  own object in the JIT, so a compiled program holds about four times the
  memory mappings, and a process keeping a few hundred programs alive (a
  test run, a notebook exploring several models) reaches Linux's limit of
  65,530 mappings, where XLA's compiler aborts. jaxlib 0.11 and later have
  only the newer ones: there ``jax.clear_caches()`` releases them.

One option XLA takes only process-wide, from ``XLA_FLAGS`` before JAX starts
its CPU backend: ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=``
:data:`SMALL_LOOP_BYTES` (2 MiB, jaxlib 0.7 and later). With it XLA's CPU
compiler compiles a while loop whose one iteration moves fewer bytes into
one function, instead of running each kernel of each iteration through the
thunk runtime's executor, which costs more than a small kernel's
arithmetic: a single trajectory's loop (a rollout, a simulation, an
optimization's iteration at batch 1) runs several times faster, and
compiles longer. :func:`set_cpu_options` adds it, and the three options
above for every program of the process, to ``XLA_FLAGS``: call it first
thing, before computing with JAX, when single trajectories are what you
run (the README's examples, the benchmarks and the tests call it).
``benchmarks/first_calls.py`` measures what it buys and costs. An option
already in ``XLA_FLAGS`` is your choice and is left alone. On jaxlib 0.6 a
loop compiled that way crashes where XLA splits one of its kernels over
threads, so there :func:`loop_compiler_options` (XLA's earlier runtime,
per program) is the way.

simbodyx's entry points called eagerly, one call at a time, also compile
with :data:`QUICK_COMPILE` on the CPU (:func:`eager_compiler_options`): such
a call runs in JAX's dispatch time whatever XLA's optimizations, and XLA's
LLVM optimizations were the larger part of its compile time.
"""

from __future__ import annotations

import functools
import os
import platform
import warnings

from simbodyx._xla.releases import release

#: The highest instruction set XLA's CPU backend may use on x86-64, unless told otherwise.
CPU_ISA_CAP = "AVX2"

#: XLA's CPU compiler compiles a while loop into one function when one
#: iteration reads and writes fewer bytes than this (XLA's default: 1 KiB).
SMALL_LOOP_BYTES = 2 * 1024 * 1024

#: (flag, value, machines it applies to or None for all, the jaxlib releases
#: it applies to: from the first, up to but not including the second, None
#: for no end). XLA aborts on a flag it does not know, so an option's range
#: never goes beyond the releases that have its flag.
CPU_OPTIONS = (
    ("--xla_cpu_max_isa", CPU_ISA_CAP, ("x86_64", "amd64"), (0, 0, 0), None),
    ("--xla_cpu_experimental_ynn_fusion_type", "", None, (0, 8, 1), None),
    ("--xla_cpu_use_fusion_emitters", "false", None, (0, 7, 0), (0, 11, 0)),
    ("--xla_backend_extra_options", f"xla_cpu_small_while_loop_byte_threshold={SMALL_LOOP_BYTES}", None,
     (0, 7, 0), None),
)


#: The options of CPU_OPTIONS XLA takes per program, each with its value's conversion from the flag's text.
PER_PROGRAM = {"--xla_cpu_max_isa": str, "--xla_cpu_experimental_ynn_fusion_type": str,
               "--xla_cpu_use_fusion_emitters": lambda value: value == "true"}


def _applicable(machine: str, jaxlib_version: str, flags: str):
    """(flag, value) of each option of ``CPU_OPTIONS`` that applies to
    ``machine`` (``platform.machine()``) and ``jaxlib_version`` and that
    ``flags`` (XLA_FLAGS) does not already name."""
    at = release(jaxlib_version)
    return [(flag, value) for flag, value, machines, first, end in CPU_OPTIONS
            if (machines is None or machine.lower() in machines)
            and first <= at and (end is None or at < end) and flag not in flags]


def flags_with_cpu_options(flags: str, machine: str, jaxlib_version: str) -> str | None:
    """XLA_FLAGS with the options of ``CPU_OPTIONS`` that apply to ``machine``
    (``platform.machine()``) and ``jaxlib_version`` appended, leaving out any
    flag ``flags`` already names; None when there is nothing to add."""
    added = [f"{flag}={value}" for flag, value in _applicable(machine, jaxlib_version, flags)]
    return " ".join([flags, *added]).strip() if added else None


def _backends_started() -> bool:
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a JAX without it: assume not started
        return False
    return backends_are_initialized()


def set_cpu_options() -> bool:
    """Add :data:`CPU_OPTIONS` to ``os.environ["XLA_FLAGS"]`` where they
    apply and JAX's backends have not started, for every JAX program of this
    process; returns whether any was added (False, with a warning, when JAX
    already started: call it before computing with JAX)."""
    from jaxlib.version import __version__ as jaxlib_version

    flags = flags_with_cpu_options(os.environ.get("XLA_FLAGS", ""), platform.machine(), jaxlib_version)
    if flags is None:
        return False
    if _backends_started():
        warnings.warn("sx.xla_setup.set_cpu_options(): JAX's backends have started and XLA has read XLA_FLAGS; "
                      "call it before computing with JAX", stacklevel=2)
        return False
    os.environ["XLA_FLAGS"] = flags
    return True


def program_options() -> dict:
    """The options of :data:`CPU_OPTIONS` that XLA takes per program (all
    but the small-loop threshold), for this machine and jaxlib, as
    ``jax.jit(compiler_options=...)`` takes them; ``{}`` where JAX's default
    backend is not the CPU; an option ``XLA_FLAGS`` names is left out (the
    process's choice)."""
    import jax
    from jaxlib.version import __version__ as jaxlib_version

    if jax.default_backend() != "cpu":
        return {}
    return options_for(platform.machine(), jaxlib_version, os.environ.get("XLA_FLAGS", ""))


def options_for(machine: str, jaxlib_version: str, flags: str) -> dict:
    """:func:`program_options` for a machine, jaxlib release and XLA_FLAGS."""
    return {flag.removeprefix("--"): PER_PROGRAM[flag](value)
            for flag, value in _applicable(machine, jaxlib_version, flags) if flag in PER_PROGRAM}


#: XLA's settings for a program that runs a few times (those JAX's
#: ``jax_disable_most_optimizations`` sets): no LLVM optimization passes.
#: Eagerly on jaxlib 0.9.2, ``realize`` of a 10-body chain of Pins and
#: Balls through Acceleration compiled in 0.57-0.60 against 1.45-1.51 s and
#: ran in the same 190-200 us; the gymnasium humanoid's in 4.0 against 5.1 s,
#: its call 0.84 against 0.71 ms.
QUICK_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def eager_compiler_options() -> dict:
    """Compiler options for simbodyx's programs called eagerly:
    :data:`QUICK_COMPILE` where JAX's default backend is the CPU, ``{}``
    elsewhere (another backend's compiler reads them its own way)."""
    import jax

    return {**program_options(), **QUICK_COMPILE} if jax.default_backend() == "cpu" else {}


#: The XLA option selecting XLA's earlier CPU runtime, which compiles a whole
#: program into one function; jaxlib 0.7 and later have only the thunk runtime.
EARLIER_RUNTIME = "xla_cpu_use_thunk_runtime"


def loop_compiler_options() -> dict:
    """Compiler options for a CPU program that loops over small kernels (a
    single trajectory, an optimization loop): :func:`program_options`, and
    ``"xla_cpu_use_thunk_runtime": False`` on jaxlib 0.6 with JAX's default
    backend the CPU, unless XLA_FLAGS names it (the user's choice).

    The thunk runtime, the only one from jaxlib 0.7, runs each kernel through
    an executor that may hand it to another thread, and each loop iteration
    pays that per kernel; the earlier runtime compiles the program, loops
    included, into one function (on jaxlib 0.7 and later the small-loop
    threshold of :func:`set_cpu_options` does that for one trajectory's loops). Loops at
    batch 1 run several times faster with it and array programs compile
    about 2x longer, and batched operations gain or lose, so the option is
    not set process-wide (the figures per program and release:
    docs/explanation/compilation.md, "Loops at batch 1", and
    benchmarks/README.md, "Across JAX releases").
    """
    import jax
    from jaxlib.version import __version__ as jaxlib_version

    return {**program_options(),
            **loop_options_for(jaxlib_version, os.environ.get("XLA_FLAGS", ""), jax.default_backend())}


def loop_options_for(jaxlib_version: str, flags: str, backend: str) -> dict:
    """:func:`loop_compiler_options` for a jaxlib release, XLA_FLAGS and JAX backend."""
    if release(jaxlib_version) >= (0, 7, 0) or EARLIER_RUNTIME in flags or backend != "cpu":
        return {}
    return {EARLIER_RUNTIME: False}


def kept_out_of_one_function(x):
    """``x`` through a sort of two copies of itself, which XLA's CPU compiler
    does not compile into one function with a loop (its small-loop hoisting
    skips loops holding a sort, a scatter or a custom call): the loop whose
    iteration computes it runs kernel by kernel, its own inner loops still
    each as one function. For loop bodies whose one-function compile costs
    far more than it saves: ``sx.simulate``'s loop over its report times,
    around its stepping loop, and its step on a model with constraints,
    whose projection loops sit inside it (the measurements:
    docs/explanation/performance.md)."""
    import jax
    import jax.numpy as jnp

    return jax.lax.sort(jnp.stack([x, x]))[0]


def jit_with_options(fn, compiler_options: dict | None = None, **jit_kwargs):
    """``jax.jit(fn, compiler_options=..., **jit_kwargs)``, built once per
    (fn, options, keywords) so repeated calls reuse its compiled programs."""
    return _jit(fn, tuple(sorted((compiler_options or {}).items())), tuple(sorted(jit_kwargs.items())))


@functools.cache
def _jit(fn, options, jit_kwargs):
    import jax

    return jax.jit(fn, compiler_options=dict(options) or None, **dict(jit_kwargs))
