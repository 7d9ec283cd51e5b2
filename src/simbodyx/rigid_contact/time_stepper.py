"""Simbody's SemiExplicitEulerTimeStepper: rigid (non-penetrating, impulsive)
contact through the unilateral contacts (``simbodyx.rigid_contact.unilateral``)
and an impulse solver, one fixed step at a time, as a pure function.

One step of length h from (t, q, u), Simbody's algorithm:

1. *Proximity.* Each adopted unilateral contact whose separation sign *
   perr, advanced by h times its approach speed, is at most the constraint
   tolerance takes part in this step (with its friction rows); the others
   are left out (and disabled in the returned State). Simbody tests the
   separation alone, so a contact approaching at speed v is first seen up
   to v h deep; looking one step ahead keeps every step's end within the
   tolerance.
2. *Impact* (Simultaneous, Simbody's default). Contacts approaching faster
   than a tenth of the tolerance that reach the surface within the step
   are impacters (Simbody: approaching and within the tolerance, since it
   does not look ahead); if there are any, a
   compression impulse removes every participating velocity error, with
   Newton restitution folded into the target or, for Poisson restitution, an
   expansion impulse e times each impacter's compression impulse applied in
   a second round, and a third round removes any approach that creates. The
   coefficient of restitution follows Simbody's rule (zero below the capture
   velocity, the contact's ``min_cor`` above the min-COR velocity, linear
   between); friction's coefficient is set once from the slip speed at the
   start of the step (mu_s at or below the transition velocity, mu_d above).
3. *Dynamics.* The forces at the post-impact velocities give the tree's
   unconstrained acceleration udot0; contacts that the impact or the forces
   would bring within the tolerance by the end of the step join in; one
   more solve finds the impulses that keep every participating constraint
   from approaching by the end of the step: G (u + h udot0) - A lambda = 0
   within the bounds, and u1 = u + h udot0 - M^-1 G^T lambda (lambda / h
   are the multipliers). A
   contact still apart may close its gap within the step (its target is an
   approach speed of gap / h rather than zero), so it does not push before
   it touches.
4. *Position.* With ``Bilateral`` projection (the default) the contacts
   that pushed, or that penetrate, and the bilateral constraints are
   corrected to zero position error with a velocity used only for the
   position update, q1 = q + h N (u1 - M^-1 G^T x), A x = e / h, e the
   bilateral constraints' perr and each contact's penetration (a pushing
   contact's remaining gap is closed by its velocity); ``Unilateral`` only
   pushes penetrating contacts out; ``NoPositionProjection`` uses
   q1 = q + h N u1.

With ``localize_impacts=True`` (not Simbody's) a step in which a contact
reaches its surface is split at that moment: the time tau at which the
earliest one touches solves gap + tau rate + tau^2 a = 0 (its separation,
approach speed and contact-free approach acceleration, advanced as a step
advances them), a step of length tau without impacts brings it to the
surface, and the rest of the step starts with the impact. The impact then
happens at the speed it has on arrival, and derivatives see how its timing
moves with the inputs: the rebound height's derivative with respect to a
ball's drop height is e^2 (with the impact at the start of the step it is
1). Both parts run in every step (one program), so a step costs about
twice as much. Without it, a derivative taken through a step with an
impact (``jax.grad`` of a rollout, say) warns once that it is the discrete
map's, not the physical one.

The model's enabled bilateral constraints take part in every solve as
unconditional rows (Simbody's stepper leaves them out), so a mechanism with
loops can hit stops. Adopted ratchets (UnilateralSpeedConstraint) take part
in every solve but the position correction, bounded speed constraints in
the dynamics solve, their impulse within h times their force bounds, and
state-limited frictions (StateLimitedFriction) in the dynamics solve while
their normal force N, taken at the start of the step, is at least
``min_significant_force``, the length of their impulse within h mu N (mu
from the slip speed at the start of the step, as the contacts' friction).
Every contact is in the program every step, masked
when out of play, so ``jax.vmap`` runs States with different contact sets
in one program. Each solve's derivative is the implicit one of its
solution (``simbodyx.rigid_contact.impulse``), so ``jax.grad`` and ``jax.jvp`` through a
step are exact wherever the contacts pushing, sticking and sliding stay
the same.

Auxiliary states z (a Force.Thermostat's) advance explicitly, z += h
zdot at the velocities after the step's impacts, as Simbody's do.

The impulse solver is PGS (``simbodyx.rigid_contact.impulse.PGSImpulseSolver``) unless
``impulse_solver_type="PLUS"`` or a ``PLUSImpulseSolver`` is given
(Simbody's default; see ``simbodyx.rigid_contact.impulse``): PLUS follows a sliding
contact's slip through an impact in sliding intervals; it steps one
trajectory as fast as PGS or faster, but a batch under ``vmap`` several
times slower, and compiles longer (benchmarks/README.md).

Not provided: Simbody's Sequential and Mixed induced-impact models (a
data-dependent number of impact rounds; Simultaneous resolves every impact
in one to three rounds of fixed shape), and prescribed motion and locks.
"""

