"""Fixed-step integration: convergence order, energy behaviour, batched
simulation in both dtypes, gradients through a rollout."""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_energies_are_the_samples, counting_compiles, link, loop_bodies, new_system, primitive_names, tol

import simbodyx as sx
from simbodyx._xla import releases, xla_setup

pytestmark = pytest.mark.smoke


@functools.lru_cache(maxsize=None)
def double_pendulum(rod=False):
    """Two 1 m links on pins; with ``rod``, the lower link's pin held 0.6 m from a Ground point."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02)))
    upper = sx.MobilizedBody.Pin(matter.Ground(), body)
    lower = sx.MobilizedBody.Pin(upper, sx.Transform([0, -1.0, 0]), body, sx.Transform())
    if rod:
        sx.Constraint.Rod(matter.Ground(), [0.5, -1.5, 0.0], lower, [0.0, 0.0, 0.0], 0.6)
    model, state = system.realize_topology()
    return model, state.with_q(jnp.array([1.0, -0.5]))


@functools.lru_cache(maxsize=None)
def run(method, dt, steps, dtype="float64"):
    model, state = double_pendulum()
    model = model.astype(dtype)
    state = model.default_state().with_q(state.q.astype(dtype))
    return jax.jit(lambda s: sx.integrate.rollout(model, s, dt, steps, save_every=steps // 10, method=method))(state)


def test_convergence_orders():
    # Final-state error over 0.4 s, halving dt: the ratio's log2 is the order.
    ref, _ = run("rk4", 1e-4, 4000)
    errors = {}
    for method in ("euler", "semi_explicit_euler", "rk4"):
        e1 = np.abs(run(method, 4e-3, 100)[0].q - ref.q).max()
        e2 = np.abs(run(method, 2e-3, 200)[0].q - ref.q).max()
        errors[method] = np.log2(e1 / e2)
    assert 0.8 < errors["euler"] < 1.3
    assert 0.8 < errors["semi_explicit_euler"] < 1.3
    assert 3.5 < errors["rk4"] < 5.0  # 4, with pre-asymptotic spread at these steps


def test_energy_behaviour():
    _, rk4 = run("rk4", 1e-3, 10000)
    assert np.abs(rk4.energy - rk4.energy[0]).max() < 1e-7
    _, symplectic = run("semi_explicit_euler", 1e-3, 10000)
    _, euler = run("euler", 1e-3, 10000)
    # Symplectic Euler's energy error stays bounded; explicit Euler's grows.
    assert np.abs(symplectic.energy - symplectic.energy[0]).max() < 0.05
    assert euler.energy[-1] - euler.energy[0] > 10 * np.abs(symplectic.energy[-1] - symplectic.energy[0])
    np.testing.assert_allclose(rk4.t, np.linspace(0, 10, 11), atol=1e-9)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_batched_simulation_under_jit_vmap(dtype):
    model, state = double_pendulum()
    model = model.astype(dtype)
    base = model.default_state()
    qs = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, size=(64, 2)), dtype)
    sim = jax.jit(jax.vmap(lambda q: sx.integrate.rollout(model, base.with_q(q), 1e-3, 200, save_every=100)[1]))
    traj = sim(qs)
    assert traj.q.shape == (64, 3, 2) and traj.q.dtype == np.dtype(dtype)
    one = sx.integrate.rollout(model, base.with_q(qs[7]), 1e-3, 200, save_every=100)[1]
    np.testing.assert_allclose(traj.q[7], one.q, atol=1e-5 if dtype == "float32" else 1e-12)
    drift = np.abs(traj.energy[:, -1] - traj.energy[:, 0]).max()
    assert drift < (1e-3 if dtype == "float32" else 1e-8)  # RK4, dt = 1e-3: O(dt^4) per unit time
    # the energies, evaluated in the model's dtype, are each sample's total energy
    assert traj.energy.dtype == np.dtype(dtype)
    samples = [base.with_time(t).with_q(q).with_u(u) for t, q, u in zip(one.t, one.q, one.u)]
    np.testing.assert_allclose(one.energy, [sx.integrate.total_energy(model, s) for s in samples], rtol=tol(dtype))


def test_quaternions_stay_normalized_and_gradients_flow():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    ball = sx.MobilizedBody.Ball(matter.Ground(), sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.7, 0], sx.Inertia(0.05))))
    model, state = system.realize_topology()
    state = ball.set_u_from_vector(ball.set_q_from_vector(state, jnp.array([1.0, 0.2, 0, 0.1])), jnp.array([0, 3.0, 0.5]))
    final, _ = sx.integrate.rollout(model, state, 1e-3, 100, energy=False)
    np.testing.assert_allclose(jnp.linalg.norm(final.q), 1.0, rtol=1e-14)

    def height(w):
        s = ball.set_u_from_vector(state, w)
        end, _ = sx.integrate.rollout(model, s, 1e-2, 20, method="semi_explicit_euler", energy=False)
        return ball.find_station_location_in_ground(model.realize(end), jnp.array([0, -0.7, 0]))[1]

    w = jnp.array([0.3, 3.0, 0.5])
    g = jax.grad(height)(w)
    h = 1e-6
    fd = [(height(w + h * e) - height(w - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_a_jitted_rollout_never_touches_the_host():
    # No callbacks in the program, and no transfer during a call on device
    # arguments: a step never synchronizes with Python.
    model, state = double_pendulum()
    sim = jax.jit(lambda s: sx.integrate.rollout(model, s, 1e-3, 100, save_every=10))
    names = primitive_names(jax.make_jaxpr(sim)(state).jaxpr)
    assert "scan" in names and not any("callback" in n for n in names), names
    state = jax.device_put(state)
    expected = sim(state)
    with jax.transfer_guard("disallow"):
        final, trajectory = sim(state)
    np.testing.assert_array_equal(final.q, expected[0].q)
    assert trajectory.q.shape == (11, 2)


def _loops(compiled_text):
    """The compiled program's loops from its top level down: "function" for
    a loop XLA's small-loop hoisting compiled into one function (a call
    tagged ``xla_cpu_small_call``), "thunks" for a while loop run kernel by
    kernel, followed by its body's loops in parentheses."""
    computations = {("ENTRY" if m.group(1) else m.group(2)): m.group(3) for m in re.finditer(
        r"^(ENTRY )?%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", compiled_text, re.S | re.M)}

    def loops(name):
        found = []
        for line in computations[name].splitlines():
            if "xla_cpu_small_call" in line:
                found.append("function")
            elif body := re.search(r" while\(.*body=%?([\w.\-]+)", line):
                inner = loops(body.group(1))
                found.append(f"thunks({inner})" if inner else "thunks")
        return " ".join(found)

    return loops("ENTRY")


