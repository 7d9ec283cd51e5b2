"""Controls: Force.DiscreteForces and Force.MobilityDiscreteForce (values
held in the State act like the equivalent Model-held elements, change
without recompiling, batch, and carry gradients) and simulate's controller."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import counting_compiles, link, new_system

G = 9.81


@functools.lru_cache(maxsize=None)
def _pendulum():
    """A Pin pendulum (1 kg link, mass center 0.5 m out) under gravity, with both
    discrete elements, and a twin built with ConstantForce/MobilityConstantForce."""
    def build(discrete):
        system, matter, forces = new_system()
        sx.Force.UniformGravity(forces, matter, [0, -G, 0])
        pin = sx.MobilizedBody.Pin(matter.Ground(), link())
        slider = sx.MobilizedBody.Slider(pin, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
        if discrete:
            elements = (sx.Force.DiscreteForces(forces, matter), sx.Force.MobilityDiscreteForce(forces, slider, 0, 0.7))
        else:
            elements = (sx.Force.ConstantForce(forces, slider, [0.1, 0.2, 0], [0, 3.0, 0]),
                        sx.Force.MobilityConstantForce(forces, pin, 0, 1.5),
                        sx.Force.MobilityConstantForce(forces, slider, 0, 0.7))
        model, state = system.realize_topology()
        return model, state.with_q(jnp.array([0.3, 0.2])).with_u(jnp.array([0.5, -0.1])), (pin, slider), elements
    return build(True), build(False)


def test_discrete_values_act_like_model_held_forces_without_recompiling():
    (model, state, (pin, slider), (table, knob)), (twin, twin_state, *_) = _pendulum()
    assert float(knob.get_mobility_force(state)) == 0.7  # the default
    udot = jax.jit(lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot)
    s = model.realize(state, sx.Stage.Position)
    s = table.add_force_to_body_point(s, slider, [0.1, 0.2, 0], [0, 3.0, 0])
    s = table.set_one_mobility_force(s, pin, 0, 1.5)
    assert s.stage == sx.Stage.Position  # the caches through Velocity are kept
    expected = jax.jit(lambda s: twin.realize(s, sx.Stage.Acceleration).acceleration.udot)(twin_state)
    np.testing.assert_allclose(udot(s), expected, rtol=1e-13)
    np.testing.assert_allclose(table.get_all_mobility_forces(s), [1.5, 0.0])
    moved = knob.set_mobility_force(table.clear_all_forces(s), -2.0)
    np.testing.assert_allclose(table.get_all_body_forces(moved), 0.0)
    udot(moved)
    assert udot._cache_size() == 1
    # a batch of controls in one vmap; d udot / d f through the State
    forces = jnp.array([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]])
    batch = jax.vmap(lambda f: udot(table.set_all_mobility_forces(state, f)))(forces)
    np.testing.assert_allclose(batch[1], udot(table.set_all_mobility_forces(state, forces[1])), rtol=1e-14)
    M = model.matter.calc_m(model.realize(state, sx.Stage.Position))
    jac = jax.jacfwd(lambda f: udot(table.set_all_mobility_forces(state, f)))(jnp.zeros(2))
    np.testing.assert_allclose(jac, np.linalg.inv(M), rtol=1e-12, atol=1e-15)
    grad = jax.grad(lambda f: udot(knob.set_mobility_force(state, f))[1])(0.0)
    assert float(grad) == pytest.approx(float(np.linalg.inv(M)[1, 1]), rel=1e-12)


def test_discrete_force_errors():
    (model, state, (pin, slider), (table, knob)), _ = _pendulum()
    with pytest.raises(ValueError, match=r"body_forces must have shape \(3, 6\)"):
        table.set_all_body_forces(state, jnp.zeros((2, 6)))
    with pytest.raises(IndexError, match="out of range"):
        table.set_one_mobility_force(state, pin, 1, 1.0)
    with pytest.raises(ValueError, match="needs Stage.Position"):
        table.add_force_to_body_point(state, slider, [0, 0, 0], [1.0, 0, 0])
    with pytest.raises(ValueError, match="has no values"):
        table.get_all_mobility_forces(state.replace(discrete=()))


class _Damping(eqx.Module):
    """A controller whose gain is a traced leaf: f = -c u."""

    c: jnp.ndarray

    def __call__(self, t, state):
        return -self.c * state.u


def test_simulate_with_a_controller():
    """A damping controller in simulate: the energy falls by the dissipated
    work, integral of c |u|^2 (Simpson on the reports, 1e-8 of it); its gain is
    traced (a new gain reuses the compiled function) and differentiable (jvp
    against central differences)."""
    (model, state, _, (_, knob)), _ = _pendulum()
    state = knob.set_mobility_force(state, 0.0)  # only gravity and the controller act
    times = jnp.linspace(0.0, 1.0, 201)
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-10, reverse_mode=False)

    @jax.jit
    def run(c):
        return sx.simulate(model, state, integrator, times, controller=_Damping(c))[1]

    trajectory = run(jnp.asarray(0.3))
    u, energy, dt = np.asarray(trajectory.u), np.asarray(trajectory.energy), float(times[1] - times[0])
    power = 0.3 * np.sum(u**2, axis=1)
    dissipated = np.sum(power[0:-2:2] + 4 * power[1:-1:2] + power[2::2]) * dt / 3
    assert dissipated > 0.05
    assert energy[0] - energy[-1] == pytest.approx(dissipated, rel=1e-8)
    run(jnp.asarray(0.5))
    assert run._cache_size() == 1
    final_energy = lambda c: run(c).energy[-1]  # noqa: E731
    _, tangent = jax.jvp(final_energy, (jnp.asarray(0.3),), (jnp.asarray(1.0),))
    h = 1e-5
    central = (final_energy(jnp.asarray(0.3 + h)) - final_energy(jnp.asarray(0.3 - h))) / (2 * h)
    assert float(tangent) == pytest.approx(float(central), rel=1e-5)
    # a plain function is held fixed (a shorter run takes other steps: equal to the accuracy)
    plain = sx.simulate(model, state, integrator, times[:3], controller=lambda t, s: -0.3 * s.u)[1]
    np.testing.assert_allclose(plain.q, trajectory.q[:3], rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"controller\(t, state\) returned shape"):
        sx.simulate(model, state, integrator, times[:3], controller=lambda t, s: jnp.zeros(3))


class _Policy(eqx.Module):
    """A neural-network controller: an MLP of (q, u), whose activation
    function is a leaf that is not an array."""

    net: eqx.nn.MLP

    def __call__(self, t, state):
        return self.net(jnp.concatenate([state.q, state.u]))


def test_a_neural_network_controller_has_its_weights_traced_and_its_functions_held():
    """An ``eqx.nn.MLP`` policy as a controller: a rollout steps it as the
    same policy closed over in a plain function does (1e-12); under a filter_jit
    over the policy other weights reuse the compiled program (called
    eagerly, this small model's numbers are compiled in); and the gradient
    with respect to the weights matches a central difference along a
    random direction (step 1e-6, rtol 1e-6: truncation and rounding well
    below it)."""
    (model, state, *_), _ = _pendulum()
    nq = state.q.shape[0] + state.u.shape[0]

    def policy(seed):
        return _Policy(eqx.nn.MLP(nq, state.u.shape[0], 8, 2, key=jax.random.PRNGKey(seed), dtype=jnp.float64))

    def final_q(p):
        controlled = sx.forces.custom.with_controller(model, p)
        return sx.integrate.rollout(controlled, state, 1e-3, 20, energy=False)[0].q

    first = policy(0)
    held = sx.forces.custom.with_controller(model, lambda t, s: first(t, s))
    np.testing.assert_allclose(final_q(first), sx.integrate.rollout(held, state, 1e-3, 20, energy=False)[0].q,
                               rtol=0, atol=1e-12)
    run = eqx.filter_jit(final_q)
    run(first)
    with counting_compiles() as compiled:
        run(policy(1))
    assert not compiled
    weights, rest = eqx.partition(first, eqx.is_inexact_array)
    loss = lambda w: jnp.sum(final_q(eqx.combine(w, rest)) ** 2)  # noqa: E731
    direction = jax.tree.map(lambda w: jax.random.normal(jax.random.PRNGKey(2), w.shape, w.dtype), weights)
    step = lambda h: jax.tree.map(lambda w, d: w + h * d, weights, direction)  # noqa: E731
    gradient = jax.grad(loss)(weights)
    along = sum(jnp.vdot(g, d) for g, d in zip(jax.tree.leaves(gradient), jax.tree.leaves(direction)))
    central = (loss(step(1e-6)) - loss(step(-1e-6))) / 2e-6
    assert float(along) == pytest.approx(float(central), rel=1e-6)
