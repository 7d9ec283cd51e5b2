"""Newton's method with an exact line search on MuJoCo's constraint
problem (``simbodyx.soft_constraints``), over its terms (``rows``), with
the implicit derivative."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from simbodyx.soft_constraints.rows import LINE_SEARCH_ITERATIONS, MIN_VALUE


def solve(M, a0, terms: tuple, tolerance, iterations: int, scale):
    """The accelerations a (nu,) minimizing 1/2 (a - a0)' M (a - a0) plus the
    costs of ``terms`` (:class:`Rows`, :class:`Cones`), by Newton's method
    with an exact line search, from a0, until the gradient's norm or a
    step's decrease of the cost, times ``scale`` (1 / (mean inertia * nu),
    as MuJoCo's), is below ``tolerance``, or after ``iterations``; its
    derivative is the implicit one (module docstring)."""
    problem = jax.lax.stop_gradient((M, a0, terms))
    a = jax.lax.stop_gradient(_minimize(*problem, tolerance, iterations, scale))
    return a + _newton_step(M, a0, terms, a)[0]


def _cost(M, a0, terms, a):
    return 0.5 * (a - a0) @ (M @ (a - a0)) + sum(term.cost_at(a) for term in terms)


def _newton_step(M, a0, terms, a):
    """(Newton's step p from a, the cost's gradient g at a)."""
    parts = [term.derivatives(a) for term in terms]
    g = M @ (a - a0) + sum(part[0] for part in parts)
    H = M + sum(part[1] for part in parts)
    return -jsl.cho_solve(jsl.cho_factor(H), g), g


def _line_search(M, a0, terms, a, p):
    """The step length alpha >= 0 minimizing the cost along p from a: the
    root of its slope (nondecreasing, piecewise smooth, at least
    p' M p alpha above its value at 0), by Newton's method on the slope
    kept inside a shrinking bracket, from alpha = 1 (Newton's full step,
    the root when no row changes its piece)."""
    linear, curvature = p @ (M @ (a - a0)), p @ (M @ p)
    slopes = [term.line(a, p) for term in terms]

    def slope(alpha):  # the cost's first and second derivatives along p
        d1, d2 = linear + alpha * curvature, curvature
        for part in slopes:
            e1, e2 = part(alpha)
            d1, d2 = d1 + e1, d2 + e2
        return d1, d2

    start = slope(0.0)[0]
    high = jnp.where(start < 0, -start / jnp.maximum(curvature, MIN_VALUE), 0.0)  # the slope is >= 0 there
    alpha = jnp.minimum(1.0, high)

    eps = 4 * jnp.finfo(a.dtype).eps

    def searching(carry):
        i, alpha, low, high, d1, _ = carry
        return (i < LINE_SEARCH_ITERATIONS) & (high - low > eps * high) & (jnp.abs(d1) > eps * jnp.abs(start))

    def narrow(carry):
        i, alpha, low, high, d1, d2 = carry
        low, high = jnp.where(d1 < 0, alpha, low), jnp.where(d1 < 0, high, alpha)
        newton = alpha - d1 / jnp.maximum(d2, MIN_VALUE)
        alpha = jnp.where((newton > low) & (newton < high), newton, 0.5 * (low + high))
        return i + 1, alpha, low, high, *slope(alpha)

    return jax.lax.while_loop(searching, narrow, (0, alpha, jnp.zeros_like(high), high, *slope(alpha)))[1]


def _minimize(M, a0, terms, tolerance, iterations: int, scale):
    def improving(carry):
        i, _, _, g, _, decrease = carry
        return (i < iterations) & (scale * jnp.linalg.norm(g) > tolerance) & (scale * decrease > tolerance)

    def iterate(carry):
        i, a, p, _, cost, _ = carry
        a = a + _line_search(M, a0, terms, a, p) * p
        p, g = _newton_step(M, a0, terms, a)
        new_cost = _cost(M, a0, terms, a)
        return i + 1, a, p, g, new_cost, cost - new_cost

    p, g = _newton_step(M, a0, terms, a0)
    start = (0, a0, p, g, _cost(M, a0, terms, a0), jnp.asarray(jnp.inf, a0.dtype))
    return jax.lax.while_loop(improving, iterate, start)[1]
