"""Forward dynamics with constraints (Simbody's realizeAcceleration):

    M udot + G^T lambda = f,   G udot = b

with lambda the least-squares (pseudo-inverse) solution, so redundant
constraints share the load with the minimum-norm multipliers and udot is
still exact (spec/Constraint_and_System.md A.2):

    udot0  = M^-1 f                       (the tree's accelerations)
    lambda = pinv(G M^-1 G^T) (G udot0 - b)
    udot   = udot0 - M^-1 G^T lambda

M^-1 is one articulated-body factorization reused for the m + 1 solves
(vector sweeps only); G^T is m O(n) sweeps; nothing nu x nu is formed.
Locked mobilities keep their prescribed udot: M^-1 acts on the free ones
(M_ff^-1), so the lock forces absorb the constraint forces there. Disabled
constraints' rows are zeroed, which gives them lambda = 0.

Derivatives come by composition, each piece with an implicit rule: the
solves with M are ``jax.lax.custom_linear_solve`` (d x = M^-1 (d b - dM x),
never the factorization's derivative), the pseudo-inverse solve
(``simbodyx.linalg.min_norm_solve``) is differentiated through its
rank-revealing factorization (finite for redundant constraints, whose
rank does not change), and G and b are derivatives of the constraints'
own errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx.algorithms import aba
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.rnea import residual_forces
from simbodyx.constraints.equations import Equations
from simbodyx.linalg import min_norm_solve


def constrained_forward_dynamics(topology, instance, t, q, u, position, velocity, mobility_forces, body_forces,
                                 prescribed=None, disabled=None):
    """(udot (nu,), A_GB (nb, 6), multipliers (m,) in [P; V; A] order)."""
    eqs = Equations(topology, instance.constraints, t, q, position.X_GB, velocity.V_GB, velocity.qdot, u)
    dtype = u.dtype
    free = None if prescribed is None else 1 - prescribed[0]
    with jax.named_scope("articulated_mass_matrix"):
        zeros = jnp.zeros((topology.num_bodies, 6), dtype)
        art = aba.articulate(topology, instance, position, zeros, zeros, jnp.zeros_like(u), free)

    def m_inv(v):
        return aba.symmetric_solve(topology, instance, position, art, v, free)

    with jax.named_scope("tree_accelerations"):
        udot_p = jnp.zeros_like(u) if prescribed is None else prescribed[0] * prescribed[1]
        f_residual = residual_forces(topology, instance, position, velocity, udot_p, mobility_forces, body_forces)[0]
        udot0 = udot_p - m_inv(f_residual)
    with jax.named_scope("constraint_multipliers"):
        G = eqs.g_matrix(position)
        enabled = eqs.layout.enabled_rows(disabled)
        aerr = eqs.acceleration_errors_at(position, velocity, udot0)
        if enabled is not None:
            G, aerr = G * enabled[:, None].astype(dtype), aerr * enabled.astype(dtype)
        Y = jax.vmap(m_inv)(G)  # rows M^-1 g_i
        A = G @ Y.T
        multipliers = min_norm_solve(A, aerr)
        udot = udot0 - Y.T @ multipliers
    A_GB = body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)
    return udot, A_GB, multipliers
