"""Simbody's TimeStepper: ``simulate(model, state, integrator,
report_times)`` advances a State to each report time in turn with one of
Simbody's error-controlled integrators (``simbodyx.integrators``), running
the events' handlers (``simbodyx.events``) between steps.

Everything is pure: the stepping is a while loop per report interval
(``equinox.internal.while_loop``, the loop diffrax is built on), so
``jax.vmap`` runs a batch of trajectories, each with its own steps, and
``jax.grad`` differentiates a rollout in reverse mode with recursive
checkpointing (memory grows with the log of ``max_steps``, not the number
of steps), through the steps taken: the step sizes are not differentiated.
``IntegratorStats.status`` reports a failure; ``throw=True`` raises
``sx.RuntimeCheckError`` naming the status and the time reached (inside a
``jax.jit`` of the caller's, within ``sx.check_errors``).
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.faults import RuntimeCheckError, at_step, check_errors, fault_if
from simbodyx._xla.module import Module
from simbodyx._xla.xla_setup import jit_with_options, kept_out_of_one_function, loop_compiler_options
from simbodyx.enums import NamedIntEnum
from simbodyx.events import (
    calc_event_trigger_info,
    calc_event_triggers,
    calc_time_of_next_scheduled_event,
    cause_order,
    check_events,
    crossed_witnesses,
    handle_events,
    localize,
    triggered_positions,
)
from simbodyx.forces.custom import with_controller
from simbodyx.integrate import Trajectory, total_energies, total_energy
from simbodyx.integrators import Integrator, _Point, _adjust_step, _at, _derivatives
from simbodyx.model import FoldedModel
from simbodyx.progress import progress_of, report
from simbodyx.stage import Stage
from simbodyx.state import State


class IntegratorStatus(NamedIntEnum):
    """Why ``simulate`` stopped (Simbody reports these as exceptions)."""

    Succeeded = 1
    #: the step size fell to nothing (Simbody: "Unable to advance time past t")
    StepSizeTooSmall = 2
    #: ``max_steps`` attempts did not reach the next report time
    StepLimitReached = 3
    #: the initial State, or one an event handler returned, could not be
    #: projected onto the constraint manifold
    ProjectionFailed = 4
    #: q, u or their derivatives became NaN or infinite at a minimum-size step
    NonFinite = 5


class IntegratorStats(Module):
    """Simbody's integrator statistics, as arrays (batched under vmap), and the
    events that happened (the first ``max_event_records`` of them)."""

    status: jnp.ndarray  #: int32, an IntegratorStatus
    num_steps_taken: jnp.ndarray  #: int32 accepted steps
    num_steps_attempted: jnp.ndarray  #: int32 all tries, accepted or not
    num_error_test_failures: jnp.ndarray  #: int32 tries rejected by the error test
    num_convergence_test_failures: jnp.ndarray  #: int32 tries whose projection failed
    actual_initial_step_size_taken: jnp.ndarray  #: s (NaN before the first step)
    previous_step_size_taken: jnp.ndarray  #: s
    predicted_next_step_size: jnp.ndarray  #: s
    num_events: jnp.ndarray  #: int32 handlers run
    event_times: jnp.ndarray  #: (max_event_records,) s, NaN past num_events
    event_index: jnp.ndarray  #: (max_event_records,) int32 position in ``events``, -1 past num_events

    @property
    def succeeded(self):
        return self.status == IntegratorStatus.Succeeded


class _Carry(Module):
    model: object  #: the Model where events may change its numbers (their handlers' output), else None
    base: State  #: the State's instance data and discrete values (handlers may change them)
    prev: _Point  #: the start of the last accepted step, with its derivatives
    adv: _Point  #: the advanced point (its derivative fields unused)
    h: jnp.ndarray
    status: jnp.ndarray
    counts: jnp.ndarray  #: (4,) int32: taken, attempted, error failures, convergence failures
    first_step: jnp.ndarray
    last_step: jnp.ndarray
    due: jnp.ndarray  #: (n_events,) bool the events to handle at adv before stepping on
    witness: jnp.ndarray  #: (n_triggered,) witness values at adv
    num_events: jnp.ndarray
    event_times: jnp.ndarray
    event_index: jnp.ndarray


@check_errors()
def simulate(model, state: State, integrator: Integrator, report_times, *, events=(), controller=None,
             max_event_records: int = 64, throw: bool = True, compiler_options=None, energy: bool = True,
             progress=False):
    """Step a State to each report time with error control: Simbody's TimeStepper.

    The initial State is projected onto the constraint manifold first. A
    report time at ``state.t`` reports that projected State; a report time
    at an event's time reports the State before its handler (the final
    State is after it). Samples after a failure are NaN and
    ``stats.status`` says why.

    A Model small enough for the scalar path (``model.uses_scalar_path()``),
    without events, has its concrete numbers compiled into the stepping
    program as constants: a Model equal in structure and numbers reuses
    the program, other numbers compile their own. Numbers that are traced
    (``jax.vmap``, ``jax.jit`` or ``jax.grad`` over them) are the
    program's inputs; to sweep or fit a few parameters, set them into the
    Model inside the transformed function (``mobod.set_mass_properties``,
    ``eqx.tree_at``) and close over the Model, so that only they are
    traced. Differentiating with respect to the whole Model makes every
    number an input, which compiles and runs several times longer.

    Args:
        model: The Model.
        state: The starting State.
        integrator: One of ``sx.Integrator``'s methods with its accuracy
            (``sx.Integrator.RungeKuttaMerson(accuracy=1e-6)``, ...).
        report_times: (n,) s, nondecreasing, none before ``state.t``; the
            last is the final time, reached by a step.
        events: ``sx.ScheduledEvent`` and ``sx.TriggeredEvent`` handlers
            run on the way (``simbodyx.events``).
        controller: ``controller(t, state) -> (nu,)`` mobility forces added
            at every evaluation of the dynamics, the State realized to
            Velocity (``Force.Controller`` for traced parameters).
        max_event_records: How many event occurrences ``stats`` records.
        throw: Raise on a failure, naming the status (and, called outside
            ``jit``, the time reached and the first non-finite variable).
        compiler_options: XLA's options for the compiled stepping loop.
            None: ``sx.xla_setup.loop_compiler_options()``, so that on
            jaxlib 0.6 too the loop runs as one function, as later releases
            compile it; ``{}``: XLA's own.
        energy: Evaluate the total energy at the reports; False leaves
            ``Trajectory.energy`` None (for a contact model the energy is
            its detection evaluated again).
        progress: Show a progress bar of the report times reached (True,
            or an ``sx.Progress``), moved from inside the compiled loop by
            host callbacks; False adds nothing to the program.

    Returns:
        (final, trajectory, stats): the final State, a ``Trajectory`` at the
            report times, and the :class:`IntegratorStats` (status, steps taken
            and rejected, event records).

    Raises:
        TypeError: ``integrator`` is a time stepper (run those with
            ``sx.integrate.rollout``) or not an ``sx.Integrator``.
        ValueError: Report times that are empty, not 1-D, not finite, not
            nondecreasing or before the State's time, or a negative
            ``max_event_records``.
        simbodyx.RuntimeCheckError: With ``throw``, the integration failed
            (a step size fallen to nothing, the step limit, a failed
            projection, non-finite numbers).
    """
    if hasattr(integrator, "take_step"):  # a time stepper (sx.SemiExplicitEulerTimeStepper)
        raise TypeError(f"simulate: {type(integrator).__name__} takes fixed steps of your choosing, with no error "
                        "control or interpolation to report times; run it with "
                        "sx.integrate.rollout(model, state, dt, num_steps, save_every, method=stepper)")
    if not isinstance(integrator, Integrator):
        raise TypeError(f"simulate: integrator must be one of sx.Integrator's methods, got {type(integrator)}")
    events = check_events(events)
    if controller is not None:
        model = with_controller(model, controller)
    if not (isinstance(max_event_records, int) and max_event_records >= 0):
        raise ValueError(f"simulate: max_event_records must be a non-negative int, got {max_event_records!r}")
    times = jnp.asarray(report_times, state.q.dtype)
    if times.ndim != 1 or times.shape[0] == 0:
        raise ValueError(f"simulate: report_times must be a non-empty 1-D array, got shape {times.shape}")
    if not isinstance(report_times, jax.core.Tracer):
        concrete = np.asarray(report_times, float)
        if np.any(np.diff(concrete) < 0) or not np.all(np.isfinite(concrete)):
            raise ValueError("simulate: report_times must be finite and nondecreasing")
        if not isinstance(state.t, jax.core.Tracer) and concrete[0] < float(state.t):
            raise ValueError(f"simulate: the first report time {concrete[0]} is before the State's time "
                             f"{float(state.t)}")
    arguments = (model.matter._check(state), integrator, times, events, max_event_records if events else 0, energy)
    progress = progress_of(progress, "simulate", "report")
    folded = model if events else FoldedModel.of(model)  # events may change the Model: it is passed as it is
    final, trajectory, stats = _stepping_program(compiler_options)(folded, *arguments, progress=progress)
    if throw:
        stats = _raise_on_failure(model, final, stats)
    return final, trajectory, stats


#: what each failure means, for simulate's errors
_FAILURES = {
    IntegratorStatus.StepSizeTooSmall: "the step size fell to nothing",
    IntegratorStatus.StepLimitReached: "max_steps attempts did not reach the next report time",
    IntegratorStatus.ProjectionFailed: "a State could not be projected onto the constraint manifold",
    IntegratorStatus.NonFinite: "q, u or their derivatives became NaN or infinite",
}


def _first_non_finite(model, state) -> str:
    """Where a State, its applied forces or its derivatives first stop being
    finite, in that order (a NaN force makes every udot NaN), for the
    NonFinite error: "mobility_forces[1] (body 2 ('link', Pin))", or ""."""
    top = state.topology
    s = model.realize(state, Stage.Acceleration)
    for name, values, owner in (("q", state.q, top.q_body), ("u", state.u, top.u_body),
                                ("qdot", s.velocity.qdot, top.q_body),
                                ("mobility_forces", s.dynamics.mobility_forces, top.u_body),
                                ("body_forces", s.dynamics.body_forces, range(top.num_bodies)),
                                ("udot", s.acceleration.udot, top.u_body)):
        values = np.asarray(values)
        rows = values.reshape(len(owner), values.size // max(len(owner), 1))  # a row per owner: an entry or 6 forces
        bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
        if bad.size:
            return f"; the first non-finite value is {name}[{bad[0]}] ({top.body_label(owner[bad[0]])})"
    return ""


def _raise_on_failure(model, final, stats):
    """``stats``, after raising on a failed run: called with concrete arrays the
    error names the status, the time reached and, for NonFinite, the first
    value that is not finite at that time; traced (inside the caller's jit
    or vmap) it names the status and the time reached."""
    advice = "pass throw=False to get the status instead"
    if not isinstance(stats.status, jax.core.Tracer) and not isinstance(final.t, jax.core.Tracer):
        status = IntegratorStatus(int(stats.status))
        if status != IntegratorStatus.Succeeded:
            where = _first_non_finite(model, final) if status == IntegratorStatus.NonFinite else ""
            raise RuntimeCheckError(f"simulate failed: {status.name} at t = {float(final.t):.6g} s "
                               f"({_FAILURES[status]}{where}); {advice}")
        return stats
    messages = [f"simulate failed: {status.name} ({_FAILURES.get(status, 'succeeded')}); {advice}"
                for status in IntegratorStatus]
    index = jnp.clip(stats.status - min(IntegratorStatus), 0, len(messages) - 1)
    status = fault_if(stats.status, stats.status != IntegratorStatus.Succeeded, index, messages, final.t)
    return eqx.tree_at(lambda r: r.status, stats, status)


def _stepping_program(compiler_options: dict | None):
    """The jitted stepping program ``simulate`` calls, :func:`_simulate`,
    built once per options (None: the loop compiler options)."""
    options = loop_compiler_options() if compiler_options is None else compiler_options
    return jit_with_options(_simulate, options, static_argnames=("integrator", "records", "energy", "progress"))


def _simulate(model, state: State, integrator: Integrator, times, events, records, energy, *, progress):
    """The stepping loop; ``model`` a Model or a :class:`FoldedModel`, its
    concrete numbers compiled in (which the scalar path folds)."""
    model = FoldedModel.unfold(model)
    dtype = state.q.dtype
    low, _ = integrator.step_bounds()
    final_time = times[-1]
    nan = jnp.full((), jnp.nan, dtype)
    n_triggered = len(triggered_positions(events))
    windows = jnp.asarray([info.localization_window
                           for info in calc_event_trigger_info(model, events, integrator.accuracy)], dtype)
    order = np.asarray(cause_order(events), np.int32)
    base = _at(state, state.t, state.q, state.u, state.z)

    def current(c: _Carry):
        """The Model now: the carried one where events may change it."""
        return c.model if events else model

    def restart(c: _Carry, model, base: State, t, q, u, z) -> _Carry:
        """c moved to (t, q, u, z), q and u projected, with this model and instance data."""
        q, u, _, _, ok = integrator.project(model, base, t, q, u)
        # the derivatives' places (filled by the first step) as zeros that depend on q, u and z: under
        # differentiation the carry's perturbed parts are then the same before and after a step, so the
        # loops' derivative rules find them in one trace instead of two
        point = _Point(t, q, u, z, 0 * q, 0 * u, 0 * z)
        status = jnp.where(ok, c.status, IntegratorStatus.ProjectionFailed).astype(jnp.int32)
        w = calc_event_triggers(model, _at(base, t, q, u, z), events)
        return dataclasses.replace(c, model=model if events else None, base=base, prev=point, adv=point,
                                   status=status, witness=w)

    def handle(c: _Carry) -> _Carry:
        """The due events' handlers run at adv, logged, and a restart from their State."""
        model, new = handle_events(current(c), _at(c.base, c.adv.t, c.adv.q, c.adv.u, c.adv.z), events, c.due)
        ran = c.due[order]
        slot = jnp.where(ran, c.num_events + jnp.cumsum(ran, dtype=jnp.int32) - 1, records)
        c = dataclasses.replace(c, due=jnp.zeros_like(c.due), num_events=c.num_events + jnp.sum(ran, dtype=jnp.int32),
                                event_times=c.event_times.at[slot].set(c.adv.t, mode="drop"),
                                event_index=c.event_index.at[slot].set(order, mode="drop"))
        return restart(c, model, new, c.adv.t, new.q, new.u, new.z)

    def scheduled_due(t):
        """(n_events,) the scheduled events due at t."""
        t_next, due = calc_time_of_next_scheduled_event(events, t, include_current_time=True)
        return due & (t_next == t)

    start = _Point(state.t, state.q, state.u, state.z, state.q, state.u, state.z)
    carry = restart(_Carry(model, base, start, start, jnp.asarray(integrator.first_step(model), dtype),
                           jnp.asarray(IntegratorStatus.Succeeded, jnp.int32), jnp.zeros(4, jnp.int32), nan, nan,
                           scheduled_due(state.t), jnp.zeros(n_triggered, dtype), jnp.zeros((), jnp.int32),
                           jnp.full(records, jnp.nan, dtype), jnp.full(records, -1, jnp.int32)),
                    model, base, state.t, state.q, state.u, state.z)

    def running(c: _Carry, target):
        return (c.adv.t < target) & (c.status == IntegratorStatus.Succeeded)

    def attempt(c: _Carry, target) -> _Carry:
        model, base, p0, h = current(c), c.base, c.adv, c.h
        t_max = final_time if integrator.allow_interpolation else target
        t_max = jnp.minimum(t_max, calc_time_of_next_scheduled_event(events, p0.t)[0])
        limited = t_max < p0.t + 0.95 * h
        t1 = jnp.where(limited | (t_max <= p0.t + 1.001 * h), t_max, p0.t + h)
        tried = integrator.attempt(model, base, p0, t1)
        q1, u1, z1, p0 = tried.q, tried.u, tried.z, tried.start
        finite = jnp.all(jnp.isfinite(jnp.concatenate([q1, u1, z1])))
        converged = tried.converged & finite
        err = jnp.where(converged, integrator.error_norm(base, p0, q1, tried.q_err, tried.u_err, tried.z_err), jnp.inf)
        h_next, success = _adjust_step(integrator, err, h, limited)
        start_finite = jnp.all(jnp.isfinite(jnp.concatenate([p0.qdot, p0.udot, p0.zdot])))
        status = jnp.where(t1 <= p0.t, IntegratorStatus.StepSizeTooSmall,
                           jnp.where(~start_finite | (~finite & (h <= low)), IntegratorStatus.NonFinite, c.status))
        accepted = success & finite & (status == IntegratorStatus.Succeeded)
        taken = jnp.where(accepted, t1 - p0.t, c.last_step)
        advanced, witness = _Point(t1, q1, u1, z1, p0.qdot, p0.udot, p0.zdot), c.witness
        due_triggered = jnp.zeros(n_triggered, bool)
        if n_triggered:
            witness = calc_event_triggers(model, _at(base, t1, q1, u1, z1), events)
            crossing = crossed_witnesses(events, c.witness, witness) & accepted
            advanced, witness, due_triggered = jax.lax.cond(
                jnp.any(crossing), lambda: cut_back(model, base, p0, advanced, c.witness, witness, crossing),
                lambda: (advanced, witness, due_triggered))
        due = scheduled_due(advanced.t)
        due = due.at[np.asarray(triggered_positions(events), np.int32)].set(due_triggered)
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(accepted, x, y), a, b)  # noqa: E731
        counts = c.counts + jnp.stack([accepted, jnp.ones((), bool), converged & ~success,
                                       ~converged]).astype(jnp.int32)
        return dataclasses.replace(
            c, prev=pick(p0, c.prev), adv=pick(advanced, c.adv), h=h_next, status=status.astype(jnp.int32),
            counts=counts, first_step=jnp.where(jnp.isnan(c.first_step) & accepted, taken, c.first_step),
            last_step=taken, due=pick(due, c.due), witness=pick(witness, c.witness))

    def cut_back(model, base, p0, p1, w0, w1, crossing):
        """(the point at the earliest crossing, its witness values, which
        triggered events are due there): the crossings localized on the step's
        interpolant, the State there projected like a report's."""
        end = _Point(p1.t, p1.q, p1.u, p1.z, *_derivatives(model, base, p1.t, p1.q, p1.u, p1.z))

        def witness_at(t, args):  # (n,): the k-th witness at t[k]
            model, base, p0, end = args
            values = jax.vmap(lambda t: calc_event_triggers(model, _at(base, t, *integrator.interpolate(p0, end, t)),
                                                            events))(t)
            return jnp.diagonal(values)

        ones = jnp.ones(n_triggered, dtype)
        found = localize(witness_at, (model, base, p0, end), p0.t * ones, p1.t * ones, w0, w1, windows, crossing)
        t_event = jnp.min(found)
        q, u, z = integrator.interpolate(p0, end, t_event)
        if integrator.project_interpolated_states:
            q, u, _, _, _ = integrator.project(model, base, t_event, q, u)
        witness = calc_event_triggers(model, _at(base, t_event, q, u, z), events)
        return (_Point(t_event, q, u, z, p0.qdot, p0.udot, p0.zdot), witness,
                crossing & crossed_witnesses(events, w0, witness))

    kind = "checkpointed" if integrator.reverse_mode else "lax"
    in_loop = energy and bool(events)  # the report energies: handlers may change the Model and the State

    def body(c: _Carry, target) -> _Carry:
        if model.params.constraints:  # the projection's loops inside: as one function it compiles for minutes
            c = dataclasses.replace(c, h=kept_out_of_one_function(c.h))
        with at_step(c.counts[0] + 1):  # where a failed run-time check says it happened
            if not events:
                return attempt(c, target)
            return jax.lax.cond(jnp.any(c.due), handle, lambda c: attempt(c, target), c)

    def interval(c: _Carry, at):
        target, reached = at
        # the loop over the reports runs kernel by kernel, its stepping loop still as one function: the two
        # nested in one function compiled 1.5-2.6x longer (docs/explanation/performance.md)
        c = dataclasses.replace(c, h=kept_out_of_one_function(c.h))
        c = eqxi.while_loop(lambda c: running(c, target), lambda c: body(c, target), c,
                            max_steps=integrator.max_steps, kind=kind)
        short = (c.status == IntegratorStatus.Succeeded) & (c.adv.t < target)
        c = dataclasses.replace(c, status=jnp.where(short, IntegratorStatus.StepLimitReached,
                                                    c.status).astype(jnp.int32))
        model, base = current(c), c.base
        at_end = target >= c.adv.t
        end = _Point(c.adv.t, c.adv.q, c.adv.u, c.adv.z, *_derivatives(model, base, c.adv.t, c.adv.q, c.adv.u,
                                                                         c.adv.z))
        q, u, z = integrator.interpolate(c.prev, end, target)
        if integrator.project_interpolated_states:
            q, u, _, _, _ = integrator.project(model, base, target, q, u)
        bad = c.status != IntegratorStatus.Succeeded
        q, u, z = (jnp.where(bad, jnp.nan, jnp.where(at_end, a, y)) for a, y in ((c.adv.q, q), (c.adv.u, u),
                                                                                  (c.adv.z, z)))
        report(progress, reached, times.shape[0])
        return c, (target, q, u, z, total_energy(model, _at(base, target, q, u, z)) if in_loop else None)

    reached = None if progress is None else jnp.arange(1, times.shape[0] + 1)  # off: the loop as without progress
    c, (t, q, u, z, energies) = jax.lax.scan(interval, carry, (times, reached))
    if energy and not in_loop:  # after the loop, whose program is then as without energies
        energies = total_energies(model, base, t, q, u, z)
    if events:  # the events due at the final time
        c = jax.lax.cond(jnp.any(c.due) & (c.status == IntegratorStatus.Succeeded), handle, lambda c: c, c)
    stats = IntegratorStats(c.status, *c.counts, c.first_step, c.last_step, c.h, c.num_events, c.event_times,
                            c.event_index)
    return (_at(c.base, c.adv.t, c.adv.q, c.adv.u, c.adv.z),
            Trajectory(t=t, q=q, u=u, energy=energies, z=z if state.z.shape[-1] else None), stats)
