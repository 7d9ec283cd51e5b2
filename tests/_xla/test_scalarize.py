"""The scalar path (simbodyx.scalarize): the same values and derivatives as
the array program, far fewer operations, the automatic choice and its
fallback. Tolerances: TOL (a few hundred ulps) for values, which differ
only in the order of additions; 1e-10 for gradients through a rollout."""

import functools
import logging
import pathlib
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest
from conftest import FD_STEP, FD_TOL, TOL, compiled_kernels, count_primitive, equations, new_system, primitive_names

import simbodyx as sx
from simbodyx._xla.scalarize import CHOICE, MAX_MOBILITIES, NotScalarizable, scalarize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
try:
    import trajopt  # the own-loop swing-up's loop, as a user writes it
finally:
    sys.path.pop(0)

T, MB = sx.Transform, sx.MobilizedBody


def _num_eqns(fn, *args):
    """Operations in fn's program, those of called programs included."""
    return sum(1 for _ in equations(jax.make_jaxpr(fn)(*args).jaxpr))


def _arithmetic(fn, *args):
    """The arithmetic primitives of fn's program, called programs included, and how often each occurs."""
    found = [e.primitive.name for e in equations(jax.make_jaxpr(fn)(*args).jaxpr)]
    return {n: found.count(n) for n in set(found) if n in ("add", "sub", "mul", "neg", "sin", "div")}


def test_known_numbers_fold_and_the_rest_is_emitted_once_per_entry():
    A = jnp.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])

    def f(x):
        y = A @ x + jnp.cross(x, jnp.array([0.0, 0.0, 1.0]))
        return jnp.sin(y[:2]).sum() * jnp.ones(2), y

    g = scalarize(f)
    x = jnp.array([0.3, -1.2, 0.7])
    for a, b in zip(f(x), g(x)):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-15)
    # y = (x0 + 2 x2 + x1, x1 - x0, 0) and sin(y0) + sin(y1): the zeros and ones of A and e_z fold away
    assert _arithmetic(g, x) == {"mul": 1, "add": 4, "neg": 1, "sin": 2}
    assert _num_eqns(g, x) < _num_eqns(f, x)
    np.testing.assert_allclose(jax.jit(g)(x)[1], f(x)[1], atol=1e-15)
    xs = jnp.stack([x, 2 * x])
    np.testing.assert_allclose(jax.vmap(g)(xs)[1], jax.vmap(f)(xs)[1], atol=1e-15)
    grad = jax.grad(lambda x, h: h(x)[0][0] + h(x)[1] @ jnp.arange(3.0), argnums=0)
    np.testing.assert_allclose(grad(x, g), grad(x, f), atol=1e-15)
    x32 = x.astype(jnp.float32)  # float32 stays float32 (f's float64 constants promote, as in f)
    for h in (f, lambda x: jnp.cross(x, x[::-1]) * 2.0):
        for a, b in zip(jax.tree.leaves(jax.jit(scalarize(h))(x32)), jax.tree.leaves(h(x32))):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=0, atol=TOL[np.dtype("float32")])
    assert scalarize(h)(x32).dtype == jnp.float32
    # a float32 operand of a float64 product: formed in float64, as XLA forms it
    B = jnp.asarray(np.random.default_rng(0).normal(size=(3, 3)))
    np.testing.assert_allclose(jax.jit(scalarize(lambda x: B @ x))(x32), B @ x32, rtol=0, atol=1e-15)


def test_integer_powers_of_traced_entries():
    """x**k on traced entries (under jit) for k from -2 to 3: x**0 is 1, not
    x (a polynomial written as sum(c * x**i) once came out wrong)."""
    x = jnp.array([0.5, -1.7, 2.5])
    for k in range(-2, 4):
        np.testing.assert_allclose(jax.jit(scalarize(lambda x, k=k: x ** k))(x), x ** k, rtol=1e-15, err_msg=f"k={k}")


def test_a_slice_update_of_a_whole_array():
    """``y.at[a:b].set(v)`` covering all of y is a scatter with no index
    entries (an empty index array, once typed float and refused)."""
    x = jnp.array([0.5, -1.7, 2.5])
    np.testing.assert_array_equal(jax.jit(scalarize(lambda x: jnp.zeros(3).at[0:3].set(2 * x)))(x), 2 * x)


