"""Events in ``sx.simulate``: a ball bouncing with restitution against the
closed-form bounce times (also in a batch and differentiated), a Rod
disabled by a scheduled event, a handler changing a Model parameter, and
the argument checks."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import new_system

G, RESTITUTION = 9.81, 0.8


@functools.lru_cache(maxsize=None)
def _ball():
    """A point mass on a Slider along x, gravity along -x: q is the height."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [-G, 0, 0])
    sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.1))))
    model, state = system.realize_topology()
    bounce = sx.TriggeredEvent(lambda m, s: s.q[0], lambda m, s: s.with_u(-RESTITUTION * s.u), direction=-1,
                               localization_window=1e-13)
    # each flight spans several steps: a witness that went up and down within one step would be unseen
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-10, maximum_step=0.05)
    return model, state, bounce, integrator


def bounce_times(h0, until):
    """Impacts of a ball dropped from rest at h0: sqrt(2 h0 / g), then flights of 2 e^k v1 / g."""
    t, v = [np.sqrt(2 * h0 / G)], np.sqrt(2 * G * h0)
    while t[-1] < until:  # the impacts accumulate at t1 (1 + e) / (1 - e): keep it past ``until``
        v *= RESTITUTION
        t.append(t[-1] + 2 * v / G)
    return np.array(t[:-1])


def test_bouncing_ball_matches_the_closed_form_bounce_times():
    model, state, bounce, integrator = _ball()
    heights = jnp.array([1.0, 2.0])

    @jax.jit
    @jax.vmap
    def run(h0):
        _, trajectory, stats = sx.simulate(model, state.with_q(h0[None]), integrator, jnp.linspace(0.0, 3.0, 31),
                                           events=[bounce])
        return trajectory, stats

    trajectory, stats = run(heights)
    assert bool(jnp.all(stats.succeeded))
    for k, h0 in enumerate(np.asarray(heights)):
        expected = bounce_times(h0, 3.0)
        n = int(stats.num_events[k])
        assert n == len(expected)
        np.testing.assert_allclose(stats.event_times[k, :n], expected, rtol=0, atol=1e-11)
        np.testing.assert_array_equal(stats.event_index[k, :n], 0)
        assert bool(jnp.all(jnp.isnan(stats.event_times[k, n:])))
    # between bounces the flight is a parabola: energy lost only at impacts, by 1 - e^2 each
    energy = np.asarray(trajectory.energy[0])
    after = np.searchsorted(np.linspace(0.0, 3.0, 31), bounce_times(1.0, 3.0)[0])
    assert energy[after] == pytest.approx(RESTITUTION**2 * energy[0], rel=1e-9)


