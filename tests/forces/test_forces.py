"""Force elements: generalized forces of conservative elements equal
-N^T grad_q(PE); dissipative and constant elements by their power; build
errors name the element."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_state, random_tree, tol

import simbodyx as sx
from simbodyx.algorithms.rnea import jacobian_transpose_times

KINDS = ("Free", "Pin", "Ball", "Slider", "Gimbal", "Pin", "Universal")


@functools.lru_cache(maxsize=None)
def setup():
    system, matter, bodies = random_tree(KINDS, seed=5)
    forces = sx.GeneralForceSubsystem(system)
    conservative = [
        sx.Force.UniformGravity(forces, matter, [0.5, -9.81, 0.2], zero_height=0.3),
        sx.Force.MobilityLinearSpring(forces, bodies[2], 0, 12.0, 0.4),
        sx.Force.TwoPointLinearSpring(forces, bodies[3], [0.1, 0.2, 0.0], bodies[6], [0.0, -0.1, 0.3], 40.0, 0.2),
        sx.Force.LinearBushing(forces, bodies[2], sx.Transform(sx.Rotation.about_x(0.3), [0.1, 0, 0.2]), bodies[5],
                               sx.Transform([0.0, -0.2, 0.1]), [3.0, 4.0, 5.0, 60.0, 70.0, 80.0], np.zeros(6)),
        sx.Force.Gravity(forces, matter, [0.0, -2.0, 0.5], 9.81, zero_height=0.3, excluded=[bodies[3], bodies[6]]),
    ]
    others = [
        sx.Force.MobilityLinearDamper(forces, bodies[4], 0, 3.0),
        sx.Force.TwoPointLinearDamper(forces, bodies[1], [0.2, 0, 0], bodies[7], [0, 0, 0.1], 5.0),
        sx.Force.GlobalDamper(forces, matter, 0.25),
        sx.Force.ConstantForce(forces, bodies[5], [0.1, 0.0, -0.2], [1.0, 2.0, -3.0]),
        sx.Force.ConstantTorque(forces, bodies[7], [0.5, -0.5, 1.0]),
        sx.Force.MobilityConstantForce(forces, bodies[6], 0, 1.5),
        sx.Force.LinearBushing(forces, bodies[1], sx.Transform(), bodies[4], sx.Transform(sx.Rotation.about_y(0.2)),
                               np.zeros(6), [0.3, 0.4, 0.5, 6.0, 7.0, 8.0]),
        sx.Force.TwoPointConstantForce(forces, bodies[2], [0.0, 0.1, 0.0], bodies[7], [0.2, 0.0, 0.0], 2.5),
        sx.Force.MobilityCoulombFriction(forces, bodies[4], 0, 2.0, 0.05),
    ]
    model, _ = system.realize_topology()
    return model, bodies, conservative, others


def generalized(model, state, element):
    T, F = element.calc(model, state)
    return T + jacobian_transpose_times(state.topology, state.position, F)


def test_conservative_forces_are_minus_energy_gradients():
    model, bodies, conservative, _ = setup()
    state = model.realize(random_state(model, seed=1), sx.Stage.Velocity)
    for element in conservative:
        pe = lambda q, e=element: e.potential_energy(model, model.realize(state.with_q(q), sx.Stage.Position))
        expected = -model.matter.multiply_by_n(state, True, jax.grad(pe)(state.q))
        np.testing.assert_allclose(generalized(model, state, element), expected, atol=1e-11, err_msg=type(element).__name__)


def test_gravity_and_spring_closed_forms():
    model, bodies, conservative, _ = setup()
    state = model.realize(random_state(model, seed=2), sx.Stage.Velocity)
    gravity, spring, two_point, _, partial = conservative
    mass = state.instance.mass
    com = jax.vmap(lambda X_R, X_p, c: X_R @ c + X_p)(state.position.X_GB.R, state.position.X_GB.p, state.instance.com)
    g = np.array([0.5, -9.81, 0.2])
    expected = -np.sum(mass[1:] * (com[1:] @ g)) - np.sum(mass[1:]) * np.linalg.norm(g) * 0.3
    np.testing.assert_allclose(gravity.potential_energy(model, state), expected, rtol=1e-14)
    down = np.array([0.0, -2.0, 0.5]) / np.linalg.norm([0.0, -2.0, 0.5])
    felt = np.ones(len(mass), bool)
    felt[[0, 3, 6]] = False
    expected = np.sum(mass[felt] * 9.81 * (com[felt] @ -down - 0.3))
    np.testing.assert_allclose(partial.potential_energy(model, state), expected, rtol=1e-13)
    np.testing.assert_allclose(partial.calc(model, state)[1][3], 0.0)
    assert partial.get_body_is_excluded(bodies[6]) and not partial.get_body_is_excluded(bodies[5])
    q = state.q[bodies[2].first_q_index]
    np.testing.assert_allclose(spring.potential_energy(model, state), 6.0 * (q - 0.4) ** 2, rtol=1e-14)
    T, F = spring.calc(model, state)
    assert float(T[bodies[2].first_u_index]) == pytest.approx(-12.0 * (float(q) - 0.4))
    p1 = bodies[3].find_station_location_in_ground(state, jnp.array([0.1, 0.2, 0.0]))
    p2 = bodies[6].find_station_location_in_ground(state, jnp.array([0.0, -0.1, 0.3]))
    length = np.linalg.norm(p2 - p1)
    np.testing.assert_allclose(two_point.potential_energy(model, state), 20.0 * (length - 0.2) ** 2, rtol=1e-13)
    _, F = two_point.calc(model, state)
    np.testing.assert_allclose(F[bodies[3].index, 3:], 40.0 * (length - 0.2) * (p2 - p1) / length, rtol=1e-13)


def test_nonconservative_forces_by_their_power():
    model, bodies, _, (damper, two_point_damper, global_damper, constant, torque, mobility, bushing, push,
                       friction) = setup()
    s = model.realize(random_state(model, seed=3), sx.Stage.Velocity)
    u = s.u
    power = lambda e: generalized(model, s, e) @ u
    np.testing.assert_allclose(power(damper), -3.0 * u[bodies[4].first_u_index] ** 2, rtol=1e-13)
    np.testing.assert_allclose(power(global_damper), -0.25 * u @ u, rtol=1e-13)
    rate = bodies[7].calc_station_to_station_distance_time_derivative(s, jnp.array([0, 0, 0.1]), bodies[1], jnp.array([0.2, 0, 0]))
    np.testing.assert_allclose(power(two_point_damper), -5.0 * rate**2, rtol=1e-12)
    v = bodies[5].find_station_velocity_in_ground(s, jnp.array([0.1, 0.0, -0.2]))
    np.testing.assert_allclose(power(constant), jnp.array([1.0, 2.0, -3.0]) @ v, rtol=1e-13)
    np.testing.assert_allclose(power(torque), jnp.array([0.5, -0.5, 1.0]) @ bodies[7].get_body_angular_velocity(s), rtol=1e-13)
    np.testing.assert_allclose(power(mobility), 1.5 * u[bodies[6].first_u_index], rtol=1e-13)
    # the bushing's coordinate rates by differentiating its coordinates along qdot
    _, rates = jax.jvp(lambda q: bushing.coordinates(model.realize(s.with_q(q), sx.Stage.Position)),
                       (s.q,), (s.velocity.qdot,))
    np.testing.assert_allclose(power(bushing), -np.sum(bushing.damping * rates ** 2), rtol=1e-12)
    rate = bodies[7].calc_station_to_station_distance_time_derivative(s, jnp.array([0.2, 0, 0]), bodies[2],
                                                                      jnp.array([0, 0.1, 0]))
    np.testing.assert_allclose(power(push), 2.5 * rate, rtol=1e-12)
    w = u[bodies[4].first_u_index]
    np.testing.assert_allclose(power(friction), -2.0 * w ** 2 / np.sqrt(w ** 2 + 0.05 ** 2), rtol=1e-13)
    # its slope, -F vt^2 / (u^2 + vt^2)^(3/2), finite at rest (-F / vt), under jit, vmap and grad, in
    # float64 and float32
    i = bodies[4].first_u_index
    expected = [-2.0 / 0.05, -2.0 / (2 ** 1.5 * 0.05)]
    for dtype in (jnp.float64, jnp.float32):
        m, st = model.astype(dtype), s.astype(dtype)
        [element] = [e for e in m.force_elements if isinstance(e, type(friction))]  # the Model's, in its dtype
        slope = jax.jit(jax.vmap(jax.grad(lambda w: element.calc(m, st.with_u(st.u.at[i].set(w)))[0][i])))
        got = slope(jnp.array([0.0, 0.05], dtype))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, expected, rtol=1e-13 if dtype == jnp.float64 else tol(dtype))


def test_calc_forces_sums_elements_and_custom_force():
    system, matter, bodies = random_tree(("Pin", "Slider"), seed=1, branching=False)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])

    def push(model, state):
        return jnp.array([0.5, -0.25]) * state.u, jnp.zeros(0)

    sx.Force.Custom(forces, push, potential_energy=lambda model, state: 2.0 * state.q[1] ** 2)
    model, state = system.realize_topology()
    s = model.realize(state.with_q(jnp.array([0.3, 0.4])).with_u(jnp.array([1.0, 2.0])), sx.Stage.Dynamics)
    T, F = model.forces.calc_forces(s)
    np.testing.assert_allclose(T, [0.5, -0.5])
    np.testing.assert_allclose(s.dynamics.mobility_forces, T)
    assert F.shape == (3, 6)
    pe = model.forces.calc_potential_energy(s)
    gravity_pe = model.force_elements[0].potential_energy(model, s)
    np.testing.assert_allclose(pe, gravity_pe + 2.0 * 0.16)
    # Parameters are differentiable leaves of the Model.
    g = jax.grad(lambda m: m.forces.calc_potential_energy(m.realize(s, sx.Stage.Position)))(model)
    np.testing.assert_allclose(g.force_elements[0].gravity, -np.asarray(
        sum(s.instance.mass[b] * bodies[b].find_mass_center_location_in_ground(s) for b in (1, 2))), rtol=1e-13)
    with pytest.raises(ValueError, match="needs Stage.Velocity"):
        model.forces.calc_forces(model.realize(s, sx.Stage.Position))


def test_custom_force_is_traced_once_per_model_and_takes_params():
    """model.realize and model.forces are compiled alike: a Python global that
    calc reads is frozen in both once traced (it was read anew by an eager
    calc_forces while realize kept its first value). Numbers that change go
    in as params: Model leaves that eqx.tree_at changes and grad reaches."""
    system, matter, bodies = random_tree(("Pin",), seed=1)
    forces = sx.GeneralForceSubsystem(system)
    gain = {"value": 2.0}
    sx.Force.Custom(forces, lambda model, state: (gain["value"] * jnp.ones(1), jnp.zeros(0)))
    sx.Force.Custom(forces, lambda model, state, p: (p["k"] * state.q, jnp.zeros(0)),
                    potential_energy=lambda model, state, p: 0.5 * p["k"] * state.q[0] ** 2, params={"k": 3})
    model, state = system.realize_topology()
    s = model.realize(state.with_q(jnp.array([0.5])), sx.Stage.Dynamics)

    def both(model):
        return (model.realize(s, sx.Stage.Dynamics).dynamics.mobility_forces[0],
                model.forces.calc_forces(s)[0][0])

    np.testing.assert_allclose(both(model), [3.5, 3.5])
    gain["value"] = 5.0
    np.testing.assert_allclose(both(model), [3.5, 3.5])
    stiffer = eqx.tree_at(lambda m: m.force_elements[1].params["k"], model, jnp.asarray(4.0, model.dtype))
    np.testing.assert_allclose(both(stiffer), [4.0, 4.0])
    assert model.force_elements[1].params["k"].dtype == model.dtype
    g = jax.grad(lambda m: m.forces.calc_potential_energy(s))(model)
    np.testing.assert_allclose(g.force_elements[1].params["k"], 0.5 * 0.25)
    with pytest.raises(TypeError, match="Force.Custom: params must hold real numbers"):
        sx.Force.Custom(forces, lambda model, state, p: None, params={"name": "stiff"})


def test_a_functions_one_trace_lives_as_long_as_the_function():
    """traced_once keeps one trace per function and argument shapes, reused
    (the global the function read is frozen in it), and drops it when
    the function is gone (a Force.Custom's function lives as long as the
    elements, Models and compiled programs that hold it)."""
    import gc

    from simbodyx.forces.custom import _TRACES, traced_once

    scale = {"value": 2.0}

    def double(x):
        return scale["value"] * x

    before = len(_TRACES)
    np.testing.assert_allclose(traced_once(double, (jnp.ones(2),)), [2.0, 2.0])
    scale["value"] = 3.0
    np.testing.assert_allclose(traced_once(double, (jnp.ones(2),)), [2.0, 2.0])
    assert len(_TRACES) == before + 1 and len(_TRACES[double]) == 1
    del double
    gc.collect()
    assert len(_TRACES) == before


def test_custom_force_sees_its_first_trace_on_every_path():
    """A Python global read by calc, changed after one eager realize: every
    path (eager realize, calc_forces and derivatives, a new jax.jit of
    realize, an eager rollout and one inside jit) computes what a fresh Model
    built with the first value computes (each path once read it anew)."""
    gain = {"value": 1.0}

    def build():
        system, matter, bodies = random_tree(("Pin",), seed=1)
        sx.Force.Custom(sx.GeneralForceSubsystem(system),
                        lambda model, state: (gain["value"] * jnp.ones(1), jnp.zeros(0)))
        return system.realize_topology()

    def paths(model, state):
        return {"realize": lambda: model.realize(state, sx.Stage.Acceleration).acceleration.udot,
                "calc_forces": lambda: model.forces.calc_forces(model.realize(state, sx.Stage.Velocity))[0],
                "derivatives": lambda: sx.integrate.derivatives(model, state)[1],
                "jit(realize)": lambda: jax.jit(lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot)(
                    state),
                "rollout": lambda: sx.integrate.rollout(model, state, 1e-3, 2)[0].u,
                "jit(rollout)": lambda: jax.jit(lambda s: sx.integrate.rollout(model, s, 1e-3, 2)[0].u)(state)}

    expected = {name: f() for name, f in paths(*build()).items()}
    model, state = build()
    model.realize(state, sx.Stage.Acceleration)
    gain["value"] = 2.0
    for name, f in paths(model, state).items():
        np.testing.assert_array_equal(f(), expected[name], err_msg=name)


def test_force_build_errors_name_the_element():
    system, matter, bodies = random_tree(("Ball", "Pin"), seed=1, branching=False)
    forces = sx.GeneralForceSubsystem(system)
    with pytest.raises(ValueError, match="UniformGravity: gravity must have shape \\(3,\\)"):
        sx.Force.UniformGravity(forces, matter, [0, -9.81])
    with pytest.raises(ValueError, match="MobilityLinearSpring: .*Ball.*qdot != u"):
        sx.Force.MobilityLinearSpring(forces, bodies[1], 0, 1.0, 0.0)
    with pytest.raises(IndexError, match="MobilityLinearDamper: mobility index 1 out of range"):
        sx.Force.MobilityLinearDamper(forces, bodies[2], 1, 1.0)
    with pytest.raises(ValueError, match="TwoPointLinearSpring: stiffness contains NaN"):
        sx.Force.TwoPointLinearSpring(forces, bodies[1], [0, 0, 0], bodies[2], [0, 0, 0], float("nan"), 1.0)
    other_system, other_matter, other_bodies = random_tree(("Pin",), seed=2)
    with pytest.raises(ValueError, match="ConstantTorque: .*different MultibodySystem"):
        sx.Force.ConstantTorque(forces, other_bodies[1], [0, 0, 1])
    with pytest.raises(ValueError, match="MobilityCoulombFriction: transition_velocity must be > 0, got 0.0"):
        sx.Force.MobilityCoulombFriction(forces, bodies[2], 0, 1.0, 0.0)
    with pytest.raises(ValueError, match="MobilityCoulombFriction: friction must be >= 0, got -1.0"):
        sx.Force.MobilityCoulombFriction(forces, bodies[2], 0, -1.0, 0.1)
    with pytest.raises(ValueError, match="GlobalDamper: the matter subsystem belongs to a different"):
        sx.Force.GlobalDamper(forces, other_matter, 1.0)
    system.realize_topology()
    with pytest.raises(RuntimeError, match="frozen"):
        sx.Force.GlobalDamper(forces, matter, 1.0)