def test_a_traced_input_is_taken_apart_by_one_equation_whose_transpose_fuses():
    """A traced 8 x 8 input (an MLP layer's weights, say) enters the program
    as its 64 entries through one ``entries`` equation. Its value, jit, vmap
    (the batch on the first or the last axis), forward and reverse derivatives and
    forward-over-reverse equal the array program's (1e-13: the same
    arithmetic in another order). The gradient stacks the entries'
    cotangents in groups of eight that XLA fuses with their computations:
    at most one kernel per group, where one concatenation of 64 pieces made
    each entry's cotangent a kernel of its own."""
    rng = np.random.default_rng(0)
    W, x = jnp.asarray(rng.normal(size=(8, 8))), jnp.asarray(rng.normal(size=8))
    f = lambda W, x: jnp.sum(jnp.sin(W @ x) ** 2)  # noqa: E731
    g = scalarize(f)
    assert count_primitive(jax.make_jaxpr(g)(W, x).jaxpr, "entries") == 2
    close = functools.partial(np.testing.assert_allclose, rtol=0, atol=1e-13)
    close(jax.jit(g)(W, x), f(W, x))
    Ws = jnp.stack([W, W.T, 2 * W])
    close(jax.vmap(g, (0, None))(Ws, x), jax.vmap(f, (0, None))(Ws, x))
    close(jax.vmap(g, (2, None))(Ws.T, x), jax.vmap(f, (2, None))(Ws.T, x))
    close(jax.jit(jax.grad(g))(W, x), jax.grad(f)(W, x))
    close(jax.jvp(g, (W, x), (W.T, x[::-1]))[1], jax.jvp(f, (W, x), (W.T, x[::-1]))[1])
    hvp = lambda h: jax.jvp(jax.grad(h), (W, x), (W.T, x[::-1]))[1]  # noqa: E731
    close(hvp(g), hvp(f))
    assert compiled_kernels(jax.grad(g), W, x) <= 64 // 8 + 1


def test_data_movement_with_known_indices_is_bookkeeping():
    """Gathers, dynamic slices and updates, scatters and scatter-adds with
    known indices move entries (and add the colliding ones) without emitting
    anything but the additions."""
    def f(x):
        moved = lax.dynamic_update_slice(x[jnp.array([2, 0, 1, 1])], lax.dynamic_slice(x, (1,), (2,)), (1,))
        return moved.at[jnp.array([0, 0, 3])].add(x[:3]), x.at[jnp.array([1])].set(x[:1] * 2.0)

    x = jnp.array([0.3, -1.2, 0.7])
    for a, b in zip(scalarize(f)(x), f(x)):
        np.testing.assert_array_equal(a, b)
    # entry 0 collects x0 and x1, entry 3 collects x2: three additions; the doubling: one product
    assert _arithmetic(scalarize(f), x) == {"add": 3, "mul": 1}

    def g(x):  # splits, pads (negative: cropping; interior) and extrema
        a, b = jnp.split(x, [1])
        padded = lax.pad(b, 0.5, [(-1, 2, 1)])
        return padded, jnp.max(x) * a, jnp.min(jnp.stack([x, 2 * x]), axis=0)

    for a, b in zip(scalarize(g)(x), g(x)):
        np.testing.assert_array_equal(a, b)

    def empty(x, y):  # reductions of empty arrays, on either side of the axis (a model without mobilities)
        return jnp.sum(x, axis=-1), jnp.sum(y, axis=0)

    for a, b in zip(scalarize(empty)(jnp.zeros((0, 3, 2)), jnp.zeros((0, 3))), (jnp.zeros((0, 3)), jnp.zeros(3))):
        np.testing.assert_array_equal(a, b)


