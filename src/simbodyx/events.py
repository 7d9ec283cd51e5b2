"""Events during ``simulate``: Simbody's scheduled and triggered event handlers.

* ``ScheduledEvent(times, handler)``: the handler runs when the trajectory
  reaches each of ``times`` (steps end exactly there), Simbody's
  ScheduledEventHandler / PeriodicEventHandler.
* ``TriggeredEvent(witness, handler, direction=0)``: the handler runs where
  the witness ``witness(model, state) -> scalar`` (the State realized through
  Velocity) crosses zero: rising (``direction=+1``, from < 0 to >= 0),
  falling (``-1``, from > 0 to <= 0) or either (0), Simbody's
  TriggeredEventHandler. A step across a crossing is cut back to it: the
  crossing is localized on the step's interpolant (modified regula falsi)
  to the event's localization window, Simbody's default 0.1 x accuracy x
  the model's time scale, and the handler runs at the window's far end, the
  first time found at which the witness has crossed.

A handler is ``handler(model, state) -> state`` or ``-> (model, state)``,
``state`` realized through Velocity at the event time. It may change the
State's values (q, u, which constraints are disabled, lock values) and the
Model's numbers (a parameter), never their structure (shapes, or locks on
a State that had none). Events due at the same time run one after another,
triggered ones before scheduled ones (Simbody's order of causes), each in
the order given; the State the last returns is projected onto the
constraint manifold before the integration goes on. A handler that leaves
its witness on the crossed side (a ball left at the floor) needs a
``direction``, or leaving that side triggers it again. A handler that
returns its State unchanged is a reporter: the event is logged in
``IntegratorStats``.

Handlers and witnesses are pure JAX functions, traced once: events work
under ``jit``, ``vmap`` (each trajectory meets its own events) and ``grad``.
The event time's derivative is the implicit one (dt = -dg / g'), so
derivatives across an event include its moving time (Simbody's saltation).
What cannot be jitted (printing, host callbacks, changing the model's
structure, a decision to stop the simulation) belongs outside: stop at a
report time and call ``simulate`` again.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.stage import Stage

#: Regula falsi iterations at most, per localization.
LOCALIZATION_ITERATIONS = 100


class ScheduledEvent(Module):
    """A handler run at given times (s)."""

    times: jnp.ndarray  #: (k,) s
    handler: Callable = eqx.field(static=True)

    def __check_init__(self):
        times = np.asarray(self.times, float)
        if times.ndim != 1 or not np.all(np.isfinite(times)):
            raise ValueError(f"ScheduledEvent: times must be a 1-D array of finite times, got {self.times!r}")
        if not callable(self.handler):
            raise TypeError("ScheduledEvent: handler must be callable: handler(model, state) -> state")


class TriggeredEvent(Module):
    """A handler run where ``witness(model, state)`` crosses zero in ``direction``."""

    witness: Callable = eqx.field(static=True)
    handler: Callable = eqx.field(static=True)
    direction: int = eqx.field(static=True, default=0)
    localization_window: float | None = eqx.field(static=True, default=None)  #: s

    def __check_init__(self):
        if self.direction not in (-1, 0, 1):
            raise ValueError(f"TriggeredEvent: direction must be -1 (falling), 0 (either) or +1 (rising), "
                             f"got {self.direction!r}")
        if not callable(self.witness) or not callable(self.handler):
            raise TypeError("TriggeredEvent: witness(model, state) -> scalar and handler(model, state) -> state "
                            "must be callable")
        if self.localization_window is not None and not self.localization_window > 0:
            raise ValueError(f"TriggeredEvent: localization_window must be positive, got {self.localization_window}")


class EventTriggerInfo(Module):
    """Simbody's EventTriggerInfo: which sign changes count, and the window (s)
    an event time is localized to."""

    rising: bool = eqx.field(static=True)
    falling: bool = eqx.field(static=True)
    localization_window: float = eqx.field(static=True)


def check_events(events) -> tuple:
    """The events as a tuple, each checked."""
    events = tuple(events)
    for e in events:
        if not isinstance(e, (ScheduledEvent, TriggeredEvent)):
            raise TypeError(f"simulate: events must be sx.ScheduledEvent or sx.TriggeredEvent, got {type(e)}")
    return events


def triggered_positions(events) -> list[int]:
    """Positions of the triggered events."""
    return [k for k, e in enumerate(events) if isinstance(e, TriggeredEvent)]


def calc_event_trigger_info(model, events, accuracy: float) -> tuple[EventTriggerInfo, ...]:
    """Simbody's calcEventTriggerInfo: for each triggered event, its directions
    and its localization window (its own, or 0.1 x ``accuracy`` x the model's
    time scale)."""
    return tuple(EventTriggerInfo(rising=e.direction >= 0, falling=e.direction <= 0,
                                  localization_window=e.localization_window
                                  or 0.1 * accuracy * model.default_time_scale)
                 for e in check_events(events) if isinstance(e, TriggeredEvent))


def calc_event_triggers(model, state, events) -> jnp.ndarray:
    """(n_triggered,) the witness values at a State (realized here through
    Velocity), Simbody's getEventTriggers."""
    chosen = [events[k] for k in triggered_positions(events)]
    if not chosen:
        return jnp.zeros(0, state.q.dtype)
    s = model.realize(state, Stage.Velocity)
    return jnp.stack([jnp.asarray(e.witness(model, s), state.q.dtype).reshape(()) for e in chosen])


