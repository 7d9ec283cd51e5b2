"""check_derivatives: a hand-written constraint method against the one
automatic differentiation derives (the seed's consistency contract)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.trace_context import per_context_jit
from simbodyx.algorithms import coordinates, rnea
from simbodyx.constraints.base import Constraint
from simbodyx.constraints.equations import Equations
from simbodyx.stage import Stage


def check_derivatives(constraint: Constraint, state, seed: int = 0) -> dict[str, float]:
    """Largest absolute difference between each method ``constraint`` computes
    (overridden or not) and the automatic one, at ``state`` (realized to
    Velocity) and random accelerations and multipliers: pverr against d/dt
    perr, paerr against d/dt pverr, vaerr against d/dt verr, and the generalized
    constraint forces against the transpose of the acceleration-level errors.
    Zeros mean consistent; Simbody's Ball and Weld differ off the manifold by
    design (their velocity errors are taken at the coincident material point)."""
    state.require(Stage.Velocity, "check_derivatives")
    return {name: float(x) for name, x in _differences(state, constraint.index, seed).items()}


@per_context_jit(eqx.filter_jit)
def _differences(state, index: int, seed: int) -> dict:
    """check_derivatives' differences as arrays (the random numbers are the
    program's constants)."""
    c = state.instance.constraints[index]
    eqs = Equations.of_state(state, (c,))
    k = eqs.kinematics(c)
    rng = np.random.default_rng(seed)
    dtype = state.u.dtype
    A = jnp.asarray(rng.standard_normal(k.V_AB.shape), dtype)
    qdd = tuple(jnp.asarray(rng.standard_normal(x.shape), dtype) for x in k.qdot)
    udot = tuple(jnp.asarray(rng.standard_normal(x.shape), dtype) for x in k.u)
    out = {}

    def diff(a, b):
        return jnp.max(jnp.abs(jnp.asarray(a) - jnp.asarray(b)), initial=0.0)

    if c.mp:
        out["position_dot_errors"] = diff(c.position_dot_errors(k, k.V_AB, k.qdot),
                                          Constraint.position_dot_errors(c, k, k.V_AB, k.qdot))
        out["position_dotdot_errors"] = diff(c.position_dotdot_errors(k, A, qdd),
                                             Constraint.position_dotdot_errors(c, k, A, qdd))
    if c.mv:
        out["velocity_dot_errors"] = diff(c.velocity_dot_errors(k, A, udot),
                                          Constraint.velocity_dot_errors(c, k, A, udot))
    lam = jnp.asarray(rng.standard_normal(c.num_equations), dtype)
    F, fq, fu = eqs.forces(lam)
    F_auto, fq_auto, fu_auto = eqs.transpose(c, lam)
    top = state.topology

    def generalized(F, fq, fu):
        applied = rnea.jacobian_transpose_times(top, state.position, F)
        return applied + coordinates.multiply_by_n(top, state.q, fq, True) + fu

    out["constraint_forces"] = diff(generalized(F, fq, fu), generalized(F_auto, fq_auto, fu_auto))
    return out
