"""Prescribed motion (simbodyx.motion): Motions at every level against their
closed forms, the motion torque of a driven pendulum against its closed
form, a simulated mechanism that follows its Motions exactly and whose
energy changes by the work of the motion forces, enabling and disabling
without recompiling, derivatives with respect to a Motion's numbers, the
motion methods, and the build-time checks."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import link, new_system

G = 9.81
A, W, PHI = 0.4, 3.0, 0.2  # the Sinusoid driving the first Pin


@functools.lru_cache(maxsize=None)
def _mechanism():
    """A double pendulum whose top Pin follows A sin(W t + PHI) (Position),
    a Slider at a Steady 0.7 m/s (Velocity), a Pin with udot = 0.5 + 2 t
    (Linear, Acceleration) and one with u = cos t (Custom, Velocity)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    top = sx.MobilizedBody.Pin(matter.Ground(), link())
    lower = sx.MobilizedBody.Pin(top, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    slider = sx.MobilizedBody.Slider(matter.Ground(), link())
    spun = sx.MobilizedBody.Pin(matter.Ground(), link())
    waved = sx.MobilizedBody.Pin(matter.Ground(), link())
    motions = (sx.Motion.Sinusoid(top, sx.Motion.Position, A, W, PHI),
               sx.Motion.Steady(slider, 0.7),
               sx.Motion.Linear(spun, sx.Motion.Acceleration, slope=2.0, value=0.5),
               sx.Motion.Custom(waved, sx.Motion.Velocity, lambda t: jnp.cos(t)[None]))
    model, state = system.realize_topology()
    return model, state, (top, lower, slider, spun, waved), motions


def _realized(model, state, t):
    return model.realize(state.with_time(t), sx.Stage.Acceleration)


def test_each_level_prescribes_its_closed_form_and_the_torque():
    """At several times: q, u, udot of each Motion; the top Pin's motor torque
    -tau (the lower link locked straight) = I_O theta'' + m g d cos(theta)."""
    model, state, (top, lower, slider, spun, waved), _ = _mechanism()
    straight = lower.lock(state)
    times = jnp.array([0.0, 0.3, 1.1, 2.5])
    s = jax.jit(jax.vmap(_realized, (None, None, 0)))(model, straight, times)
    t = np.asarray(times)
    theta, omega, alpha = A * np.sin(W * t + PHI), A * W * np.cos(W * t + PHI), -A * W**2 * np.sin(W * t + PHI)
    close = functools.partial(np.testing.assert_allclose, rtol=1e-13, atol=1e-13)
    close(s.q[:, top.first_q_index], theta)
    close(s.u[:, top.first_u_index], omega)
    close(s.acceleration.udot[:, top.first_u_index], alpha)
    close(s.u[:, slider.first_u_index], 0.7)
    close(s.acceleration.udot[:, slider.first_u_index], 0.0)
    close(s.acceleration.udot[:, spun.first_u_index], 0.5 + 2 * t)
    close(s.u[:, waved.first_u_index], np.cos(t))
    close(s.acceleration.udot[:, waved.first_u_index], -np.sin(t))
    # two 1 kg links in line, mass center 1 m out, I_O = 2 I_zz + 0.5^2 + 1.5^2
    torque = (2 * 0.1 + 0.25 + 2.25) * alpha + 2.0 * G * 1.0 * np.cos(theta)
    tau = jax.vmap(model.matter.find_motion_forces)(s)
    np.testing.assert_allclose(-tau[:, top.first_u_index], torque, rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(top.get_tau_as_vector)(s)[:, 0], tau[:, top.first_u_index])
    # = the inverse-dynamics torque of the same motion (tree inverse dynamics at the realized udot)
    residual = jax.vmap(lambda s: model.matter.calc_residual_force_ignoring_constraints(
        s, s.dynamics.mobility_forces, s.dynamics.body_forces, s.acceleration.udot))(s)
    prescribed = [top.first_u_index, lower.first_u_index, slider.first_u_index, spun.first_u_index,
                  waved.first_u_index]
    np.testing.assert_allclose(-tau[:, prescribed], residual[:, prescribed], rtol=1e-12, atol=1e-12)
    power = jax.vmap(model.matter.calc_motion_power)(s)
    np.testing.assert_allclose(power, -np.einsum("bi,bi->b", tau, s.u), rtol=1e-13)


def test_simulated_mechanism_follows_its_motions_and_balances_energy():
    """2 s of simulate: every prescribed coordinate on its closed form, and the
    energy minus the motion forces' work (Simpson's rule on the reported
    power) constant."""
    model, state, (top, lower, slider, spun, waved), _ = _mechanism()
    state = lower.set_one_q(state, 0, 0.3)
    times = jnp.linspace(0.0, 2.0, 401)
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-10)

    @jax.jit
    def run(state):
        _, trajectory, _ = sx.simulate(model, state, integrator, times)
        power = jax.vmap(lambda t, q, u: model.matter.calc_motion_power(
            state.replace(t=t, q=q, u=u)))(trajectory.t, trajectory.q, trajectory.u)
        return trajectory, power

    trajectory, power = run(state)
    t, q, u = np.asarray(times), np.asarray(trajectory.q), np.asarray(trajectory.u)
    np.testing.assert_allclose(q[:, top.first_q_index], A * np.sin(W * t + PHI), rtol=0, atol=1e-13)
    np.testing.assert_allclose(u[:, top.first_u_index], A * W * np.cos(W * t + PHI), rtol=0, atol=1e-12)
    np.testing.assert_allclose(q[:, slider.first_q_index], 0.7 * t, atol=1e-12)
    np.testing.assert_allclose(u[:, spun.first_u_index], 0.5 * t + t**2, atol=1e-9)
    np.testing.assert_allclose(q[:, spun.first_q_index], 0.25 * t**2 + t**3 / 3, atol=1e-9)
    np.testing.assert_allclose(q[:, waved.first_q_index], np.sin(t), atol=1e-9)
    power = np.asarray(power)
    work = np.concatenate([[0.0], np.cumsum((power[0:-2:2] + 4 * power[1:-1:2] + power[2::2]) * (t[1] - t[0]) / 3)])
    balance = np.asarray(trajectory.energy)[::2] - work
    scale = np.max(np.abs(work))
    assert scale > 1.0  # the Motions do real work (J)
    assert np.max(np.abs(balance - balance[0])) < 1e-7 * scale


