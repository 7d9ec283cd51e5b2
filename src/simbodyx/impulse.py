"""Simbody's projected Gauss-Seidel impulse solver (PGSImpulseSolver), with a
fixed shape so that it runs under ``jit``, ``vmap`` and ``grad``.

Given the constraint-space compliance A = G M^-1 G^T (m x m) and a right
side v (the constraint velocity errors to remove), find impulses pi with

    A pi = v                                  on participating rows, subject to
    sign_k pi_k <= 0                          unilateral contact normals and speeds
    |(pi_x, pi_y)_k| <= mu_k |pi_n + known_n| the normals' friction (a Coulomb cone)
    lo_j <= pi_j <= hi_j                      bounded rows
    |pi_F| <= limit_l                         a friction whose normal force is known
                                              (1 to 3 rows F, Simbody's state-limited friction)

in Simbody's sign: a multiplier opposes the force it stands for, so the
velocity errors after the impulse are v - A pi. Unconditional rows (the
bilateral constraints) have no bound. ``known`` impulses (Poisson expansion)
are applied in full and moved to the right side; their normals do not
participate, their friction does.

Every row of the ``Rows`` structure is in the program; a boolean per row
says whether it participates this time, so a batch of States with different
contact sets shares one compiled program. Each sweep visits the
unconditional rows, the unilateral speed rows, the bounded rows, the
state-limited frictions (their rows from the same row sums, then scaled
back into their ball), then every normal, then every friction pair (both
rows from the same row sums, then scaled back into the cone), with successive over-relaxation (SOR 1.2, reduced by 0.8 down to 0.1 whenever the error
grows). The sweeps stop once the RMS error of the enforced rows
(participating and not at a bound) is below ``convergence_tolerance``, or
after ``max_iterations``; under ``vmap`` the batch sweeps until its last
member is done (the others keep their answers).

Derivatives are not taken through the sweeps: the solution is a fixed point
of one projected update of every row, and its derivative is the implicit
one of that fixed point with the bounds that hold there (normals pushing or
off, friction rolling or sliding at the cone's edge in its direction). It
is exact wherever the set of bounds does not change, for forward and
reverse mode alike, and costs one m x m pseudo-inverse.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module


@dataclasses.dataclass(frozen=True)
class Rows:
    """The static row structure of an impulse problem (indices into the m rows)."""

    unconditional: tuple = ()  #: rows without bounds
    normal: tuple = ()  #: (nc,) each unilateral contact's normal row
    sign: tuple = ()  #: (nc,) its sign convention, 1 or -1
    friction: tuple = ()  #: (nf,) pairs (row x, row y) of friction rows
    friction_contact: tuple = ()  #: (nf,) the contact each pair belongs to
    speed: tuple = ()  #: unilateral speed rows (ratchets)
    speed_sign: tuple = ()  #: their sign conventions
    bounded: tuple = ()  #: rows whose impulse lies within given bounds
    limited: tuple = ()  #: tuples of 1 to 3 rows whose impulse vector lies within a given length

    @property
    def num_contacts(self) -> int:
        return len(self.normal)


class Problem(NamedTuple):
    """One impulse problem's numbers (its rows' structure is :class:`Rows`)."""

    A: jnp.ndarray  #: (m, m) the rows' compliance G M^-1 G^T
    rhs: jnp.ndarray  #: (m,) the velocity change each row must make
    participating: jnp.ndarray  #: (m,) bool: the rows that take part
    mu: jnp.ndarray  #: (nc,) the effective friction coefficients
    known: jnp.ndarray  #: (m,) impulses applied in full
    bounds: jnp.ndarray  #: (len(rows.bounded), 2) each bounded row's [lowest, highest]
    limits: jnp.ndarray  #: (len(rows.limited),) each limited group's largest impulse length


class SolveStats(Module):
    """What one solve did (arrays, batched under vmap)."""

    residual: jnp.ndarray  #: RMS error of the enforced rows at the last sweep
    iterations: jnp.ndarray  #: int32 sweeps until converged (max_iterations when not)
    converged: jnp.ndarray  #: bool
    active: jnp.ndarray  #: (nc,) bool: the normal takes part and is not at its bound (Simbody's UniActive)


class PGSImpulseSolver(Module):
    """Simbody's PGSImpulseSolver settings (static): its defaults are a
    convergence tolerance of 1e-6 on the RMS error, 100 sweeps and SOR 1.2."""

    convergence_tolerance: float = eqx.field(static=True, default=1e-6)
    max_iterations: int = eqx.field(static=True, default=100)
    sor: float = eqx.field(static=True, default=1.2)

    def __check_init__(self):
        if not (np.isfinite(self.convergence_tolerance) and self.convergence_tolerance > 0):
            raise ValueError(f"PGSImpulseSolver: convergence_tolerance must be positive, got "
                             f"{self.convergence_tolerance}")
        if not (isinstance(self.max_iterations, int) and self.max_iterations >= 1):
            raise ValueError(f"PGSImpulseSolver: max_iterations must be a positive int, got {self.max_iterations!r}")
        if not 0 < self.sor < 2:
            raise ValueError(f"PGSImpulseSolver: sor must be in (0, 2), got {self.sor}")

    def get_convergence_tol(self) -> float:
        return self.convergence_tolerance

    def get_max_iterations(self) -> int:
        return self.max_iterations

    def solve(self, A, rhs, rows: Rows, participating, mu=None, *, known=None, bounds=None, limits=None):
        """(pi (m,), SolveStats): the impulses that remove ``rhs`` on the
        participating rows within the bounds, non-participating rows zero;
        ``mu`` (nc,) the effective friction coefficients, ``known`` (m,) impulses
        applied in full (their rows must not participate), ``bounds``
        (len(rows.bounded), 2) each bounded row's [lowest, highest] impulse,
        ``limits`` (len(rows.limited),) each limited group's largest impulse."""
        dtype = A.dtype
        mu = jnp.zeros(rows.num_contacts, dtype) if mu is None else mu
        known = jnp.zeros(A.shape[0], dtype) if known is None else known
        bounds = jnp.zeros((len(rows.bounded), 2), dtype) if bounds is None else bounds
        limits = jnp.zeros(len(rows.limited), dtype) if limits is None else limits
        problem = Problem(A, rhs, jnp.asarray(participating, bool), mu, known, bounds, limits)
        pi, *stats = _solve(self, rows, problem)
        return pi, SolveStats(*stats)

    def iterate(self, rows: Rows, problem: Problem):
        """The sweeps themselves: (pi, residual, iterations, converged, active)."""
        A, rhs, participating, mu, known, bounds, limits = problem
        dtype = A.dtype
        m, nc = A.shape[0], rows.num_contacts
        rhs = rhs - A @ known
        known_normal = known[np.asarray(rows.normal, np.int32)]
        diagonal = jnp.diagonal(A)
        p = jnp.maximum(jnp.sum(participating), 1).astype(dtype)

        def update(pi, r):
            """(pi[r] updated, the squared error of row r), unbounded."""
            er = rhs[r] - A[r] @ pi
            step = jnp.where(participating[r] & (diagonal[r] > 0), er / jnp.where(diagonal[r] > 0, diagonal[r], 1.0), 0)
            return er, step

        def sweep(pi, sor):
            """One Gauss-Seidel pass over the rows (unrolled: rows are few and static)."""
            enforced, active = jnp.zeros((), dtype), []
            for r in rows.unconditional:
                er, step = update(pi, r)
                pi = pi.at[r].add(sor * step)
                enforced += jnp.where(participating[r], er * er, 0)
            for r, sign in zip(rows.speed, rows.speed_sign):
                er, step = update(pi, r)
                value, off = _one_sided(sign, pi[r] + sor * step)
                pi = pi.at[r].set(value)
                enforced += jnp.where(participating[r] & ~off, er * er, 0)
            for r, (lo, hi) in zip(rows.bounded, bounds):
                er, step = update(pi, r)
                value = pi[r] + sor * step
                pi = pi.at[r].set(jnp.clip(value, lo, hi))
                enforced += jnp.where(participating[r] & (lo < value) & (value < hi), er * er, 0)
            for group, limit in zip(rows.limited, limits):
                updates = [update(pi, r) for r in group]
                values, sliding = _into_ball(jnp.stack([pi[r] + sor * step for r, (_, step) in zip(group, updates)]),
                                             limit)
                pi = pi.at[np.asarray(group, np.int32)].set(values)
                enforced += jnp.where(participating[group[0]] & ~sliding, sum(er * er for er, _ in updates), 0)
            for r, sign in zip(rows.normal, rows.sign):
                er, step = update(pi, r)
                value, off = _one_sided(sign, pi[r] + sor * step)
                on = participating[r] & ~off
                pi = pi.at[r].set(value)
                enforced += jnp.where(on, er * er, 0)
                active.append(on)
            for (rx, ry), k in zip(rows.friction, rows.friction_contact):
                (ex, sx), (ey, sy) = update(pi, rx), update(pi, ry)
                limit = mu[k] * jnp.abs(pi[rows.normal[k]] + known_normal[k])
                fx, fy, sliding = _into_cone(pi[rx] + sor * sx, pi[ry] + sor * sy, limit)
                pi = pi.at[rx].set(fx).at[ry].set(fy)
                enforced += jnp.where(participating[rx] & ~sliding, ex * ex + ey * ey, 0)
            return pi, jnp.sqrt(enforced / p), jnp.stack(active) if active else jnp.zeros(0, bool)

        def unfinished(carry):
            return ~carry[3] & (carry[4] < self.max_iterations)

        def body(carry):
            pi, sor, previous, _, iterations, _, _ = carry
            pi, rms, active = sweep(pi, sor)
            relaxed = jnp.where((rms > previous) & (sor > 0.1), jnp.maximum(0.8 * sor, 0.1), sor)
            return pi, relaxed, rms, rms < self.convergence_tolerance, iterations + 1, rms, active

        carry = (jnp.zeros(m, dtype), jnp.asarray(self.sor, dtype), jnp.asarray(jnp.inf, dtype), ~jnp.any(participating),
                 jnp.zeros((), jnp.int32), jnp.zeros((), dtype), jnp.zeros(nc, bool))
        pi, _, _, done, iterations, residual, active = jax.lax.while_loop(unfinished, body, carry)
        return pi, residual, iterations, done, active


