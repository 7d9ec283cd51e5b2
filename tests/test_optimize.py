"""Controls in rollouts and optimization with optax: zero-order-hold
mobility forces against the closed form of a pushed slider (RK4 is exact
for piecewise-constant acceleration, so 1e-12), their gradient under each
checkpoint setting, jax.test_util.check_grads on a pendulum, minimize
batched over problems (and with the loop compiler options) and tracing
its loss once, multiple shooting joining into the single rollout, the
augmented Lagrangian against a problem's closed-form KKT point, and
set_mass_properties. The examples' results: tests/test_examples.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.test_util import check_grads

import simbodyx as sx
from conftest import counting_compiles, link, new_system

MASS, DT, STEPS = 2.0, 0.1, 8


@functools.lru_cache(maxsize=None)
def _slider():
    system, matter, _ = new_system()
    sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(0.1))))
    return system.realize_topology()


def test_controls_push_a_slider_as_the_closed_form():
    model, state = _slider()
    state = state.with_q(jnp.array([0.3])).with_u(jnp.array([-0.2]))
    forces = jnp.linspace(-1.0, 2.0, STEPS)
    weights = DT**2 * (STEPS - jnp.arange(STEPS) - 0.5) / MASS  # d x_N / d F_k

    def final_x(forces, checkpoint):
        final, trajectory = sx.integrate.rollout(model, state, DT, controls=forces[:, None], checkpoint=checkpoint,
                                                 energy=False)
        return final.q[0], trajectory

    for checkpoint in (True, 2, False):  # per step, in segments of 2 steps, none
        (x, trajectory), gradient = jax.jit(jax.value_and_grad(final_x, has_aux=True), static_argnums=1)(
            forces, checkpoint)
        assert trajectory.q.shape == (STEPS + 1, 1) and trajectory.energy is None
        assert float(x) == pytest.approx(0.3 - 0.2 * STEPS * DT + float(weights @ forces), abs=1e-12)
        np.testing.assert_allclose(trajectory.u[-1, 0], -0.2 + DT * jnp.sum(forces) / MASS, atol=1e-12)
        np.testing.assert_allclose(gradient, weights, atol=1e-12)
    with pytest.raises(ValueError, match=r"controls must have shape \(num_steps, nu = 1\)"):
        sx.integrate.rollout(model, state, DT, controls=jnp.zeros((STEPS, 2)))
    with pytest.raises(ValueError, match="controls has 8 rows for num_steps = 4"):
        sx.integrate.rollout(model, state, DT, 4, controls=jnp.zeros((STEPS, 1)))
    segmented = sx.integrate.rollout(model, state, DT, save_every=2, controls=forces[:, None], checkpoint=4)[1]
    np.testing.assert_allclose(segmented.q, trajectory.q[::2], atol=1e-15)
    with pytest.raises(ValueError, match=r"checkpoint = 3 steps per segment must be a positive multiple of "
                                         r"save_every \(2\) dividing num_steps \(8\)"):
        sx.integrate.rollout(model, state, DT, 8, save_every=2, checkpoint=3)


def test_check_grads_through_a_controlled_pendulum():
    """Forward and reverse mode to first order, forward mode to second,
    against finite differences (check_grads' float64 tolerance; reverse
    over reverse would compile four times as long)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    sx.MobilizedBody.Pin(matter.Ground(), link())
    model, state = system.realize_topology()
    state = state.with_q(jnp.array([0.4]))

    def final(torques):
        end, _ = sx.integrate.rollout(model, state, 0.02, controls=torques[:, None], energy=False)
        return jnp.concatenate([end.q, end.u])

    torques = (jnp.linspace(0.5, -0.5, 6),)
    check_grads(jax.jit(final), torques, order=1, modes=["fwd", "rev"])
    check_grads(jax.jit(final), torques, order=2, modes=["fwd"])


def test_minimize_is_one_program_batched_over_problems():
    """Adam on |x - target|^2 for three targets at once (vmap over the extra
    argument); the loss history starts at the initial iterate."""

    def loss(x, target):
        return jnp.sum((x - target) ** 2)

    targets = jnp.array([[1.0, -2.0], [0.5, 0.0], [-3.0, 4.0]])
    optimizer = optax.adam(0.1)
    solve = jax.vmap(lambda t: sx.optimize.minimize(loss, jnp.zeros(2), optimizer, 500, t))
    x, losses = solve(targets)
    np.testing.assert_allclose(x, targets, atol=1e-3)
    np.testing.assert_allclose(losses[:, 0], jnp.sum(targets**2, axis=1), atol=1e-12)
    looped = sx.optimize.minimize(loss, jnp.zeros(2), optimizer, 500, targets[0],
                                  compiler_options=sx.xla_setup.loop_compiler_options())
    np.testing.assert_allclose(looped[0], x[0], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="num_steps must be a positive int"):
        sx.optimize.minimize(loss, jnp.zeros(2), optimizer, 0, targets[0])


