"""The examples solve their problems: the cart-pole swing-up both ways
(single shooting by Adam and by L-BFGS), the 7-link arm's gradient
against central finite differences, the four-bar steered through its
constrained dynamics (the gradient through the multipliers against central
differences), a ball thrown through a bounce to a target (the gradient
through the contact against central differences), and bricks dropped onto
an incline under rigid contact. Each example is run as its module's
functions, on the settings it prints. The arm's reach (by gradient and by
random shooting) and system identification are checked where their
notebooks run them (tests/test_notebooks.py, CLAIMS)."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

import simbodyx as sx

from conftest import FD_STEP

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import arm_reaching  # noqa: E402
import bounce_to_target  # noqa: E402
import cartpole_swingup  # noqa: E402
import fourbar_control  # noqa: E402
import rigid_contact  # noqa: E402


def test_cartpole_swing_up_reaches_the_upright():
    forces, losses, final = cartpole_swingup.swing_up()
    assert abs(float(final.q[1]) - np.pi) < 0.05 and float(jnp.max(jnp.abs(final.u))) < 0.1
    assert abs(float(final.q[0])) < 0.05
    sampled = np.asarray(losses[50::25])  # after warm-up the cost falls
    assert np.all(np.diff(sampled) < 0) and sampled[-1] < 1e-3 * float(losses[0])


def test_cartpole_swing_up_by_lbfgs():
    """optax.lbfgs through the same minimize: 60 iterations, each accepted
    by the line search only if it lowers the cost."""
    forces, losses, final = cartpole_swingup.swing_up(cartpole_swingup.LBFGS_ITERATIONS, "lbfgs")
    assert abs(float(final.q[1]) - np.pi) < 0.01 and float(jnp.max(jnp.abs(final.u))) < 0.01
    assert abs(float(final.q[0])) < 0.01
    assert np.all(np.diff(np.asarray(losses)) <= 1e-12 * np.asarray(losses[:-1]))


def test_cartpole_swing_up_by_multiple_shooting_respects_the_force_limit():
    """The joined trajectory, re-simulated as one rollout of the forces,
    ends near the upright (defects of 5e-4 grow along the unstable upswing)
    with every force within the 8 N limit."""
    forces, solution, final = cartpole_swingup.swing_up_multiple_shooting()
    assert float(solution.violation[-1]) < 1e-3
    assert float(jnp.max(jnp.abs(forces))) < cartpole_swingup.MAX_FORCE + 1e-3
    assert abs(float(final.q[1]) - np.pi) < 0.02 and float(jnp.max(jnp.abs(final.u))) < 0.05
    assert abs(float(final.q[0])) < 0.01


def _central_differences_agree(value_and_grad, x, entries):
    """value_and_grad's gradient at x against central differences of step
    FD_STEP on the given entries: to 1e-6 relative or, for small entries, to
    the differences' rounding error, 10 eps |value| / h."""
    value, gradient = value_and_grad(x)
    rounding = 10 * np.finfo(np.float64).eps * abs(float(value)) / FD_STEP
    for entry in entries:
        e = jnp.zeros_like(x).at[entry].set(FD_STEP)
        difference = (value_and_grad(x + e)[0] - value_and_grad(x - e)[0]) / (2 * FD_STEP)
        np.testing.assert_allclose(gradient[entry], difference, rtol=1e-6, atol=rounding)


def test_arm_gradient_matches_finite_differences():
    """d cost / d torque for four entries (steps early and late, proximal and
    distal joints) at a nonzero torque profile."""
    model, state, hand = arm_reaching.arm()
    value_and_grad = jax.jit(jax.value_and_grad(arm_reaching.make_cost(model, state, hand)))  # one compile
    torques = 2.0 * jnp.sin(jnp.arange(arm_reaching.NUM_STEPS * arm_reaching.NUM_LINKS).reshape(
        arm_reaching.NUM_STEPS, arm_reaching.NUM_LINKS))
    _central_differences_agree(value_and_grad, torques, [(0, 0), (3, 6), (25, 2), (49, 5)])


def test_fourbar_is_steered_through_its_constrained_dynamics():
    """The cost's gradient, closure-force term included (the multipliers along
    the trajectory), against central differences on three torques; then the
    steered rocker within 0.01 rad of its target nearly at rest, the loop
    held to 1e-6 m by the constrained dynamics (no projection)."""
    model, state, closure, crank_torque = fourbar_control.fourbar()
    cost, _ = fourbar_control.make_cost(model, state, closure, crank_torque)
    weight = fourbar_control.WEIGHTS[1]
    value_and_grad = jax.jit(jax.value_and_grad(lambda torques: cost(torques, weight)))
    _central_differences_agree(value_and_grad, jnp.linspace(-5.0, 5.0, fourbar_control.NUM_STEPS), [0, 40, 99])
    model, closure, [(torques, costs, final, forces)] = fourbar_control.steer(closure_weights=(weight,))
    assert abs(float(final.q[2]) - fourbar_control.TARGET) < 0.01 and float(jnp.linalg.norm(final.u)) < 0.01
    assert float(costs[-1]) < 1e-3 * float(costs[0]) and forces.shape == (fourbar_control.NUM_STEPS, 3)
    loop = closure.get_position_errors_as_vector(model.realize(final, sx.Stage.Position))
    assert float(jnp.abs(loop).max()) < 1e-6


def test_a_ball_is_thrown_through_a_bounce_to_its_target():
    throw, costs = bounce_to_target.solve()
    model, state = bounce_to_target.ball_on_floor()
    assert float(costs[0]) > 0.05 and float(costs[-1]) < 1e-6  # 0.24 m away, then under 1 mm
    # one program for both (compile time), the model closed over as solve() does
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: bounce_to_target.cost(x, model, state)))
    cost = lambda x: value_and_grad(x)[0]
    x = jnp.array([1.0, 0.0, 0.0])
    central = [(cost(x.at[i].add(FD_STEP)) - cost(x.at[i].add(-FD_STEP))) / (2 * FD_STEP) for i in range(3)]
    np.testing.assert_allclose(value_and_grad(x)[1], central, rtol=1e-6)


def test_rigid_contact_bricks_stay_on_the_incline():
    """16 bricks dropped for 1 s: no corner deeper than the stepper's
    tolerance in any sample, every value finite."""
    deepest, at_rest, rate, samples = rigid_contact.drop(num=16, seconds=1.0)
    assert deepest < sx.SemiExplicitEulerTimeStepper().get_constraint_tolerance_in_use()
    assert np.all(np.isfinite(samples.q)) and rate > 0