def _one_sided(sign, value):
    """(value, off): ``value`` where sign * value <= 0, zero where it is not (off)."""
    off = sign * value > 0
    return jnp.where(off, 0.0, value), off


def _into_cone(fx, fy, limit):
    """(fx, fy, sliding): the pair scaled back onto |f| <= limit where it lies outside."""
    (fx, fy), sliding = _into_ball(jnp.stack([fx, fy]), limit)
    return fx, fy, sliding


def _into_ball(f, limit):
    """(f, sliding): the vector f (k, ...) scaled back onto |f| <= limit where it lies outside."""
    norm2 = jnp.sum(f * f, axis=0)
    sliding = norm2 > limit * limit
    scale = jnp.where(sliding, limit / jnp.sqrt(jnp.where(sliding, norm2, 1.0)), 1.0)
    return f * scale, sliding


def _fixed_point_map(rows: Rows, pi, problem: Problem):
    """One projected Jacobi update of every row from ``pi`` minus ``pi``: zero
    exactly at the solver's solutions (a sweep that changes nothing), whatever
    the relaxation, so its derivatives give the solution's."""
    A, rhs, participating, mu, known, bounds, limits = problem
    diagonal = jnp.diagonal(A)
    ok = participating & (diagonal > 0)
    y = jnp.where(ok, pi + (rhs - A @ (pi + known)) / jnp.where(diagonal > 0, diagonal, 1.0), 0.0)
    for index, signs in ((rows.speed, rows.speed_sign), (rows.normal, rows.sign)):
        if index:
            index, signs = np.asarray(index, np.int32), np.asarray(signs)
            y = y.at[index].set(_one_sided(signs, y[index])[0])
    if rows.bounded:
        bounded = np.asarray(rows.bounded, np.int32)
        y = y.at[bounded].set(jnp.clip(y[bounded], bounds[:, 0], bounds[:, 1]))
    for group, limit in zip(rows.limited, limits):
        index = np.asarray(group, np.int32)
        y = y.at[index].set(_into_ball(y[index], limit)[0])
    normal = np.asarray(rows.normal, np.int32)
    if rows.friction:
        fx, fy = (np.asarray(rows.friction, np.int32)[:, i] for i in (0, 1))
        n = normal[np.asarray(rows.friction_contact, np.int32)]
        limit = mu[np.asarray(rows.friction_contact, np.int32)] * jnp.abs(pi[n] + known[n])
        x_part, y_part, _ = _into_cone(y[fx], y[fy], limit)
        y = y.at[fx].set(x_part).at[fy].set(y_part)
    return y - pi


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _solve(solver: PGSImpulseSolver, rows: Rows, problem: Problem):
    return solver.iterate(rows, problem)


@_solve.defjvp
def _solve_jvp(solver, rows, primals, tangents):
    """The implicit derivative of the solution: F(pi, A, rhs, mu, known) = 0 for
    ``_fixed_point_map`` F, so dpi = -(dF/dpi)^+ (dF/dtheta dtheta) with the
    bounds that hold at the solution (a minimum-norm solve: redundant contacts
    leave directions of pi that move nothing, which it sets to zero)."""
    (problem,), (d_problem,) = primals, tangents
    out = _solve(solver, rows, problem)
    pi = out[0]

    K = jax.jacfwd(lambda pi: _fixed_point_map(rows, pi, problem))(pi)
    _, b = jax.jvp(lambda problem: _fixed_point_map(rows, pi, problem), (problem,), (d_problem,))
    dpi = -jnp.linalg.pinv(K) @ b
    zeros = tuple(np.zeros(x.shape, jax.dtypes.float0) if not jnp.issubdtype(x.dtype, jnp.inexact)
                  else jnp.zeros_like(x) for x in out[1:])
    return out, (dpi,) + zeros
