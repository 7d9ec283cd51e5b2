"""System, station and frame Jacobians: against velocity kinematics, virtual
power, explicit forms, finite-difference bias terms, forward-dynamics
accelerations, and Pinocchio's frame Jacobians."""

import functools
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CORE_KINDS, FD_STEP, random_state, with_forces

import simbodyx as sx

MIXED = CORE_KINDS + ("Ball", "Pin", "Free")
BODIES = (3, 7, 7, 12, 0)
STATIONS = np.array([[0.1, -0.2, 0.3], [0.0, 0.5, 0.0], [-0.3, 0.1, 0.2], [0.2, 0.2, -0.1], [1.0, 2.0, 3.0]])


@functools.lru_cache(maxsize=None)
def setup():
    system, matter, forces, bodies = with_forces(MIXED, seed=23)
    model, _ = system.realize_topology()
    state = model.realize(random_state(model, seed=2), sx.Stage.Acceleration)
    return model, bodies, state


def rand(shape, seed):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape))


def test_products_equal_velocity_kinematics():
    model, bodies, s = setup()
    m = model.matter
    np.testing.assert_allclose(m.multiply_by_system_jacobian(s, s.u), s.velocity.V_GB, atol=1e-13)
    V = m.multiply_by_frame_jacobian(s, BODIES, STATIONS, s.u)
    v = m.multiply_by_station_jacobian(s, BODIES, STATIONS, s.u)
    for t, (b, p) in enumerate(zip(BODIES, STATIONS)):
        X_BF = sx.Transform(p)
        np.testing.assert_allclose(V[t], bodies[b].find_frame_velocity_in_ground(s, X_BF), atol=1e-13)
        np.testing.assert_allclose(v[t], bodies[b].find_station_velocity_in_ground(s, p), atol=1e-13)
        np.testing.assert_allclose(m.multiply_by_station_jacobian(s, bodies[b], p, s.u), v[t], atol=1e-15)
        np.testing.assert_allclose(m.multiply_by_frame_jacobian(s, b, p, s.u), V[t], atol=1e-15)


def test_transposes_are_virtual_power():
    model, bodies, s = setup()
    m, nu, nb = model.matter, model.topology.nu, model.topology.num_bodies
    u = rand(nu, 1)
    F = rand((nb, 6), 2).at[0].set(0.0)
    np.testing.assert_allclose(jnp.sum(F * m.multiply_by_system_jacobian(s, u)),
                               m.multiply_by_system_jacobian_transpose(s, F) @ u, rtol=1e-12)
    Ft = rand((len(BODIES), 6), 3)
    np.testing.assert_allclose(jnp.sum(Ft * m.multiply_by_frame_jacobian(s, BODIES, STATIONS, u)),
                               m.multiply_by_frame_jacobian_transpose(s, BODIES, STATIONS, Ft) @ u, rtol=1e-12)
    ft = rand((len(BODIES), 3), 4)
    np.testing.assert_allclose(jnp.sum(ft * m.multiply_by_station_jacobian(s, BODIES, STATIONS, u)),
                               m.multiply_by_station_jacobian_transpose(s, BODIES, STATIONS, ft) @ u, rtol=1e-12)
    single = m.multiply_by_station_jacobian_transpose(s, BODIES[0], STATIONS[0], ft[0])
    np.testing.assert_allclose(single, m.multiply_by_station_jacobian_transpose(s, BODIES[:1], STATIONS[:1], ft[:1]), atol=1e-14)


def test_explicit_forms_match_operators_column_by_column():
    model, bodies, s = setup()
    m, nu = model.matter, model.topology.nu
    J = m.calc_system_jacobian(s)
    Jflat = m.calc_system_jacobian(s, flat=True)
    JF = m.calc_frame_jacobian(s, BODIES, STATIONS)
    JS = m.calc_station_jacobian(s, BODIES, STATIONS)
    assert J.shape == (model.topology.num_bodies, nu, 6) and Jflat.shape == (6 * model.topology.num_bodies, nu)
    assert JF.shape == (6 * len(BODIES), nu) and JS.shape == (3 * len(BODIES), nu)
    for k in range(0, nu, 4):
        e = jnp.zeros(nu).at[k].set(1.0)
        np.testing.assert_allclose(J[:, k, :], m.multiply_by_system_jacobian(s, e), atol=1e-14)
        np.testing.assert_allclose(Jflat[:, k], m.multiply_by_system_jacobian(s, e).ravel(), atol=1e-14)
        np.testing.assert_allclose(JF[:, k], m.multiply_by_frame_jacobian(s, BODIES, STATIONS, e).ravel(), atol=1e-14)
        np.testing.assert_allclose(JS[:, k], m.multiply_by_station_jacobian(s, BODIES, STATIONS, e).ravel(), atol=1e-14)
    np.testing.assert_allclose(m.calc_station_jacobian(s, bodies[7], STATIONS[1]), JS[3:6], atol=1e-15)
    np.testing.assert_allclose(m.calc_frame_jacobian(s, 7, STATIONS[1]), JF[6:12], atol=1e-15)


