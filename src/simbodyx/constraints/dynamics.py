"""Forward dynamics with constraints (Simbody's realizeAcceleration):

    M udot + G^T lambda = f,   G udot = b

with lambda the least-squares (pseudo-inverse) solution, so redundant
constraints share the load with the minimum-norm multipliers and udot is
still exact (spec/Constraint_and_System.md A.2):

    udot0  = M^-1 f                       (the tree's accelerations)
    lambda = pinv(W) (G udot0 - b),       W = G M^-1 G^T
    udot   = udot0 - M^-1 G^T lambda

udot0 is the tree's forward dynamics (the articulated-body method), whose
articulation factors M^-1 = L^T D^-1 L (``aba.innovations``). Each row g_i
of G enters as the forces G^T e_i of its constraint (body forces and
mobility forces, no Jacobian formed), and only the inward vector sweep
runs for it, over the paths from the constrained bodies to Ground alone
(``tree.restricted``: L g_i is zero elsewhere): W_ij = (L g_i)^T D^-1 (L g_j).
The correction M^-1 G^T lambda is then one outward sweep of
sum_i lambda_i L g_i over the whole tree. Nothing nu x nu is formed.
Locked mobilities keep their prescribed udot: M^-1 acts on the free ones
(M_ff^-1), so the lock forces absorb the constraint forces there. Disabled
constraints' rows are zeroed, which gives them lambda = 0.

Differentiated implicitly (a custom JVP, forward and reverse mode): with
R = M udot + f_inertial - f + G^T lambda and E = G udot - b, the residual
and the acceleration errors, both zero at the solution, and their tangents
dR, dE at fixed (udot, lambda),

    d lambda = W^+ (G M^-1 (-dR) + dE) + P dG y + W^+ W^+ G M^-1 dG^T n
    d udot   = M^-1 (-dR - G^T d lambda)

the derivative of the pseudo-inverse solution at constant rank, where
P = 1 - W W^+ projects on the redundant combinations of rows,
y = M^-1 G^T W^+ lambda and n = a - W lambda the part of a = G udot0 - b that W
cannot reach (the last two terms vanish without redundant rows, and the
last one whenever the constraints are consistent). The rule costs two
solves with M (``aba.symmetric_solve``, whose transposes reverse mode
calls), evaluates G^T for lambda and n together, and reuses the primal's
factorization of W and its rows L g_i: M^-1 G^T of a multiplier-like
vector is one outward sweep of their combination, as in the primal (y
and the last term of d udot). Nothing of the articulation or of the
factorizations is differentiated; second derivatives differentiate this
rule, and those with it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx import tree
from simbodyx._xla import trace_context
from simbodyx.algorithms import aba, coordinates
from simbodyx.algorithms.accelerations import body_accelerations_tangent
from simbodyx.algorithms.rnea import residual_forces
from simbodyx.constraints.equations import Equations
from simbodyx.linalg import min_norm_solver


def constrained_forward_dynamics(topology, x: aba.ForwardInputs, t, disabled=None):
    """(udot (nu,), A_GB (nb, 6), multipliers (m,) in [P; V; A] order) for
    the forward-dynamics inputs ``x`` at time ``t`` (s); ``disabled``: the
    State's per-constraint disabled flags (None: all enabled)."""
    return _constrained(topology, x, t, disabled)


def _equations(topology, x: aba.ForwardInputs, t):
    return Equations(topology, x.instance.constraints, t, x.q, x.position.X_GB, V_GB=x.velocity.V_GB,
                     qdot=x.velocity.qdot, u=x.u)


@trace_context.custom_jvp(nondiff_argnums=(0,))
def _constrained(topology, x, t, disabled):
    return _solve(topology, x, t, disabled)[0]


