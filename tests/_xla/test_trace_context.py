"""Where the products' sums are adds and where reductions
(simbodyx._xla.trace_context): a program that runs once per call sums with adds,
a loop body with reductions, also through simbodyx's jitted functions
traced first outside a loop, its custom derivatives (their functions and
rules, JAX traces both apart from the caller) and a model's rollout. The
values are the same either way (1e-14: at most six adds in another order)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import with_forces

import simbodyx as sx
from simbodyx._xla import trace_context, xla_setup
from simbodyx._xla.trace_context import per_context_jit, traced_in_loop_body
from simbodyx.spatial.vectors import mat_vec

A = jnp.asarray(np.random.default_rng(3).normal(size=(6, 6)))


def _reductions(fn, *args):
    return jax.jit(fn).lower(*args).compile().as_text().count(" reduce(")


def _seen(where):
    def probe(x):
        where.append(traced_in_loop_body())
        return x

    return probe


@pytest.mark.parametrize("loop", [
    lambda f, x: jax.lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0],
    lambda f, x: jax.lax.fori_loop(0, 2, lambda i, c: f(c), x),
    lambda f, x: jax.lax.fori_loop(0, x.astype(int), lambda i, c: f(c), x),
    lambda f, x: jax.lax.while_loop(lambda c: c < 3.0, lambda c: f(c) + 1.0, x),
    lambda f, x: jax.lax.map(f, x[None]),
    lambda f, x: jax.lax.scan(lambda c, _: (jax.jit(jax.checkpoint(jax.vmap(f)))(c[None])[0], None), x, None,
                              length=2)[0],
], ids=["scan", "fori_loop", "fori_loop_dynamic", "while_loop", "map", "jit_checkpoint_vmap_in_scan"])
def test_loop_bodies_are_seen(loop):
    where = []
    jax.jit(lambda x: loop(_seen(where), x))(1.0)
    assert where and all(where)


def test_programs_that_run_once_are_seen():
    where = []
    probe = _seen(where)
    probe(1.0)
    jax.jit(probe)(1.0)
    jax.vmap(probe)(jnp.ones(2))
    jax.grad(probe)(1.0)
    jax.jit(lambda x: jax.lax.cond(x > 0, probe, probe, x))(1.0)
    assert where and not any(where)


def test_a_jitted_function_keeps_one_program_per_context():
    """Traced first outside a loop, then inside one: each has its own cache."""
    f = per_context_jit(jax.jit)(lambda x: mat_vec(A, x))
    x = jnp.arange(6.0)
    looped = lambda x: jax.lax.scan(lambda c, _: (f(c), None), x, None, length=3)[0]  # noqa: E731
    assert _reductions(f, x) == 0
    assert _reductions(looped, x) > 0
    assert _reductions(f, x) == 0
    np.testing.assert_allclose(looped(x), A @ (A @ (A @ x)), rtol=1e-13)


def test_eager_calls_compile_quickly_and_traced_ones_with_their_callers_options():
    """An eager call runs a third program, built on the first eager call
    with XLA's quick settings (on the CPU, this suite's backend); calls
    traced in a program of one's own use the other two, the options of that
    program's own jit."""
    options = []

    def recording_jit(fn, **kwargs):
        options.append(kwargs.get("compiler_options"))
        return jax.jit(fn, **kwargs)

    f = per_context_jit(recording_jit)(lambda x: mat_vec(A, x))
    x = jnp.arange(6.0)
    assert options == [None, None]
    eager, again = f(x), f(2 * x)
    assert options == [None, None, xla_setup.eager_compiler_options()]
    np.testing.assert_allclose(eager, jax.jit(f)(x), rtol=1e-14)
    np.testing.assert_allclose(again, 2 * A @ x, rtol=1e-14)
    assert len(options) == 3


def test_custom_jvp_function_and_rule_know_their_callers_loop():
    @trace_context.custom_jvp(nondiff_argnums=(0,))
    def f(scale, x):
        return scale * mat_vec(A, x)

    @f.defjvp
    def f_jvp(scale, primals, tangents):
        return f(scale, *primals), scale * mat_vec(A, tangents[0])

    x, t = jnp.arange(6.0), jnp.ones(6)

    def once(x):
        return jnp.sin(f(2.0, x))

    def looped(x):
        return jax.lax.scan(lambda c, _: (jnp.sin(f(0.5, c)), None), x, None, length=2)[0]

    def tangent(fn):
        return lambda x: jax.jvp(fn, (x,), (t,))[1]

    assert _reductions(once, x) == _reductions(tangent(once), x) == 0
    assert _reductions(tangent(looped), x) > _reductions(looped, x) > 0  # the rule too
    np.testing.assert_allclose(tangent(once)(x), 2.0 * jnp.cos(2.0 * A @ x) * (A @ t), rtol=1e-13)
    reference = lambda x: jax.lax.scan(lambda c, _: (jnp.sin(0.5 * A @ c), None), x, None, length=2)[0]  # noqa: E731
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(looped(x)))(x),
                               jax.grad(lambda x: jnp.sum(reference(x)))(x), rtol=1e-13, atol=1e-14)


def test_a_models_call_sums_with_adds_and_its_rollout_with_reductions():
    """A two-body tree: forward dynamics at one state has no reduction; the
    same operators in a rollout's loop body (traced after the single call)
    do, and one RK4 step agrees with the single-call derivatives."""
    system, matter, _, _ = with_forces(["Pin", "Ball"], seed=4)
    model, state = system.realize_topology()

    def forward_dynamics(s):
        return model.realize(s, sx.Stage.Acceleration).acceleration.udot

    def rollout(s):
        return sx.integrate.rollout(model, s, 1e-3, 2, save_every=2, energy=False)[0].u

    assert _reductions(forward_dynamics, state) == 0
    assert _reductions(rollout, state) > 0
    dt, udot = 1e-3, forward_dynamics(state)
    step = jax.jit(lambda s: sx.integrate.rk4_step(model, s, dt))(state)
    looped = jax.jit(lambda s: sx.integrate.rollout(model, s, dt, 1, save_every=1, energy=False)[0])(state)
    np.testing.assert_allclose(looped.u, step.u, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose((step.u - state.u) / dt, udot, rtol=1e-2, atol=1e-6)


def test_tracing_says_whether_jax_traces():
    """trace_context.tracing (what the entry points ask before taking the
    scalar path): False eagerly, True under jit, vmap, grad and in a scan,
    whether or not the function's arguments are traced."""
    seen = []

    def probe(x):
        seen.append(trace_context.tracing())
        return x

    probe(1.0)
    jax.jit(lambda: probe(jnp.ones(2)))()
    jax.vmap(probe)(jnp.ones(2))
    jax.grad(probe)(1.0)
    jax.lax.scan(lambda c, _: (probe(c), None), 1.0, None, length=1)
    assert seen == [False, True, True, True, True]
