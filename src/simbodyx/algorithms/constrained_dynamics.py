"""Forward dynamics with constraints (Simbody's realizeAcceleration):

    M udot + G^T lambda = f,   G udot = b

with lambda the least-squares (pseudo-inverse) solution, so redundant
constraints share the load with the minimum-norm multipliers and udot is
still exact (spec/Constraint_and_System.md A.2):

    udot0  = M^-1 f                       (the tree's accelerations)
    lambda = pinv(G M^-1 G^T) (G udot0 - b)
    udot   = udot0 - M^-1 G^T lambda

udot0 is the tree's forward dynamics (the articulated-body method), whose
articulation then serves the m solves M^-1 g_i (vector sweeps only); G
comes from the rows of J of the bodies the constraints act on, without a
sweep; nothing nu x nu is formed. Locked mobilities keep their
prescribed udot: M^-1 acts on the free ones (M_ff^-1), so the lock forces
absorb the constraint forces there. Disabled constraints' rows are zeroed,
which gives them lambda = 0.

Derivatives come by composition, each piece with an implicit rule: udot0
has ``aba.forward_dynamics``' analytic one, the solves with M are
``jax.lax.custom_linear_solve`` (d x = M^-1 (d b - dM x), never the
factorization's derivative), the pseudo-inverse solve
(``simbodyx.linalg.min_norm_solve``) is differentiated through its
Cholesky factorizations at constant rank (finite for redundant
constraints, whose rank does not change), and G and b are derivatives of
the constraints' own errors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx.algorithms import aba, coordinates
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.constraints.equations import Equations
from simbodyx.linalg import min_norm_solve


def constrained_forward_dynamics(topology, instance, t, q, u, position, velocity, mobility_forces, body_forces,
                                 prescribed=None, disabled=None):
    """(udot (nu,), A_GB (nb, 6), multipliers (m,) in [P; V; A] order)."""
    eqs = Equations(topology, instance.constraints, t, q, position.X_GB, velocity.V_GB, velocity.qdot, u)
    with jax.named_scope("tree_accelerations"):
        udot0, A0, art = aba.forward_dynamics_articulated(topology, instance, q, u, position, velocity,
                                                          mobility_forces, body_forces, prescribed)
    free = None if prescribed is None else 1 - prescribed[0]

    def m_inv(v):
        return aba.symmetric_solve(topology, instance, position, art, v, free)

    with jax.named_scope("constraint_matrix"):
        G = eqs.layout.zero_disabled(eqs.g_matrix(position), disabled)
        aerr = eqs.acceleration_errors(A0, coordinates.calc_qdotdot(topology, q, u, udot0), udot0)
        aerr = eqs.layout.zero_disabled(aerr, disabled)
        Y = jax.vmap(m_inv)(G)  # rows M^-1 g_i
    with jax.named_scope("constraint_multipliers"):
        # W = G M^-1 G^T as a product and a sum, which XLA fuses (a batch of small dots it does not)
        W = jnp.sum(G[:, None, :] * Y[None, :, :], axis=-1)
        multipliers = min_norm_solve(W, aerr)
        udot = udot0 - Y.T @ multipliers
    A_GB = body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)
    return udot, A_GB, multipliers