def _solve(topology, x: aba.ForwardInputs, t, disabled):
    """((udot, A_GB, multipliers), what the derivative rule reuses)."""
    eqs = _equations(topology, x, t)
    layout, dtype = eqs.layout, x.u.dtype
    with jax.named_scope("tree_accelerations"):
        udot0, A0, art = aba.forward_dynamics_articulated(topology, x)
    with jax.named_scope("constraint_matrix"):
        F, g = (layout.zero_disabled(part, disabled) for part in eqs.row_forces())  # each row's G^T e_i
        paths = tree.restricted(topology.schedule, eqs.swept_bodies())  # where the rows' sweeps are nonzero
        art_paths = aba.restrict(art, paths)
        bodies = eqs.force_bodies()
        rows = jax.vmap(lambda g, F: aba.innovations(paths, art_paths, g, F, bodies))(g, F)  # L g_i
        W = aba.innovation_product(art_paths, rows, rows)
        aerr = eqs.acceleration_errors(A0, coordinates.calc_qdotdot(topology, x.q, x.u, udot0), udot0)
        aerr = layout.zero_disabled(aerr, disabled)
    with jax.named_scope("constraint_multipliers"):
        pinv = min_norm_solver(W, inverse_formed=True)  # many solves; the rule below differentiates, not JAX

        def combined(weights):  # sum_i weights_i L g_i, in the full layout
            return tree.expand_levels(paths, aba.combine_innovations(weights, rows), art.u_bar)

        multipliers = pinv(aerr)
        d_udot, d_A = aba.respond(topology, art, combined(multipliers), dtype)
    return (udot0 - d_udot, A0 - d_A, multipliers), (eqs, art, combined, W, pinv, aerr)


@_constrained.defjvp
def _constrained_jvp(topology, primals, tangents):
    """The rule of the module notes."""
    (x, t, disabled), (dx, dt, _) = primals, tangents
    (udot, A_GB, multipliers), (eqs, art, combined, W, pinv, aerr) = _solve(topology, x, t, disabled)
    layout, position = eqs.layout, x.position
    free = None if x.prescribed is None else 1 - x.prescribed[0]
    udot_given = jnp.zeros_like(udot) if x.prescribed is None else x.prescribed[0] * dx.prescribed[1]
    y = aba.respond(topology, art, combined(pinv(multipliers)), udot.dtype)[0]
    n = aerr - W @ multipliers

    def linear_parts(x, t, udot):  # x without its locks: their udot enter as udot's tangent
        e = _equations(topology, x, t)
        GT_multipliers, GT_n = jax.vmap(lambda v: e.generalized_forces(x.position, v))(jnp.stack([multipliers, n]))
        R = residual_forces(topology, x.instance, x.position, x.velocity, udot, x.mobility_forces,
                            x.body_forces)[0] + GT_multipliers
        E = e.acceleration_errors_at(x.position, x.velocity, udot)
        return R, E, e.multiply_by_g(x.position, y), GT_n

    with jax.named_scope("linearized_constrained_dynamics"):
        _, (dR, dE, dG_y, dGT_n) = jax.jvp(linear_parts, (x._replace(prescribed=None), t, udot),
                                           (dx._replace(prescribed=None), dt, udot_given))

        def m_inv(v):
            return aba.symmetric_solve(topology, x.instance, position, art, v, free)

        def g_times(v):
            return layout.zero_disabled(eqs.multiply_by_g(position, v), disabled)

        y1, y2 = jax.vmap(m_inv)(jnp.stack([-dR, dGT_n]))
        G_y1, G_y2 = jax.vmap(g_times)(jnp.stack([y1, y2]))
        dG_y = layout.zero_disabled(dG_y, disabled)
        main, redundant = pinv(jnp.stack([G_y1 + layout.zero_disabled(dE, disabled) + pinv(G_y2), dG_y], axis=1)).T
        d_multipliers = main + dG_y - W @ redundant
        d_udot = udot_given + y1 - aba.respond(topology, art, combined(d_multipliers), udot.dtype)[0]
    d_A = body_accelerations_tangent(topology, position, x.velocity, udot, dx.position, dx.velocity, d_udot)
    return (udot, A_GB, multipliers), (d_udot, d_A, d_multipliers)