from __future__ import annotations

import functools
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.faults import check_errors
from simbodyx._xla.module import Module
from simbodyx._xla.trace_context import tracing
from simbodyx.algorithms.aba import ForwardInputs, forward_dynamics
from simbodyx.algorithms.coordinates import multiply_by_n, normalize_quaternions
from simbodyx.algorithms.crba import mass_matrix
from simbodyx.algorithms.kinematics import realize_velocity
from simbodyx.constraints.equations import Equations
from simbodyx.enums import NamedIntEnum
from simbodyx.forces.subsystem import z_derivatives
from simbodyx.linalg import significant_real
from simbodyx.model import FoldedModel
from simbodyx.rigid_contact.impulse import PGSImpulseSolver, PLUSImpulseSolver, Rows, SolveStats
from simbodyx.rigid_contact.unilateral import calc_effective_cof, calc_effective_cor
from simbodyx.spatial.vectors import safe_norm
from simbodyx.stage import Stage
from simbodyx.state import State


class RestitutionModel(NamedIntEnum):
    Poisson = 0  #: the coefficient of restitution is a ratio of impulses
    Newton = 1  #: a ratio of velocities
    NoRestitution = 2  #: every impact is maximally dissipative


class InducedImpactModel(NamedIntEnum):
    Simultaneous = 0
    Sequential = 1
    Mixed = 2


class PositionProjectionMethod(NamedIntEnum):
    Bilateral = 0
    Unilateral = 1
    NoPositionProjection = 2


class ImpulseSolverType(NamedIntEnum):
    PLUS = 0
    PGS = 1


class StepReport(Module):
    """What one step did (arrays, batched under vmap)."""

    proximal: jnp.ndarray  #: (nc,) bool, the unilateral contacts that took part
    impacters: jnp.ndarray  #: (nc,) bool, those that were hit at the start of the step
    num_impact_rounds: jnp.ndarray  #: int32, 0 to 3
    impact_time: jnp.ndarray  #: s into the step of the localized impact (0 unless ``localize_impacts``)
    impulse: jnp.ndarray  #: (m,) total constraint impulses of the step (N s), Simbody's sign
    multipliers: jnp.ndarray  #: (m,) the dynamics phase's multipliers (impulse / h)
    dynamics: SolveStats  #: the dynamics solve's convergence


def _enum(cls, value, what: str):
    try:
        return cls[value] if isinstance(value, str) else cls(value)
    except (KeyError, ValueError):
        raise ValueError(f"SemiExplicitEulerTimeStepper: unknown {what} {value!r}; choose one of "
                         f"{[m.name for m in cls]}") from None


