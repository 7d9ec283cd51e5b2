"""Simbody's error-controlled integrators, which ``simulate``
(``simbodyx.simulation``) steps, chosen by name:

======================================  =====  ============================
``Integrator.RungeKuttaMerson``          4(3)  Simbody's default choice
``Integrator.RungeKutta3``               3(2)
``Integrator.RungeKuttaFeldberg``        4(5)  error estimate of order 5
``Integrator.Verlet``                    3(2)  velocities by a trapezoid
                                               fixed-point iteration
``Integrator.SemiExplicitEuler2``        1     error from two half steps
``Integrator.ExplicitEuler``             1     error from the trapezoid rule
======================================  =====  ============================

Each step follows Simbody's AbstractIntegrator: an explicit step from the
accepted point (t0, q0, u0) and its derivatives; Simbody's error norm (the
q errors weighted as ``N Wu N^+ dq``, the u errors relative to
max(|u0|, 1 / Wu), each RMS or infinity norm, the larger of the two); a
projection of q, then u, onto the constraint manifold to the constraint
tolerance, carrying the error estimate with it (``projection.project_q`` /
``project_u`` with ``local_only``, quaternions normalized); and Simbody's
step-size rule (safety 0.9, growth at most 5x and only above 1.2x, shrink
at least to 0.9x and at most to 0.1x, a step that met the accuracy is never
shrunk). The State at a report time inside a step is the cubic Hermite
interpolant of the step's ends (linear for the Euler methods), projected.
Events (``simbodyx.events``) end a step at a scheduled time or cut it back
to a localized witness crossing; their handlers run before the next step.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.coordinates import multiply_by_n, multiply_by_n_inv
from simbodyx.integrate import state_rates
from simbodyx.motion import model_prescription
from simbodyx.projection import ProjectOptions, project_q, project_u
from simbodyx.stage import Stage
from simbodyx.state import State


class _Point(Module):
    """A point of the trajectory (t, q, u, z) and, once evaluated, its derivatives."""

    t: jnp.ndarray
    q: jnp.ndarray
    u: jnp.ndarray
    z: jnp.ndarray
    qdot: jnp.ndarray
    udot: jnp.ndarray
    zdot: jnp.ndarray


class Attempt(NamedTuple):
    """One try of a step (:meth:`Integrator.attempt`): the end it reached,
    its error estimates, whether its projection converged, and the start
    point with its derivatives evaluated."""

    q: jnp.ndarray  #: (nq,) at the end
    u: jnp.ndarray  #: (nu,)
    z: jnp.ndarray  #: (nz,)
    q_err: jnp.ndarray  #: (nq,) the error estimates of q, u and z
    u_err: jnp.ndarray
    z_err: jnp.ndarray
    converged: jnp.ndarray  #: bool
    start: _Point


def _at(base: State, t, q, u, z) -> State:
    return base.replace(t=t, q=q, u=u, z=z, keep=Stage.Time)


def _realized(model, base: State, t, q, u, z) -> State:
    return model.realize(_at(base, t, q, u, z), Stage.Acceleration)


def _derivatives(model, base: State, t, q, u, z):
    """(qdot, udot, zdot) at (t, q, u, z), locks applied."""
    return state_rates(model, _at(base, t, q, u, z))


class Integrator(Module):
    """Settings shared by Simbody's integrators (static: changing one recompiles).

    ``accuracy`` is the relative accuracy of each step (Simbody's default
    1e-3); ``constraint_tolerance`` the accuracy of the projections (default:
    ``accuracy``). ``initial_step`` defaults to the model's time scale / 10;
    ``minimum_step`` and ``maximum_step`` bound every step; ``fixed_step``
    sets all three (steps then always succeed). ``max_steps`` caps the tries
    between two report times. With ``allow_interpolation=False`` steps end
    exactly at each report time instead of being interpolated. ``reverse_mode``
    chooses the checkpointed loop (``jax.grad``) over the plain one
    (``jax.jvp`` / ``jax.jacfwd``).
    """

    accuracy: float = eqx.field(static=True, default=1e-3)
    constraint_tolerance: float | None = eqx.field(static=True, default=None)
    initial_step: float | None = eqx.field(static=True, default=None)
    minimum_step: float | None = eqx.field(static=True, default=None)
    maximum_step: float | None = eqx.field(static=True, default=None)
    fixed_step: float | None = eqx.field(static=True, default=None)
    use_infinity_norm: bool = eqx.field(static=True, default=False)
    project_interpolated_states: bool = eqx.field(static=True, default=True)
    allow_interpolation: bool = eqx.field(static=True, default=True)
    max_steps: int = eqx.field(static=True, default=10_000)
    reverse_mode: bool = eqx.field(static=True, default=True)

    #: Simbody's method name, the order of its step-size rule, and whether
    #: report states are interpolated linearly (the Euler methods)
    name = "Integrator"
    error_order = 0
    linear_interpolation = False

    def __check_init__(self):
        label = f"Integrator.{self.name}"
        if type(self) is Integrator:
            raise TypeError("choose a method: Integrator.RungeKuttaMerson(...), Integrator.Verlet(...), ...")
        positive = {"accuracy": self.accuracy, "constraint_tolerance": self.constraint_tolerance,
                    "initial_step": self.initial_step, "minimum_step": self.minimum_step,
                    "maximum_step": self.maximum_step, "fixed_step": self.fixed_step}
        for field, value in positive.items():
            if value is not None and not (np.isfinite(value) and value > 0):
                raise ValueError(f"{label}: {field} must be a positive number, got {value}")
        if self.minimum_step and self.maximum_step and self.minimum_step > self.maximum_step:
            raise ValueError(f"{label}: minimum_step {self.minimum_step} exceeds maximum_step {self.maximum_step}")
        if not (isinstance(self.max_steps, int) and self.max_steps >= 1):
            raise ValueError(f"{label}: max_steps must be a positive int, got {self.max_steps!r}")

    # -- settings in use ---------------------------------------------------------------
    @property
    def tolerance(self) -> float:
        return self.accuracy if self.constraint_tolerance is None else self.constraint_tolerance

    def step_bounds(self):
        """(minimum, maximum) step, 0 and inf where unset."""
        if self.fixed_step is not None:
            return self.fixed_step, self.fixed_step
        return self.minimum_step or 0.0, self.maximum_step or np.inf

    def first_step(self, model) -> float:
        if self.fixed_step is not None:
            return self.fixed_step
        h = self.initial_step or model.default_time_scale / 10
        low, high = self.step_bounds()
        return float(min(max(h, low), high))

    def project_options(self) -> ProjectOptions:
        tol = self.tolerance
        return ProjectOptions(accuracy=tol, projection_limit=max(2 * tol, float(np.sqrt(tol))), local_only=True,
                              use_infinity_norm=self.use_infinity_norm)

    # -- one try -----------------------------------------------------------------------
    def error_norm(self, base: State, p0: _Point, q1, q_err, u_err, z_err):
        """Simbody's calcErrorNorm: q errors as N Wu N^+ dq at q1 (Wu = 1), u
        and z errors relative to max(|u0|, 1) and max(|z0|, 1), the largest
        of the three norms."""
        top = base.topology
        dq = multiply_by_n(top, q1, multiply_by_n_inv(top, q1, q_err))
        du = u_err / jnp.maximum(jnp.abs(p0.u), 1.0)
        dz = z_err / jnp.maximum(jnp.abs(p0.z), 1.0)

        def norm(x):
            if x.shape[0] == 0:
                return jnp.zeros((), x.dtype)
            return jnp.max(jnp.abs(x)) if self.use_infinity_norm else jnp.sqrt(jnp.mean(x * x))

        return jnp.maximum(jnp.maximum(norm(dq), norm(du)), norm(dz))

    def project(self, model, base: State, t1, q1, u1, q_err=None, u_err=None):
        """(q, u, q_err, u_err, converged): the prescribed q and u set to their
        values at t1 (their errors zeroed), then q and u projected (with the
        error estimate when given), as Simbody's prescribe and
        localProject*AndErrEst; a model with neither constraints nor
        quaternions has nothing to project."""
        prescribed = model_prescription(model, _at(base, t1, q1, u1, base.z))
        if prescribed is not None:
            top = base.topology
            q1, u1 = prescribed.apply(top, q1, u1)
            if q_err is not None:
                q_err = jnp.where(prescribed.held_q(top), 0.0, q_err)
                u_err = jnp.where(prescribed.held_u(top), 0.0, u_err)
        if not model.params.constraints and not base.topology.quaternion_bodies:
            return q1, u1, q_err, u_err, jnp.ones((), bool)
        options = self.project_options()
        s = _at(base, t1, q1, u1, base.z)
        if q_err is None:
            s, rq = project_q(model, s, options, throw=False)
            s, ru = project_u(model, s, options, throw=False)
        else:
            s, rq, q_err = project_q(model, s, options, error_estimate=q_err, throw=False)
            s, ru, u_err = project_u(model, s, options, error_estimate=u_err, throw=False)
        return s.q, s.u, q_err, u_err, rq.succeeded & ru.succeeded

    def attempt(self, model, base: State, p0: _Point, t1) -> Attempt:
        """One try from p0 (t, q, u, z) to t1, Simbody's attemptDAEStep (z
        is not projected)."""
        raise NotImplementedError

    def interpolate(self, p0: _Point, p1: _Point, t):
        """(q, u, z) at t in [p0.t, p1.t]: cubic Hermite, or linear."""
        h = p1.t - p0.t
        s = jnp.where(h > 0, (t - p0.t) / jnp.where(h > 0, h, 1.0), 1.0)
        if self.linear_interpolation:
            return tuple((1 - s) * a + s * b for a, b in ((p0.q, p1.q), (p0.u, p1.u), (p0.z, p1.z)))
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        return tuple(h00 * y0 + h10 * h * dy0 + h01 * y1 + h11 * h * dy1 for y0, dy0, y1, dy1 in
                     ((p0.q, p0.qdot, p1.q, p1.qdot), (p0.u, p0.udot, p1.u, p1.udot), (p0.z, p0.zdot, p1.z, p1.zdot)))


class _RungeKutta(Integrator):
    """An explicit Runge-Kutta method given by its tableau: stage times c,
    stage coefficients a (rows 2..s), the propagated weights b and the error
    weights e (y1_err = h sum e_i k_i)."""

    c = ()
    a = ()
    b = ()
    e = ()

    def explicit_step(self, model, base, p0, h):
        """(q1, u1, z1, q_err, u_err, z_err, p0 with its derivatives). The
        stages, the first at p0 itself, are one ``lax.scan``: the dynamics is
        traced and compiled once per step, not once per stage."""
        s, dtype = len(self.b), p0.q.dtype
        a = np.zeros((s, s))
        for i, row in enumerate(self.a, start=1):
            a[i, :len(row)] = row
        a, c = jnp.asarray(a, dtype), jnp.asarray((0.0,) + tuple(self.c), dtype)
        y0 = (p0.q, p0.u, p0.z)

        def stage(k, i):
            rates = _derivatives(model, base, p0.t + c[i] * h, *(y + h * (a[i] @ ky) for y, ky in zip(y0, k)))
            return tuple(ky.at[i].set(r) for ky, r in zip(k, rates)), None

        k, _ = jax.lax.scan(stage, tuple(jnp.zeros((s,) + y.shape, dtype) for y in y0), jnp.arange(s))
        b, e = jnp.asarray(self.b, dtype), jnp.asarray(self.e, dtype)
        start = _Point(p0.t, *y0, *(ky[0] for ky in k))
        return (*(y + h * (b @ ky) for y, ky in zip(y0, k)), *(h * (e @ ky) for ky in k), start)

    def attempt(self, model, base, p0, t1):
        """The explicit step, then, when its error is within 2^p of the
        accuracy (a projection could rescue it), the projection of q, u and
        the error estimate with limit max(2 tol, sqrt(tol))."""
        q1, u1, z1, q_err, u_err, z_err, start = self.explicit_step(model, base, p0, t1 - p0.t)
        worth = self.error_norm(base, p0, q1, q_err, u_err, z_err) <= 2.0 ** self.error_order * self.accuracy
        qp, up, qe, ue, converged = self.project(model, base, t1, q1, u1, q_err, u_err)
        pick = lambda a, b: jnp.where(worth, a, b)  # noqa: E731
        return Attempt(pick(qp, q1), pick(up, u1), z1, pick(qe, q_err), pick(ue, u_err), z_err, converged | ~worth,
                       start)


class RungeKuttaMerson(_RungeKutta):
    """Merson's 5-stage fourth-order method with a third-order embedded
    estimate (Hairer, Norsett & Wanner I, table 4.1), Simbody's workhorse."""

    name, error_order = "RungeKuttaMerson", 4
    c = (1 / 3, 1 / 3, 1 / 2, 1.0)
    a = ((1 / 3,), (1 / 6, 1 / 6), (1 / 8, 0.0, 3 / 8), (1 / 2, 0.0, -3 / 2, 2.0))
    b = (1 / 6, 0.0, 0.0, 2 / 3, 1 / 6)
    e = (-1 / 15, 0.0, 3 / 10, -4 / 15, 1 / 30)  # (y1 - y_stage4) / 5