def test_minimize_traces_the_loss_once_for_the_line_search_too():
    """L-BFGS's line search calls the loss besides the iteration's gradient;
    all calls share one trace, from a weakly typed x0 too."""
    traces = []

    def loss(x, target):
        traces.append(x.shape)
        return jnp.sum((x - target) ** 2)

    x, _ = sx.optimize.minimize(loss, jnp.full(2, 0.5), optax.lbfgs(), 10, jnp.array([1.0, -2.0]))
    assert traces == [(2,)]
    np.testing.assert_allclose(x, [1.0, -2.0], atol=1e-10)


def test_multiple_shooting_joins_into_the_single_rollout():
    """Knots taken from one rollout of the same controls: zero defects and
    the last segment ends where the rollout does (to rounding, 1e-12), with
    time carried into each segment (a time-dependent force would see it).
    Called eagerly, it is one program that a second call reuses."""
    model, state = _slider()
    state = state.with_time(1.0).with_q(jnp.array([0.3])).with_u(jnp.array([-0.2]))
    forces = jnp.linspace(-1.0, 2.0, 12)[:, None]
    final, trajectory = sx.integrate.rollout(model, state, DT, controls=forces, energy=False)
    knots = jnp.concatenate([trajectory.q, trajectory.u], axis=1)[4:12:4]
    ends, defects = jax.jit(sx.optimize.multiple_shooting, static_argnums=5)(
        model, state, DT, forces.reshape(3, 4, 1), knots, "rk4")
    assert ends.shape == (3, 2) and defects.shape == (2, 2)
    np.testing.assert_allclose(defects, 0.0, atol=1e-12)
    np.testing.assert_allclose(ends[-1], jnp.concatenate([final.q, final.u]), atol=1e-12)
    moved, segments = knots.at[0, 1].add(0.5), forces.reshape(3, 4, 1)  # a faster start for segment 1
    _, defects = sx.optimize.multiple_shooting(model, state, DT, segments, knots)
    with counting_compiles() as compiled:
        _, defects = sx.optimize.multiple_shooting(model, state, DT, segments, moved)
    assert not compiled
    np.testing.assert_allclose(defects, jnp.array([[0.0, -0.5], [0.2, 0.5]]), atol=1e-12)  # its end moves by 0.5 * 4 DT
    with pytest.raises(ValueError, match=r"controls must have shape \(segments, steps, nu = 1\)"):
        sx.optimize.multiple_shooting(model, state, DT, forces, knots)
    with pytest.raises(ValueError, match=r"knots must have shape \(segments - 1, nq \+ nu\) = \(2, 2\)"):
        sx.optimize.multiple_shooting(model, state, DT, forces.reshape(3, 4, 1), knots[:1])


def test_augmented_lagrangian_reaches_the_kkt_point():
    """min (x0 - c)^2 + x1^2 s.t. x0 + x1 = 1, x0 <= 0.2: x = (0.2, 0.8),
    lam = -1.6, mu = 2 (c - 0.2) + 1.6 (stationarity), for two c at once
    (vmap); L-BFGS solves each round's smooth subproblem to 1e-8."""

    def problem(x, c):
        return (x[0] - c) ** 2 + x[1] ** 2, jnp.array([x[0] + x[1] - 1.0]), jnp.array([x[0] - 0.2])

    optimizer = optax.lbfgs()
    c = jnp.array([2.0, 3.0])
    x, solution = jax.vmap(lambda c: sx.optimize.augmented_lagrangian(problem, jnp.zeros(2), optimizer, 100, 8, c))(c)
    np.testing.assert_allclose(x, jnp.array([[0.2, 0.8]] * 2), atol=1e-7)
    np.testing.assert_allclose(solution.equality_multipliers[:, 0], -1.6, atol=1e-6)
    np.testing.assert_allclose(solution.inequality_multipliers[:, 0], 2 * (c - 0.2) + 1.6, atol=1e-6)
    assert solution.losses.shape == (2, 8, 100) and np.all(solution.violation[:, -1] < 1e-7)
    with pytest.raises(ValueError, match="returned neither equalities nor inequalities"):
        sx.optimize.augmented_lagrangian(lambda x: (jnp.sum(x**2), None, None), jnp.zeros(2), optimizer, 10, 2)
    with pytest.raises(ValueError, match="num_rounds must be a positive int"):
        sx.optimize.augmented_lagrangian(problem, jnp.zeros(2), optimizer, 10, 0, c[0])


