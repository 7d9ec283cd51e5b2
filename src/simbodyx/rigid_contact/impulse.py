"""Simbody's impulse solvers, projected Gauss-Seidel (PGSImpulseSolver) and
PLUS (PLUSImpulseSolver), with a fixed shape so that they run under
``jit``, ``vmap`` and ``grad``.

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
rows from the same row sums, then scaled back into the cone), with
successive over-relaxation (SOR 1.2, reduced by 0.8 down to 0.1 whenever
the error grows). The sweeps stop once the RMS error of the enforced rows
(participating and not at a bound) is below ``convergence_tolerance``, or
after ``max_iterations``; under ``vmap`` the batch sweeps until its last
member is done (the others keep their answers).

Derivatives are not taken through the sweeps: the solution is a fixed point
of one projected update of every row, and its derivative is the implicit
one of that fixed point with the bounds that hold there (normals pushing or
off, friction rolling or sliding at the cone's edge in its direction). It
is exact wherever the set of bounds does not change, for forward and
reverse mode alike, and costs one m x m pseudo-inverse.

PLUS solves the same problem by Newton's method on the equations of an
active set, in sliding intervals (see :class:`PLUSImpulseSolver`); its
derivative is rebuilt from the decisions of each interval.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from simbodyx._xla.module import Module
from simbodyx._xla.trace_context import tracing
from simbodyx.linalg import significant_real
from simbodyx.spatial.vectors import safe_norm

#: The name (``jax.ad_checkpoint.checkpoint_name``) of what a solve's
#: iterations found, which carries no derivative: a checkpoint whose policy
#: saves it (``integrate.rollout``'s) differentiates a step without running
#: the iterations again.
ITERATED = "simbodyx_impulse_iterations"


def _iterated(found):
    """``found`` (a pytree) named ITERATED, leaf by leaf (jax 0.6 names one array at a time)."""
    return jax.tree.map(lambda x: checkpoint_name(x, ITERATED), found)


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

    residual: jnp.ndarray  #: RMS error of the enforced rows at the last sweep (PGS) or Newton iterate (PLUS)
    iterations: jnp.ndarray  #: int32 sweeps (PGS) or Newton iterations over all intervals (PLUS)
    converged: jnp.ndarray  #: bool
    active: jnp.ndarray  #: (nc,) bool: the normal takes part and is not at its bound (Simbody's UniActive)
    intervals: jnp.ndarray  #: int32 sliding intervals (PLUS; 1 for PGS)


class ImpulseSolver(Module):
    """Simbody's ImpulseSolver, the base of :class:`PGSImpulseSolver` and
    :class:`PLUSImpulseSolver`: :meth:`solve`, whose solve proper is each
    solver's ``_solve``."""

    def solve(self, A, rhs, rows: Rows, participating, mu=None, *, known=None, bounds=None, limits=None):
        """(pi (m,), SolveStats): the impulses that remove ``rhs`` on the
        participating rows within the bounds, non-participating rows zero;
        ``mu`` (nc,) the effective friction coefficients, ``known`` (m,) impulses
        applied in full (their rows must not participate), ``bounds``
        (len(rows.bounded), 2) each bounded row's [lowest, highest] impulse,
        ``limits`` (len(rows.limited),) each limited group's largest impulse.
        Called eagerly, the solve is one compiled program, which later calls
        with this solver's settings, the same rows and shapes reuse."""
        problem = _problem(A, rhs, rows, participating, mu=mu, known=known, bounds=bounds, limits=limits)
        if tracing() is False:
            return _compiled_solve(self, rows, problem)
        return self._solve(rows, problem)


@eqx.filter_jit
def _compiled_solve(solver: ImpulseSolver, rows: Rows, problem: Problem):
    return solver._solve(rows, problem)


