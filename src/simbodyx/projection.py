"""Projection onto the constraint manifold: Simbody's ``System::project``,
``projectQ`` and ``projectU`` (spec/Constraint_and_System.md B.5, B.5.1).

Position level: find the q nearest the State's, in the norm of the u
weights Wu, whose weighted position errors Tp perr(t, q) meet the accuracy
(RMS, or the infinity norm). Each Newton step is the minimum-norm solution
of the linearized errors in weighted u-space, mapped to q by N:

    A = Tp P Wu^-1 F      (F: 1 on the free mobilities, 0 where a lock holds them)
    du = Wu^-1 F A^T (A A^T)^+ Tp perr,   q <- q - N du

(Simbody writes the same step as (Tp Pq Wq^+) dq_WLS = Tp perr with
Wq^+ = N Wu^-1 N^+), with the Jacobian recomputed at every iterate, which is
what Simbody does whatever its ForceFullNewton flag says. Quaternions are
then normalized, a separate constraint.
Velocity level: the errors [pverr; verr] are linear in u, weighted by
Tpv = [ts Tp; Tv] (ts the system's time scale), and one such step lands on
the manifold.

Everything is pure: under ``jit`` and ``vmap`` the Newton loop is a
``lax.while_loop`` (a batch runs until its last State is done), results
come back as arrays in :class:`ProjectResults`, and ``throw=True`` raises
``sx.RuntimeCheckError``, also inside ``jit``, where a caller wants an
error rather than a status. Derivatives of q are implicit: the projected q moves
with the inputs along the manifold's tangent, dq* = dq - N Wu^-1 F A^T
(A A^T)^+ Tp d perr (at the projected q), never through the iterations; the
velocity level's single linear step is differentiated as it stands.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla import trace_context
from simbodyx._xla.faults import fault_if
from simbodyx._xla.module import Module
from simbodyx.algorithms import coordinates
from simbodyx.constraints.equations import Equations
from simbodyx.enums import NamedIntEnum
from simbodyx.linalg import min_norm_solve
from simbodyx.motion import model_prescription, prescribe_q, prescribe_u
from simbodyx.stage import Stage
from simbodyx.state import Level, State


class ProjectStatus(NamedIntEnum):
    """Simbody's ProjectResults::Status."""

    Invalid = 0
    Succeeded = 1
    FailedToAchieveAccuracy = 2
    FailedToConverge = 3


class ProjectOptions(Module):
    """Simbody's ProjectOptions (static: changing one recompiles)."""

    #: required accuracy of the weighted constraint errors
    accuracy: float = eqx.field(static=True, default=1e-4)
    #: the iteration tries for overshoot * accuracy and settles for accuracy
    overshoot: float = eqx.field(static=True, default=0.1)
    #: a norm on entry above this fails at once (FailedToConverge)
    projection_limit: float = eqx.field(static=True, default=math.inf)
    #: stop (FailedToConverge) when an iteration makes the norm worse
    local_only: bool = eqx.field(static=True, default=False)
    use_infinity_norm: bool = eqx.field(static=True, default=False)
    #: iterate at least once even when the errors already meet the accuracy
    force_projection: bool = eqx.field(static=True, default=False)
    max_iterations: int = eqx.field(static=True, default=20)

    def __check_init__(self):
        if not self.accuracy > 0 or not 0 < self.overshoot <= 1 or self.max_iterations < 1:
            raise ValueError(f"ProjectOptions: need accuracy > 0, 0 < overshoot <= 1 and max_iterations >= 1; "
                             f"got {self.accuracy}, {self.overshoot}, {self.max_iterations}")