def test_bias_terms():
    model, bodies, s = setup()
    m = model.matter
    qdot = s.velocity.qdot
    # JDot u: the derivative along the motion of J(q(t)) u at fixed u.
    def products(q):
        sq = model.realize(s.with_q(q), sx.Stage.Position)
        return (m.multiply_by_system_jacobian(sq, s.u), m.multiply_by_frame_jacobian(sq, BODIES, STATIONS, s.u))

    h = FD_STEP
    plus, minus = products(s.q + h * qdot), products(s.q - h * qdot)
    fd_sys, fd_frame = ((a - b) / (2 * h) for a, b in zip(plus, minus))
    np.testing.assert_allclose(m.calc_bias_for_system_jacobian(s), fd_sys, atol=1e-8)
    np.testing.assert_allclose(m.calc_bias_for_system_jacobian(s, flat=True), fd_sys.ravel(), atol=1e-8)
    np.testing.assert_allclose(m.calc_bias_for_frame_jacobian(s, BODIES, STATIONS), fd_frame, atol=1e-8)
    np.testing.assert_allclose(m.calc_bias_for_station_jacobian(s, BODIES, STATIONS), fd_frame[:, 3:], atol=1e-8)
    # J udot + bias = the accelerations of forward dynamics.
    udot = s.acceleration.udot
    np.testing.assert_allclose(m.multiply_by_system_jacobian(s, udot) + m.calc_bias_for_system_jacobian(s), s.acceleration.A_GB, atol=1e-11)
    a = m.multiply_by_station_jacobian(s, BODIES, STATIONS, udot) + m.calc_bias_for_station_jacobian(s, BODIES, STATIONS)
    for t, (b, p) in enumerate(zip(BODIES, STATIONS)):
        np.testing.assert_allclose(a[t], bodies[b].find_station_acceleration_in_ground(s, p), atol=1e-11)
    np.testing.assert_allclose(m.calc_bias_for_station_jacobian(s, bodies[3], STATIONS[0]), a[0] - m.multiply_by_station_jacobian(s, 3, STATIONS[0], udot), atol=1e-11)


def test_input_validation():
    model, bodies, s = setup()
    m = model.matter
    with pytest.raises(IndexError, match="calc_station_jacobian: body index 99 out of range"):
        m.calc_station_jacobian(s, [1, 99], STATIONS[:2])
    with pytest.raises(ValueError, match="stations have shape \\(2,\\), expected \\(3,\\)"):
        m.multiply_by_station_jacobian(s, 3, jnp.zeros(2), s.u)
    with pytest.raises(ValueError, match="stations have shape \\(3,\\), expected \\(2, 3\\)"):
        m.calc_frame_jacobian(s, [1, 2], jnp.zeros(3))
    with pytest.raises(ValueError, match="input has shape \\(2, 3\\), expected \\(2, 6\\)"):
        m.multiply_by_frame_jacobian_transpose(s, [1, 2], STATIONS[:2], jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match="u has shape"):
        m.multiply_by_system_jacobian(s, jnp.zeros(3))


def test_jit_vmap_grad(dtype):
    model, bodies, _ = setup()
    model = model.astype(dtype)
    m = model.matter
    states = [random_state(model, seed=k) for k in range(3)]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    stations = jnp.asarray(STATIONS, dtype)

    def f(s):
        s = model.realize(s, sx.Stage.Velocity)
        return jnp.concatenate([m.calc_station_jacobian(s, BODIES, stations).ravel(),
                                m.calc_bias_for_frame_jacobian(s, BODIES, stations).ravel()])

    out = jax.jit(jax.vmap(f))(batch)
    assert out.dtype == dtype
    np.testing.assert_allclose(out[1], f(states[1]), atol=(1e-12 if dtype == np.float64 else 1e-4) * np.abs(np.asarray(out[1])).max())
    g = jax.jit(jax.grad(lambda q: jnp.sum(f(states[0].with_q(q)) ** 2)))(states[0].q)
    assert g.dtype == dtype and np.all(np.isfinite(g))


def test_inverse_kinematics_example_reaches_target():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
    from inverse_kinematics import arm, solve_ik

    model, state, finger = arm()
    tip, target = jnp.array([0.0, -0.5, 0.0]), jnp.array([0.6, -1.0, 0.7])
    q, errors = jax.jit(lambda t: solve_ik(model, state, finger, tip, t))(target)
    reached = finger.find_station_location_in_ground(model.realize(state.with_q(q)), tip)
    assert np.linalg.norm(reached - target) < 1e-8
