"""Force.Thermostat: Simbody's Nose-Hoover chain formulas to 1e-12; a
harmonic oscillator held at the bath temperature (Simbody's
TestNoseHooverThermostat); the system's energy plus the bath energy
conserved and the external work equal to the energy change; the
auxiliary states z stepped by every fixed-step method and their
derivatives through a rollout; build errors name the element."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx

KB, TB, RELAXATION = 1.0, 0.5, 1.0


@functools.lru_cache(maxsize=None)
def oscillator(scalar_path=None):
    """(model, state, thermostat): Simbody's test oscillator, a 1 kg slider on a
    unit spring starting at x = -2, every dof thermal."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(1.0))))
    sx.Force.TwoPointLinearSpring(forces, matter.Ground(), [0, 0, 0], body, [0, 0, 0], 1.0, 0.0)
    thermostat = sx.Force.Thermostat(forces, matter, KB, TB, RELAXATION, num_excluded_dofs=0)
    model, state = system.realize_topology()
    return model.with_scalar_path(scalar_path), state.with_q(jnp.array([-2.0])), thermostat


def simbody_rates(thermostat, ke, N, z):
    """Force::ThermostatImpl::realizeDynamics in numpy: zdot for z = [W, c, s]."""
    m = thermostat.num_chains
    c = z[1:1 + m]
    oot2 = 1 / float(thermostat.relaxation_time) ** 2
    Eb = float(thermostat.boltzmanns_constant * thermostat.bath_temperature) / 2
    cdot = np.zeros(m)
    cdot[0] = (ke / N / Eb - 1) * oot2
    dofs = N
    for k in range(1, m):
        cdot[k - 1] -= c[k - 1] * c[k]
        cdot[k] = dofs * c[k - 1] ** 2 - oot2
        dofs = 1
    return np.concatenate([[-2 * c[0] * ke], cdot, c])