def test_set_mass_properties_replaces_the_model_leaves():
    system, matter, _ = new_system()
    slider = sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0],
                                                                                       sx.Inertia(0.1))))
    model, state = system.realize_topology()
    heavier = slider.set_mass_properties(model, sx.MassProperties(2 * MASS, [0.1, 0, 0], sx.Inertia(0.3)))
    assert float(heavier.params.mass[1]) == 2 * MASS and float(heavier.params.com[1, 0]) == 0.1
    forces = jnp.linspace(-1.0, 2.0, STEPS)

    def final_x(mass):  # x_N = x_0 + v_0 N DT + sum_k w_k F_k / mass
        m = slider.set_mass_properties(model, sx.MassProperties(mass, [0, 0, 0], sx.Inertia(0.1)))
        return sx.integrate.rollout(m, state, DT, controls=forces[:, None], energy=False)[0].q[0]

    weights = DT**2 * (STEPS - jnp.arange(STEPS) - 0.5)  # d x_N / d (F_k / mass)
    np.testing.assert_allclose(jax.grad(final_x)(3.0), -(weights @ forces) / 9.0, atol=1e-12)
    same = slider.set_mass_properties(model, slider.get_default_mass_properties())
    np.testing.assert_array_equal(same.params.inertia, model.params.inertia)
    with pytest.raises(ValueError, match="mass"):
        slider.set_mass_properties(model, sx.MassProperties(-1.0))
    rebuilt = slider.set_mass_properties(_slider()[0], sx.MassProperties(3.0))  # the same tree, built again
    assert float(rebuilt.params.mass[1]) == 3.0
    system, matter, _ = new_system()
    sx.MobilizedBody.Pin(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS)))
    with pytest.raises(ValueError, match="different MultibodySystem"):
        slider.set_mass_properties(system.realize_topology()[0], sx.MassProperties(1.0))
    with pytest.raises(ValueError, match="Ground has no mass properties"):
        matter.Ground().set_mass_properties(model, sx.MassProperties(1.0))


def test_float32_throughout():
    """A float32 Model keeps float32 through multiple shooting, the augmented
    Lagrangian's multipliers and set_mass_properties; results to float32's
    resolution of the float64 ones (1e-5 relative)."""
    system, matter, _ = new_system()
    slider = sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0],
                                                                                       sx.Inertia(0.1))))
    model, state = system.realize_topology()
    single = model.astype("float32")
    forces = jnp.linspace(-1.0, 2.0, 12, dtype="float32").reshape(3, 4, 1)
    knots = jnp.zeros((2, 2), "float32")
    ends, defects = sx.optimize.multiple_shooting(single, single.default_state(), DT, forces, knots)
    wide = sx.optimize.multiple_shooting(model, state, DT, forces.astype("float64"), knots.astype("float64"))
    assert ends.dtype == defects.dtype == np.float32
    np.testing.assert_allclose(defects, wide[1], rtol=1e-5, atol=1e-6)

    def problem(x):  # reach x = 0.2 at rest after 8 steps, |F| <= 4 N (0.32 m reachable)
        final, _ = sx.integrate.rollout(single, single.default_state(), DT, controls=x[:, None], energy=False)
        return 1e-3 * jnp.sum(x**2), jnp.concatenate([final.q - 0.2, final.u]), jnp.abs(x) - 4.0

    x, solution = sx.optimize.augmented_lagrangian(problem, jnp.zeros(STEPS, "float32"), optax.lbfgs(), 50, 6)
    assert x.dtype == solution.equality_multipliers.dtype == solution.inequality_multipliers.dtype == np.float32
    assert float(solution.violation[-1]) < 1e-4
    heavier = slider.set_mass_properties(single, sx.MassProperties(2 * MASS, [0.1, 0, 0], sx.Inertia(0.3)))
    assert heavier.params.mass.dtype == heavier.params.inertia.dtype == np.float32