def test_disabling_a_motion_frees_its_mobilizer_without_recompiling():
    model, state, (top, lower, *_), (sinusoid, *_) = _mechanism()
    accelerations = jax.jit(lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot)
    driven = accelerations(state)
    free = accelerations(sinusoid.disable(state))
    assert accelerations._cache_size() == 1
    assert bool(sinusoid.is_disabled(sinusoid.disable(state))) and not bool(sinusoid.is_disabled(state))
    # free: M udot = -bias on the two pendulum rows, as without the Motion
    s = model.realize(sinusoid.disable(state), sx.Stage.Dynamics)
    rows = np.array([top.first_u_index, lower.first_u_index])
    M = np.asarray(model.matter.calc_m(s))[np.ix_(rows, rows)]
    bias = np.asarray(model.matter.calc_residual_force_ignoring_constraints(
        s, s.dynamics.mobility_forces, s.dynamics.body_forces, jnp.zeros(model.topology.nu)))
    np.testing.assert_allclose(np.asarray(free)[rows], np.linalg.solve(M, -bias[rows]), rtol=1e-12)
    assert float(driven[top.first_u_index]) == pytest.approx(-A * W**2 * np.sin(PHI), rel=1e-13)
    assert sinusoid.get_level(state) == sx.Motion.Position
    assert sinusoid.get_level(sinusoid.disable(state)) == sx.Motion.NoLevel
    M, off = sx.Motion.Method, sinusoid.disable(state)
    np.testing.assert_array_equal(sinusoid.enable(off).motion_disabled, state.motion_disabled)
    assert (sinusoid.get_level_method(state), sinusoid.get_level_method(off)) == (M.Prescribed, M.NoMethod)
    traced = jax.jit(lambda s: (sinusoid.get_level(s), sinusoid.get_level_method(s)))
    assert [int(x) for x in traced(off) + traced(state)] == [sx.Motion.NoLevel, M.NoMethod, sx.Motion.Position,
                                                             M.Prescribed]
    # a Motion defined but off in the default State
    system, matter, _ = new_system()
    idle = sx.Motion.Steady(sx.MobilizedBody.Pin(matter.Ground(), link()), 0.7).set_disabled_by_default()
    assert idle.is_disabled_by_default() and matter.get_num_motions() == 1
    assert bool(idle.is_disabled(system.realize_topology()[1]))