class RungeKutta3(_RungeKutta):
    """Kutta's third-order method, error against the second-order midpoint rule."""

    name, error_order = "RungeKutta3", 3
    c = (1 / 2, 1.0)
    a = ((1 / 2,), (-1.0, 2.0))
    b = (1 / 6, 2 / 3, 1 / 6)
    e = (1 / 6, -1 / 3, 1 / 6)


class RungeKuttaFeldberg(_RungeKutta):
    """Fehlberg's 4(5) pair: the fourth-order solution propagated, the
    difference from the fifth-order one its error."""

    name, error_order = "RungeKuttaFeldberg", 4
    c = (1 / 4, 3 / 8, 12 / 13, 1.0, 1 / 2)
    a = ((1 / 4,), (3 / 32, 9 / 32), (1932 / 2197, -7200 / 2197, 7296 / 2197),
         (439 / 216, -8.0, 3680 / 513, -845 / 4104), (-8 / 27, 2.0, -3544 / 2565, 1859 / 4104, -11 / 40))
    b = (25 / 216, 0.0, 1408 / 2565, 2197 / 4104, -1 / 5, 0.0)
    e = (16 / 135 - 25 / 216, 0.0, 6656 / 12825 - 1408 / 2565, 28561 / 56430 - 2197 / 4104, -9 / 50 + 1 / 5, 2 / 55)