class _Problem:
    """One State's constraint rows for the stepper (a trace-time helper): the
    bilateral constraints (unconditional rows, masked where disabled), then
    every adopted contact, ratchet, bounded speed constraint and state-limited
    friction."""

    def __init__(self, model, state: State):
        params = model.params
        contacts, frictions = params.unilateral_contacts, params.state_limited_frictions
        conditional = contacts + params.unilateral_speeds + params.bounded_speeds
        #: the wrapped constraints: one per conditional constraint, then each friction's
        wrapped = tuple(c.constraint for c in conditional) + tuple(i for f in frictions for i in f.constraints)
        conditional_indices = frozenset(wrapped)
        bilateral = tuple(c for c in params.constraints if c.index not in conditional_indices)
        for c in bilateral:
            if c.ma:
                raise ValueError(f"SemiExplicitEulerTimeStepper: {c.label} has acceleration-only equations, "
                                 "which an impulse cannot enforce")
        elements = bilateral + tuple(params.constraints[i] for i in wrapped)
        self.elements, self.model, self.state = elements, model, state
        self.eqs = Equations(state.topology, elements, state.t, state.q, state.position.X_GB)  # position level
        rows = self.eqs.layout.rows
        nb, nc, ns = len(bilateral), len(contacts), len(params.unilateral_speeds)
        unconditional = tuple(int(r) for i in range(nb) for r in rows[i])
        first = nb + len(conditional)  # the first friction constraint's element
        limited, friction_of = [], []
        for k, f in enumerate(frictions):
            limited.append(tuple(int(r) for i in range(len(f.constraints)) for r in rows[first + i]))
            friction_of += [k] * len(f.constraints)
            first += len(f.constraints)
        self.rows = Rows(
            unconditional=unconditional,
            normal=tuple(int(rows[nb + k][0]) for k in range(nc)),
            sign=tuple(c.sign for c in contacts),
            friction=tuple((int(rows[nb + k][1]), int(rows[nb + k][2])) for k, c in enumerate(contacts) if c.friction),
            friction_contact=tuple(k for k, c in enumerate(contacts) if c.friction),
            speed=tuple(int(rows[nb + nc + k][0]) for k in range(ns)),
            speed_sign=tuple(c.sign for c in params.unilateral_speeds),
            bounded=tuple(int(rows[nb + nc + ns + k][0]) for k in range(len(params.bounded_speeds))),
            limited=tuple(limited))
        self.speeds_on = jnp.zeros(self.eqs.layout.m, bool).at[np.asarray(self.rows.speed, np.int32)].set(True)
        self.bounded_on = jnp.zeros(self.eqs.layout.m, bool).at[np.asarray(self.rows.bounded, np.int32)].set(True)
        self.force_bounds = (jnp.stack([jnp.stack([c.lower, c.upper]) for c in params.bounded_speeds])
                             if params.bounded_speeds else jnp.zeros((0, 2)))
        mp = self.eqs.layout.mp
        self.position_rows = Rows(unconditional=tuple(r for r in unconditional if r < mp), normal=self.rows.normal,
                                  sign=self.rows.sign)
        self.bilateral_rows = Rows(unconditional=self.position_rows.unconditional + self.rows.normal)
        m = self.eqs.layout.m
        on = np.zeros(m, bool)
        on[list(unconditional)] = True
        disabled = None if state.constraint_disabled is None else \
            state.constraint_disabled[np.asarray([c.index for c in elements], np.int32)]
        enabled = self.eqs.layout.enabled_rows(disabled)
        self.bilateral_on = jnp.asarray(on) if enabled is None else jnp.asarray(on) & (enabled > 0)  # (m,)
        #: (m,) the contact each normal and friction row belongs to, -1 elsewhere
        self.row_contact = np.full(m, -1)
        for k, r in enumerate(self.rows.normal):
            self.row_contact[r] = k
        for (rx, ry), k in zip(self.rows.friction, self.rows.friction_contact):
            self.row_contact[[rx, ry]] = k
        self.contacts, self.frictions = contacts, frictions
        self.wrapped = np.asarray(wrapped, np.int32)
        #: (number of friction constraints,) the friction each wrapped friction constraint belongs to
        self.friction_of = np.asarray(friction_of, np.int32)
        self.num_conditional = len(conditional)

    def limited_rows(self, active):
        """(m,) bool: the rows of the active state-limited frictions."""
        on = jnp.zeros(self.eqs.layout.m, bool)
        for group, a in zip(self.rows.limited, active):
            on = on.at[np.asarray(group, np.int32)].set(a)
        return on

    def velocity_errors_and_g(self):
        """(verr (m,), G (m, nu)): the velocity-level errors and their
        derivative with respect to u, which is G (every row here is affine in
        u), by forward differentiation through the body velocities."""
        s, top = self.state, self.state.topology

        def errors(u):
            v = realize_velocity(top, self.model.params, s.position, s.q, u)
            return Equations(top, self.elements, s.t, s.q, s.position.X_GB, V_GB=v.V_GB, qdot=v.qdot,
                             u=u).velocity_errors()

        return errors(s.u), jax.jacfwd(errors)(s.u)

    def contact_rows(self, proximal):
        """(m,) bool: the rows of the proximal contacts (normal and friction)."""
        if not self.contacts:
            return jnp.zeros(self.eqs.layout.m, bool)
        return jnp.where(jnp.asarray(self.row_contact >= 0), proximal[np.maximum(self.row_contact, 0)], False)

    def coefficients(self, name):
        return jnp.stack([getattr(c, name) for c in self.contacts]) if self.contacts else jnp.zeros(0)


