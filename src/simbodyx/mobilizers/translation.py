"""Translation (Cartesian): q = p_FM (in F), u = v_FM = qdot; H = [0; 1]."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit


@dataclasses.dataclass(frozen=True)
class Translation(Mobilizer):
    nq = 3
    nu = 3

    def X_FM(self, q, params):
        return jnp.eye(3, dtype=q.dtype), q

    def H_FM(self, q, params):
        return rows(*(unit(k, q.dtype, linear=True) for k in range(3)))