@pytest.mark.parametrize("chains", [1, 2, 4])
def test_forces_and_rates_are_simbodys_with_constraints_counted(chains):
    """A 4-mobility chain with a Rod: N = 4 - 1 - 1 excluded, and 4 - 1 with
    the Rod disabled; f = -c0 M u; zdot from Simbody's loop."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.3, [0, -0.4, 0.1], sx.Inertia(0.2, 0.3, 0.25)))
    links, parent = [], matter.Ground()
    for k in range(4):
        parent = sx.MobilizedBody.Pin(parent, sx.Transform(sx.Rotation.about_x(0.3 * k), [0, -0.5 * (k > 0), 0]),
                                      body, sx.Transform())
        links.append(parent)
    sx.Constraint.Rod(links[0], [0.1, 0, 0], links[3], [0, 0.1, 0], 0.9)
    thermostat = sx.Force.Thermostat(forces, matter, 1.380649e-2, 300.0, 0.7, num_excluded_dofs=1, num_chains=chains)
    model, state = system.realize_topology()
    rng = np.random.default_rng(chains)
    state = state.with_q(rng.normal(size=4)).with_u(rng.normal(size=4)).with_z(rng.normal(size=2 * chains + 1))
    for disabled, N in ((False, 2.0), (True, 3.0)):
        s = model.realize(state.with_constraint_disabled(jnp.array([disabled])), sx.Stage.Acceleration)
        assert float(thermostat.get_num_thermal_dofs(s)) == N
        p = model.matter.multiply_by_m(s, s.u)
        ke = 0.5 * float(s.u @ p)
        np.testing.assert_allclose(s.acceleration.zdot, simbody_rates(thermostat, ke, N, np.asarray(s.z)),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(thermostat.calc(model, s)[0], -s.z[1] * p, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(thermostat.get_current_temperature(s), 2 * ke / (N * 1.380649e-2), rtol=1e-12)
        np.testing.assert_allclose(thermostat.get_external_power(s), -2 * s.z[1] * ke, rtol=1e-12)


def test_the_oscillator_reaches_the_bath_temperature_and_conserves_its_extended_energy():
    """150 s of RK4 at 10 ms, statistics after 1 s (Simbody's test: within 20%
    of kT/2 for the mean kinetic energy and of kT/m for the mean squared
    speed, means within 0.2 of 0). Energy + bath energy drifts by < 1e-5 J
    and the energy change equals the external work to 1e-6 J (RK4's error)."""
    model, state, thermostat = oscillator()
    _, trajectory = jax.jit(lambda s: sx.integrate.rollout(model, s, 0.01, 15000, save_every=10))(state)
    x, v = trajectory.q[10:, 0], trajectory.u[10:, 0]
    assert abs(float(jnp.mean(0.5 * v**2)) / (KB * TB / 2) - 1) < 0.2
    assert abs(float(jnp.mean(v**2)) / (KB * TB) - 1) < 0.2
    assert abs(float(jnp.mean(x))) < 0.2 and abs(float(jnp.mean(v))) < 0.2
    bath = jax.vmap(lambda q, u, z: thermostat.calc_bath_energy(
        model.realize(state.with_q(q).with_u(u).with_z(z), sx.Stage.Instance)))(trajectory.q, trajectory.u, trajectory.z)
    energy = trajectory.energy
    assert float(jnp.abs(energy + bath - energy[0] - bath[0]).max()) < 1e-5
    work = jax.vmap(thermostat.get_external_work)(jax.vmap(lambda z: state.with_z(z))(trajectory.z))
    assert float(jnp.abs(energy - energy[0] - work).max()) < 1e-6


def test_simulate_holds_the_bath_temperature_as_simbodys_test_does():
    """Simbody's TestNoseHooverThermostat: the oscillator under the Verlet
    integrator (Simbody's default accuracy) to 150 s, reported every 0.1 s,
    its statistics after 1 s within 20% of the bath's."""
    model, state, thermostat = oscillator()
    final, trajectory, stats = sx.simulate(model, state, sx.Integrator.Verlet(), jnp.arange(1501) * 0.1)
    assert stats.succeeded and trajectory.z.shape == (1501, 7)
    x, v = trajectory.q[11:, 0], trajectory.u[11:, 0]
    assert abs(float(jnp.mean(0.5 * v**2)) / (KB * TB / 2) - 1) < 0.2
    assert abs(float(jnp.mean(v**2)) / (KB * TB) - 1) < 0.2
    assert abs(float(jnp.mean(x))) < 0.2 and abs(float(jnp.mean(v))) < 0.2
    np.testing.assert_array_equal(final.z, trajectory.z[-1])


@pytest.mark.parametrize("method, accuracy, tolerance", [("RungeKuttaMerson", 1e-8, 1e-5),
                                                         ("Verlet", 1e-7, 1e-4),
                                                         ("SemiExplicitEuler2", 1e-6, 1e-2)])
def test_simulate_steps_z_with_error_control_and_interpolates_it(method, accuracy, tolerance):
    """Every 0.1 s of 5 s (interpolated reports), q, u and z against a 1 ms
    RK4 rollout (error about 1e-10): within each method's accuracy."""
    model, state, _ = oscillator()
    _, reference = sx.integrate.rollout(model, state, 1e-3, 5000, save_every=100, energy=False)
    _, trajectory, stats = sx.simulate(model, state, getattr(sx.Integrator, method)(accuracy=accuracy),
                                       jnp.arange(51) * 0.1)
    assert stats.succeeded
    for ours, theirs in ((trajectory.q, reference.q), (trajectory.u, reference.u), (trajectory.z, reference.z)):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance * float(jnp.abs(theirs).max()))


