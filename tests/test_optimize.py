"""Controls in rollouts and optimization with optax: zero-order-hold
mobility forces against the closed form of a pushed slider (RK4 is exact
for piecewise-constant acceleration, so 1e-12), their gradient with and
without checkpointing, jax.test_util.check_grads on a pendulum, minimize
batched over problems, and the cart-pole swing-up example reaching the
upright."""

import functools
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.test_util import check_grads

import simbodyx as sx
from conftest import link, new_system

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import cartpole_swingup  # noqa: E402

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

    for checkpoint in (True, False):
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


def test_check_grads_through_a_controlled_pendulum():
    """Forward and reverse mode, first order, against finite differences
    (check_grads' float64 tolerance)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    sx.MobilizedBody.Pin(matter.Ground(), link())
    model, state = system.realize_topology()
    state = state.with_q(jnp.array([0.4]))

    def final(torques):
        end, _ = sx.integrate.rollout(model, state, 0.02, controls=torques[:, None], energy=False)
        return jnp.concatenate([end.q, end.u])

    check_grads(jax.jit(final), (jnp.linspace(0.5, -0.5, 6),), order=1, modes=["fwd", "rev"])


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
    with pytest.raises(ValueError, match="num_steps must be a positive int"):
        sx.optimize.minimize(loss, jnp.zeros(2), optimizer, 0, targets[0])


def test_cartpole_swing_up_reaches_the_upright():
    forces, losses, final = cartpole_swingup.swing_up()
    assert abs(float(final.q[1]) - np.pi) < 0.05 and float(jnp.max(jnp.abs(final.u))) < 0.1
    assert abs(float(final.q[0])) < 0.05
    sampled = np.asarray(losses[50::25])  # after warm-up the cost falls
    assert np.all(np.diff(sampled) < 0) and sampled[-1] < 1e-3 * float(losses[0])