class PGSImpulseSolver(ImpulseSolver):
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

    def _solve(self, rows: Rows, problem: Problem):
        pi, *stats = _iterated(self.iterate(rows, jax.lax.stop_gradient(problem)))
        pi = _root(functools.partial(_fixed_point_map, rows), pi, problem)
        return pi, SolveStats(*stats, jnp.ones((), jnp.int32))

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

        carry = (jnp.zeros(m, dtype), jnp.asarray(self.sor, dtype), jnp.asarray(jnp.inf, dtype),
                 ~jnp.any(participating), jnp.zeros((), jnp.int32), jnp.zeros((), dtype), jnp.zeros(nc, bool))
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


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _root(residual, x, args):
    """x, a root of residual(x, args) = 0 found by a solver that is not
    differentiated (its inputs held constant), as a function of ``args``: its
    derivative is the implicit one, dx = -(dr/dx)^+ (dr/dargs) dargs, for
    forward and reverse mode alike. The pseudo-inverse gives the minimum-norm
    change where the residual leaves directions of x free (redundant
    contacts move nothing along them)."""
    return x


@_root.defjvp
def _root_jvp(residual, primals, tangents):
    x, args = primals
    _, d_args = tangents
    K = jax.jacfwd(lambda x: residual(x, args))(x)
    _, b = jax.jvp(lambda args: residual(x, args), (args,), (d_args,))
    return x, -jnp.linalg.pinv(K) @ b


def _problem(A, rhs, rows: Rows, participating, *, mu, known, bounds, limits) -> Problem:
    """The numbers of one solve, absent ones zero."""
    dtype = A.dtype
    mu = jnp.zeros(rows.num_contacts, dtype) if mu is None else mu
    known = jnp.zeros(A.shape[0], dtype) if known is None else known
    bounds = jnp.zeros((len(rows.bounded), 2), dtype) if bounds is None else bounds
    limits = jnp.zeros(len(rows.limited), dtype) if limits is None else limits
    return Problem(A, rhs, jnp.asarray(participating, bool), mu, known, bounds, limits)


# -- PLUS ----------------------------------------------------------------------------------------

ROLLING, SLIDING, IMPENDING = 0, 1, 2  #: a friction's condition during an interval (Simbody's FricCond)
_FULL, _UNUSED = -1, -2  #: an interval taken whole, an interval not taken (limiter codes)
_ORIGIN, _TURN = 0, 1  #: what cut an interval short: a slip through (or to) zero, or a turn of the slip


class _Conditions(NamedTuple):
    """The conditions that hold during one Newton solve of a PLUS interval."""

    on: jnp.ndarray  #: (m,) bool: the row's equation holds; the others are pinned (to zero, or a bound)
    at_bound: jnp.ndarray  #: (len(rows.bounded),) int32: 0 free, -1 at its lowest, 1 at its highest
    mode: jnp.ndarray  #: (number of friction groups,) int32: ROLLING, SLIDING or IMPENDING


class _Record(NamedTuple):
    """What each interval of a PLUS solve decided (stacked over intervals), from
    which the solution is rebuilt as a differentiable function of the problem."""

    pi: jnp.ndarray  #: (K, m) the interval's full impulse, before scaling by its length
    conditions: _Conditions  #: stacked over the K intervals
    limiter: jnp.ndarray  #: (K,) int32: _FULL, _UNUSED, or the friction group that cut the interval short
    case: jnp.ndarray  #: (K,) int32: _ORIGIN or _TURN, for a limiter group


class _Progress(NamedTuple):
    """Where a PLUS solve stands, one pass of its loop to the next."""

    k: jnp.ndarray  #: the interval
    verr_left: jnp.ndarray  #: (m,) the velocity errors left at its start
    expand_left: jnp.ndarray  #: (m,) the expansion impulse left
    remaining: jnp.ndarray  #: the share of the impact left (of the bounds and limits)
    conditions: _Conditions  #: those that hold
    pi: jnp.ndarray  #: (m,) the Newton iterate
    norm: jnp.ndarray  #: its error's 2-norm
    iterations: jnp.ndarray  #: Newton iterations on these conditions
    solved: jnp.ndarray  #: Newton has stopped on these conditions
    changes: jnp.ndarray  #: conditions corrected in this interval
    record: _Record  #: the intervals' decisions so far
    impulse: jnp.ndarray  #: (m,) the impulse of the intervals so far
    total: jnp.ndarray  #: Newton iterations in all
    converged: jnp.ndarray  #: every Newton solve met the tolerance and no interval was cut by the cap
    active: jnp.ndarray  #: (nc,) the normals pushing at the last interval's end
    done: jnp.ndarray
    starting: jnp.ndarray  #: an interval is to begin