def test_scans_are_unrolled_in_either_direction():
    """A scan's body is evaluated once per iteration, forward or reversed,
    its carries and stacked outputs as the scan's own."""
    def f(x, reverse):
        return lax.scan(lambda c, xi: (c * xi + 1.0, c - xi), x[0], x, reverse=reverse)

    x = jnp.array([0.3, -1.2, 0.7, 2.0])
    for reverse in (False, True):
        for a, b in zip(jax.tree.leaves(scalarize(lambda x: f(x, reverse))(x)), jax.tree.leaves(f(x, reverse))):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)
    assert "scan" not in primitive_names(jax.make_jaxpr(scalarize(lambda x: f(x, False)))(x).jaxpr)


def test_operations_it_does_not_evaluate_raise():
    with pytest.raises(NotScalarizable, match="cholesky"):
        scalarize(jnp.linalg.cholesky)(jnp.eye(3))
    with pytest.raises(NotScalarizable, match="traced indices"):
        jax.jit(scalarize(lambda x, i: x[i]))(jnp.arange(3.0), 1)
    assert scalarize(lambda x, i: x[i])(jnp.arange(3.0), 1) == 1.0  # concrete arguments are known numbers


def _models():
    """Small models on the automatic scalar path: the cart-pole (Slider, Pin)
    and a Ball pendulum on a Slider with a tilted frame and a spring (quaternions)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    cart = MB.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.01))))
    MB.Pin(cart, sx.Body.Rigid(sx.MassProperties.from_central(0.1, [0, -0.5, 0], sx.Inertia(0.01, 0.0, 0.01))))
    cartpole, _ = system.realize_topology()
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    base = MB.Slider(matter.Ground(), T(sx.Rotation.about_z(0.4), [0, 0, 0]),
                     sx.Body.Rigid(sx.MassProperties(2.0, [0, 0, 0], sx.Inertia(0.1))), T())
    ball = MB.Ball(base, T([0, -0.2, 0.1]), sx.Body.Rigid(
        sx.MassProperties.from_central(0.7, [0.1, -0.4, 0.05], sx.Inertia(0.03, 0.02, 0.04, 0.001, 0.0, 0.002))), T())
    sx.Force.TwoPointLinearSpring(forces, matter.Ground(), [0.5, 0, 0], ball, [0, -0.4, 0], 30.0, 0.2)
    pendulum, _ = system.realize_topology()
    return {"cartpole": cartpole, "ball_pendulum": pendulum}


MODELS = _models()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_scalar_path_equals_the_array_program(name):
    """Both models stay on the automatic scalar path (a program grown past
    MAX_OPERATIONS would be declined silently). Derivatives and their
    Jacobian with respect to (q, u) at random States on both paths; the gradient of a controlled RK4 rollout on the
    scalar path (the controls reach it as traced numbers inside the Model)
    against central differences along a random direction (FD_TOL)."""
    model = MODELS[name]
    assert model.uses_scalar_path() and model.topology.nu <= MAX_MOBILITIES
    rng = np.random.default_rng(0)
    state = model.default_state()
    states = jax.vmap(lambda q, u: model.matter.normalize_quaternions(state.with_q(q).with_u(u)))(
        jnp.asarray(state.q + 0.5 * rng.normal(size=(4, state.q.size))), jnp.asarray(rng.normal(size=(4, state.u.size))))
    start = jax.tree.map(lambda x: x[0], states)

    def on_both(f):
        return [jax.jit(f(model.with_scalar_path(use))) for use in (True, False)]

    def field(m):
        return lambda q, u: jnp.concatenate(sx.integrate.derivatives(m, start.with_q(q).with_u(u)))

    values, jacobians = (on_both(lambda m: jax.vmap(lambda s: jnp.concatenate(sx.integrate.derivatives(m, s)))),
                         on_both(lambda m: jax.jacrev(field(m), argnums=(0, 1))))
    a, b = values[0](states), values[1](states)
    jax.jit(lambda s: sx.integrate.derivatives(model, s))(start)  # the automatic choice, kept
    assert model.uses_scalar_path()
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL[np.dtype("float64")] * max(1.0, float(jnp.abs(b).max())))
    for a, b in zip(jacobians[0](start.q, start.u), jacobians[1](start.q, start.u)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e3 * TOL[np.dtype("float64")] * max(1.0, float(jnp.abs(b).max())))

    scalar_model = model.with_scalar_path(True)

    def loss(controls):
        final, _ = sx.integrate.rollout(scalar_model, start, 0.01, controls=controls, energy=False)
        return jnp.sum(final.q ** 2) + jnp.sum(final.u ** 2)

    controls = jnp.asarray(rng.normal(size=(20, model.topology.nu)))
    direction = jnp.asarray(rng.normal(size=controls.shape))
    value = jax.jit(loss)
    slope = (value(controls + FD_STEP * direction) - value(controls - FD_STEP * direction)) / (2 * FD_STEP)
    np.testing.assert_allclose(jnp.vdot(jax.jit(jax.grad(loss))(controls), direction), slope, rtol=FD_TOL)


def test_programs_are_shared_by_calls_with_the_same_known_numbers_only():
    """A scalar program is traced once per combination of its known numbers:
    the cart-pole in a new jit calls the program already traced; with a
    heavier pole, or with its q known (closed over), it gets its own, and
    each equals its own array program (TOL)."""
    model = MODELS["cartpole"]
    heavier = eqx.tree_at(lambda m: m.params.mass, model, model.params.mass.at[2].multiply(3.0))
    state = model.default_state().with_q(jnp.array([0.2, 0.7])).with_u(jnp.array([-0.3, 1.1]))

    def udot(m, q):
        return sx.integrate.derivatives(m, state.with_q(q))[1]

    def traced(m):
        return jax.make_jaxpr(lambda q: udot(m, q))(state.q)

    def called(jaxpr):
        return [e.params["jaxpr"] for e in equations(jaxpr.jaxpr) if e.primitive.name in ("pjit", "jit")]

    first, again, other = called(traced(model)), called(traced(model)), called(traced(heavier))
    assert len(first) == 1 and first[0] is again[0] and other[0] is not first[0]
    q_known = called(jax.make_jaxpr(lambda u: sx.integrate.derivatives(model, state.with_u(u))[1])(state.u))
    assert q_known[0] is not first[0]
    for m in (model, heavier):
        np.testing.assert_allclose(jax.jit(lambda q: udot(m, q))(state.q),
                                   jax.jit(lambda q: udot(m.with_scalar_path(False), q))(state.q),
                                   rtol=0, atol=TOL[np.dtype("float64")])
    assert not np.allclose(jax.jit(lambda q: udot(model, q))(state.q), jax.jit(lambda q: udot(heavier, q))(state.q))


def test_automatic_choice_decides_once_per_model_before_tracing(caplog):
    """A planar five-bar (three Pins and a rocker closed by a Ball: 4 u,
    about 2,100 operations) and a chain of four Pins on tilted frames (about
    2,900) take the array program, decided once per structure from the
    vector field's size and logged with the reason; forced, the scalar path
    gives both the array program's values, and a four-bar's Jacobian too
    (the scalar path differentiates the constrained solve's arithmetic, the
    articulation included, where the array program has its implicit rule);
    a chain longer than MAX_MOBILITIES is not sized. A Model passed as a
    traced argument (its numbers symbolic, its program larger) keeps its
    structure's decision: the cart-pole stays on the scalar path."""
    link = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02, 0.01, 0.02)))

    def chain(n, closed=False):
        system, matter, forces = new_system()
        sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
        bodies = [matter.Ground()]
        for i in range(n):
            tilt = 0.0 if closed else 0.3 * (i % 2)
            bodies.append(MB.Pin(bodies[-1], T(sx.Rotation.about_x(tilt), [0, -1.0 if i else 0.0, 0]), link, T()))
        if closed:
            rocker = MB.Pin(matter.Ground(), T([1.0, 0, 0]), link, T())
            sx.Constraint.Ball(bodies[-1], [1.0, -0.5, 0], rocker, [0, 0.5 - n, 0])  # assembled at q = 0
        return system.realize_topology()

    for model, state in (chain(3, closed=True), chain(4)):
        with caplog.at_level(logging.INFO, logger="simbodyx"):
            assert not model.uses_scalar_path()
        assert any("takes the array path" in r.message and "passed 1900 operations" in r.message
                   for r in caplog.records)
        assert CHOICE.decisions[CHOICE.key(model)] == (False, CHOICE.decisions[CHOICE.key(model)].reason)
        array = sx.integrate.derivatives(model.with_scalar_path(False), state)
        for a, b in zip(jax.jit(lambda s: sx.integrate.derivatives(model, s))(state), array):
            np.testing.assert_array_equal(a, b)
        assert model.with_scalar_path(True).uses_scalar_path()
        forced = sx.integrate.derivatives(model.with_scalar_path(True), state)
        np.testing.assert_allclose(forced[1], array[1], atol=TOL[np.dtype("float64")])
    model, state = chain(2, closed=True)
    state = state.with_q(jnp.array([0.3, -0.2, 0.4])).with_u(jnp.array([0.5, -1.0, 0.2]))

    def udot_of(m):
        return jax.jit(jax.jacrev(lambda q, u: sx.integrate.derivatives(m, state.with_q(q).with_u(u))[1], (0, 1)))

    for a, b in zip(udot_of(model.with_scalar_path(True))(state.q, state.u),
                    udot_of(model.with_scalar_path(False))(state.q, state.u)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e3 * TOL[np.dtype("float64")] * max(1.0, float(jnp.abs(b).max())))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="simbodyx"):
        assert not chain(MAX_MOBILITIES + 1)[0].uses_scalar_path()
    assert "more than MAX_MOBILITIES" in caplog.text
    cartpole = MODELS["cartpole"]
    assert cartpole.uses_scalar_path()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a scalar program that failed would warn and turn the model to arrays
        jax.make_jaxpr(lambda m, s: sx.integrate.derivatives(m, s))(cartpole, cartpole.default_state())
    assert cartpole.uses_scalar_path()


