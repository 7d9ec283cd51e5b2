"""Where the program being traced will run: once per call, or in a loop body.

XLA's CPU runtime handles the scalars of every reduction of a program on
every call of it, so one state's forward dynamics with its products' sums
as reductions costs several times JAX's dispatch floor, and with the sums
as adds it runs near it. In a loop body the runtime pays that once, and
the adds' kernels, run one after another many times, are the slower ones.
:func:`simbodyx._xla.primitives.small_sum` asks :func:`traced_in_loop_body`
which to emit (docs/explanation/performance.md).

simbodyx's jitted functions cache their traced programs, so one traced
outside a loop would be reused inside one: :func:`per_context_jit` keeps a
cache for each (and a third for eager calls, compiled quickly), and
:func:`custom_jvp` tells a custom derivative's function and rule where
their caller was. A function you jit yourself and call both
outside a loop and inside one keeps the program of its first trace: the
same values, only the speed differs.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools

import jax

from simbodyx._xla.faults import check_errors, located_step
from simbodyx._xla.xla_setup import eager_compiler_options

try:
    from jax._src.core import EvalTrace, trace_ctx
except ImportError:  # a JAX release without them: reductions everywhere
    EvalTrace = trace_ctx = None

#: What JAX's trace of a loop body says it is traced for (``lax.scan``,
#: ``lax.map``; ``lax.while_loop``; ``lax.fori_loop``, as a scan or a while).
LOOP_BODIES = frozenset({"scan", "while_body", "fori_loop"})

#: True while tracing a custom derivative's function or rule whose caller
#: was traced in a loop body: JAX traces those apart from their caller.
_CALLER_IN_LOOP_BODY = contextvars.ContextVar("simbodyx_caller_in_loop_body", default=False)


def tracing() -> bool | None:
    """True while JAX traces a function (under jit, vmap, grad, in a loop
    body), False while it evaluates eagerly; None where a JAX release does
    not say. One look at JAX's current trace, whatever the arguments."""
    return None if trace_ctx is None else not isinstance(trace_ctx.trace, EvalTrace)


def traced_in_loop_body() -> bool:
    """True while JAX traces the body of a loop (a scan, a while loop, a
    fori_loop), however deep inside it (jit, vmap, grad, checkpoint, the
    custom derivatives of :func:`custom_jvp`); False when evaluating
    eagerly or tracing a program that runs once per call. Reads JAX's
    current trace and its parents; where a JAX release has no such chain,
    True (reductions: batched programs do not depend on it)."""
    if _CALLER_IN_LOOP_BODY.get() or trace_ctx is None:
        return True
    trace = trace_ctx.trace
    if isinstance(trace, EvalTrace):
        return False
    if not hasattr(trace, "parent_trace"):
        return True
    while trace is not None:
        debug_info = getattr(getattr(trace, "frame", None), "debug_info", None)
        if getattr(debug_info, "traced_for", None) in LOOP_BODIES:
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


@contextlib.contextmanager
def _caller_in_loop_body(in_loop: bool):
    token = _CALLER_IN_LOOP_BODY.set(in_loop)
    try:
        yield
    finally:
        _CALLER_IN_LOOP_BODY.reset(token)


def per_context_jit(jit):
    """Decorator: ``jit`` (``eqx.filter_jit``, ``functools.partial(jax.jit,
    static_argnames=...)``) applied three times to the function, one cache
    for eager calls, compiled with
    :func:`simbodyx._xla.xla_setup.eager_compiler_options`, one for calls
    traced outside loop bodies and one for calls traced inside a loop body."""

    def decorate(fn):
        def copy():
            return functools.wraps(fn)(lambda *args, **kwargs: fn(*args, **kwargs))

        outside, inside, eager = jit(fn), jit(copy()), []

        @functools.wraps(fn)
        @check_errors()  # also where a transformation of the user's evaluates it eagerly (vmap, grad)
        def call(*args, **kwargs):
            if tracing() is False:
                if not eager:
                    eager.append(jit(copy(), compiler_options=eager_compiler_options() or None))
                return eager[0](*args, **kwargs)
            if located_step() is not None:  # a cached trace would keep the loop's step counter: traced inline
                return fn(*args, **kwargs)
            return (inside if traced_in_loop_body() else outside)(*args, **kwargs)

        return call

    return decorate


def custom_jvp(nondiff_argnums=()):
    """Decorator: ``jax.custom_jvp(fn, nondiff_argnums)`` whose function and
    rule (``fn.defjvp(rule, **options)``, called as JAX calls it) are traced
    knowing whether the call was in a loop body: JAX traces them apart from
    the caller, the rule possibly later (when a scan is differentiated)."""

    def decorate(fn):
        @functools.partial(jax.custom_jvp, nondiff_argnums=(0,) + tuple(i + 1 for i in nondiff_argnums))
        def with_context(in_loop, *args):
            with _caller_in_loop_body(in_loop):
                return fn(*args)

        @functools.wraps(fn)
        def call(*args):
            return with_context(traced_in_loop_body(), *args)

        def defjvp(rule, **options):
            def rule_with_context(in_loop, *args):
                with _caller_in_loop_body(in_loop):
                    return rule(*args)

            with_context.defjvp(rule_with_context, **options)
            return rule

        call.defjvp = defjvp
        return call

    return decorate
