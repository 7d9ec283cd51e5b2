"""Progress bars from inside compiled loops (simbodyx.progress): rollout,
simulate, minimize and augmented_lagrangian move one bar to its end, under
jit, vmap and grad too, with results equal to the run without it; off,
the program has no callback at all. Under jit the results are the same
bits; an eager rollout, whose loop is compiled to run as one function,
and the optimizers agree to round-off (1e-13) with the callbacks in them."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import simbodyx as sx
from conftest import link, new_system

jax.config.update("jax_enable_x64", True)


class Recorder:
    """Stands in for tqdm: every bar made, with its positions and postfix."""

    bars = []

    def __init__(self, total, desc, unit, **_):
        self.total, self.desc, self.unit, self.n, self.positions, self.postfix, self.closed = (
            total, desc, unit, 0, [], None, False)
        Recorder.bars.append(self)

    def update(self, k):
        self.n += k
        self.positions.append(self.n)

    def set_postfix(self, refresh=True, **values):
        self.postfix = values

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorder)
    Recorder.bars = []
    return Recorder.bars


@pytest.fixture(scope="module")
def pendulum():
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    sx.MobilizedBody.Pin(matter.Ground(), link())
    model, state = system.realize_topology()
    return model, state.with_q(jnp.array([0.5]))


def _finished(bar, total, desc, unit):
    assert (bar.total, bar.desc, bar.unit, bar.n, bar.closed) == (total, desc, unit, total, True)
    assert bar.positions == sorted(bar.positions)


def test_rollout_moves_one_bar_eager_jitted_vmapped_and_differentiated(bars, pendulum):
    model, state = pendulum
    _, plain = sx.integrate.rollout(model, state, 1e-3, 400)
    _, shown = sx.integrate.rollout(model, state, 1e-3, 400, progress=sx.Progress("swing", updates=4))
    np.testing.assert_allclose(shown.q, plain.q, rtol=1e-13, atol=1e-15)  # round-off: another loop
    (bar,) = bars
    _finished(bar, 400, "swing", "step")
    assert bar.positions == [1, 100, 200, 300, 400]

    def batch(progress):
        def angles(q):
            return sx.integrate.rollout(model, state.with_q(q), 1e-3, 400, save_every=4, progress=progress)[1].q

        return jax.jit(jax.vmap(angles))(jnp.linspace(0, 1, 16)[:, None])

    np.testing.assert_array_equal(batch(True), batch(False))  # under jit: the same bits
    assert len(bars) == 2  # one bar for the batch
    _finished(bars[1], 400, "rollout", "step")

    def height(q, checkpoint, progress):
        return sx.integrate.rollout(model, state.with_q(q), 1e-3, 400, checkpoint=checkpoint,
                                    progress=progress)[1].q[-1, 0]

    for checkpoint in (True, 20):  # segments run again by reverse mode report nothing again
        before = len(bars)
        g = jax.grad(height)(state.q, checkpoint, True)
        np.testing.assert_allclose(g, jax.grad(height)(state.q, checkpoint, False), rtol=1e-12)
        assert len(bars) == before + 1
        _finished(bars[-1], 400, "rollout", "step")


def test_a_time_steppers_rollout_moves_its_bar(bars, pendulum):
    model, state = pendulum
    sx.integrate.rollout(model, state, 1e-3, 100, method=sx.SemiExplicitEulerTimeStepper(), progress=True)
    _finished(bars[0], 100, "rollout", "step")


def test_off_the_program_has_no_callback(pendulum):
    model, state = pendulum

    def program(progress):
        return str(jax.make_jaxpr(lambda s: sx.integrate.rollout(model, s, 1e-3, 40, progress=progress)[1].q)(state))

    assert "callback" not in program(False) and "callback" in program(True)


def test_simulate_and_the_optimizers_move_their_bars(bars, pendulum):
    model, state = pendulum
    times = jnp.linspace(0.0, 0.5, 26)
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-6)
    _, shown, _ = sx.simulate(model, state, integrator, times, progress=True)
    _, plain, _ = sx.simulate(model, state, integrator, times)
    np.testing.assert_allclose(shown.q, plain.q, rtol=1e-13, atol=1e-15)  # round-off: another loop
    _finished(bars[0], 26, "simulate", "report")

    def loss(x):
        return jnp.sum((x - 1.0) ** 2)

    optimizer = optax.adam(0.1)
    x, losses = sx.optimize.minimize(loss, jnp.zeros(3), optimizer, 50, progress=True)
    np.testing.assert_allclose(losses, sx.optimize.minimize(loss, jnp.zeros(3), optimizer, 50)[1], rtol=1e-12)
    _finished(bars[1], 50, "minimize", "iteration")
    assert float(bars[1].postfix["loss"]) == pytest.approx(float(losses[-1]), rel=1e-5)

    def problem(x):
        return jnp.sum(x**2), x[:1] - 1.0, None

    sx.optimize.augmented_lagrangian(problem, jnp.zeros(3), optimizer, 30, 3, progress=sx.Progress("fit"))
    _finished(bars[2], 90, "fit", "iteration")


def test_bad_options_are_refused(pendulum):
    model, state = pendulum
    with pytest.raises(TypeError, match="progress must be True, False or an sx.Progress"):
        sx.integrate.rollout(model, state, 1e-3, 10, progress="yes")
    with pytest.raises(ValueError, match="updates must be a positive int"):
        sx.integrate.rollout(model, state, 1e-3, 10, progress=sx.Progress(updates=0))


def test_batched_moves_a_bar_per_chunk(bars, pendulum):
    model, state = pendulum

    def final_angle(q):
        return sx.integrate.rollout(model, state.with_q(q), 1e-3, 50, energy=False)[0].q

    starts = jnp.linspace(0.1, 1.0, 10)[:, None]
    run = jax.jit(sx.parallel.batched(final_angle, chunk_size=4, devices=jax.devices()[:1], progress=True))
    np.testing.assert_allclose(run(starts), jax.vmap(final_angle)(starts), rtol=1e-13)
    (bar,) = bars
    _finished(bar, 3, "batched", "chunk")  # two chunks of 4 and the remaining 2
    assert bar.positions == [1, 2, 3]
