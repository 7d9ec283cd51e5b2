"""Body accelerations from udot: A_GB = J udot + JDot u.

Outward recursion (differentiating V_GB = shift(V_GP, r) + H_PB_G u):
A_GB = Phi(r) A_GP + H_PB_G udot + a_c, with a_c the mobilizer Coriolis
acceleration cached at the Velocity stage. Ground's row is zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx import tree
from simbodyx.algorithms.kinematics import sum_per_body
from simbodyx.algorithms.per_body import parent_offsets
from simbodyx.spatial.vectors import shift_velocity
from simbodyx.topology import Topology


def body_accelerations(topology: Topology, position, udot, coriolis=None):
    """(nb, 6) A_GB in G for the given udot; ``coriolis`` (nb, 6) is the
    mobilizer Coriolis term (None: zero velocities)."""
    rel = sum_per_body(topology, position.H_PB_G, udot)
    if coriolis is not None:
        rel = rel + coriolis
    r = parent_offsets(topology, position.X_GB)

    def step(A_GP, inputs):
        r_b, rel_b = inputs
        return shift_velocity(A_GP, r_b) + rel_b

    return tree.outward(topology.schedule, step, jnp.zeros(6, udot.dtype), (r, rel), vectorized=True)


def body_accelerations_tangent(topology: Topology, position, velocity, udot, position_dot, velocity_dot, udot_dot):
    """(nb, 6) tangent of ``body_accelerations`` with the velocity cache's
    Coriolis term, along tangents of the caches and of udot."""
    return jax.jvp(lambda position, velocity, udot: body_accelerations(topology, position, udot,
                                                                       velocity.mobilizer_coriolis),
                   (position, velocity, udot), (position_dot, velocity_dot, udot_dot))[1]
