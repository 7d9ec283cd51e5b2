"""Simbody's error-controlled integrators through ``sx.simulate``: a compound
pendulum's period against the elliptic-integral closed form, conservation
on a free-floating chain, a closed chain held on its manifold, every method
converging at its order, the gradient against finite differences, a batch
with its own step sizes, the loop compiler options, and the failure paths."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax.test_util import check_grads

import simbodyx as sx
from conftest import FD_STEP, FD_TOL, assert_energies_are_the_samples, link, loop_bodies, new_system
from simbodyx._xla import xla_setup
from simbodyx.simulation import _stepping_program

G = 9.81


def complete_elliptic_k(m):
    """K(m) = pi / (2 AGM(1, sqrt(1 - m))), to rounding."""
    a, b = 1.0, np.sqrt(1.0 - m)
    for _ in range(40):
        a, b = (a + b) / 2, np.sqrt(a * b)
    return np.pi / (2 * a)


@functools.lru_cache(maxsize=None)
def _pendulum():
    """A compound pendulum on a z Pin: 2 kg, mass center 0.8 below the pivot,
    central inertia 0.05 about z; omega0 = sqrt(m g d / I_pivot)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    body = sx.Body.Rigid(sx.MassProperties.from_central(2.0, [0.0, -0.8, 0.0], sx.Inertia(0.05, 0.05, 0.05)))
    sx.MobilizedBody.Pin(matter.Ground(), body)
    model, state = system.realize_topology()
    return model, state, np.sqrt(2.0 * G * 0.8 / (0.05 + 2.0 * 0.8**2))


@functools.lru_cache(maxsize=None)
def _double_pendulum():
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    upper = sx.MobilizedBody.Pin(matter.Ground(), link())
    sx.MobilizedBody.Pin(upper, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    model, state = system.realize_topology()
    return model, state.with_q(jnp.array([0.5, 0.3])).with_u(jnp.array([0.2, -0.4]))


def test_pendulum_period_matches_the_elliptic_closed_form():
    model, state, omega0 = _pendulum()
    amplitudes = np.array([0.1, np.pi / 4, np.pi / 2, 2.0])
    periods = 4 * np.array([complete_elliptic_k(np.sin(a / 2) ** 2) for a in amplitudes]) / omega0
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-11)

    @jax.jit
    @jax.vmap
    def run(theta0, period):  # released from rest: theta crosses zero at T/4 and 5T/4
        _, trajectory, stats = sx.simulate(model, state.with_q(theta0[None]), integrator,
                                           jnp.stack([period / 4, 5 * period / 4]), energy=False)
        return trajectory, stats

    trajectory, stats = run(jnp.asarray(amplitudes), jnp.asarray(periods))
    assert bool(jnp.all(stats.succeeded))
    # one Newton step on theta(t) from each report time gives the crossing
    crossings = np.asarray(trajectory.t - trajectory.q[..., 0] / trajectory.u[..., 0])
    measured = crossings[:, 1] - crossings[:, 0]
    np.testing.assert_allclose(measured, periods, rtol=1e-8, atol=0)
    # each run chose its own steps: larger swings need more of them
    assert np.all(np.diff(np.asarray(stats.num_steps_taken)) > 0)