@pytest.mark.skipif(releases.JAXLIB < (0, 7, 0), reason="jaxlib 0.6 keeps XLA's small-loop threshold")
def test_one_trajectory_is_compiled_into_one_function_and_a_wide_batch_is_not():
    """simbodyx's XLA option (``xla_setup.SMALL_LOOP_BYTES``): a rollout at
    batch 1 runs as one compiled function, not kernel by kernel through the
    thunk runtime's executor; 8,192 trajectories keep the thunk runtime."""
    model, state = double_pendulum()
    one = jax.jit(lambda s: sx.integrate.rollout(model, s, 1e-3, 100, save_every=100)[0])
    assert _loops(one.lower(state).compile().as_text()) == "function"
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (8192, *x.shape)), state)
    assert _loops(jax.jit(jax.vmap(one)).lower(states).compile().as_text()) == "thunks"


@pytest.mark.skipif(releases.JAXLIB < (0, 7, 0), reason="jaxlib 0.6 keeps XLA's small-loop threshold")
def test_simulate_compiles_its_step_into_one_function_unless_it_projects_constraints():
    """``sx.simulate`` at batch 1: the loop over the reports kernel by kernel
    and the stepping loop inside it as one function (the two nested in one
    function compiled 1.5-2.6x longer), but with a constraint, whose projection
    loops inside the step made a closed chain's compile minutes long, the
    stepping loop kernel by kernel too, its projection loops each one
    function (``xla_setup.kept_out_of_one_function``); the initial projection
    is one function before the loops."""
    integrator = sx.Integrator.RungeKuttaMerson(accuracy=1e-6)
    times = jnp.linspace(0.0, 1.0, 3)

    def loops(model, state):
        simulate = jax.jit(lambda s: sx.simulate(model, s, integrator, times)[0].q)
        return _loops(simulate.lower(state).compile().as_text())

    assert loops(*double_pendulum()) == "thunks(function)"
    assert loops(*double_pendulum(rod=True)) == "function thunks(thunks(function function))"