def calc_time_of_next_scheduled_event(events, t, include_current_time: bool = False):
    """(time, due): Simbody's calcTimeOfNextScheduledEvent, the first
    scheduled time after ``t`` (at or after it with ``include_current_time``),
    inf if none, and (n_events,) which events are scheduled then."""
    times = [jnp.asarray(e.times) if isinstance(e, ScheduledEvent) else jnp.zeros(0) for e in events]
    later = (lambda s: s >= t) if include_current_time else (lambda s: s > t)
    t_next = jnp.min(jnp.asarray([jnp.min(jnp.where(later(s), s, jnp.inf), initial=jnp.inf) for s in times]
                                 or [jnp.inf]))
    return t_next, jnp.asarray([jnp.any(s == t_next) for s in times], bool).reshape(len(events))


def crossed_witnesses(events, before, after) -> jnp.ndarray:
    """(n_triggered,) whether each witness crossed zero in its direction."""
    chosen = [events[k] for k in triggered_positions(events)]
    rise = np.array([e.direction >= 0 for e in chosen], bool)
    fall = np.array([e.direction <= 0 for e in chosen], bool)
    return (rise & (before < 0) & (after >= 0)) | (fall & (before > 0) & (after <= 0))


def handle_events(model, state, events, due):
    """(model, state) after the handlers of the ``due`` events, triggered
    ones first, each given the State realized through Velocity."""

    def run(handler, model, state):
        out = handler(model, model.realize(state, Stage.Velocity))
        model_out, state_out = out if isinstance(out, tuple) else (model, out)
        return model_out, state_out.replace(keep=Stage.Model)

    for k in cause_order(events):
        model, state = jax.lax.cond(due[k], lambda m, s, k=k: run(events[k].handler, m, s),
                                    lambda m, s: (m, s), model, state)
    return model, state


def cause_order(events) -> list[int]:
    """Positions of the events in the order their handlers run at one time."""
    return triggered_positions(events) + [k for k, e in enumerate(events) if isinstance(e, ScheduledEvent)]


def localize(g, args, t0, t1, g0, g1, window, active):
    """(n,) the first times in (t0, t1] at which the functions ``g(t, args) ->
    (n,)`` (the k-th evaluated at t[k]) have crossed zero, each on its own
    bracket with g0 = g(t0), g1 = g(t1) on opposite sides, where ``active``,
    else inf: modified regula falsi (Illinois) until each bracket is at most
    ``window`` wide, returning its far (crossed) end. The derivative is the
    implicit one, dt = -(dg/d args) / (dg/dt), not the iteration's: the
    search runs on constants."""
    fixed = jax.lax.stop_gradient(args)

    def unfinished(carry):
        lo, hi, *_, i = carry
        return jnp.any(active & (hi - lo > window)) & (i < LOCALIZATION_ITERATIONS)

    def step(carry):
        lo, hi, g_lo, g_hi, side, i = carry
        done = ~active | (hi - lo <= window)
        t = jnp.clip((lo * g_hi - hi * g_lo) / jnp.where(g_hi == g_lo, 1.0, g_hi - g_lo), lo, hi)
        t = jnp.where((t <= lo) | (t >= hi), (lo + hi) / 2, t)
        g_t = g(t, fixed)
        same_as_lo = jnp.sign(g_t) == jnp.sign(g_lo)
        # Illinois: halve the stale end's value when the same end moves twice in a row
        new = (jnp.where(same_as_lo, t, lo), jnp.where(same_as_lo, hi, t),
               jnp.where(same_as_lo, g_t, jnp.where(side < 0, g_lo / 2, g_lo)),
               jnp.where(same_as_lo, jnp.where(side > 0, g_hi / 2, g_hi), g_t),
               jnp.where(same_as_lo, 1, -1))
        kept = tuple(jnp.where(done, a, b) for a, b in zip(carry[:5], new))
        return kept + (i + 1,)

    start = jax.lax.stop_gradient((t0, t1, g0, g1))
    side = jnp.zeros(jnp.shape(t0), jnp.int32)
    _, t, *_ = jax.lax.while_loop(unfinished, step, start + (side, jnp.zeros((), jnp.int32)))
    # one Newton step's tangent with none of its value: g(t*(args), args) = 0
    _, slope = jax.jvp(lambda t: g(t, fixed), (t,), (jnp.ones_like(t),))
    newton = -g(t, args) / jnp.where(slope == 0, 1.0, slope)
    return jnp.where(active, t + newton - jax.lax.stop_gradient(newton), jnp.inf)
