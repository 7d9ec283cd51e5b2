"""Contact-style constraints: NoSlip1D (Simbody's rolling without slip
along one direction, two moving bodies touching at a point of a case body)."""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx.constraints.base import Constraint
from simbodyx.constraints.geometric import material_point_velocity, unit3, vec3


class NoSlip1D(Constraint):
    """At a contact point P fixed on the case body, the two moving bodies'
    material points at P have equal velocity along a direction n fixed on the
    case body (0, 1, 0): verr = (v_AP1 - v_AP0) . n_A."""

    contact_point: jnp.ndarray
    direction: jnp.ndarray

    def __init__(self, case_body, contact_point, direction, moving_body0, moving_body1, *, name=None):
        self.contact_point = vec3(contact_point, "contact_point", "NoSlip1D")
        self.direction = unit3(direction, "direction", "NoSlip1D")
        self._register("NoSlip1D", bodies=(case_body, moving_body0, moving_body1), counts=(0, 1, 0), name=name)

    def velocity_errors(self, k, V_AB, u):
        X = k.X_AB
        p_AP = X[0].apply(self.contact_point)
        n_A = X[0].rotate(self.direction)
        v0 = material_point_velocity(X[1], V_AB[1], p_AP)
        v1 = material_point_velocity(X[2], V_AB[2], p_AP)
        return ((v1 - v0) @ n_A)[None]