def test_an_eager_rollout_is_one_program_that_later_calls_reuse(monkeypatch):
    """Called eagerly, a rollout compiles once, with the loop compiler
    options (XLA's earlier CPU runtime on jaxlib 0.6, none after): a second
    call with another State and time step compiles nothing (a notebook's
    loop over initial states pays one compile), and it equals the rollout
    under jit."""
    model, state = double_pendulum()
    options = []
    monkeypatch.setattr(sx.integrate, "jit_with_options", lambda fn, compiler_options, **kwargs: (
        options.append(compiler_options) or xla_setup.jit_with_options(fn, compiler_options, **kwargs)))
    sx.integrate.rollout(model, state, 1e-3, 50, save_every=10)
    assert options == [xla_setup.loop_compiler_options()]
    other = state.with_q(state.q + 0.1)
    with counting_compiles() as compiled:
        final, trajectory = sx.integrate.rollout(model, other, 2e-3, 50, save_every=10)
    assert not compiled
    expected = jax.jit(lambda s: sx.integrate.rollout(model, s, 2e-3, 50, save_every=10))(other)
    np.testing.assert_allclose(final.q, expected[0].q, atol=1e-12)
    np.testing.assert_allclose(trajectory.energy, expected[1].energy, atol=1e-12)


@pytest.mark.parametrize("kinds", [("Slider", "Pin"), ("Slider", "Pin", "Universal", "Pin", "Slider")])
def test_a_first_rollout_and_its_gradient_are_one_program_each(kinds):
    """On a model new to the process, on the scalar path (2 u) and the array
    program (7 u): the first eager rollout lowers one program, and the first
    ``jax.jit(jax.grad(...))`` of a rollout with respect to its controls one
    (no entry point declined and traced again, nothing compiled twice)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    parent = matter.Ground()
    for i, kind in enumerate(kinds):
        parent = getattr(sx.MobilizedBody, kind)(parent, sx.Transform([0.1 * i, -0.7, 0]), link(), sx.Transform())
    model, state = system.realize_topology()
    assert model.uses_scalar_path() is (len(kinds) == 2)
    with counting_compiles("jaxpr_to_mlir_module_duration") as lowered:
        sx.integrate.rollout(model, state, 1e-3, 20)
    assert len(lowered) == 1

    def loss(controls):
        return jnp.sum(sx.integrate.rollout(model, state, 1e-3, controls=controls, energy=False)[0].q ** 2)

    controls = jnp.ones((20, model.topology.nu))
    with counting_compiles("jaxpr_to_mlir_module_duration") as lowered:
        jax.jit(jax.grad(loss))(controls)
    assert len(lowered) == 1


def test_a_rollouts_energies_are_the_samples_evaluated_after_its_loop():
    """``energy=True`` leaves the loop's program as it is without energies:
    they are each saved sample's total energy, evaluated after the loop."""
    model, state = double_pendulum()

    def loops(energy):
        return loop_bodies(jax.make_jaxpr(
            lambda s: sx.integrate.rollout(model, s, 1e-3, 20, save_every=10, energy=energy))(state))

    assert loops(True) == loops(False) and loops(True)
    _, trajectory = sx.integrate.rollout(model, state, 1e-3, 20, save_every=10)
    assert_energies_are_the_samples(model, state, trajectory)
    # the same evaluation, public, for a trajectory run without energies
    without = sx.integrate.rollout(model, state, 1e-3, 20, save_every=10, energy=False)[1]
    np.testing.assert_allclose(sx.integrate.total_energies(model, state, without.t, without.q, without.u),
                               trajectory.energy, rtol=0, atol=1e-12)