def test_every_fixed_step_method_steps_z_and_both_paths_agree():
    """Euler, symplectic Euler and the time stepper step z by its rate, RK4
    to fourth order (halving the step cuts its error by ~16); the scalar
    path and the array program give the same rates, float32 its rounding
    of them."""
    model, state, thermostat = oscillator()
    s = model.realize(state.with_u(jnp.array([0.3])), sx.Stage.Acceleration)
    array = oscillator(False)[0].realize(s, sx.Stage.Acceleration)
    np.testing.assert_allclose(array.acceleration.zdot, s.acceleration.zdot, rtol=1e-14, atol=1e-15)
    single = model.astype(jnp.float32).realize(state.with_u(jnp.array([0.3])).astype(jnp.float32),
                                               sx.Stage.Acceleration)  # float32: its rounding
    assert single.acceleration.zdot.dtype == jnp.float32
    np.testing.assert_allclose(single.acceleration.zdot, s.acceleration.zdot, rtol=1e-6, atol=1e-6)
    for method in (sx.integrate.euler_step, sx.integrate.semi_explicit_euler_step,
                   sx.SemiExplicitEulerTimeStepper().step):  # no contact: the stepper's z is Simbody's z + h zdot
        np.testing.assert_allclose(method(model, s, 1e-3).z, s.z + 1e-3 * s.acceleration.zdot, rtol=1e-14)
    ends = [sx.integrate.rollout(model, s, 0.4 / n, n, save_every=n, energy=False)[0].z for n in (10, 20, 40, 640)]
    errors = [float(jnp.abs(z - ends[-1]).max()) for z in ends[:3]]
    assert 12 < errors[0] / errors[1] < 20 and 12 < errors[1] / errors[2] < 20


def test_rollout_derivative_with_respect_to_the_bath_temperature():
    """d(final kinetic energy after 2 s)/d(Tb), reverse mode, under vmap
    over three temperatures, against central differences."""
    model, state, thermostat = oscillator()
    state = state.with_u(jnp.array([0.5]))

    def final_ke(tb):
        m = eqx.tree_at(lambda m: [e for e in m.force_elements if isinstance(e, sx.Force.Thermostat)][0]
                        .bath_temperature, model, tb)
        final, _ = sx.integrate.rollout(m, state, 0.01, 200, energy=False)
        return 0.5 * final.u[0] ** 2

    temperatures = jnp.array([0.3, 0.5, 0.9])
    grads = jax.jit(jax.vmap(jax.grad(final_ke)))(temperatures)
    f = jax.jit(jax.vmap(final_ke))
    central = (f(temperatures + 1e-6) - f(temperatures - 1e-6)) / 2e-6
    np.testing.assert_allclose(grads, central, rtol=1e-6)
    assert np.all(np.abs(grads) > 1e-3)


def test_state_access_and_errors():
    model, state, thermostat = oscillator()
    s = thermostat.set_chain_state(state, jnp.arange(6.0))
    np.testing.assert_array_equal(thermostat.get_chain_state(s), np.arange(6.0))
    s = thermostat.set_external_work(s, 2.5)
    assert float(thermostat.get_external_work(s)) == 2.5
    np.testing.assert_array_equal(thermostat.get_chain_state(thermostat.initialize_chain_state(s)), np.zeros(6))
    assert thermostat.get_default_num_chains() == 3 and thermostat.num_z() == 7 and state.z.shape == (7,)
    assert (thermostat.get_boltzmanns_constant(), thermostat.get_default_bath_temperature(),
            thermostat.get_default_relaxation_time(), thermostat.get_default_num_excluded_dofs()) == (
        KB, TB, RELAXATION, 0)
    with pytest.raises(ValueError, match=r"set_chain_state: expected 6 values"):
        thermostat.set_chain_state(state, jnp.zeros(3))
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    for args, kwargs, message in (((0.0, 1.0, 1.0), {}, "boltzmanns_constant must be positive"),
                                  ((1.0, -1.0, 1.0), {}, "bath_temperature must be positive"),
                                  ((1.0, 1.0, 0.0), {}, "relaxation_time must be positive"),
                                  ((1.0, 1.0, 1.0), {"num_excluded_dofs": 7}, "num_excluded_dofs must be an int"),
                                  ((1.0, 1.0, 1.0), {"num_chains": 0}, "num_chains must be a positive int")):
        with pytest.raises(ValueError, match=f"Force.Thermostat: {message}"):
            sx.Force.Thermostat(forces, matter, *args, **kwargs)