class SemiExplicitEulerTimeStepper(Module):
    """Simbody's rigid-contact time stepper (see the module notes); settings
    are static and named as Simbody's setters name them:
    ``restitution_model`` (Poisson, Newton, NoRestitution; "Poisson"),
    ``induced_impact_model`` (only Simultaneous), ``position_projection_method``
    (Bilateral, Unilateral, NoPositionProjection; "Bilateral"),
    ``impulse_solver_type`` ("PGS" or "PLUS"; None: the solver given's, else
    PGS, where Simbody's default is PLUS), ``accuracy`` (1e-2; unused by fixed steps, kept for Simbody's
    getter), ``constraint_tolerance`` (accuracy / 10, m or rad),
    ``default_impact_capture_velocity``, ``default_impact_min_cor_velocity``
    and ``default_friction_transition_velocity`` (m/s; 0 means Simbody's
    floors: twice the constraint tolerance for the capture and transition
    velocities, the capture velocity for the min-COR velocity), and
    ``solver``, a PGSImpulseSolver or PLUSImpulseSolver (None: one of the
    type chosen, with its defaults); ``min_significant_force`` (N; None:
    Simbody's SignificantReal) selects the state-limited frictions that take
    part; ``localize_impacts`` (False) splits a step at the moment of an
    impact (see the module notes)."""

    restitution_model: RestitutionModel = eqx.field(static=True, default=RestitutionModel.Poisson,
                                                    converter=lambda v: _enum(RestitutionModel, v, "restitution_model"))
    induced_impact_model: InducedImpactModel = eqx.field(
        static=True, default=InducedImpactModel.Simultaneous,
        converter=lambda v: _enum(InducedImpactModel, v, "induced_impact_model"))
    position_projection_method: PositionProjectionMethod = eqx.field(
        static=True, default=PositionProjectionMethod.Bilateral,
        converter=lambda v: _enum(PositionProjectionMethod, v, "position_projection_method"))
    impulse_solver_type: ImpulseSolverType | None = eqx.field(
        static=True, default=None,
        converter=lambda v: None if v is None else _enum(ImpulseSolverType, v, "impulse_solver_type"))
    accuracy: float = eqx.field(static=True, default=1e-2)
    constraint_tolerance: float | None = eqx.field(static=True, default=None)
    default_impact_capture_velocity: float = eqx.field(static=True, default=0.0)
    default_impact_min_cor_velocity: float = eqx.field(static=True, default=0.0)
    default_friction_transition_velocity: float = eqx.field(static=True, default=0.0)
    solver: PGSImpulseSolver | PLUSImpulseSolver | None = eqx.field(static=True, default=None)
    localize_impacts: bool = eqx.field(static=True, default=False)
    min_significant_force: float | None = eqx.field(static=True, default=None)

    RestitutionModel = RestitutionModel
    InducedImpactModel = InducedImpactModel
    PositionProjectionMethod = PositionProjectionMethod
    ImpulseSolverType = ImpulseSolverType

    def __check_init__(self):
        label = "SemiExplicitEulerTimeStepper"
        if self.induced_impact_model != InducedImpactModel.Simultaneous:
            raise ValueError(f"{label}: induced_impact_model {self.induced_impact_model.name} is not provided: its "
                             "number of impact rounds depends on the data, which a fixed-shape program cannot "
                             "follow; Simultaneous resolves every impact in one program")
        for name in ("accuracy", "constraint_tolerance", "min_significant_force"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise ValueError(f"{label}: {name} must be a positive number, got {value}")
        for name in ("default_impact_capture_velocity", "default_impact_min_cor_velocity",
                     "default_friction_transition_velocity"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{label}: {name} must be nonnegative, got {value}")
        if self.solver is not None:
            kinds = {PGSImpulseSolver: ImpulseSolverType.PGS, PLUSImpulseSolver: ImpulseSolverType.PLUS}
            if type(self.solver) not in kinds:
                raise TypeError(f"{label}: solver must be a PGSImpulseSolver or a PLUSImpulseSolver, got "
                                f"{type(self.solver).__name__}")
            if self.impulse_solver_type not in (None, kinds[type(self.solver)]):
                raise ValueError(f"{label}: impulse_solver_type {self.impulse_solver_type.name} disagrees with "
                                 f"the solver given, a {type(self.solver).__name__}")

    # -- Simbody's getters ------------------------------------------------------------------
    def get_restitution_model(self) -> RestitutionModel:
        return self.restitution_model

    def get_induced_impact_model(self) -> InducedImpactModel:
        return self.induced_impact_model

    def get_position_projection_method(self) -> PositionProjectionMethod:
        return self.position_projection_method

    def get_impulse_solver_type(self) -> ImpulseSolverType:
        if self.solver is not None:
            return ImpulseSolverType.PLUS if isinstance(self.solver, PLUSImpulseSolver) else ImpulseSolverType.PGS
        return ImpulseSolverType.PGS if self.impulse_solver_type is None else self.impulse_solver_type

    def get_impulse_solver(self) -> PGSImpulseSolver | PLUSImpulseSolver:
        """The solver given, or one of the type chosen with its defaults (a
        PLUSImpulseSolver's transition velocity the friction transition
        velocity in use, as Simbody builds it)."""
        if self.solver is not None:
            return self.solver
        if self.get_impulse_solver_type() == ImpulseSolverType.PLUS:
            return PLUSImpulseSolver(self.get_default_friction_transition_velocity_in_use())
        return PGSImpulseSolver()

    def get_accuracy_in_use(self) -> float:
        return self.accuracy

    def get_constraint_tolerance_in_use(self) -> float:
        return self.accuracy / 10 if self.constraint_tolerance is None else self.constraint_tolerance

    def get_default_impact_capture_velocity(self) -> float:
        return self.default_impact_capture_velocity

    def get_default_impact_min_cor_velocity(self) -> float:
        return self.default_impact_min_cor_velocity

    def get_default_friction_transition_velocity(self) -> float:
        return self.default_friction_transition_velocity

    def get_min_significant_force(self, dtype=jnp.float64) -> float:
        """The smallest normal force (N) with which a state-limited friction takes
        part: the setting, or Simbody's default SignificantReal (eps^(7/8) of ``dtype``)."""
        if self.min_significant_force is not None:
            return self.min_significant_force
        return significant_real(dtype)

    def get_default_impact_capture_velocity_in_use(self) -> float:
        return max(self.default_impact_capture_velocity, 2 * self.get_constraint_tolerance_in_use())

    def get_default_impact_min_cor_velocity_in_use(self) -> float:
        return max(self.default_impact_min_cor_velocity, self.get_default_impact_capture_velocity_in_use())

    def get_default_friction_transition_velocity_in_use(self) -> float:
        return max(self.default_friction_transition_velocity, 2 * self.get_constraint_tolerance_in_use())

    @staticmethod
    def get_restitution_model_name(model) -> str:
        return RestitutionModel(model).name

    @staticmethod
    def get_induced_impact_model_name(model) -> str:
        return InducedImpactModel(model).name

    @staticmethod
    def get_position_projection_method_name(method) -> str:
        return PositionProjectionMethod(method).name

    @staticmethod
    def get_impulse_solver_type_name(solver_type) -> str:
        return ImpulseSolverType(solver_type).name

    # -- stepping ---------------------------------------------------------------------------
    def step(self, model, state: State, dt) -> State:
        """The State one step of length ``dt`` (s) later, at Stage.Time, its
        unilateral contacts enabled where they took part."""
        return self.take_step(model, state, dt)[0]

    @check_errors()
    def take_step(self, model, state: State, dt):
        """(next State, StepReport). Called eagerly (outside ``jit``, ``vmap``
        and ``grad``: a loop of Simbody's kind, one step per Python call), the
        step is one compiled program, which later calls with this stepper's
        settings and the same shapes reuse, as ``sx.integrate.rollout``'s."""
        state = state.check_model(model)
        if model.params.motions or state.locks is not None:
            raise ValueError("SemiExplicitEulerTimeStepper: prescribed motion and locks are not provided; "
                             "model them with bilateral constraints (Constraint.ConstantSpeed, ...)")
        h = jnp.asarray(dt, state.u.dtype)
        if tracing() is False:
            return _compiled_take_step(self, FoldedModel.of(model), state, h)
        return self._take_step(model, state, h)

    def _take_step(self, model, state: State, h):
        s = model.realize(state, Stage.Velocity)
        tau = jnp.zeros((), h.dtype)
        if self.localize_impacts and model.params.unilateral_contacts:
            tau = self._time_of_impact(model, s, h)
            moved = tau > 0
            first, _ = self._advance(model, s, jnp.where(moved, tau, h), impacts=False)
            pick = functools.partial(jnp.where, moved)
            s = s.with_constraint_disabled(pick(first.constraint_disabled, s.constraint_disabled))
            s = model.realize(s.replace(t=pick(first.t, s.t), q=pick(first.q, s.q), u=pick(first.u, s.u),
                                        z=pick(first.z, s.z)), Stage.Velocity)
        out, report = self._advance(model, s, h - tau, impacts=True)
        if not self.localize_impacts and model.params.unilateral_contacts:
            out = out.replace(u=_warned_if_differentiated(out.u, jnp.any(report.impacters)), keep=Stage.Time)
        return out, eqx.tree_at(lambda r: r.impact_time, report, tau)

    def _time_of_impact(self, model, s: State, h):
        """The earliest time within the step (s) at which a contact approaching
        faster than a tenth of the tolerance reaches the surface, its separation
        advanced as the step advances it: gap + tau rate + tau^2 a = 0 with a
        the approach acceleration without contact; 0 when none does, or one
        already touches."""
        problem = _Problem(model, s)
        normal = np.asarray(problem.rows.normal, np.int32)
        sign = jnp.asarray(problem.rows.sign, s.u.dtype)
        verr, G = problem.velocity_errors_and_g()
        gap, rate = sign * problem.eqs.position_errors()[normal], sign * verr[normal]
        d = model.realize(s, Stage.Dynamics)
        udot, _ = forward_dynamics(model.topology, ForwardInputs.at(d))
        accel = sign * (G @ udot)[normal]
        disc = rate * rate - 4 * accel * gap
        reaching = (rate < -0.1 * self.get_constraint_tolerance_in_use()) & (disc >= 0)
        root = 2 * gap / (-rate + jnp.sqrt(jnp.where(reaching, disc, 1.0)))
        tau = jnp.min(jnp.where(reaching, root, h))
        return jnp.where((tau < h) & jnp.all(~reaching | (gap > 0)), tau, 0.0)

    def _advance(self, model, s: State, h, impacts: bool):
        """One step of length h from a State realized to Velocity: (next State, StepReport)."""
        tol = self.get_constraint_tolerance_in_use()
        top, params = model.topology, model.params
        problem = _Problem(model, s)
        rows, eqs = problem.rows, problem.eqs
        normal = np.asarray(rows.normal, np.int32)
        sign = jnp.asarray(rows.sign, s.u.dtype)
        perr = eqs.position_errors()
        verr0, G = problem.velocity_errors_and_g()
        M = mass_matrix(top, params, s.position)
        L = jnp.linalg.cholesky(M)
        M_inv_Gt = jax.scipy.linalg.cho_solve((L, True), G.T)  # (nu, m)
        A = G @ M_inv_Gt

        gap = sign * perr[normal]
        proximal = gap + h * jnp.minimum(sign * verr0[normal], 0) <= tol  # at the end of the step
        participating = problem.bilateral_on | problem.speeds_on | problem.contact_rows(proximal)
        mu = self._friction(problem, verr0)
        normal_forces = jnp.stack([jnp.maximum(f.get_normal_force_magnitude(s), 0) for f in problem.frictions]) \
            if problem.frictions else jnp.zeros(0, s.u.dtype)
        limited = normal_forces >= self.get_min_significant_force(s.u.dtype)
        limits = h * self._limited_friction(problem, verr0) * normal_forces  # impulse bounds

        touching = gap + h * sign * verr0[normal] <= 0  # reaches the surface within the step
        if impacts:
            impulse, impacters, rounds = self._impact(problem, A, verr0, proximal, touching, participating, mu)
        else:
            impulse, impacters, rounds = jnp.zeros_like(verr0), jnp.zeros_like(proximal), jnp.zeros((), jnp.int32)
        u1 = s.u - M_inv_Gt @ impulse

        with jax.named_scope("dynamics_phase"):
            s1 = model.realize(s.replace(u=u1, keep=Stage.Position), Stage.Dynamics)
            udot0, _ = forward_dynamics(top, ForwardInputs.at(s1))
            verr_start = verr0 - A @ impulse
            free_end = verr_start + G @ (h * udot0)  # the velocity errors at the end without contact
            # the impact or the forces may bring more contacts into play within the step
            proximal = proximal | (gap + h * jnp.minimum(sign * free_end[normal], 0) <= tol)
            participating = (problem.bilateral_on | problem.speeds_on | problem.bounded_on
                             | problem.contact_rows(proximal) | problem.limited_rows(limited))
            closing = free_end.at[normal].add(sign * jnp.maximum(gap, 0) / h)  # may close a gap, not pass it
            bounds = -h * problem.force_bounds[:, ::-1]  # lower <= -lambda <= upper, lambda = pi / h
            lam, stats = self.get_impulse_solver().solve(A, closing, rows, participating, mu, bounds=bounds,
                                                         limits=limits)
            u2 = u1 + h * udot0 - M_inv_Gt @ lam

        with jax.named_scope("position_phase"):
            q_rate = self._position_correction(problem, A, M_inv_Gt, perr, gap, h, proximal, stats.active, u2)
            q2 = normalize_quaternions(top, s.q + h * multiply_by_n(top, s.q, q_rate))

        # z explicitly, at the velocities after the impacts (Simbody's z += h zdot)
        out = s.replace(t=s.t + h, q=q2, u=u2, z=s.z + h * z_derivatives(model, s1), keep=Stage.Time)
        if len(problem.wrapped):
            in_play = jnp.concatenate([proximal, jnp.ones(problem.num_conditional - len(problem.contacts), bool),
                                       limited[problem.friction_of]])
            out = out.with_constraint_disabled(out.constraint_disabled.at[problem.wrapped].set(~in_play))
        report = StepReport(proximal=proximal, impacters=impacters, num_impact_rounds=rounds, impact_time=0 * h,
                            impulse=impulse + lam, multipliers=lam / h, dynamics=stats)
        return out, report

    def _friction(self, problem: _Problem, verr):
        """(nc,) effective coefficients of friction from the slip speeds in verr."""
        nc = problem.rows.num_contacts
        if not problem.rows.friction:
            return jnp.zeros(nc, verr.dtype)
        slip = safe_norm(verr[np.asarray(problem.rows.friction, np.int32)])
        owner = np.asarray(problem.rows.friction_contact, np.int32)
        mu = calc_effective_cof(problem.coefficients("mu_s")[owner], problem.coefficients("mu_d")[owner],
                                problem.coefficients("mu_v")[owner],
                                self.get_default_friction_transition_velocity_in_use(), slip)
        return jnp.zeros(nc, verr.dtype).at[owner].set(mu)

    def _limited_friction(self, problem: _Problem, verr):
        """(number of state-limited frictions,) effective coefficients of friction
        from their slip speeds in verr."""
        transition = self.get_default_friction_transition_velocity_in_use()
        mu = []
        for group, f in zip(problem.rows.limited, problem.frictions):
            mu.append(f.calc_effective_cof(transition, safe_norm(verr[np.asarray(group, np.int32)])))
        return jnp.stack(mu) if mu else jnp.zeros(0, verr.dtype)

    def _impact(self, problem: _Problem, A, verr, proximal, touching, participating, mu):
        """(total impact impulse (m,), impacters (nc,), number of rounds): Simbody's
        simultaneous impact, skipped (one branch) when nothing is hit."""
        rows, dtype = problem.rows, verr.dtype
        normal = np.asarray(rows.normal, np.int32)
        sign = jnp.asarray(rows.sign, dtype)
        tol = self.get_constraint_tolerance_in_use()
        solve = self.get_impulse_solver().solve

        def hit(v):
            return proximal & (sign * v[normal] < -0.1 * tol)

        impacters = hit(verr) & touching

        def impact(verr):
            speed = sign * verr[normal]
            if self.restitution_model == RestitutionModel.NoRestitution:
                cor = jnp.zeros_like(speed)
            else:
                cor = calc_effective_cor(problem.coefficients("min_cor"),
                                         self.get_default_impact_capture_velocity_in_use(),
                                         self.get_default_impact_min_cor_velocity_in_use(), -speed)
                cor = jnp.where(speed >= -tol, 0.0, cor)
            newton = self.restitution_model == RestitutionModel.Newton
            target = verr.at[normal].add(cor * verr[normal]) if newton else verr

            def impact_round(carry, i):
                """Round 0 compresses, round 1 applies the expansion (Poisson), round 2
                removes any approach that creates; a round counts while ``counts``."""
                verr, total, known, expanding, counts = carry
                first, expand = i == 0, i == 1
                sitting_out = participating.at[normal].set(participating[normal] & ~expanding)  # the expanding normals
                pi, _ = solve(A, jnp.where(first, target, verr), rows, jnp.where(expand, sitting_out, participating),
                              mu, known=jnp.where(expand, known, 0.0))
                applied = pi + jnp.where(expand, known, 0.0)
                verr = verr - A @ applied
                total = total + jnp.where(first | counts, applied, 0.0)
                fresh = impacters & (cor > 0) & (jnp.abs(pi[normal]) >= significant_real(dtype))
                expanding = jnp.where(first, fresh, expanding)
                known = jnp.where(first, jnp.zeros_like(verr).at[normal].set(jnp.where(fresh, cor * pi[normal], 0.0)),
                                  known)
                counts = jnp.where(first, jnp.any(fresh), counts & jnp.any(hit(verr)))
                return (verr, total, known, expanding, counts), counts

            start = (verr, jnp.zeros_like(verr), jnp.zeros_like(verr), jnp.zeros_like(impacters), jnp.zeros((), bool))
            (_, total, _, _, _), counted = jax.lax.scan(impact_round, start, jnp.arange(1 if newton else 3))
            return total, (1 + jnp.sum(counted[:-1])).astype(jnp.int32)

        def no_impact(verr):
            return jnp.zeros_like(verr), jnp.zeros((), jnp.int32)

        if not rows.num_contacts:
            return jnp.zeros_like(verr), impacters, jnp.zeros((), jnp.int32)
        total, rounds = jax.lax.cond(jnp.any(impacters), impact, no_impact, verr)
        return total, impacters, rounds

    def _position_correction(self, problem: _Problem, A, M_inv_Gt, perr, gap, h, proximal, active, u):
        """The velocity that moves q this step: u less the correction that
        removes the position errors of the contacts in play."""
        method = self.position_projection_method
        if method == PositionProjectionMethod.NoPositionProjection:
            return u
        normal = np.asarray(problem.rows.normal, np.int32)
        mp = problem.eqs.layout.mp
        violation = jnp.where(gap < 0, perr[normal], 0.0)  # a pushing contact's gap closes by its velocity
        rhs = jnp.zeros(A.shape[0], perr.dtype).at[:mp].set(perr / h).at[normal].set(violation / h)
        holonomic = problem.bilateral_on & (jnp.arange(A.shape[0]) < mp)
        if method == PositionProjectionMethod.Bilateral:
            correcting = active | (proximal & (gap < 0))
            x, _ = self.get_impulse_solver().solve(A, rhs, problem.bilateral_rows, holonomic.at[normal].set(correcting))
        else:
            x, _ = self.get_impulse_solver().solve(A, rhs, problem.position_rows, holonomic.at[normal].set(proximal))
        return u - M_inv_Gt @ x


#: What a derivative through an unlocalized impact is told, once per process.
IMPACT_DERIVATIVE_WARNING = (
    "SemiExplicitEulerTimeStepper: a derivative is taken through a step with an impact, which this stepper applies "
    "at the step's start; the derivative is the discrete map's and misses how the impact's timing moves with the "
    "inputs (a ball's rebound height gets derivative 1 with respect to its drop height, where the physical one is "
    "e^2). SemiExplicitEulerTimeStepper(localize_impacts=True) splits the step at the moment of contact and gives "
    "the physical derivative.")


@jax.custom_jvp
def _warned_if_differentiated(x, impact):
    """``x``; differentiated (forward or reverse), it warns where ``impact`` holds."""
    return x


@_warned_if_differentiated.defjvp
def _warned_if_differentiated_jvp(primals, tangents):
    x, impact = primals
    jax.debug.callback(_warn_of_impact, impact)
    return x, tangents[0]


def _warn_of_impact(impact):
    if impact:
        warnings.warn(IMPACT_DERIVATIVE_WARNING)  # shown once per process, at this line


@eqx.filter_jit
def _compiled_take_step(stepper: SemiExplicitEulerTimeStepper, model, state: State, h):
    return stepper._take_step(FoldedModel.unfold(model), state, h)