@dataclasses.dataclass(frozen=True)
class _Groups:
    """The friction groups of a Rows structure (static): each contact's
    friction pair, then each state-limited friction, stacked and padded to 3
    rows (padding index m: gathered as zero, never scattered)."""

    index: np.ndarray  #: (ng, 3) rows
    contact: np.ndarray  #: (ng,) owning contact, num_contacts for a state-limited friction
    limited: np.ndarray  #: (ng,) state-limited friction, len(rows.limited) for a contact's
    normal: np.ndarray  #: (ng,) the owning contact's normal row (0 for a state-limited friction)
    sign: np.ndarray  #: (ng,) its sign (0 for a state-limited friction)

    @classmethod
    def of(cls, rows: Rows, m: int) -> "_Groups":
        members = [tuple(pair) for pair in rows.friction] + [tuple(group) for group in rows.limited]
        index = np.full((len(members), 3), m, np.int32)
        for g, member in enumerate(members):
            index[g, :len(member)] = member
        nf, nc = len(rows.friction), rows.num_contacts
        contact = np.asarray(list(rows.friction_contact) + [nc] * len(rows.limited), np.int32)
        limited = np.asarray([len(rows.limited)] * nf + list(range(len(rows.limited))), np.int32)
        normal = np.asarray([rows.normal[k] for k in rows.friction_contact] + [0] * len(rows.limited), np.int32)
        sign = np.asarray([rows.sign[k] for k in rows.friction_contact] + [0] * len(rows.limited), np.int32)
        return cls(index, contact, limited, normal, sign)

    def __len__(self):
        return len(self.contact)

    def gather(self, x):
        """(ng, 3) the groups' entries of x (m,)."""
        return x.at[self.index].get(mode="fill", fill_value=0)

    def scatter(self, x, values):
        """x (m,) with the groups' entries set to values (ng, 3)."""
        return x.at[self.index].set(values, mode="drop")

    def limit(self, problem: Problem, normal_impulse):
        """(ng,) each group's largest impulse: mu times the normal impulse
        (ng,) for a contact's friction, the given limit for a state-limited one."""
        def take(x, index):  # zero past the end (x may be empty)
            return x.at[index].get(mode="fill", fill_value=0) if x.shape[0] else jnp.zeros(index.shape, x.dtype)

        return jnp.where(self.contact < len(problem.mu), take(problem.mu, self.contact) * normal_impulse,
                         take(problem.limits, self.limited))