def test_a_loop_of_ones_own_runs_the_rollout_program():
    """RK4 written as a user writes it (benchmarks/trajopt.py's own loop:
    lax.scan; model.realize, model.forces, model.matter in each stage) on
    the cart-pole: the same trajectory as
    sx.integrate.rollout (1e-12: the same arithmetic up to the order of a
    few additions) and the same gradient (1e-10); its vector field is the
    scalar program of sx.integrate.derivatives (no more arithmetic, no array
    products), the outputs of model.realize keeping their known entries for
    the operators after it."""
    model = MODELS["cartpole"]
    state = model.default_state().with_q(jnp.array([0.1, 0.5]))
    dt, controls = 0.01, jnp.asarray(np.random.default_rng(1).normal(size=(40, 2)))

    field = trajopt.own_loop_field(sx, model, state)

    def own_loop(controls):
        return trajopt.own_loop(sx, model, state, controls, dt)

    def through_rollout(controls):
        trajectory = sx.integrate.rollout(model, state, dt, controls=controls, energy=False)[1]
        return trajectory.q[1:], trajectory.u[1:]

    for a, b in zip(jax.jit(own_loop)(controls), jax.jit(through_rollout)(controls)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    grads = [jax.jit(jax.grad(lambda c, f=f: jnp.sum(f(c)[0][-1] ** 2)))(controls) for f in (own_loop, through_rollout)]
    np.testing.assert_allclose(grads[0], grads[1], rtol=0, atol=1e-10)

    q, u, control = state.q, state.u, controls[0]
    own = _arithmetic(field, q, u, control)
    derivatives = _arithmetic(lambda q, u: sx.integrate.derivatives(model, state.with_q(q).with_u(u)), q, u)
    assert sum(own.values()) <= sum(derivatives.values()) + 2, (own, derivatives)  # + the control's 2 adds
    assert not primitive_names(jax.make_jaxpr(field)(q, u, control).jaxpr) & {"dot_general", "reduce_sum"}
    # each entry point's scalar program traced once, its four RK4 stages calling it
    calls = [e.params["jaxpr"] for e in equations(jax.make_jaxpr(own_loop)(controls).jaxpr)
             if e.primitive.name in ("pjit", "jit")]
    assert len(calls) == 12 and len({id(c) for c in calls}) == 3, (len(calls), len({id(c) for c in calls}))
