"""Translation (Cartesian): q = p_FM (in F), u = v_FM = qdot; H = [0; 1]."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit
from simbodyx.mobilizers.fitting import pick


@dataclasses.dataclass(frozen=True)
class Translation(Mobilizer):
    nq = 3
    nu = 3

    def X_FM(self, q, params):
        return jnp.eye(3, dtype=q.dtype), q

    def H_FM(self, q, params):
        return rows(*(unit(k, q.dtype, linear=True) for k in range(3)))

    def fit_q(self, q, params, R=None, p=None):
        return pick(p, lambda p: p, q)
