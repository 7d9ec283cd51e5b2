"""The XLA options simbodyx sets on import, for XLA's CPU backend only.

- ``--xla_cpu_max_isa=AVX2`` on x86-64: on a CPU with AVX-512, XLA emits
  512-bit code for the dynamics' small fused kernels, and it runs slower
  than AVX2 code; on a CPU without AVX-512 the cap changes nothing.
- ``--xla_cpu_experimental_ynn_fusion_type=`` (the empty list) on jaxlib
  0.8.1 and later, the releases that have the option: XLA otherwise hands
  fusions of the dynamics' small reductions and elementwise kernels to the
  YNNPACK library, which runs them several times slower than XLA's own.
- ``--xla_cpu_use_fusion_emitters=false`` on jaxlib 0.7 to 0.10, where
  XLA's newer fusion emitters are the default and the older ones still
  exist: the newer ones give each fusion its own object in the JIT, so a
  compiled program holds about four times the memory mappings. A process
  that keeps a few hundred programs alive, a test run or a notebook
  exploring several models, reaches Linux's default limit of 65,530
  mappings per process, and XLA's compiler then aborts or crashes. The
  older emitters run the dynamics as fast. jaxlib 0.11 and later have only
  the newer ones: there ``jax.clear_caches()`` releases them.
- ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=``
  :data:`SMALL_LOOP_BYTES` (2 MiB) on jaxlib 0.7 and later: XLA's CPU
  compiler compiles a while loop whose one iteration reads and writes
  fewer bytes than this (its cost analysis; loops with dots, scatters or
  custom calls excepted) into one function instead of running each kernel
  of each iteration through the thunk runtime's executor, which costs more
  than a small kernel's arithmetic. XLA's own threshold, 1 KiB, takes only
  toy loops; 2 MiB takes one trajectory of the dynamics (on jaxlib 0.9.2
  chain7's RK4 step ran 3.3x faster, gymnasium's Ant and Humanoid with
  contact 4.6-5x) and leaves batches of more than a few states to the
  thunk runtime. Such a loop compiles up to 3.6x longer, and a rollout's
  gradient, which runs 3-12x faster, up to 6.4x (the humanoid's over
  1,000 RK4 steps: 134 against 21 s); ``sx.simulate`` keeps its step on
  a constrained model out of it (:func:`kept_out_of_one_function`). On
  jaxlib 0.6 a loop compiled this way crashes where XLA splits one of its
  kernels over threads (``jax.random.normal`` of 1,024 x 14 numbers did),
  so there :func:`loop_compiler_options` is the way.

The figures behind each option, per release: benchmarks/README.md, "Why the
code is as it is" and "Across JAX releases".

Two more options are per program, not per process. simbodyx's entry points
called eagerly, one call at a time (``model.realize(state)`` in a notebook),
compile with :data:`QUICK_COMPILE` on the CPU (:func:`eager_compiler_options`):
such a call runs in JAX's dispatch time, tens to hundreds of microseconds
whatever XLA's optimizations, and XLA's LLVM optimizations took up to 60%
of its compile time. And :func:`loop_compiler_options`
(XLA's earlier CPU runtime, jaxlib 0.6 only), which compiles a whole
program, loops included, into one function; ``sx.simulate``,
``sx.optimize.minimize`` and ``sx.optimize.augmented_lagrangian`` take it
as ``compiler_options=``, and ``jax.jit(f, compiler_options=...)`` takes
it for a program of your own.

XLA reads XLA_FLAGS once, when JAX starts its CPU backend, so the options
are added only while that has not happened (importing jax starts nothing;
the first array or computation does): import simbodyx before computing
with JAX. An option already in XLA_FLAGS is the user's choice and is left
alone (``XLA_FLAGS=--xla_cpu_max_isa=AVX512`` keeps AVX-512). The options
apply to every JAX computation of the process on the CPU, simbodyx's or not.
"""

from __future__ import annotations

import functools
import os
import platform

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


def flags_with_cpu_options(flags: str, machine: str, jaxlib_version: str) -> str | None:
    """XLA_FLAGS with the options of ``CPU_OPTIONS`` that apply to ``machine``
    (``platform.machine()``) and ``jaxlib_version`` appended, leaving out any
    flag ``flags`` already names; None when there is nothing to add."""
    at = release(jaxlib_version)
    added = [f"{flag}={value}" for flag, value, machines, first, end in CPU_OPTIONS
             if (machines is None or machine.lower() in machines)
             and first <= at and (end is None or at < end) and flag not in flags]
    return " ".join([flags, *added]).strip() if added else None


def _backends_started() -> bool:
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a JAX without it: assume not started
        return False
    return backends_are_initialized()


def set_cpu_options() -> bool:
    """Add the options to ``os.environ["XLA_FLAGS"]`` where they apply and
    JAX's backends have not started; returns whether any was added."""
    from jaxlib.version import __version__ as jaxlib_version

    flags = flags_with_cpu_options(os.environ.get("XLA_FLAGS", ""), platform.machine(), jaxlib_version)
    if flags is None or _backends_started():
        return False
    os.environ["XLA_FLAGS"] = flags
    return True


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

    return dict(QUICK_COMPILE) if jax.default_backend() == "cpu" else {}


#: The XLA option selecting XLA's earlier CPU runtime, which compiles a whole
#: program into one function; jaxlib 0.7 and later have only the thunk runtime.
EARLIER_RUNTIME = "xla_cpu_use_thunk_runtime"


def loop_compiler_options() -> dict:
    """Compiler options for a CPU program that loops over small kernels (a
    single trajectory, an optimization loop): ``{"xla_cpu_use_thunk_runtime":
    False}`` on jaxlib 0.6 with JAX's default backend the CPU, ``{}``
    elsewhere, and ``{}`` where XLA_FLAGS names the option (the user's choice).

    The thunk runtime, the only one from jaxlib 0.7, runs each kernel through
    an executor that may hand it to another thread, and each loop iteration
    pays that per kernel; the earlier runtime compiles the program, loops
    included, into one function (on jaxlib 0.7 and later the small-loop
    threshold set on import does that for one trajectory's loops). Loops at
    batch 1 run several times faster with it and array programs compile
    about 2x longer, and batched operations gain or lose, so the option is
    not set process-wide (the figures per program and release: README.md,
    "Loops at batch 1", and benchmarks/README.md, "Across JAX releases").
    """
    import jax
    from jaxlib.version import __version__ as jaxlib_version

    return loop_options_for(jaxlib_version, os.environ.get("XLA_FLAGS", ""), jax.default_backend())


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
    around its stepping loop (the humanoid to 11 reports, jax 0.9.2: 20.5 s
    to compile and 7.3 ms to run, against 52.8 s and 6.9 ms as one
    function), and its step on a model with constraints, whose projection
    loops sit inside it (an 11-body closed chain, 1,705 steps: 15.7-16.9 s
    to compile and 0.23-0.30 s to run, against 80.7 and 0.12 s)."""
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
