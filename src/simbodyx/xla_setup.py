"""The one XLA option simbodyx sets: importing simbodyx caps the machine code
that XLA's CPU backend generates at AVX2 (``--xla_cpu_max_isa=AVX2``).

Why: on an x86-64 CPU with AVX-512, XLA emitted 512-bit code for the
dynamics' small fused kernels, and it ran 1.2-1.5x slower than AVX2 code:
one core of an AMD EPYC (Zen 4) with jaxlib 0.6.2, per state, forward
dynamics chain7 2.36 -> 1.74 us and humanoid 9.6 -> 6.4 us, the humanoid's
gradient 23.1 -> 18.5 us (benchmarks/README.md, "Why the code is as it is"). On an Intel
Xeon with jax 0.11.2 the two were within noise of each other. On a CPU
without AVX-512 the cap changes nothing.

XLA reads XLA_FLAGS once, when JAX starts its CPU backend, so the cap is
added only while that has not happened (importing jax starts nothing; the
first array or computation does): import simbodyx before computing with
JAX. A ``--xla_cpu_max_isa`` already in XLA_FLAGS is the user's choice and
is left alone (``XLA_FLAGS=--xla_cpu_max_isa=AVX512`` keeps AVX-512), and
nothing is done on other processors. The cap applies to every JAX
computation of the process on the CPU, simbodyx's or not.
"""

from __future__ import annotations

import os
import platform

#: The highest instruction set XLA's CPU backend may use, unless told otherwise.
CPU_ISA_CAP = "AVX2"
_ISA_FLAG = "--xla_cpu_max_isa"


def flags_with_isa_cap(flags: str, machine: str) -> str | None:
    """XLA_FLAGS with the cap appended, or None when ``flags`` already names
    an instruction-set cap or ``machine`` (``platform.machine()``) is not x86-64."""
    if machine.lower() not in ("x86_64", "amd64") or _ISA_FLAG in flags:
        return None
    return f"{flags} {_ISA_FLAG}={CPU_ISA_CAP}".strip()


def _backends_started() -> bool:
    try:
        from jax._src.xla_bridge import backends_are_initialized
    except ImportError:  # a JAX without it: assume not started
        return False
    return backends_are_initialized()


def cap_cpu_isa() -> bool:
    """Add the cap to ``os.environ["XLA_FLAGS"]`` where it applies and JAX's
    backends have not started; returns whether it was added."""
    flags = flags_with_isa_cap(os.environ.get("XLA_FLAGS", ""), platform.machine())
    if flags is None or _backends_started():
        return False
    os.environ["XLA_FLAGS"] = flags
    return True