class ExplicitEuler(Integrator):
    """y1 = y0 + h f0, projected; its error is the difference from the
    trapezoid rule with the derivatives at the projected end (order 2)."""

    name, error_order, linear_interpolation = "ExplicitEuler", 2, True

    def attempt(self, model, base, p0, t1):
        h = t1 - p0.t
        p0 = _Point(p0.t, p0.q, p0.u, p0.z, *_derivatives(model, base, p0.t, p0.q, p0.u, p0.z))
        q1, u1, z1 = p0.q + h * p0.qdot, p0.u + h * p0.udot, p0.z + h * p0.zdot
        qp, up, _, _, converged = self.project(model, base, t1, q1, u1)
        qdot1, udot1, zdot1 = _derivatives(model, base, t1, qp, up, z1)
        q_err, u_err = q1 - (p0.q + h / 2 * (p0.qdot + qdot1)), u1 - (p0.u + h / 2 * (p0.udot + udot1))
        return Attempt(qp, up, z1, q_err, u_err, h / 2 * (p0.zdot - zdot1), converged, p0)


class SemiExplicitEuler2(Integrator):
    """Semi-explicit (symplectic) Euler, u first then q = q0 + h N(q0) u1,
    taken as two half steps; the difference from one full step is the error."""

    name, error_order, linear_interpolation = "SemiExplicitEuler2", 2, True

    def attempt(self, model, base, p0, t1):
        top, h = base.topology, t1 - p0.t
        p0 = _Point(p0.t, p0.q, p0.u, p0.z, *_derivatives(model, base, p0.t, p0.q, p0.u, p0.z))
        u_big = p0.u + h * p0.udot
        q_big = p0.q + h * multiply_by_n(top, p0.q, u_big)
        u_half, z_half = p0.u + h / 2 * p0.udot, p0.z + h / 2 * p0.zdot
        q_half = p0.q + h / 2 * multiply_by_n(top, p0.q, u_half)
        _, udot_half, zdot_half = _derivatives(model, base, p0.t + h / 2, q_half, u_half, z_half)
        u1, z1 = u_half + h / 2 * udot_half, z_half + h / 2 * zdot_half
        q1 = q_half + h / 2 * multiply_by_n(top, q_half, u1)
        qp, up, _, _, converged = self.project(model, base, t1, q1, u1)
        return Attempt(qp, up, z1, q1 - q_big, u1 - u_big, z1 - (p0.z + h * p0.zdot), converged, p0)


