"""The JAX and jaxlib releases of this process, and the choices simbodyx
makes by release.

Each switch below is read when a program is traced, so setting it (for
example ``simbodyx._xla.releases.SPLIT_TRANSPOSES = False``) before
tracing overrides the release's choice for the programs traced after.
"""

from __future__ import annotations

import re

import jax
from jaxlib.version import __version__ as JAXLIB_VERSION


def release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a version string such as ``"0.10.2"`` or ``"0.8.1.dev20251020"``."""
    numbers = [int(n) for n in re.findall(r"\d+", version)[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


#: This process's releases, as :func:`release` tuples.
JAX = release(jax.__version__)
JAXLIB = release(JAXLIB_VERSION)

#: Whether the derivatives of the tree's row gathers that ``tree._gather``
#: does not split are transposed as splits of the cotangent (summed, one per
#: occurrence of a row, then materialized) rather than as one scatter-add.
#: XLA's newer fusion emitters, the only ones from jaxlib 0.11, run the
#: splits faster on every model; with the older ones chain7's gradient is
#: faster with the scatter-adds (docs/explanation/performance.md).
SPLIT_TRANSPOSES = JAXLIB >= (0, 11, 0)