def test_simulate_argument_errors():
    model, state = double_pendulum()
    with pytest.raises(ValueError, match="unknown method 'verlet'"):
        sx.integrate.rollout(model, state, 1e-3, 10, method="verlet")
    with pytest.raises(ValueError, match="multiple of save_every"):
        sx.integrate.rollout(model, state, 1e-3, 10, save_every=3)


def _stiff_slider(stiffness=4e6, mass=1.0):
    """A 1 kg slider on a spring of ``stiffness`` N/m, released 1 mm out."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.MobilizedBody.Slider(matter.Ground(), sx.Transform(), sx.Body.Rigid(sx.MassProperties(
        mass, [0, 0, 0], sx.Inertia(0.1))), sx.Transform(), name="cart")
    sx.Force.MobilityLinearSpring(forces, body, 0, stiffness, 0.0)
    model, state = system.realize_topology()
    return model, state.with_q(jnp.array([1e-3]))


def test_stable_step_is_the_stability_limit_over_the_fastest_rate():
    """An undamped spring-mass of natural frequency w = sqrt(k / m) = 2000
    rad/s: the fastest eigenvalues are +-i w, so RK4's bound is 2.785 / w
    and the Euler methods' 2 / w, and the mode is the cart's."""
    model, state = _stiff_slider()
    estimate = sx.integrate.stable_step(model, state)
    assert estimate.rate == pytest.approx(2000.0, rel=1e-9)
    assert estimate.max_step == pytest.approx(2.785 / 2000.0, rel=1e-9)
    assert estimate.bodies == ("body 1 ('cart', Slider)",)
    assert sx.integrate.stable_step(model, state, "semi_explicit_euler").max_step == pytest.approx(1e-3, rel=1e-9)
    with pytest.raises(ValueError, match="unknown method 'leapfrog'"):
        sx.integrate.stable_step(model, state, "leapfrog")


def test_an_eager_rollout_that_diverges_names_the_step_it_needs():
    """RK4 at twice its bound on the stiff spring grows without limit; the
    eager rollout warns with the bound and the body, instead of returning
    NaN silently. A stable step gives no warning."""
    model, state = _stiff_slider()
    with pytest.warns(UserWarning, match=r"'cart'.*rk4 steps stably only below dt = 0\.00139 s"):
        final, _ = sx.integrate.rollout(model, state, 2.8e-3, 2000, energy=False)
    assert not np.all(np.isfinite(np.asarray(final.q)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        final, _ = sx.integrate.rollout(model, state, 1e-3, 200, energy=False)
    assert np.all(np.isfinite(np.asarray(final.q)))


ARM = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
  <body name="a"><joint name="j1" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
    <body name="b" pos="0.5 0 0"><joint name="j2" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/></body></body>
  </worldbody><actuator><motor name="m" joint="j1" gear="2" ctrlrange="-1 1"/>
  <position name="p" joint="j2" kp="10" forcerange="-3 3"/></actuator></mujoco>"""