class PLUSImpulseSolver(ImpulseSolver):
    """Simbody's PLUS impulse solver (Poisson-Lankarani-Uchida-Sherman), with
    a fixed shape so that it runs under ``jit``, ``vmap`` and ``grad``.

    It solves the problem of :class:`PGSImpulseSolver` in sliding intervals.
    In each interval every friction is classified from its slip at the
    interval's start: Rolling (slip at most ``transition_velocity``, its
    velocity error removed) or Sliding (its impulse mu N along that slip).
    Newton's method with a backtracking line search (Simbody's: halving down
    to 1/100; a stop after three iterations that gain less than 5%) solves
    the equations of the conditions that hold; the worst violation is then
    corrected (a normal or ratchet that pulls is released, a rolling
    friction beyond its cone becomes Impending, its impulse along the slip
    it is about to have, a bounded row is pinned at the bound it passed;
    the normal of a rolling friction keeps its equation until the friction
    is released) and Newton runs again, until no condition is violated.
    The interval is then cut short where a sliding friction's slip would
    turn by more than ``max_sliding_direction_change`` (30 degrees) or pass
    through zero (at the point of least slip), the impulse scaled by the
    interval's length, a Poisson expansion impulse (``known``) applied and
    the bounds and limits used up in the same share, and the next interval
    starts from what is left. The
    friction impulse so follows the slip's direction through the impact
    rather than its end alone, which is what PLUS is for.

    Beyond Simbody's (whose PLUS leaves them to do), ratchets, bounded rows
    and state-limited frictions take part, the last like contact friction
    with a known limit. The impending slip is the one at the interval's end
    (what is left of the velocity error), so friction opposes the slip it
    is about to have.

    Newton's step is damped least squares (a Cholesky factorization of
    J^T J + 1e-12 mean(diag) I) where Simbody's is a rank-revealing QTZ
    solve: both take a least-squares step where redundant contacts make J
    singular.

    Fixed shape: every row is in the program, conditions are masks, one
    ``while_loop`` takes one Newton iteration, one correction or one
    interval's end per pass (under ``vmap`` a batch takes as many passes as
    its longest solve), and the intervals are at most
    ``max_sliding_intervals`` (the last one is taken whole). The solution's
    derivative is rebuilt from what each interval decided: each interval's
    impulse is the root of its equations (its derivative the implicit one),
    and the interval lengths follow their formulas, so forward and reverse
    mode are exact wherever the decisions do not change."""

    transition_velocity: float = eqx.field(static=True)  #: m/s, the fastest slip that counts as rolling
    convergence_tolerance: float = eqx.field(static=True, default=1e-10)  #: on the 2-norm of the equations' error
    max_iterations: int = eqx.field(static=True, default=20)  #: Newton iterations per active set
    max_sliding_direction_change: float = eqx.field(static=True, default=np.pi / 6)  #: rad
    max_sliding_intervals: int = eqx.field(static=True, default=10)

    def __check_init__(self):
        label = "PLUSImpulseSolver"
        for name in ("transition_velocity", "convergence_tolerance"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{label}: {name} must be positive, got {value}")
        for name in ("max_iterations", "max_sliding_intervals"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{label}: {name} must be a positive int, got {value!r}")
        if not 0 < self.max_sliding_direction_change < np.pi / 2:
            raise ValueError(f"{label}: max_sliding_direction_change must be in (0, pi/2) rad, got "
                             f"{self.max_sliding_direction_change}")

    def get_max_rolling_speed(self) -> float:
        return self.transition_velocity

    def get_convergence_tol(self) -> float:
        return self.convergence_tolerance

    def get_max_iterations(self) -> int:
        return self.max_iterations

    def _solve(self, rows: Rows, problem: Problem):
        return _plus_solve(self, rows, problem)

    def iterate(self, rows: Rows, problem: Problem):
        """The intervals themselves: (pi, _Record, SolveStats). One ``while_loop``
        whose every pass takes at most one Newton iteration, after correcting
        a violated condition or ending an interval (and starting the next),
        so that under ``vmap`` the batch takes as many passes as its longest
        solve rather than the product of its longest loops."""
        A, rhs, participating, _, known, _, _ = problem
        dtype, m, K = A.dtype, A.shape[0], self.max_sliding_intervals
        normal, sign = np.asarray(rows.normal, np.int32), np.asarray(rows.sign)
        speed, speed_sign = np.asarray(rows.speed, np.int32), np.asarray(rows.speed_sign)
        bounded = np.asarray(rows.bounded, np.int32)
        groups = _Groups.of(rows, m)
        nc, ns, nb, ng = len(normal), len(speed), len(bounded), len(groups)
        n = nc + ns + nb + ng  # the conditions that can be violated: normals, ratchets, bounded rows, frictions
        releases = np.zeros((n + 1, m), bool)  # the rows correcting each takes out of play (one more: nothing)
        releases[np.arange(nc), normal] = True
        releases[nc + np.arange(ns), speed] = True
        releases[nc + ns + np.arange(nb), bounded] = True
        group_of = np.full(n + 1, -1, np.int32)  # the friction a condition concerns
        for g, (k, index) in enumerate(zip(groups.contact, groups.index)):
            if k < nc:  # a normal's friction is taken out with it
                releases[k, index[index < m]] = True
                group_of[k] = g
        group_of[nc + ns + nb + np.arange(ng)] = np.arange(ng)
        is_normal = np.arange(n + 1) < nc
        significant = significant_real(dtype)
        tol = self.convergence_tolerance
        backs = jnp.asarray(0.5 ** np.arange(8), dtype)  # line search: a whole step down to the first below 1/100

        def residual(c: _Progress, pi, smooth=False):
            return _plus_residual(rows, smooth, pi, (_left(problem, c.remaining), c.verr_left, c.expand_left,
                                                     c.conditions))

        def restart(c: _Progress, guess):
            """Newton from ``guess``, each normal in play at Simbody's start: a
            small impulse of the sign its equation asks for."""
            target = c.verr_left - A @ c.expand_left
            pi = guess.at[normal].set(jnp.where(c.conditions.on[normal], 0.01 * jnp.sign(target[normal]),
                                                guess[normal]))
            norm = jnp.linalg.norm(residual(c, pi))
            return c._replace(pi=pi, norm=norm, iterations=jnp.zeros((), jnp.int32), solved=norm <= tol)

        def begin(c: _Progress):
            """An interval's start: each friction rolling or sliding by its slip."""
            slipping = safe_norm(groups.gather(c.verr_left)) > self.transition_velocity
            conditions = _Conditions(participating, jnp.zeros(nb, jnp.int32),
                                     jnp.where(slipping, SLIDING, ROLLING).astype(jnp.int32))
            c = c._replace(conditions=conditions, changes=jnp.zeros((), jnp.int32), starting=jnp.zeros((), bool))
            return restart(c, jnp.zeros(m, dtype))

        def newton(c: _Progress):
            """One Newton iteration with Simbody's backtracking (a step that does
            not reduce the error is halved, down to below 1/100); its Jacobian
            with Simbody's smooth min, its step by damped least squares."""
            J = jax.jacfwd(lambda pi: residual(c, pi, smooth=True))(c.pi)
            JtJ = J.T @ J
            damping = 1e-12 * jnp.trace(JtJ) / m + jnp.finfo(dtype).tiny
            L = jnp.linalg.cholesky(JtJ + damping * jnp.eye(m, dtype=dtype))
            step = jax.scipy.linalg.cho_solve((L, True), J.T @ residual(c, c.pi))
            trials = c.pi - backs[:, None] * step
            norms = jnp.linalg.norm(jax.vmap(lambda pi: residual(c, pi))(trials), axis=1)
            better = norms < c.norm
            i = jnp.where(jnp.any(better), jnp.argmax(better), len(backs) - 1)
            iterations = c.iterations + 1
            stalled = (iterations >= 3) & (norms[i] > 0.95 * c.norm)  # a local minimum: infeasible
            return c._replace(pi=trials[i], norm=norms[i], iterations=iterations, total=c.total + 1,
                              solved=(norms[i] < tol) | stalled | (iterations >= self.max_iterations))

        def decide(c: _Progress):
            """After Newton: correct the worst violated condition and restart, or,
            with none left, end the interval."""
            pi, conditions, left = c.pi, c.conditions, _left(problem, c.remaining)
            projected, violations = pi, []
            for index, signs in ((normal, sign), (speed, speed_sign)):
                pulls = signs * pi[index] > 0
                projected = projected.at[index].set(jnp.where(pulls, 0.0, pi[index]))
                violations.append(jnp.where(conditions.on[index] & pulls, jnp.abs(pi[index]), 0.0))
            free, inside = conditions.on[bounded], jnp.clip(pi[bounded], left.bounds[:, 0], left.bounds[:, 1])
            projected = projected.at[bounded].set(jnp.where(free, inside, pi[bounded]))
            violations.append(jnp.where(free, jnp.abs(pi[bounded] - inside), 0.0))
            magnitude = safe_norm(groups.gather(pi))
            limit = groups.limit(left, jnp.abs(projected[groups.normal] + c.expand_left[groups.normal]))
            over = conditions.on[groups.index[:, 0]] & (conditions.mode == ROLLING) & (magnitude > limit)
            projected = groups.scatter(projected, groups.gather(pi) * jnp.where(
                over, limit / jnp.where(over, magnitude, 1.0), 1.0)[:, None])
            violations = jnp.concatenate(violations + [jnp.where(over, magnitude - limit, 0.0), jnp.zeros(1)])
            worst = jnp.argmax(violations)
            settled = (violations[worst] <= significant) | (c.changes > n)
            # correct the worst: a normal whose friction rolls keeps its equation while the friction goes Impending
            g = jnp.asarray(group_of)[worst]
            rolling = (conditions.mode[jnp.maximum(g, 0)] == ROLLING) if ng else False
            defer = jnp.asarray(is_normal)[worst] & (g >= 0) & rolling
            pin = jnp.arange(nb) == worst - nc - ns
            corrected = c._replace(conditions=_Conditions(
                conditions.on & ~(jnp.asarray(releases)[worst] & ~defer),
                jnp.where(pin, jnp.where(pi[bounded] < left.bounds[:, 0], -1, 1), conditions.at_bound).astype(
                    jnp.int32),
                jnp.where((jnp.arange(ng) == g) & (defer | ~jnp.asarray(is_normal)[worst]), IMPENDING,
                          conditions.mode).astype(jnp.int32)), changes=c.changes + 1)
            return jax.lax.cond(settled, lambda: finish(c), lambda: restart(corrected, projected))

        def finish(c: _Progress):
            """An interval's end: take the share of it that Simbody's rules allow."""
            length, limiter, case = self._interval(groups, A, c.verr_left, c.expand_left, c.conditions, c.pi)
            capped = (c.k == K - 1) & (limiter != _FULL)  # the last interval is taken whole
            length, limiter = jnp.where(capped, 1.0, length), jnp.where(capped, _FULL, limiter)
            record = jax.tree.map(lambda r, x: r.at[c.k].set(x), c.record, _Record(c.pi, c.conditions, limiter, case))
            verr_left, expand_left = _advance(A, c.verr_left, c.expand_left, c.pi, length)
            return c._replace(k=c.k + 1, verr_left=verr_left, expand_left=expand_left,
                              impulse=c.impulse + length * c.pi, remaining=c.remaining * (1 - length), record=record,
                              converged=c.converged & (c.norm < tol) & ~capped,
                              active=c.conditions.on[normal] & (sign * c.pi[normal] < 0),
                              done=length >= 1, starting=length < 1)

        def tick(c: _Progress):
            """Settle what the last Newton solve left, start the next interval
            if that ended one, and take a Newton iteration where one is due."""
            keep = lambda c: c  # noqa: E731
            c = jax.lax.cond(c.solved & ~c.starting & ~c.done, decide, keep, c)
            c = jax.lax.cond(c.starting, begin, keep, c)
            return jax.lax.cond(~c.solved & ~c.done, newton, keep, c)

        empty = _Conditions(jnp.zeros((K, m), bool), jnp.zeros((K, nb), jnp.int32), jnp.zeros((K, ng), jnp.int32))
        nothing = ~jnp.any(participating)
        c = _Progress(
            k=jnp.zeros((), jnp.int32), verr_left=rhs, expand_left=known, remaining=jnp.ones((), dtype),
            conditions=jax.tree.map(lambda x: x[0], empty), pi=jnp.zeros(m, dtype), norm=jnp.zeros((), dtype),
            iterations=jnp.zeros((), jnp.int32), solved=jnp.zeros((), bool), changes=jnp.zeros((), jnp.int32),
            record=_Record(jnp.zeros((K, m), dtype), empty, jnp.full(K, _UNUSED, jnp.int32), jnp.zeros(K, jnp.int32)),
            impulse=jnp.zeros(m, dtype), total=jnp.zeros((), jnp.int32), converged=jnp.ones((), bool),
            active=jnp.zeros(nc, bool), done=nothing, starting=~nothing)
        c = jax.lax.while_loop(lambda c: ~c.done, tick, c)
        return c.impulse, c.record, SolveStats(c.norm, c.total, c.converged, c.active, c.k)

    def _interval(self, groups: _Groups, A, verr_left, expand_left, conditions: _Conditions, pi):
        """(length, limiter, case): the share of the interval to take, and what
        cut it short (Simbody's rules, for each sliding friction)."""
        if not len(groups):
            return jnp.ones((), pi.dtype), jnp.asarray(_FULL, jnp.int32), jnp.asarray(_ORIGIN, jnp.int32)
        start, end, origin, turn = _slips(groups, A, verr_left, expand_left, pi, self.max_sliding_direction_change)
        significant = significant_real(pi.dtype)
        v0, v1 = safe_norm(start), safe_norm(end)
        cos = jnp.sum(start * end, axis=1) / jnp.where((v0 > 0) & (v1 > 0), v0 * v1, 1.0)
        nearest = safe_norm(start + origin[:, None] * (end - start))
        slow = v1 <= self.transition_velocity
        whole = (slow & (v1 < significant)) | (~slow & (cos >= float(np.cos(self.max_sliding_direction_change))))
        case = jnp.where(slow | (nearest <= self.transition_velocity), _ORIGIN, _TURN)
        length = jnp.where(whole, 1.0, jnp.where(case == _ORIGIN, origin, turn))
        sliding = conditions.on[groups.index[:, 0]] & (conditions.mode == SLIDING)
        length = jnp.where(sliding, length, 1.0)
        g = jnp.argmin(length)
        full = length[g] > 1 - float(jnp.finfo(pi.dtype).eps) ** 0.5  # no sliver of an interval left
        return jnp.where(full, 1.0, length[g]), jnp.where(full, _FULL, g).astype(jnp.int32), case[g].astype(jnp.int32)

    def replay(self, rows: Rows, problem: Problem, record: _Record):
        """The solution rebuilt from the decisions in ``record``: each interval's
        impulse the root of its equations, each length its formula, as
        differentiable functions of ``problem``."""
        A = problem.A
        groups = _Groups.of(rows, A.shape[0])

        def interval(carry, decided: _Record):
            verr_left, expand_left, remaining, total = carry
            pi = _root(functools.partial(_plus_residual, rows, False), decided.pi,
                       (_left(problem, remaining), verr_left, expand_left, decided.conditions))
            length = jnp.where(decided.limiter == _UNUSED, 0.0, 1.0)
            if len(groups):
                _, _, origin, turn = _slips(groups, A, verr_left, expand_left, pi, self.max_sliding_direction_change)
                g = jnp.maximum(decided.limiter, 0)
                length = jnp.where(decided.limiter >= 0, jnp.where(decided.case == _TURN, turn[g], origin[g]), length)
            verr_left, expand_left = _advance(A, verr_left, expand_left, pi, length)
            return (verr_left, expand_left, remaining * (1 - length), total + length * pi), None

        start = (problem.rhs, problem.known, jnp.ones((), A.dtype), jnp.zeros_like(problem.rhs))
        (_, _, _, total), _ = jax.lax.scan(interval, start, record)
        return total


def _left(problem: Problem, remaining) -> Problem:
    """The problem's bounds and limits on what is left of the impact, a share
    ``remaining`` of it (each interval takes its share of them as of the
    velocity errors and the expansion)."""
    return problem._replace(bounds=remaining * problem.bounds, limits=remaining * problem.limits)


def _advance(A, verr_left, expand_left, pi, length):
    """(velocity errors, expansion impulse) left after taking ``length`` of an
    interval whose whole impulse is pi (with the whole expansion left)."""
    return verr_left - length * (A @ (pi + expand_left)), (1 - length) * expand_left


def _slips(groups: _Groups, A, verr_left, expand_left, pi, max_turn):
    """For each friction group (ng, 3): its slip at the interval's start and
    end, and the interval lengths (ng,) at which the slip is nearest zero and
    at which it has turned by ``max_turn``."""
    start = groups.gather(verr_left)
    end = start - groups.gather(A @ (pi + expand_left))
    significant = significant_real(pi.dtype)
    w = end - start
    ww = jnp.sum(w * w, axis=1)
    short = ww < significant
    origin = jnp.where(short, 1.0, jnp.clip(-jnp.sum(start * w, axis=1) / jnp.where(short, 1.0, ww), 0.0, 1.0))
    # angle(start, start + t w) = max_turn: (aw^2 - c^2 aa ww) t^2 + 2 aa aw (1 - c^2) t + aa^2 (1 - c^2) = 0
    c2 = float(np.cos(max_turn)) ** 2
    aa, aw = jnp.sum(start * start, axis=1), jnp.sum(start * w, axis=1)
    qa, qb, qc = aw * aw - c2 * aa * ww, 2 * aa * aw * (1 - c2), aa * aa * (1 - c2)
    disc = qb * qb - 4 * qa * qc
    root = jnp.where(disc > 0, jnp.sqrt(jnp.where(disc > 0, disc, 1.0)), 0.0)
    q = -0.5 * (qb + jnp.where(qb >= 0, root, -root))
    safe = lambda x: jnp.where(x == 0, 1.0, x)  # noqa: E731
    roots = jnp.stack([jnp.where(qa == 0, jnp.inf, q / safe(qa)), jnp.where(q == 0, jnp.inf, qc / safe(q))])
    turn = jnp.min(jnp.where(roots > 0, roots, jnp.inf), axis=0)
    return start, end, origin, jnp.clip(jnp.where(jnp.isfinite(turn), turn, 1.0), 0.0, 1.0)


def _plus_residual(rows: Rows, smooth: bool, pi, args):
    """The error of a PLUS interval's equations at pi (m,): a row in play
    removes its velocity error (A pi = target), a pinned row keeps its value
    (zero, or its bound), and a sliding or impending friction's impulse lies
    along its slip v with the length of its limit L: |v| pi - L v = 0 (L =
    mu N for contact friction, N the normal impulse pushing, known or not).
    ``smooth`` uses Simbody's smooth min(z, 0) in N, for the Newton
    Jacobian."""
    problem, verr_left, expand_left, conditions = args
    A, bounds = problem.A, problem.bounds
    groups = _Groups.of(rows, A.shape[0])
    linear = A @ pi - (verr_left - A @ expand_left)
    at = conditions.at_bound
    pinned = jnp.zeros_like(pi).at[np.asarray(rows.bounded, np.int32)].set(
        jnp.where(at < 0, bounds[:, 0], jnp.where(at > 0, bounds[:, 1], 0.0)))
    error = jnp.where(conditions.on, linear, pi - pinned)
    if not len(groups):
        return error
    slip = jnp.where((conditions.mode == IMPENDING)[:, None], -groups.gather(linear), groups.gather(verr_left))
    z = groups.sign * pi[groups.normal]
    pushing = (z - jnp.sqrt(z * z + float(jnp.finfo(pi.dtype).eps) ** 0.5)) / 2 if smooth else jnp.minimum(z, 0.0)
    normal_impulse = -(groups.sign * expand_left[groups.normal] + jnp.where(conditions.on[groups.normal], pushing, 0.0))
    law = safe_norm(slip)[:, None] * groups.gather(pi) - groups.limit(problem, normal_impulse)[:, None] * slip
    sliding = conditions.on[groups.index[:, 0]] & (conditions.mode != ROLLING)
    return groups.scatter(error, jnp.where(sliding[:, None], law, groups.gather(error)))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _plus_solve(solver: PLUSImpulseSolver, rows: Rows, problem: Problem):
    pi, _, stats = solver.iterate(rows, problem)
    return pi, stats


@_plus_solve.defjvp
def _plus_solve_jvp(solver, rows, primals, tangents):
    """The solution's derivative from the solve's decisions (``replay``): a
    forward run without derivatives does not pay for it."""
    (problem,), (d_problem,) = primals, tangents
    pi, record, stats = _iterated(solver.iterate(rows, problem))
    _, d_pi = jax.jvp(lambda problem: solver.replay(rows, problem, record), (problem,), (d_problem,))
    zeros = jax.tree.map(lambda x: np.zeros(x.shape, jax.dtypes.float0) if not jnp.issubdtype(x.dtype, jnp.inexact)
                         else jnp.zeros_like(x), stats)
    return (pi, stats), (d_pi, zeros)
