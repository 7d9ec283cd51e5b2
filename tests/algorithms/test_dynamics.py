"""Tree dynamics: closed forms and cross-method identities on random trees
mixing every mobilizer kind (the identities with armature on half the
mobilizers)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CORE_KINDS, random_state, with_forces

import simbodyx as sx

MIXED = CORE_KINDS + ("Ball", "Pin", "Free", "Gimbal", "Slider")


@functools.lru_cache(maxsize=None)
def mixed():
    system, matter, forces, bodies = with_forces(MIXED, seed=13)
    sx.Force.MobilityLinearDamper(forces, bodies[2], 0, 0.7)
    sx.Force.ConstantForce(forces, bodies[5], [0.1, 0.2, 0.3], [1.0, -2.0, 0.5])
    sx.Force.MobilityConstantForce(forces, bodies[7], 1, 0.9)
    sx.Force.TwoPointLinearSpring(forces, bodies[3], [0.1, 0, 0], bodies[9], [0, 0.2, 0], 30.0, 0.5)
    rng = np.random.default_rng(13)
    for b in bodies[1::2]:  # rotor inertia on every other mobilizer: each identity holds with M + diag(armature)
        b.set_armature(rng.uniform(0.0, 0.3, size=b.num_u))
    model, _ = system.realize_topology()
    realize = jax.jit(lambda m, s: m.realize(s, sx.Stage.Acceleration))
    return model, bodies, realize


def rand(n, seed):
    return jnp.asarray(np.random.default_rng(seed).normal(size=n))


def test_two_link_planar_chain_mass_matrix_and_coriolis():
    m1, m2, l1, lc1, lc2, I1, I2 = 1.3, 0.8, 1.1, 0.45, 0.6, 0.07, 0.05
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    body = lambda m, lc, I: sx.Body.Rigid(sx.MassProperties.from_central(m, [0, -lc, 0], sx.Inertia(I, I, I)))
    a = sx.MobilizedBody.Pin(matter.Ground(), body(m1, lc1, I1))
    sx.MobilizedBody.Pin(a, sx.Transform([0, -l1, 0]), body(m2, lc2, I2), sx.Transform())
    model, state = system.realize_topology()
    q2, u1, u2 = 0.7, 1.3, -0.4
    state = model.realize(state.with_q(jnp.array([0.2, q2])).with_u(jnp.array([u1, u2])), sx.Stage.Velocity)
    c = np.cos(q2)
    M = np.array([
        [I1 + I2 + m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * c), I2 + m2 * (lc2**2 + l1 * lc2 * c)],
        [I2 + m2 * (lc2**2 + l1 * lc2 * c), I2 + m2 * lc2**2],
    ])
    np.testing.assert_allclose(model.matter.calc_m(state), M, atol=1e-14)
    h = m2 * l1 * lc2 * np.sin(q2)
    coriolis = np.array([-h * (2 * u1 * u2 + u2**2), h * u1**2])
    f_inertial = model.matter.calc_residual_force_ignoring_constraints(state, None, None, jnp.zeros(2))
    np.testing.assert_allclose(f_inertial, coriolis, atol=1e-14)


def test_compound_pendulum_small_oscillation_period():
    m, d, Ic, g = 2.0, 0.4, 0.03, 9.81
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -g, 0])
    pin = sx.MobilizedBody.Pin(matter.Ground(), sx.Body.Rigid(sx.MassProperties.from_central(m, [0, -d, 0], sx.Inertia(Ic))))
    pin.set_default_angle(0.01)
    model, state = system.realize_topology()
    period = 2 * np.pi * np.sqrt((Ic + m * d * d) / (m * g * d))
    dt = period / 2000
    _, traj = jax.jit(lambda s: sx.integrate.rollout(model, s, dt, 4000, energy=False))(state)
    q = np.asarray(traj.q[:, 0])
    t = np.asarray(traj.t)
    i = np.flatnonzero((q[:-1] > 0) & (q[1:] <= 0))  # downward zero crossings
    crossings = t[i] + (t[i + 1] - t[i]) * q[i] / (q[i] - q[i + 1])
    # Amplitude 0.01 rad lengthens the period by theta^2/16 = 6e-6 (relative).
    np.testing.assert_allclose(crossings[1] - crossings[0], period, rtol=2e-5)


def test_free_body_torque_free_precession():
    I1, I3, w0 = 0.15, 0.25, np.array([0.3, 0.0, 2.0])  # axisymmetric about z
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    free = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.5, [0, 0, 0], sx.Inertia(I1, I1, I3))))
    model, state = system.realize_topology()
    state = free.set_u_from_vector(state, jnp.array([*w0, 0.1, 0.2, 0.3]))
    final, traj = jax.jit(lambda s: sx.integrate.rollout(model, s, 1e-3, 3000, save_every=1000))(state)
    np.testing.assert_allclose(traj.energy, traj.energy[0], rtol=1e-11)
    h0 = model.matter.calc_system_central_momentum(state)
    h1 = model.matter.calc_system_central_momentum(final)
    np.testing.assert_allclose(h1, h0, atol=1e-11)
    # Euler's equations, I1 = I2: w1' = -Omega w2, w2' = Omega w1 with
    # Omega = (I3 - I1)/I1 w3, and w3 constant.
    s = model.realize(final, sx.Stage.Velocity)
    w_B = free.express_ground_vector_in_body_frame(s, free.get_body_angular_velocity(s))
    Omega, T = (I3 - I1) / I1 * w0[2], 3.0
    expected = np.array([w0[0] * np.cos(Omega * T), w0[0] * np.sin(Omega * T), w0[2]])
    np.testing.assert_allclose(w_B, expected, atol=1e-9)


def test_mass_matrix_identities():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=1))
    m = model.matter
    M = m.calc_m(s)
    v = rand(model.topology.nu, 2)
    np.testing.assert_allclose(M @ v, m.multiply_by_m(s, v), atol=1e-12)
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    assert np.linalg.eigvalsh(M).min() > 0
    # A backward-stable O(n) solve is accurate to about cond(M) * eps.
    tol = 10 * np.linalg.cond(M) * np.finfo(np.float64).eps
    np.testing.assert_allclose(M @ m.multiply_by_m_inv(s, v), v, atol=tol * np.abs(v).max())
    np.testing.assert_allclose(m.calc_m_inv(s) @ M, np.eye(len(v)), atol=tol)
    np.testing.assert_allclose(0.5 * s.u @ M @ s.u, m.calc_kinetic_energy(s), rtol=1e-13)


def test_inverse_dynamics_of_forward_dynamics_returns_the_applied_forces():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=3))
    T, F = s.dynamics.mobility_forces, s.dynamics.body_forces
    udot = s.acceleration.udot
    np.testing.assert_allclose(model.matter.calc_residual_force_ignoring_constraints(s, T, F, udot), 0, atol=1e-11)
    # With extra applied forces too, through the operator form.
    T2, F2 = rand(model.topology.nu, 4), rand((model.topology.num_bodies, 6), 5)
    udot2, A2 = model.matter.calc_acceleration_ignoring_constraints(s, T2, F2)
    np.testing.assert_allclose(model.matter.calc_residual_force_ignoring_constraints(s, T2, F2, udot2), 0, atol=1e-11)
    np.testing.assert_allclose(model.matter.calc_body_acceleration_from_udot(s, udot2), A2, atol=1e-12)
    # M udot = T + tree-equivalent mobility forces.
    tree_equiv = model.matter.calc_tree_equivalent_mobility_forces(s, F2)
    np.testing.assert_allclose(model.matter.multiply_by_m(s, udot2), T2 + tree_equiv, atol=1e-11)


def test_mdot_finite_differences_and_skew_identity():
    # u^T (Mdot - 2C) u = 0, with C u the velocity-dependent inertial force.
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=6))
    qdot = s.velocity.qdot
    calc_m = lambda q: model.matter.calc_m(s.with_q(q))
    Mdot = jax.jvp(calc_m, (s.q,), (qdot,))[1]
    Cu = model.matter.calc_residual_force_ignoring_constraints(s, None, None, jnp.zeros_like(s.u))
    np.testing.assert_allclose(s.u @ Mdot @ s.u, 2 * s.u @ Cu, rtol=1e-11)
    # Mdot itself against a central difference along qdot (tangent to the unit
    # quaternions): truncation ~eps^2, rounding ~1e-16/eps, both far below 1e-8.
    eps = 1e-6
    fd = (calc_m(s.q + eps * qdot) - calc_m(s.q - eps * qdot)) / (2 * eps)
    np.testing.assert_allclose(Mdot, fd, atol=1e-8 * np.abs(Mdot).max())


def test_reaction_methods_agree_and_balance():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=7))
    a = model.matter.calc_mobilizer_reaction_forces(s)
    b = model.matter.calc_mobilizer_reaction_forces_using_free_body_method(s)
    np.testing.assert_allclose(a, b, atol=1e-10)
    # Mobility forces are included: H_FM^T (reaction at Mo, in F) = applied T for free
    # mobilities, less what accelerates the rotors (the armature is not a body).
    armature = model.params.armature
    for body in bodies[1:]:
        F_M = body.find_mobilizer_reaction_on_body_at_m_in_ground(s)
        X_GF = body.parent.get_body_transform(s) @ body.get_inboard_frame(s)
        F_F = np.concatenate([X_GF.R.T @ F_M[:3], X_GF.R.T @ F_M[3:]])
        for k in range(body.num_u):
            u_index = body.first_u_index + k
            rotor = armature[u_index] * s.acceleration.udot[u_index]
            np.testing.assert_allclose(body.get_h_fm_col(s, k) @ F_F, s.dynamics.mobility_forces[u_index] - rotor,
                                       atol=1e-10)


def test_armature_is_checked_when_set():
    system, matter, forces, bodies = with_forces(("Pin", "Ball"), seed=1)
    with pytest.raises(ValueError, match=r"Ball 'body2'.*armature must have shape \(3,\)"):
        bodies[2].set_armature([0.1])
    with pytest.raises(ValueError, match=r"Pin 'body1'.*armature must be >= 0"):
        bodies[1].set_armature([-0.1])
    with pytest.raises(ValueError, match=r"armature contains NaN"):
        bodies[1].set_armature([np.nan])
    np.testing.assert_array_equal(bodies[2].set_armature([0.1, 0.2, 0.3]).get_armature(), [0.1, 0.2, 0.3])
    model, _ = system.realize_topology()
    np.testing.assert_array_equal(model.params.armature, [0, 0.1, 0.2, 0.3])
    with pytest.raises(RuntimeError, match="frozen"):
        bodies[1].set_armature([0.1])


def test_power_balance():
    # dE/dt = power of the non-conservative forces (damper, constant forces).
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=8))
    energy = lambda q, u: sx.integrate.total_energy(model, s.with_q(q).with_u(u))
    dE = jax.jvp(energy, (s.q, s.u), (s.velocity.qdot, s.acceleration.udot))[1]
    u = s.u
    damper = -0.7 * u[bodies[2].first_u_index] ** 2
    constant = 0.9 * u[bodies[7].first_u_index + 1]
    v_station = bodies[5].find_station_velocity_in_ground(s, jnp.array([0.1, 0.2, 0.3]))
    point = jnp.array([1.0, -2.0, 0.5]) @ v_station
    np.testing.assert_allclose(dE, damper + constant + point, rtol=1e-10)


def test_composite_and_articulated_inertias():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=9))
    K = model.matter.calc_composite_body_inertias(s)
    base_mass = sum(float(K[b.index][5, 5]) for b in bodies[1:] if b.parent.is_ground())
    np.testing.assert_allclose(base_mass, model.matter.calc_system_mass(s), rtol=1e-14)
    leaves = [b for b in bodies[1:] if all(c.parent is not b for c in bodies[1:])]
    for leaf in leaves:
        own = leaf.calc_body_spatial_inertia_matrix_in_ground(s)
        np.testing.assert_allclose(model.matter.get_articulated_body_inertia(s, leaf), own, atol=1e-13)
        np.testing.assert_allclose(model.matter.get_composite_body_inertia(s, leaf), own, atol=1e-13)
    for b in bodies[1:]:
        P = model.matter.get_articulated_body_inertia(s, b)
        np.testing.assert_allclose(P, P.T, atol=1e-12)
        assert np.linalg.eigvalsh(P).min() > -1e-10


def test_coriolis_gyroscopic_and_centrifugal_accessors():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=10))
    m = model.matter
    JDotu = m.calc_body_acceleration_from_udot(s, jnp.zeros(0))
    for b in bodies[1:]:
        np.testing.assert_allclose(m.get_total_coriolis_acceleration(s, b), JDotu[b.index], atol=1e-14)
        M = b.calc_body_spatial_inertia_matrix_in_ground(s)
        np.testing.assert_allclose(m.get_total_centrifugal_forces(s, b), M @ JDotu[b.index] + m.get_gyroscopic_force(s, b), atol=1e-12)
    # JDot u is the time derivative of J along the motion at fixed u.
    V = lambda q: model.realize(s.with_q(q), sx.Stage.Velocity).velocity.V_GB
    np.testing.assert_allclose(JDotu, jax.jvp(V, (s.q,), (s.velocity.qdot,))[1], atol=1e-11)


def test_system_mass_properties_and_momentum():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=11))
    m = model.matter
    M = m.calc_system_mass(s)
    mp = m.calc_system_mass_properties_in_ground(s)
    np.testing.assert_allclose(mp.mass, M)
    c = m.calc_system_mass_center_location_in_ground(s)
    np.testing.assert_allclose(mp.com, c)
    h = m.calc_system_momentum_about_ground_origin(s)
    np.testing.assert_allclose(h[3:], M * m.calc_system_mass_center_velocity_in_ground(s), atol=1e-12)
    hc = m.calc_system_central_momentum(s)
    np.testing.assert_allclose(hc[:3], h[:3] - np.cross(c, h[3:]), atol=1e-12)
    # Sum of per-body momenta about their own origins, moved to G's origin.
    total = sum(np.concatenate([hb[:3] + np.cross(b.get_body_origin_location(s), hb[3:]), hb[3:]])
                for b in bodies[1:] for hb in [b.calc_body_momentum_about_body_origin_in_ground(s)])
    np.testing.assert_allclose(total, h, atol=1e-12)
    # Central inertia: parallel-axis theorem back to the origin.
    Ic = m.calc_system_central_inertia_in_ground(s).matrix
    np.testing.assert_allclose(Ic + M * (c @ c * np.eye(3) - np.outer(c, c)), mp.inertia.matrix, atol=1e-12)
    # Mass center acceleration: d/dt of its velocity along the motion.
    vc = lambda q, u: m.calc_system_mass_center_velocity_in_ground(model.realize(s.with_q(q).with_u(u), sx.Stage.Velocity))
    np.testing.assert_allclose(m.calc_system_mass_center_acceleration_in_ground(s),
                               jax.jvp(vc, (s.q, s.u), (s.velocity.qdot, s.acceleration.udot))[1], atol=1e-10)


def test_free_system_mass_center_follows_external_force():
    system, matter, forces, bodies = with_forces(("Free", "Ball", "Pin", "Gimbal"), seed=2, branching=False)
    model, _ = system.realize_topology()
    s = model.realize(random_state(model, seed=3), sx.Stage.Acceleration)
    np.testing.assert_allclose(model.matter.calc_system_mass_center_acceleration_in_ground(s), [0, -9.81, 0], atol=1e-11)


def test_force_helpers_return_new_arrays():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=12))
    m, b = model.matter, bodies[4]
    F = m.add_in_station_force(s, b, [0.1, 0, 0], [0, 1.0, 0], jnp.zeros(0))
    r = b.express_vector_in_ground_frame(s, jnp.array([0.1, 0, 0]))
    np.testing.assert_allclose(F[b.index], np.concatenate([np.cross(r, [0, 1, 0]), [0, 1, 0]]), atol=1e-15)
    np.testing.assert_allclose(F, b.apply_force_to_body_point(s, [0.1, 0, 0], [0, 1.0, 0], jnp.zeros_like(F)))
    F = m.add_in_body_torque(s, b, [1.0, 2, 3], F)
    np.testing.assert_allclose(F[b.index, :3], np.cross(r, [0, 1, 0]) + [1, 2, 3], atol=1e-15)
    T = m.add_in_mobility_force(s, bodies[2], 0, 2.5, None)
    assert float(T[bodies[2].first_u_index]) == 2.5
    np.testing.assert_allclose(T, bodies[2].apply_one_mobility_force(s, 0, 2.5, jnp.zeros_like(T)))
    with pytest.raises(IndexError, match="Weld.*mobility index 0 out of range"):
        m.add_in_mobility_force(s, bodies[1], 0, 2.5, None)
    with pytest.raises(ValueError, match="body_forces has shape"):
        m.calc_acceleration_ignoring_constraints(s, None, jnp.zeros((2, 6)))


def test_dynamics_operators_under_jit_vmap_grad(dtype):
    model, bodies, _ = mixed()
    model = model.astype(dtype)
    m = model.matter
    states = [random_state(model, seed=s, scale=0.5) for s in range(2)]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    v = rand(model.topology.nu, 1).astype(dtype)

    def outputs(s):
        s = model.realize(s, sx.Stage.Acceleration)
        return jnp.concatenate([
            s.acceleration.udot, m.multiply_by_m(s, v), m.multiply_by_m_inv(s, v),
            m.calc_m(s).ravel(), m.calc_mobilizer_reaction_forces(s).ravel(),
            m.calc_system_central_momentum(s), m.calc_kinetic_energy(s)[None],
            bodies[4].find_station_acceleration_in_ground(s, jnp.array([0.1, 0.2, 0.3], dtype)),
        ])

    out = jax.jit(jax.vmap(outputs))(batch)
    assert out.dtype == dtype
    udot = lambda m_, s: m_.realize(s, sx.Stage.Acceleration).acceleration.udot
    if dtype == np.float64:  # each operator compiled on its own, called eagerly (float32 shares the code)
        eager = outputs(states[0])
        np.testing.assert_allclose(out[0], eager, atol=1e-11 * np.abs(np.asarray(eager)).max())
    else:
        # Against float64, relative to the largest entry: cond(M) ~ 5e4 here,
        # times float32's eps 6e-8, is 3e-3.
        s64 = jax.tree.map(lambda x: x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x, states[1])
        ref = jax.jit(udot)(model.astype(jnp.float64), s64)
        np.testing.assert_allclose(out[1][:model.topology.nu], ref, atol=1e-2 * np.abs(np.asarray(ref)).max())
    g = jax.jit(jax.grad(lambda q: jnp.sum(udot(model, states[0].with_q(q)) ** 2)))(states[0].q)
    assert g.dtype == dtype and np.all(np.isfinite(g))


def test_apply_body_force_and_torque_and_one_udot():
    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=14))
    b = bodies[6]
    F = b.apply_body_force(s, jnp.arange(6.0), jnp.zeros((model.topology.num_bodies, 6)))
    F = b.apply_body_torque(s, jnp.ones(3), F)
    np.testing.assert_allclose(F[b.index], np.arange(6.0) + np.array([1, 1, 1, 0, 0, 0]))
    assert np.count_nonzero(np.asarray(F)) == 6
    for k in range(b.num_u):
        assert float(b.get_one_udot(s, k)) == float(s.acceleration.udot[b.first_u_index + k])


def test_solve_reuses_the_articulated_factorization():
    """aba.solve (vector sweeps on a finished articulation) = M^-1 v, for the
    articulation of a state with velocities and forces (only U, D^-1 matter)."""
    from simbodyx.algorithms import aba

    model, bodies, realize = mixed()
    s = realize(model, random_state(model, seed=12))
    s = model.realize(s, sx.Stage.Acceleration)
    top = model.topology

    @jax.jit  # one program, not one per operation
    def solve(s, v):
        art = aba.articulate(top, s.instance, s.position, s.velocity.mobilizer_coriolis,
                             s.velocity.gyroscopic - s.dynamics.body_forces, s.dynamics.mobility_forces)
        return aba.solve(top, art, v)

    v = jnp.asarray(np.random.default_rng(3).normal(size=top.nu))
    np.testing.assert_allclose(solve(s, v), model.matter.multiply_by_m_inv(s, v), atol=1e-12)