class Verlet(Integrator):
    """Velocity Verlet: q1 = q0 + h qdot0 + h^2/2 qdotdot0 (projected), u1
    and z1 by the trapezoid rule iterated to convergence (at most 10
    fixed-point passes); errors against the trapezoid rule for q and
    explicit Euler for u and z (times h), order 3."""

    name, error_order = "Verlet", 3

    def attempt(self, model, base, p0, t1):
        h = t1 - p0.t
        options = self.project_options()
        s0 = _realized(model, base, p0.t, p0.q, p0.u, p0.z)
        p0 = _Point(p0.t, p0.q, p0.u, p0.z, s0.velocity.qdot, s0.acceleration.udot, s0.acceleration.zdot)
        q1 = p0.q + h * p0.qdot + h * h / 2 * s0.acceleration.qdotdot
        u_euler, z_euler = p0.u + h * p0.udot, p0.z + h * p0.zdot
        s, rq = project_q(model, _at(base, t1, q1, u_euler, z_euler), options, throw=False)
        q1 = s.q
        tol = min(1e-4, 0.1 * self.accuracy)

        def refine(_, carry):
            u, z, done = carry
            _, udot, zdot = _derivatives(model, base, t1, q1, u, z)
            u_new, z_new = p0.u + h / 2 * (p0.udot + udot), p0.z + h / 2 * (p0.zdot + zdot)
            change = jnp.sqrt(jnp.sum((u_new - u) ** 2) + jnp.sum((z_new - z) ** 2)) / (
                jnp.sqrt(jnp.sum(u * u) + jnp.sum(z * z)) + 1e-300)
            return jnp.where(done, u, u_new), jnp.where(done, z, z_new), done | (change <= tol)

        u1, z1, converged = jax.lax.fori_loop(0, 10, refine, (u_euler, z_euler, jnp.zeros((), bool)))
        qdot1, _, _ = _derivatives(model, base, t1, q1, u1, z1)
        q_err = p0.q + h / 2 * (p0.qdot + qdot1) - q1
        s, ru, u_err = project_u(model, _at(base, t1, q1, u1, z1), options, error_estimate=(u_euler - u1) * h,
                                 throw=False)
        return Attempt(s.q, s.u, z1, q_err, u_err, (z_euler - z1) * h, converged & rq.succeeded & ru.succeeded, p0)


for _cls in (RungeKuttaMerson, RungeKutta3, RungeKuttaFeldberg, Verlet, SemiExplicitEuler2, ExplicitEuler):
    setattr(Integrator, _cls.__name__, _cls)


def _adjust_step(integrator: Integrator, err, h, limited):
    """(next h, success): Simbody's AbstractIntegratorRep::adjustStepSize. The
    step size is a choice of the discretization, not differentiated (as
    diffrax's step-size controllers): gradients are those of the steps taken."""
    accuracy, order = integrator.accuracy, integrator.error_order
    safe_err = jnp.where(jnp.isfinite(err) & (err > 0), err, 1.0)
    new = jnp.where(~jnp.isfinite(err), 0.1 * h,
                    jnp.where(err == 0, 5 * h, 0.9 * h * (accuracy / safe_err) ** (1 / order)))
    new = jnp.where((new > h) & (limited | (new < 1.2 * h)), h, new)
    new = jnp.where(new < h, jnp.where(err <= accuracy, h, jnp.minimum(new, 0.9 * h)), new)
    low, high = integrator.step_bounds()
    new = jax.lax.stop_gradient(jnp.clip(jnp.clip(new, 0.1 * h, 5 * h), low, high))
    return new, new >= h