class ProjectResults(Module):
    """Simbody's ProjectResults, as arrays (batched under vmap)."""

    status: jnp.ndarray  #: int32, a ProjectStatus
    any_change_made: jnp.ndarray  #: bool
    num_iterations: jnp.ndarray  #: int32
    norm_on_entrance: jnp.ndarray
    norm_on_exit: jnp.ndarray
    #: index of the worst weighted error on entrance (position rows, then quaternions)
    worst_error_on_entrance: jnp.ndarray
    projection_limit_exceeded: jnp.ndarray  #: bool

    @property
    def succeeded(self):
        return self.status == ProjectStatus.Succeeded

    def combine(self, other: ProjectResults) -> ProjectResults:
        """The results of this projection followed by ``other`` (q, then u)."""
        first_failed = self.status != ProjectStatus.Succeeded
        return ProjectResults(
            jnp.where(first_failed, self.status, other.status),
            self.any_change_made | other.any_change_made,
            self.num_iterations + other.num_iterations,
            jnp.maximum(self.norm_on_entrance, other.norm_on_entrance),
            jnp.where(first_failed, self.norm_on_exit, jnp.maximum(self.norm_on_exit, other.norm_on_exit)),
            jnp.where(self.norm_on_entrance >= other.norm_on_entrance, self.worst_error_on_entrance,
                      other.worst_error_on_entrance),
            self.projection_limit_exceeded | other.projection_limit_exceeded,
        )


# -- weights, free mobilities, errors ------------------------------------------------------

def _vector(x, n: int, default, dtype, what: str):
    if x is None:
        return jnp.broadcast_to(jnp.asarray(default, dtype), (n,))
    x = jnp.asarray(x, dtype)
    if x.shape != (n,):
        raise ValueError(f"project: {what} must have shape ({n},), got {x.shape}")
    return x


def _free_u(model, state: State, level: Level):
    """(nu,) 1.0 where no lock or Motion at ``level`` or above holds the mobility."""
    top, dtype = state.topology, state.u.dtype
    p = model_prescription(model, state)
    if p is None:
        return jnp.ones(top.nu, dtype)
    return (p.u_level(top) < level).astype(dtype)


def _quaternion_index(topology) -> np.ndarray:
    """(k, 4) the q indices of each quaternion in use."""
    starts = [topology.q_start[b] + topology.kinds[b].quaternion_at for b in topology.quaternion_bodies]
    return np.asarray([np.arange(s, s + 4) for s in starts], int).reshape(-1, 4)


def _norm(x, infinity: bool):
    """(norm, index of the largest |x|) of a weighted error vector; 0 for none."""
    if x.shape[0] == 0:
        return jnp.zeros((), x.dtype), jnp.zeros((), jnp.int32)
    worst = jnp.argmax(jnp.abs(x)).astype(jnp.int32)
    return (jnp.max(jnp.abs(x)) if infinity else jnp.sqrt(jnp.mean(x * x))), worst


def enabled_position_errors(s: State):
    """perr (mp,) of a State realized to Position, disabled constraints' rows zero."""
    eqs = Equations.of_state(s, velocity=False)
    return eqs.layout.zero_disabled(eqs.position_errors(), s.constraint_disabled)


def _position_errors(model, state: State, q):
    """perr (mp,) at q (disabled constraints' rows zero)."""
    return enabled_position_errors(model.realize(state.with_q(q), Stage.Position))


def _velocity_errors(model, state: State, u):
    """[pverr; verr] (mp + mv,) at u (disabled constraints' rows zero)."""
    s = model.realize(state.with_u(u), Stage.Velocity)
    eqs = Equations.of_state(s)
    return eqs.layout.zero_disabled(eqs.velocity_errors(), s.constraint_disabled)


def _correction(J, r, weights, scale):
    """Wu^-1 F A^T (A A^T)^+ r with A = weights J Wu^-1 F: the least weighted change
    (u-like) that removes the weighted errors r. ``scale`` is Wu^-1 F (nu,)."""
    A = weights[:, None] * J * scale[None, :]
    return scale * (A.T @ min_norm_solve(A @ A.T, r))


# -- position level ------------------------------------------------------------------------