def test_derivatives_across_a_bounce():
    """The first impact's derivative d t1 / d h0 = 1 / sqrt(2 g h0) (the
    implicit derivative of the localized time), and the height's after the
    bounce, which moves with it (Simbody's saltation), against the closed
    form. Forward mode here; reverse mode gives the same."""
    model, state, bounce, _ = _ball()
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-10, maximum_step=0.05, reverse_mode=False)
    T = 0.8

    def simulated(h0):
        _, trajectory, stats = sx.simulate(model, state.with_q(h0[None]), integrator, jnp.array([T]), events=[bounce])
        return stats.event_times[0], trajectory.q[0, 0]

    def closed_form(h0):
        t1 = jnp.sqrt(2 * h0 / G)
        return t1, RESTITUTION * G * t1 * (T - t1) - G / 2 * (T - t1) ** 2

    h0, one = jnp.asarray(0.7), jnp.asarray(1.0)
    value, tangent = jax.jit(lambda h: jax.jvp(simulated, (h,), (one,)))(h0)
    expected, expected_tangent = jax.jvp(closed_form, (h0,), (one,))
    np.testing.assert_allclose(value, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(tangent, expected_tangent, rtol=1e-7)


def test_scheduled_event_disables_a_rod():
    """A particle on a Rod swings until a scheduled event disables the Rod at
    4.9 s: its length holds to the constraint tolerance before, not after."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    point = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.0)))
    particle = sx.MobilizedBody.Translation(matter.Ground(), point)
    rod = sx.Constraint.Rod(matter.Ground(), [0, 0, 0], particle, [0, 0, 0], 1.0)
    model, state = system.realize_topology()
    state = state.with_q(jnp.array([1.0, 0, 0])).with_u(jnp.array([0, 0, 0.5]))
    cut = sx.ScheduledEvent(jnp.array([4.9]), lambda m, s: rod.disable(s))
    tolerance = 1e-8
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-8, constraint_tolerance=tolerance)
    times = jnp.linspace(0.0, 6.0, 61)
    final, trajectory, stats = sx.simulate(model, state, integrator, times, events=[cut])
    assert int(stats.num_events) == 1 and float(stats.event_times[0]) == 4.9
    stretch = np.abs(np.linalg.norm(np.asarray(trajectory.q), axis=1) - 1.0)
    before = np.asarray(times) <= 4.9  # the report at 4.9 is the State before the handler
    assert stretch[before].max() < tolerance
    assert stretch[~before].min() > 1e-3 and bool(rod.is_disabled(final))


def test_handler_changes_a_model_parameter():
    """At t = 0.5 the handler turns gravity off: the ball then coasts."""
    model, state, _, integrator = _ball()

    def switch_off(m, s):  # the Model's numbers change, never its structure
        return eqx.tree_at(lambda m: m.force_elements[0].gravity, m, jnp.zeros(3)), s

    off = sx.ScheduledEvent(jnp.array([0.5]), switch_off)
    _, trajectory, stats = sx.simulate(model, state.with_q(jnp.array([10.0])), integrator,
                                       jnp.array([0.5, 1.0]), events=[off])
    assert int(stats.num_events) == 1
    v = -G * 0.5
    np.testing.assert_allclose(trajectory.q[:, 0], [10.0 - G * 0.125, 10.0 - G * 0.125 + v * 0.5], atol=1e-9)
    np.testing.assert_allclose(trajectory.u[:, 0], [v, v], atol=1e-9)


def test_simultaneous_events_run_in_simbodys_order():
    """Events due together run triggered first, then scheduled in list order;
    one at the initial time runs before the first step and one at the final
    time after the last report (the report shows the State before it)."""
    model, state, _, integrator = _ball()
    add = sx.ScheduledEvent(jnp.array([0.0, 0.5, 1.0]), lambda m, s: s.with_u(s.u + 1))
    double = sx.ScheduledEvent(jnp.array([0.5]), lambda m, s: s.with_u(2 * s.u))
    triple = sx.TriggeredEvent(lambda m, s: s.t - 0.5, lambda m, s: s.with_u(3 * s.u), direction=1)
    events = [add, double, triple]
    final, trajectory, stats = sx.simulate(model, state.with_q(jnp.array([10.0])), integrator,
                                           jnp.array([0.5, 1.0]), events=events)
    u_half = 1 - G * 0.5
    u_after = (3 * u_half + 1) * 2
    np.testing.assert_allclose(trajectory.u[:, 0], [u_half, u_after - G * 0.5], atol=1e-9)
    assert float(final.u[0]) == pytest.approx(u_after - G * 0.5 + 1, abs=1e-9)
    assert int(stats.num_events) == 5
    np.testing.assert_array_equal(stats.event_index[:5], [0, 2, 0, 1, 0])
    np.testing.assert_allclose(stats.event_times[:5], [0.0, 0.5, 0.5, 0.5, 1.0], atol=1e-12)
    # the seed's queries
    t_next, due = sx.events.calc_time_of_next_scheduled_event(events, 0.5)
    assert float(t_next) == 1.0 and due.tolist() == [True, False, False]
    t_next, due = sx.events.calc_time_of_next_scheduled_event(events, 0.5, include_current_time=True)
    assert float(t_next) == 0.5 and due.tolist() == [True, True, False]
    (info,) = sx.events.calc_event_trigger_info(model, events, accuracy=1e-6)
    assert (info.rising, info.falling) == (True, False)
    assert info.localization_window == pytest.approx(0.1 * 1e-6 * model.get_default_time_scale())
    np.testing.assert_allclose(sx.events.calc_event_triggers(model, state.with_time(0.2), events), [-0.3])


def test_event_argument_errors():
    model, state, bounce, integrator = _ball()
    with pytest.raises(ValueError, match="direction must be"):
        sx.TriggeredEvent(lambda m, s: s.q[0], lambda m, s: s, direction=2)
    with pytest.raises(ValueError, match="finite times"):
        sx.ScheduledEvent(jnp.array([[1.0]]), lambda m, s: s)
    with pytest.raises(TypeError, match="events must be"):
        sx.simulate(model, state, integrator, jnp.array([1.0]), events=[lambda m, s: s])