def test_motion_methods_free_indices_and_prescribe():
    model, state, (top, lower, slider, spun, waved), (sinusoid, *_) = _mechanism()
    M = sx.Motion.Method
    assert top.get_q_motion_method(state) == M.Prescribed and top.get_udot_motion_method(state) == M.Prescribed
    assert (slider.get_q_motion_method(state), slider.get_u_motion_method(state)) == (M.Free, M.Prescribed)
    assert (spun.get_u_motion_method(state), spun.get_udot_motion_method(state)) == (M.Free, M.Prescribed)
    assert lower.get_q_motion_method(state) == M.Free and not lower.has_motion()
    assert top.get_motion() is sinusoid
    locked = top.lock(state)  # a lock overrides the Motion while held
    assert (top.get_q_motion_method(locked), top.get_u_motion_method(locked)) == (M.Discrete, M.Zero)
    matter = model.matter
    np.testing.assert_array_equal(matter.get_free_q_index(state), [lower.first_q_index, slider.first_q_index,
                                                                   spun.first_q_index, waved.first_q_index])
    np.testing.assert_array_equal(matter.get_free_u_index(state), [lower.first_u_index, spun.first_u_index])
    np.testing.assert_array_equal(matter.get_known_udot_index(sinusoid.disable(state)),
                                  [slider.first_u_index, spun.first_u_index, waved.first_u_index])
    off = state.with_time(0.5).with_q(jnp.full(model.topology.nq, 0.1)).with_u(jnp.full(model.topology.nu, 0.2))
    errors = matter.calc_motion_errors(off, sx.Stage.Position)
    np.testing.assert_allclose(errors, [0.1 - A * np.sin(W * 0.5 + PHI)], rtol=1e-14)
    on = model.prescribe(off)
    assert float(on.q[top.first_q_index]) == pytest.approx(A * np.sin(W * 0.5 + PHI), rel=1e-15)
    np.testing.assert_allclose(matter.calc_motion_errors(on, sx.Stage.Position), 0.0, atol=1e-15)
    np.testing.assert_allclose(matter.calc_motion_errors(on, sx.Stage.Velocity), 0.0, atol=1e-15)
    np.testing.assert_allclose(matter.calc_motion_errors(off, sx.Stage.Velocity),
                               [0.2 - A * W * np.cos(W * 0.5 + PHI), 0.2 - 0.7, 0.2 - np.cos(0.5)], rtol=1e-14)
    assert float(on.u[lower.first_u_index]) == 0.2  # free coordinates untouched
    # prescribe is prescribe_q then prescribe_u; the free-entry packings are the index lists' gathers and scatters
    in_two_steps = model.prescribe_u(model.prescribe_q(off))
    np.testing.assert_array_equal(in_two_steps.q, on.q)
    np.testing.assert_array_equal(in_two_steps.u, on.u)
    known = matter.get_known_udot_index(state)
    np.testing.assert_array_equal(np.sort(np.concatenate([known, matter.get_free_udot_index(state)])),
                                  np.arange(model.topology.nu))
    q, u = jnp.arange(1.0, model.topology.nq + 1), jnp.arange(1.0, model.topology.nu + 1)
    for pack, unpack, index, x in ((matter.pack_free_q, matter.unpack_free_q, matter.get_free_q_index, q),
                                   (matter.pack_free_u, matter.unpack_free_u, matter.get_free_u_index, u)):
        np.testing.assert_array_equal(pack(state, x), x[index(state)])
        np.testing.assert_array_equal(unpack(state, pack(state, x)), jnp.zeros_like(x).at[index(state)].set(
            x[index(state)]))
        np.testing.assert_array_equal(unpack(state, pack(state, x), -x), jnp.where(
            jnp.isin(jnp.arange(x.shape[0]), index(state)), x, -x))
    s = model.realize(on, sx.Stage.Acceleration)
    np.testing.assert_array_equal(matter.get_motion_multipliers(s), matter.find_motion_forces(s)[known])
    projected, results = model.project(off)  # Simbody's project prescribes first
    assert bool(results.succeeded)
    np.testing.assert_allclose(projected.q, on.q, rtol=1e-15)


def test_gradient_with_respect_to_a_motions_numbers():
    """d(-tau_top)/dA at t = 0.3 (lower link locked): the closed form's
    derivative, through the Motion's amplitude as a Model leaf."""
    model, state, (top, lower, *_), _ = _mechanism()
    straight = lower.lock(state)

    def torque(amplitude):
        m = eqx.tree_at(lambda m: m.params.motions[0].amplitude, model, amplitude)
        s = _realized(m, straight, jnp.asarray(0.3))
        return -m.matter.find_motion_forces(s)[top.first_u_index]

    theta = W * 0.3 + PHI
    expected = -(2 * 0.1 + 0.25 + 2.25) * W**2 * np.sin(theta) - 2.0 * G * np.sin(A * np.sin(theta)) * np.sin(theta)
    assert float(jax.jit(jax.grad(torque))(jnp.asarray(A))) == pytest.approx(expected, rel=1e-12)


def test_motion_construction_errors():
    system, matter, _ = new_system()
    ball = sx.MobilizedBody.Ball(matter.Ground(), link())
    pin = sx.MobilizedBody.Pin(matter.Ground(), link())
    with pytest.raises(ValueError, match="cannot drive a quaternion"):
        sx.Motion.Sinusoid(ball, sx.Motion.Position, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="level must be"):
        sx.Motion.Linear(pin, sx.Motion.NoLevel, 1.0)
    with pytest.raises(ValueError, match=r"amplitude must be a scalar or have shape \(1,\)"):
        sx.Motion.Sinusoid(pin, sx.Motion.Velocity, [1.0, 2.0], 1.0, 0.0)
    with pytest.raises(ValueError, match="Ground has no mobilizer"):
        sx.Motion.Steady(matter.Ground(), 1.0)
    with pytest.raises(ValueError, match=r"must return shape \(1,\)"):
        sx.Motion.Custom(pin, sx.Motion.Acceleration, lambda t: jnp.ones(3) * t)
    sx.Motion.Steady(ball, [0.1, 0.2, 0.3])  # Velocity level: a Ball's three u
    sx.Motion.Steady(pin, 1.0)
    with pytest.raises(ValueError, match="already has a Motion"):
        sx.Motion.Linear(pin, sx.Motion.Velocity, 1.0)