def _newton_q(model, state: State, Tp, scale, options: ProjectOptions):
    """(q, float aux: [status, changed, iterations, norm_entry, norm_exit, worst, limit]) for
    the Newton iteration on the position errors; quaternions are not touched."""
    dtype, q0 = state.q.dtype, state.q
    infinity = options.use_infinity_norm
    perr0 = Tp * _position_errors(model, state, q0)
    norm0, worst = _norm(perr0, infinity)
    target = max(options.overshoot * options.accuracy, 1e-14)
    limit_exceeded = norm0 > options.projection_limit
    start = (norm0 > 0) & ((norm0 > options.accuracy) | options.force_projection) & ~limit_exceeded

    def cond(carry):
        _, _, norm, k, diverged = carry
        return jnp.where(k == 0, start, (norm > target) & (k < options.max_iterations) & ~diverged)

    def body(carry):  # full Newton: the Jacobian at every iterate, as Simbody computes it
        q, r, norm, k, _ = carry
        s = model.realize(state.with_q(q), Stage.Position)
        q_new = q - coordinates.multiply_by_n(s.topology, q, _correction(model.matter.calc_p(s), r, Tp, scale))
        r_new = Tp * _position_errors(model, state, q_new)
        norm_new = _norm(r_new, infinity)[0]
        worse = options.local_only & (k >= 1) & (norm_new > norm)  # diverging: keep the last iterate
        return (jnp.where(worse, q, q_new), jnp.where(worse, r, r_new), jnp.where(worse, norm, norm_new), k + 1,
                worse)

    q, _, norm, iterations, diverged = jax.lax.while_loop(
        cond, body, (q0, perr0, norm0, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    failed = norm > options.accuracy
    revert = failed & (norm >= norm0)
    q = jnp.where(revert, q0, q)
    norm = jnp.where(revert, norm0, norm)
    status = jnp.where(limit_exceeded | (failed & diverged), ProjectStatus.FailedToConverge,
                       jnp.where(failed, ProjectStatus.FailedToAchieveAccuracy, ProjectStatus.Succeeded))
    changed = (iterations > 0) & ~revert
    aux = jnp.stack([status, changed, iterations, norm0, norm, worst, limit_exceeded]).astype(dtype)
    return q, aux


@trace_context.custom_jvp(nondiff_argnums=(0,))
def _newton_q_implicit(options, model, state, Tp, scale):
    return _newton_q(model, state, Tp, scale, options)


@_newton_q_implicit.defjvp
def _newton_q_jvp(options, primals, tangents):
    model, state, Tp, scale = primals
    model_dot, state_dot, _, _ = tangents
    q, aux = _newton_q(model, state, Tp, scale, options)
    # the errors at the projected q move with the inputs: remove that along the least-change direction
    _, perr_dot = jax.jvp(lambda m, s: _position_errors(m, s, s.q), (model, state.with_q(q)), (model_dot, state_dot))
    s = model.realize(state.with_q(q), Stage.Position)
    dq = coordinates.multiply_by_n(s.topology, q, _correction(model.matter.calc_p(s), Tp * perr_dot, Tp, scale))
    return (q, aux), (state_dot.q - dq, jnp.zeros_like(aux))


def _results(aux) -> ProjectResults:
    aux = jax.lax.stop_gradient(aux)
    return ProjectResults(aux[0].astype(jnp.int32), aux[1] > 0, aux[2].astype(jnp.int32), aux[3], aux[4],
                          aux[5].astype(jnp.int32), aux[6] > 0)


def _normalize(state: State, q, error_estimate):
    """(q, estimate, |quaternion| - 1 of each): quaternions scaled to unit
    length, and the estimate's component along each quaternion removed."""
    index = _quaternion_index(state.topology)
    if index.shape[0] == 0:
        return q, error_estimate, jnp.zeros(0, q.dtype)
    quat = q[index]
    length = jnp.linalg.norm(quat, axis=-1)
    unit = quat / length[:, None]
    if error_estimate is not None:
        e = error_estimate[index]
        error_estimate = error_estimate.at[index].set(e - jnp.sum(e * unit, -1, keepdims=True) * unit)
    return q.at[index].set(unit), error_estimate, length - 1


def _throw(results: ProjectResults, what: str):
    return fault_if(results.status, results.status != ProjectStatus.Succeeded, 0,
                    [f"{what} failed: the weighted constraint errors could not be brought within the required "
                     "accuracy from this State (status in ProjectResults; pass throw=False to get it instead)"])


def project_q(model, state: State, options: ProjectOptions | None = None, *, u_weights=None,
              q_error_weights=None, error_estimate=None, throw: bool = True):
    """(state, results), or (state, results, error_estimate) when a q-like
    ``error_estimate`` is given: the free q moved to the position manifold
    (Simbody's projectQ), quaternions normalized, the returned State realized
    through Position. ``u_weights`` (nu,) is Wu, 1 / unit change of each u;
    ``q_error_weights`` (mp,) is Tp, 1 / unit error of each holonomic
    equation (both default to ones). A given error estimate comes back with its
    component normal to the manifold removed (no iteration)."""
    options = ProjectOptions() if options is None else options
    s = model.matter._check(state)
    dtype, mp = s.q.dtype, model.matter.get_num_constraint_equations()[0]
    Tp = jax.lax.stop_gradient(_vector(q_error_weights, mp, 1.0, dtype, "q_error_weights"))
    Wu = jax.lax.stop_gradient(_vector(u_weights, s.topology.nu, 1.0, dtype, "u_weights"))
    scale = _free_u(model, s, Level.Position) / Wu
    if mp:
        q, aux = _newton_q_implicit(options, model, s, Tp, scale)
    else:
        q, aux = s.q, jnp.array([ProjectStatus.Succeeded, 0, 0, 0, 0, 0, 0], dtype)
    results = _results(aux)
    if error_estimate is not None:
        error_estimate = jnp.asarray(error_estimate, dtype)
        if error_estimate.shape != (s.topology.nq,):
            raise ValueError(f"project_q: error_estimate must have shape ({s.topology.nq},), "
                             f"got {error_estimate.shape}")
        if mp:  # Pq e = P N^-1 e, and the least change that cancels it
            P = model.matter.calc_p(model.realize(s.with_q(q), Stage.Position))
            Pq_e = P @ coordinates.multiply_by_n_inv(s.topology, q, error_estimate)
            error_estimate = error_estimate - coordinates.multiply_by_n(
                s.topology, q, _correction(P, Tp * Pq_e, Tp, scale))
    q_unit, error_estimate, _ = _normalize(s, q, error_estimate)
    # quaternions are normalized only after a successful (or no) position projection, as Simbody does
    ok = results.status == ProjectStatus.Succeeded
    q = jnp.where(ok, q_unit, q)
    quaternion_norm, quaternion_worst = _norm(_normalize(s, s.q, None)[2], options.use_infinity_norm)
    worse = quaternion_norm > results.norm_on_entrance
    results = ProjectResults(
        results.status, results.any_change_made | (ok & (quaternion_norm > 0)), results.num_iterations,
        jnp.maximum(results.norm_on_entrance, quaternion_norm), results.norm_on_exit,
        jnp.where(worse, mp + quaternion_worst, results.worst_error_on_entrance), results.projection_limit_exceeded)
    if throw:
        results = eqx.tree_at(lambda r: r.status, results, _throw(results, "project_q"))
    out = model.realize(s.with_q(q), Stage.Position)
    return (out, results) if error_estimate is None else (out, results, error_estimate)


# -- velocity level ------------------------------------------------------------------------

def project_u(model, state: State, options: ProjectOptions | None = None, *, u_weights=None,
              q_error_weights=None, u_error_weights=None, error_estimate=None, throw: bool = True):
    """(state, results), or (state, results, error_estimate): the free u moved
    to the velocity manifold at the State's q (Simbody's projectU), the
    returned State realized through Velocity. The velocity-level errors
    [pverr; verr] are linear in u, so one least-change step solves them.
    ``u_error_weights`` (mp + mv,) defaults to [ts Tp; 1], ts the model's
    ``default_time_scale`` and Tp the ``q_error_weights``."""
    options = ProjectOptions() if options is None else options
    s = model.matter._check(state)
    dtype = s.u.dtype
    mp, mv = model.matter.get_num_constraint_equations()[:2]
    Tp = _vector(q_error_weights, mp, 1.0, dtype, "q_error_weights")
    default = jnp.concatenate([model.default_time_scale * Tp, jnp.ones(mv, dtype)])
    Tpv = jax.lax.stop_gradient(_vector(u_error_weights, mp + mv, default, dtype, "u_error_weights"))
    Wu = jax.lax.stop_gradient(_vector(u_weights, s.topology.nu, 1.0, dtype, "u_weights"))
    scale = _free_u(model, s, Level.Velocity) / Wu
    infinity = options.use_infinity_norm
    u0 = s.u
    err0 = Tpv * _velocity_errors(model, s, u0)
    norm0, worst = _norm(err0, infinity)
    limit_exceeded = norm0 > options.projection_limit
    act = (norm0 > 0) & ((norm0 > options.accuracy) | options.force_projection) & ~limit_exceeded
    J = model.matter.calc_g(model.realize(s, Stage.Position))[:mp + mv] if mp + mv else None  # [P; V]
    u = u0 - _correction(J, err0, Tpv, scale) if mp + mv else u0
    norm = _norm(Tpv * _velocity_errors(model, s, u), infinity)[0] if mp + mv else norm0
    failed = act & (norm > options.accuracy)
    keep = ~act | (failed & (norm >= norm0))
    u, norm = jnp.where(keep, u0, u), jnp.where(keep, norm0, norm)
    status = jnp.where(limit_exceeded, ProjectStatus.FailedToConverge,
                       jnp.where(failed, ProjectStatus.FailedToAchieveAccuracy, ProjectStatus.Succeeded))
    results = ProjectResults(status.astype(jnp.int32), ~keep, act.astype(jnp.int32), norm0, norm, worst,
                             limit_exceeded)
    if error_estimate is not None:
        error_estimate = jnp.asarray(error_estimate, dtype)
        if error_estimate.shape != (s.topology.nu,):
            raise ValueError(f"project_u: error_estimate must have shape ({s.topology.nu},), "
                             f"got {error_estimate.shape}")
        if mp + mv:
            error_estimate = error_estimate - _correction(J, Tpv * (J @ error_estimate), Tpv, scale)
    if throw:
        results = eqx.tree_at(lambda r: r.status, results, _throw(results, "project_u"))
    out = model.realize(s.with_u(u), Stage.Velocity)
    return (out, results) if error_estimate is None else (out, results, error_estimate)


def project(model, state: State, options: ProjectOptions | None = None, *, u_weights=None,
            q_error_weights=None, u_error_weights=None, throw: bool = True):
    """(state, results): the prescribed q set, ``project_q``, the prescribed u
    set, then ``project_u`` at the projected q (Simbody's System::project);
    the State comes back realized through Velocity, and the results are
    those of the two steps together (the first failure's status)."""
    s, rq = project_q(model, prescribe_q(model, state), options, u_weights=u_weights,
                      q_error_weights=q_error_weights, throw=False)
    s, ru = project_u(model, prescribe_u(model, s), options, u_weights=u_weights, q_error_weights=q_error_weights,
                      u_error_weights=u_error_weights, throw=False)
    results = rq.combine(ru)
    if throw:
        results = eqx.tree_at(lambda r: r.status, results, _throw(results, "project"))
    return s, results
