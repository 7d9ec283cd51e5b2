"""Errors raised from inside compiled code, readable as Python errors.

A check made on the numbers a compiled program computes (the checks mode's
NaN and zero-quaternion checks, ``throw=True`` on projection, assembly and
``simulate``) can only stop the program through a host callback. JAX then
raises its own ``JaxRuntimeError`` whose text opens with "INTERNAL:
CpuCallback error calling callback: Traceback", holds the message in the
middle of a traceback of JAX's frames, and logs a second traceback to
stderr. This module keeps all of that out of the user's sight:

- :func:`fault_if` adds the check to a program: its message is chosen by
  index, and the time and step where it happened are added when known
  (the time from the State being checked, the step from the loop around
  it, :func:`at_step`). With concrete numbers (eager, op by op) it raises
  at once.
- Every compiled call simbodyx makes from Python, and any call of the
  user's inside :class:`check_errors`, turns JAX's error back into
  :class:`RuntimeCheckError`, whose text is the message alone.

Goes when JAX raises a callback's exception as itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np


class RuntimeCheckError(RuntimeError):
    """A check on the numbers a computation produced failed while it ran:
    the checks mode's (``model.with_checks()``: a NaN, a zero quaternion, a
    singular solve), or a failed projection, assembly or ``simulate`` asked
    to raise (``throw=True``). The message names the body, constraint or
    call, and the time (s) and step where known."""


#: The step counter of the loop being traced (a traced int32), set by :func:`at_step`.
_STEP: contextvars.ContextVar = contextvars.ContextVar("simbodyx_fault_step", default=None)
#: The text of the last error raised from inside a program (what :class:`check_errors` re-raises).
_last_message: list[str] = [""]


@contextlib.contextmanager
def at_step(step):
    """While tracing a loop's body: checks traced inside it report ``step``
    (a traced integer: the loop's step being taken, counted from 1) as where
    they happened; None: no step."""
    token = _STEP.set(step)
    try:
        yield
    finally:
        _STEP.reset(token)


def located_step():
    """The step of :func:`at_step` being traced (None: none). A check traced
    in a program of its own would keep it past its loop's trace, so
    simbodyx's cached programs are traced inline while it is set."""
    return _STEP.get()


def located(message: str, t, step) -> str:
    """``message`` with the time (s) and step it happened at, where known."""
    where = [f"t = {float(t):.6g} s"] if np.isfinite(t) else []  # -inf: a batch member with no time
    where += [f"in step {int(step)}"] if step > 0 else []
    return f"{message} (at {', '.join(where)})" if where else message


def fault_if(x, bad, index, messages, t=None):
    """``x``, carrying a check: when any entry of ``bad`` holds, the program
    stops with :class:`RuntimeCheckError` ``(messages[index])``, located at
    time ``t`` (s; None: not known) and the step of :func:`at_step`. Under
    ``vmap`` the batch's largest failing index (and its latest time) is
    reported; derivatives pass through as if the check were not there."""
    pred = jnp.any(bad)
    step = located_step()
    if not isinstance(pred, jax.core.Tracer) and not isinstance(index, jax.core.Tracer) and step is None:
        if bool(pred):  # concrete numbers: op by op, raise here
            raise RuntimeCheckError(located(messages[int(index)], np.nan if t is None else t, 0))
        return x
    _quiet_jax_callback_log()
    t = jax.lax.stop_gradient(jnp.asarray(jnp.nan if t is None else t, float))  # where, not what: no derivative
    step = jnp.asarray(0 if step is None else step, jnp.int32)
    failing = (eqxi.unvmap_max(jnp.where(pred, jnp.asarray(index, jnp.int32), -1)),
               eqxi.unvmap_max(jnp.where(pred, t, -jnp.inf)), eqxi.unvmap_max(jnp.where(pred, step, 0)))
    return _stopped_if(x, eqxi.unvmap_any(pred), *failing, tuple(messages))


@functools.partial(jax.custom_jvp, nondiff_argnums=(5,))
def _stopped_if(x, pred, index, t, step, messages):
    def stop(x):  # the callback gives the branch's result, so it stays in the program; it never returns
        return jax.pure_callback(functools.partial(_raise, messages), jax.eval_shape(lambda: x), index, t, step)

    return jax.lax.cond(pred, stop, lambda x: x, x)


@_stopped_if.defjvp
def _stopped_if_jvp(messages, primals, tangents):
    return _stopped_if(*primals, messages), tangents[0]


def _raise(messages, index, t, step):
    message = located(messages[int(index)], float(t), int(step))
    _last_message[0] = message
    raise RuntimeCheckError(message)


class check_errors(contextlib.ContextDecorator):
    """Inside it (``with sx.check_errors(): ...``, or as a decorator), a
    failed run-time check of a program compiled by your own ``jax.jit``
    raises :class:`RuntimeCheckError` with the check's message, instead of
    JAX's ``JaxRuntimeError`` that holds it mid-traceback. simbodyx's own
    compiled calls need no wrapper."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        # JAX's runtime error (a RuntimeError on every release; a ValueError where the failure surfaces as
        # the result is awaited) carrying the callback's traceback, whose last line names the error
        carried = isinstance(error, (RuntimeError, ValueError)) and not isinstance(error, RuntimeCheckError)
        if carried and f"{RuntimeCheckError.__name__}: " in str(error):
            raise RuntimeCheckError(_last_message[0]) from None
        return False


@functools.cache
def _quiet_jax_callback_log():
    """JAX logs a failed callback's traceback before raising; drop that log
    for :class:`RuntimeCheckError` (its text is the error's own)."""
    logging.getLogger("jax._src.callback").addFilter(
        lambda record: not (record.exc_info and isinstance(record.exc_info[1], RuntimeCheckError)))
