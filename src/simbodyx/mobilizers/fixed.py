"""Zero-dof mobilizers: Ground's placeholder and Weld (X_FM = identity)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer


@dataclasses.dataclass(frozen=True)
class Weld(Mobilizer):
    nq = 0
    nu = 0

    def X_FM(self, q, params):
        return jnp.eye(3, dtype=q.dtype), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        return jnp.zeros((0, 6), q.dtype)


@dataclasses.dataclass(frozen=True)
class Ground(Weld):
    """Body 0's mobilizer: Ground welded to the world frame."""