def test_actuator_controls_over_time_drive_a_rollout_as_set_controls_per_step_does():
    """rollout took generalized forces only: an MJCF robot's actuator
    trajectory meant a loop of set_controls and one-step rollouts. Now
    actuator_controls (N, n_actuators) is held over each step (the same
    numbers as that loop, clamps and servo laws included, also through a
    time stepper and a robot's soft-constraint stepper), or linear between
    N + 1 values; a motor on a free
    slider gives the closed forms (RK4 is exact on them); the gradient
    matches central differences."""
    system, _, _, robot = sx.io.load_mjcf(ARM)
    model, state = system.realize_topology()
    assert [type(a).__name__ for a in sx.integrate.actuators(model)] == ["MobilityActuator"] * 2
    dt, n = 2e-3, 12
    controls = jnp.asarray(np.random.default_rng(0).uniform(-2, 2, size=(n, 2)))  # the motor's beyond its range
    soft_system, _, _, soft_robot = sx.io.load_mjcf(ARM, physics="mujoco")  # no contact pair: no contact rows
    for m, start, r, method in ((model, state, robot, "rk4"), (model, state, robot, sx.SemiExplicitEulerTimeStepper()),
                                (*soft_system.realize_topology(), soft_robot, soft_robot.stepper)):
        final, trajectory = sx.integrate.rollout(m, start, dt, actuator_controls=controls, method=method)
        s = start
        for k in range(n):
            s, _ = sx.integrate.rollout(m, r.set_controls(s, controls[k]), dt, 1, method=method)
        np.testing.assert_allclose(final.q, s.q, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(final.u, s.u, rtol=1e-13, atol=1e-15)

    slider_system, matter, forces = new_system()
    slider = sx.MobilizedBody.Slider(matter.Ground(), sx.Transform(), sx.Body.Rigid(sx.MassProperties(2.0)),
                                     sx.Transform())
    sx.Force.MobilityActuator(forces, slider, 0, gain=3.0)
    slider_model, slider_state = slider_system.realize_topology()
    c = jnp.linspace(0.0, 1.0, n + 1) ** 2  # u(T) = 3/2 times the integral of c: sums of the held or linear c
    final, _ = sx.integrate.rollout(slider_model, slider_state, dt, actuator_controls=c[:n, None])
    np.testing.assert_allclose(final.u[0], 1.5 * dt * c[:n].sum(), rtol=1e-13)
    final, _ = sx.integrate.rollout(slider_model, slider_state, dt, actuator_controls=c[:, None], hold="linear")
    np.testing.assert_allclose(final.u[0], 1.5 * dt * (c[:-1] + c[1:]).sum() / 2, rtol=1e-13)
    forced, _ = sx.integrate.rollout(slider_model, slider_state, dt, controls=3 * c[:, None], hold="linear")
    np.testing.assert_allclose(forced.u[0], final.u[0], rtol=1e-13)  # generalized forces interpolate alike

    def reach(controls, hold):
        final, _ = sx.integrate.rollout(model, state, dt, actuator_controls=controls, hold=hold)
        return final.q[1]

    clamped = int(np.argmax(np.abs(controls[:-1, 0]) > 1))  # a row whose motor control is beyond its range
    for hold, values in (("zero", controls), ("linear", jnp.concatenate([controls, controls[-1:]]))):
        gradient = jax.jit(jax.grad(reach), static_argnums=1)(values, hold)
        for i, j in ((3, 1), (clamped + 1, 0)):
            bump = jnp.zeros_like(values).at[i, j].set(1e-6)
            fd = (reach(values + bump, hold) - reach(values - bump, hold)) / 2e-6
            np.testing.assert_allclose(gradient[i, j], fd, rtol=1e-6, atol=1e-12)
    assert abs(controls[clamped, 0]) > 1 and jax.grad(reach)(controls, "zero")[clamped, 0] == 0
    with pytest.raises(ValueError, match=r"actuator_controls must have shape \(num_steps \+ 1, n_actuators = 2\), got \(12, 3\)"):
        sx.integrate.rollout(model, state, dt, actuator_controls=jnp.zeros((12, 3)), hold="linear")
    with pytest.raises(ValueError, match=r"actuator_controls has 12 rows for num_steps = 12 with hold='linear'"):
        sx.integrate.rollout(model, state, dt, 12, actuator_controls=controls, hold="linear")
    with pytest.raises(ValueError, match=r"the Model has no Force.MobilityActuator"):
        sx.integrate.rollout(*double_pendulum(), dt, actuator_controls=controls)
    with pytest.raises(ValueError, match=r"hold must be 'zero' or 'linear', got 'cubic'"):
        sx.integrate.rollout(model, state, dt, controls=jnp.zeros((n, 2)), hold="cubic")