def test_free_chain_conserves_energy_and_momentum():
    """A Free base and two Ball joints, no forces, 5 s at accuracy 1e-10."""
    system, matter, _ = new_system()
    base = sx.MobilizedBody.Free(matter.Ground(), link())
    middle = sx.MobilizedBody.Ball(base, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    sx.MobilizedBody.Ball(middle, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    model, state = system.realize_topology()
    state = state.with_u(jnp.array([0.3, -1.2, 0.8, 0.5, 0.1, -0.2, 2.0, -1.0, 0.5, -1.5, 0.7, 1.1]))
    times = jnp.linspace(0.0, 5.0, 11)
    _, trajectory, stats = sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(accuracy=1e-10), times,
                                       energy=False)  # the invariants below are computed from q and u
    assert bool(stats.succeeded) and trajectory.energy is None

    @jax.vmap
    def invariants(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        return (model.matter.calc_kinetic_energy(s), model.matter.calc_system_momentum_about_ground_origin(s),
                model.matter.calc_system_mass_center_location_in_ground(s),
                model.matter.calc_system_mass_center_velocity_in_ground(s))

    energy, momentum, com, com_velocity = (np.asarray(x) for x in invariants(trajectory.q, trajectory.u))
    np.testing.assert_allclose(energy, energy[0], rtol=1e-8)
    np.testing.assert_allclose(momentum, np.broadcast_to(momentum[0], momentum.shape),
                               atol=1e-8 * np.abs(momentum[0]).max())
    np.testing.assert_allclose(com, com[0] + np.asarray(times)[:, None] * com_velocity[0],
                               atol=1e-8 * np.abs(com).max())
    quaternions = np.asarray(trajectory.q)[:, np.r_[0:4, 7:15]].reshape(len(times), 3, 4)
    np.testing.assert_allclose(np.linalg.norm(quaternions, axis=-1), 1.0, atol=1e-14)


@functools.lru_cache(maxsize=None)
def _closed_chain():
    """Ten links on Gimbal, Universal and Ball joints in turn, the last one's
    tip tied to a Ground point by a Ball constraint, under gravity; assembled."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    body, kinds = matter.Ground(), ("Gimbal", "Universal", "Ball") * 3 + ("Gimbal",)
    for i, kind in enumerate(kinds):
        inboard = sx.Transform() if i == 0 else sx.Transform([1.0, 0, 0])
        body = getattr(sx.MobilizedBody, kind)(body, inboard, link(), sx.Transform())
    loop = sx.Constraint.Ball(body, [1.0, 0, 0], matter.Ground(), [4.0, -5.0, 1.0])
    model, state = system.realize_topology()
    rng = np.random.default_rng(3)
    guess = state.with_q(state.q + 0.3 * rng.normal(size=state.q.shape))
    assembled, results = sx.Assembler(model).set_error_tolerance(1e-12).assemble(guess)
    assert bool(results.succeeded)
    return model, assembled, loop


def test_closed_chain_stays_on_its_manifold():
    model, state, loop = _closed_chain()
    state, _ = model.project(state.with_u(jnp.linspace(-1.0, 1.0, state.u.shape[0])),
                             sx.ProjectOptions(accuracy=1e-12))
    tolerance = 1e-8
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-6, constraint_tolerance=tolerance)
    times = jnp.linspace(0.0, 5.0, 51)
    final, trajectory, stats = sx.simulate(model, state, integrator, times)
    assert bool(stats.succeeded) and float(final.t) == 5.0

    @jax.jit
    @jax.vmap
    def errors(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        return loop.get_position_errors_as_vector(s), loop.get_velocity_errors_as_vector(s)

    perr, verr = errors(trajectory.q, trajectory.u)
    # the projections meet the tolerance in Simbody's norm: the RMS of the 3
    # rows, the velocity rows (time derivatives of holonomic ones) weighted
    # by the system's time scale
    assert float(jnp.max(jnp.sqrt(jnp.mean(perr**2, axis=-1)))) < tolerance
    ts = model.default_time_scale
    assert float(jnp.max(jnp.sqrt(jnp.mean((ts * verr) ** 2, axis=-1)))) < tolerance
    index = sx.projection._quaternion_index(state.topology)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(trajectory.q)[:, index], axis=-1), 1.0, atol=1e-14)
    # energy: each step's relative error is held to 1e-6; over 5 s it drifts far less than 1e-6 of the
    # total swing of kinetic energy
    energy = np.asarray(trajectory.energy)
    kinetic_scale = np.ptp(energy) + np.abs(energy).max()
    assert np.abs(energy - energy[0]).max() < 1e-4 * kinetic_scale


METHODS = ("RungeKuttaMerson", "RungeKutta3", "RungeKuttaFeldberg", "Verlet", "SemiExplicitEuler2", "ExplicitEuler")


def test_every_method_converges_as_its_accuracy_tightens():
    """The double pendulum's state at 1 s against RungeKuttaMerson at 1e-12.
    Tightening the accuracy 100x shrinks every method's error and multiplies
    its steps by about 100^(1/p), p the order of its step-size rule. The
    Runge-Kutta methods propagate their higher-order solution and land within
    20x of the accuracy; Verlet (second order, its u error estimate scaled by
    h as Simbody does), SemiExplicitEuler2 and ExplicitEuler (first order)
    control a local error that is not their global one."""
    model, state = _double_pendulum()
    times = jnp.array([1.0])

    def final_y(integrator):
        _, trajectory, stats = sx.simulate(model, state, integrator, times, energy=False)
        return jnp.concatenate([trajectory.q[-1], trajectory.u[-1]]), stats

    reference, _ = jax.jit(final_y, static_argnums=0)(sx.Integrator.RungeKuttaMerson(accuracy=1e-12))

    @jax.jit
    def all_methods():
        return {(name, acc): final_y(getattr(sx.Integrator, name)(accuracy=acc))
                for name in METHODS for acc in (1e-4, 1e-6)}

    results = all_methods()
    for name in METHODS:
        (loose, stats_loose), (tight, stats_tight) = results[name, 1e-4], results[name, 1e-6]
        error_loose, error_tight = (float(jnp.abs(y - reference).max()) for y in (loose, tight))
        assert bool(stats_loose.succeeded) and bool(stats_tight.succeeded), name
        assert error_tight < error_loose / 3, (name, error_loose, error_tight)
        if name.startswith("RungeKutta"):
            assert error_tight < 20 * 1e-6, (name, error_tight)
        growth = int(stats_tight.num_steps_taken) / int(stats_loose.num_steps_taken)
        order = getattr(sx.Integrator, name).error_order
        assert 0.5 * 100 ** (1 / order) < growth < 2 * 100 ** (1 / order), (name, growth)


@pytest.mark.smoke
def test_gradient_matches_finite_differences_and_batches_step_their_own_way():
    """Reverse mode through the checkpointed loop: d theta(1 s) / d(theta0,
    omega0, g) against central differences (step 1e-6; at accuracy 1e-10 both
    see the same step sequence, so they agree to about 1e-7 relative). The
    loss reads only q: the u half of each sample then gets a zero cotangent
    (the case ``simbodyx._xla.jax_compat`` exists for on JAX < 0.7)."""
    pendulum, start, _ = _pendulum()
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-10)
    times = jnp.array([0.5, 1.0])

    def angle(x, model):
        return sx.simulate(model, start.with_q(x[:1]).with_u(x[1:]), integrator, times, energy=False)[1].q[-1, 0]

    x0 = jnp.array([0.7, -0.3])
    gx, gmodel = jax.jit(jax.grad(angle, argnums=(0, 1)))(x0, pendulum)
    eps = 1e-6
    for i in range(2):
        dx = jnp.zeros(2).at[i].set(eps)
        fd = (angle(x0 + dx, pendulum) - angle(x0 - dx, pendulum)) / (2 * eps)
        assert float(gx[i]) == pytest.approx(float(fd), rel=1e-6)
    assert any(float(jnp.abs(leaf).max()) > 0 for leaf in jax.tree.leaves(gmodel) if leaf.size)

    model, state = _double_pendulum()
    scales = jnp.array([0.5, 1.0, 2.0])
    batch = jax.jit(jax.vmap(lambda k: sx.simulate(model, state.with_u(k * state.u), integrator, times)))
    _, trajectories, stats = batch(scales)
    for k, scale in enumerate(scales):
        _, one, one_stats = sx.simulate(model, state.with_u(scale * state.u), integrator, times)
        np.testing.assert_allclose(trajectories.q[k], one.q, rtol=0, atol=1e-13)
        assert int(stats.num_steps_taken[k]) == int(one_stats.num_steps_taken)
    assert len(set(np.asarray(stats.num_steps_taken).tolist())) == 3


def test_check_grads_through_simulate():
    """jax.test_util.check_grads (first order, float64 tolerance) on the
    reported (theta, omega) at 0.35 and 1 s with respect to (theta0, omega0):
    reverse mode through the checkpointed loop, forward mode through the
    plain one. Fixed steps, because an adaptive step sequence is piecewise
    constant in the inputs and central differences would straddle its
    jumps (the adaptive gradient is checked above)."""
    pendulum, start, _ = _pendulum()
    times = jnp.array([0.35, 1.0])

    def reported(x, integrator):
        _, trajectory, _ = sx.simulate(pendulum, start.with_q(x[:1]).with_u(x[1:]), integrator, times, energy=False)
        return jnp.concatenate([trajectory.q[:, 0], trajectory.u[:, 0]])

    for mode, reverse in (("rev", True), ("fwd", False)):
        integrator = sx.Integrator.RungeKuttaMerson(fixed_step=0.01, reverse_mode=reverse)
        check_grads(jax.jit(lambda x, i=integrator: reported(x, i)), (jnp.array([0.7, -0.3]),), order=1,
                    modes=[mode])


def test_fixed_step_interpolation_and_statistics(monkeypatch):
    """Fixed steps report their statistics and samples; the stepping loop
    compiles with the loop compiler options unless told otherwise (XLA's
    own options: ``{}``), to the same samples."""
    model, state = _double_pendulum()
    fixed = sx.Integrator.RungeKutta3(fixed_step=0.01)
    options = []
    monkeypatch.setattr(sx.simulation, "jit_with_options", lambda fn, compiler_options, **kwargs: (
        options.append(compiler_options) or xla_setup.jit_with_options(fn, compiler_options, **kwargs)))
    _, trajectory, stats = sx.simulate(model, state, fixed, jnp.array([0.0, 0.25, 0.5]))
    assert int(stats.num_steps_taken) == 50 == int(stats.num_steps_attempted)
    assert float(stats.actual_initial_step_size_taken) == pytest.approx(0.01)
    np.testing.assert_allclose(trajectory.q[0], state.q)  # a report time at state.t gives the start
    xla_own = sx.simulate(model, state, fixed, jnp.array([0.0, 0.25, 0.5]), compiler_options={})[1]
    assert options == [xla_setup.loop_compiler_options(), {}]
    np.testing.assert_allclose(xla_own.q, trajectory.q, rtol=0, atol=1e-12)
    # stepping to each report time instead of interpolating gives the same samples to the accuracy
    accurate = sx.Integrator.RungeKuttaMerson(accuracy=1e-9)
    interpolated = sx.simulate(model, state, accurate, jnp.linspace(0.0, 1.0, 7))[1]
    stepped = sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(accuracy=1e-9, allow_interpolation=False),
                          jnp.linspace(0.0, 1.0, 7))[1]
    np.testing.assert_allclose(interpolated.q, stepped.q, atol=1e-7)


def test_without_events_the_energies_are_the_reports_evaluated_after_the_loop():
    """``energy=True`` leaves the stepping loop's program as it is without
    energies: they are each report's total energy, evaluated after it."""
    model, state = _double_pendulum()
    fixed, times = sx.Integrator.RungeKutta3(fixed_step=0.01), jnp.array([0.0, 0.25, 0.5])

    def loops(energy):
        return loop_bodies(jax.make_jaxpr(lambda s: sx.simulate(model, s, fixed, times, energy=energy)[1].q)(state))

    assert loops(True) == loops(False) and loops(True)
    assert_energies_are_the_samples(model, state, sx.simulate(model, state, fixed, times)[1])  # the test above's program


def test_a_small_concrete_model_is_compiled_in_and_its_program_reused():
    """simulate compiles a small concrete Model's numbers into its stepping
    program (the scalar path folds them): fixed steps give the array
    program's trajectory to 1e-12; a second call with an equal Model reuses
    the program, a Model with other numbers gets its own."""
    model, state = _double_pendulum()
    fixed, times = sx.Integrator.RungeKutta3(fixed_step=0.01), jnp.array([0.25, 0.5])
    run = _stepping_program(None)  # the program simulate calls, default options
    before = run._cache_size()
    folded = sx.simulate(model, state, fixed, times)[1]
    sx.simulate(eqx.tree_at(lambda m: m.force_elements[0].gravity, model, model.force_elements[0].gravity + 0.0),
                state, fixed, times)
    assert run._cache_size() == before + 1
    sx.simulate(eqx.tree_at(lambda m: m.force_elements[0].gravity, model, model.force_elements[0].gravity * 1.01),
                state, fixed, times)
    assert run._cache_size() == before + 2
    array = sx.simulate(model.with_scalar_path(False), state, fixed, times)[1]
    np.testing.assert_allclose(folded.q, array.q, rtol=0, atol=1e-12)


def test_a_model_traced_in_some_numbers_has_the_others_compiled_in():
    """Under grad with respect to some of a Model's numbers (here its masses,
    set into it), simulate compiles the Model's other numbers into its
    stepping program, which takes the one traced leaf instead of every leaf
    of the Model; its value is the array program's (the same arithmetic in
    another order) and its gradient central differences'."""
    model, state = _double_pendulum()
    fixed, times = sx.Integrator.RungeKutta3(fixed_step=0.01), jnp.array([0.25, 0.5])

    def angle_of(model):
        def angle(mass):
            massive = eqx.tree_at(lambda m: m.params.mass, model, mass)
            return sx.simulate(massive, state, fixed, times, energy=False)[1].q[-1, 0]
        return angle

    def program_inputs(model):
        (program,) = [e for e in jax.make_jaxpr(angle_of(model))(model.params.mass).eqns
                      if e.params.get("name") == "_simulate"]
        return len(program.invars)

    array = model.with_scalar_path(False)
    assert program_inputs(model) == program_inputs(array) - len(jax.tree.leaves(model)) + 1
    mass, value, gradient = model.params.mass, jax.jit(angle_of(model)), jax.jit(jax.grad(angle_of(model)))
    assert abs(value(mass) - sx.simulate(array, state, fixed, times, energy=False)[1].q[-1, 0]) < 1e-12
    for link_mass in (1, 2):  # Ground's mass has no effect
        step = FD_STEP * jnp.eye(3)[link_mass]
        assert abs(gradient(mass)[link_mass] - (value(mass + step) - value(mass - step)) / (2 * FD_STEP)) < FD_TOL


def test_failures_are_reported_or_raised():
    model, state = _double_pendulum()
    capped = sx.Integrator.RungeKuttaMerson(accuracy=1e-10, max_steps=5)
    _, trajectory, stats = sx.simulate(model, state, capped, jnp.array([0.5, 1.0]), throw=False)
    assert int(stats.status) == sx.IntegratorStatus.StepLimitReached
    assert bool(jnp.all(jnp.isnan(trajectory.q)))
    with pytest.raises(RuntimeError, match=r"simulate failed: StepLimitReached at t = [0-9.e-]+ s \(max_steps"):
        sx.simulate(model, state, capped, jnp.array([1.0]))
    with pytest.raises(Exception, match=r"simulate failed: StepLimitReached \(max_steps attempts"):
        jax.jit(lambda s: sx.simulate(model, s, capped, jnp.array([1.0]))[2].status)(state).block_until_ready()
    with pytest.raises(ValueError, match="nondecreasing"):
        sx.simulate(model, state, capped, jnp.array([1.0, 0.5]))
    # A torque on the second joint that is NaN: NonFinite, and where.
    system, matter, forces = new_system()
    upper = sx.MobilizedBody.Pin(matter.Ground(), link())
    sx.MobilizedBody.Pin(upper, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    sx.Force.Custom(forces, lambda model, s: (jnp.array([0.0, jnp.nan]), jnp.zeros((3, 6))))
    model, state = system.realize_topology()
    with pytest.raises(RuntimeError, match=r"simulate failed: NonFinite at t = 0 s \(q, u or their derivatives became "
                                           r"NaN or infinite; the first non-finite value is mobility_forces\[1\] "
                                           r"\(body 2 \('body2', Pin\)\)\)"):
        sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(accuracy=1e-6), jnp.array([1.0]))
    with pytest.raises(ValueError, match="before the State's time"):
        sx.simulate(model, state.with_time(2.0), capped, jnp.array([1.0]))
    with pytest.raises(ValueError, match="accuracy must be a positive number"):
        sx.Integrator.Verlet(accuracy=0.0)
    with pytest.raises(TypeError, match="choose a method"):
        sx.Integrator()
