"""Position and velocity kinematics: closed forms, finite differences,
Euler/quaternion agreement, and jit/vmap/grad in both dtypes."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CORE_KINDS, FD_STEP, FD_TOL, random_state, random_tree, rigid, tol

import simbodyx as sx
from simbodyx.spatial import rot_z, vee

MIXED = CORE_KINDS + ("Ball", "Pin", "Free", "Gimbal", "Slider")


@functools.lru_cache(maxsize=None)
def mixed_tree():
    system, matter, bodies = random_tree(MIXED, seed=3)
    model, _ = system.realize_topology()
    return model, bodies


@functools.lru_cache(maxsize=None)
def realize_velocity_jit():
    return jax.jit(lambda m, s: m.realize(s, sx.Stage.Velocity))


def double_pendulum():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    link1 = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), rigid(), sx.Transform())
    link2 = sx.MobilizedBody.Pin(link1, sx.Transform([0, -1.0, 0]), rigid(), sx.Transform())
    model, state = system.realize_topology()
    return model, state, link1, link2


def test_double_pendulum_closed_form():
    model, state, link1, link2 = double_pendulum()
    q1, q2, u1, u2 = 0.3, -0.8, 1.5, 0.4
    state = state.with_q(jnp.array([q1, q2])).with_u(jnp.array([u1, u2]))
    state = model.realize(state, sx.Stage.Velocity)
    X2 = link2.get_body_transform(state)
    np.testing.assert_allclose(X2.R, rot_z(q1 + q2), atol=1e-15)
    elbow = rot_z(q1) @ np.array([0, -1.0, 0])
    np.testing.assert_allclose(X2.p, elbow, atol=1e-15)
    np.testing.assert_allclose(link2.get_body_angular_velocity(state), [0, 0, u1 + u2], atol=1e-15)
    np.testing.assert_allclose(link2.get_body_origin_velocity(state), np.cross([0, 0, u1], elbow), atol=1e-15)
    tip = link2.find_station_velocity_in_ground(state, jnp.array([0, -1.0, 0]))
    tip_p = elbow + rot_z(q1 + q2) @ np.array([0, -1.0, 0])
    np.testing.assert_allclose(tip, np.cross([0, 0, u1], elbow) + np.cross([0, 0, u1 + u2], tip_p - elbow), atol=1e-15)
    np.testing.assert_allclose(link2.get_mobilizer_velocity(state), [0, 0, u2, 0, 0, 0], atol=1e-15)


def test_velocities_match_finite_differences_of_poses():
    model, bodies = mixed_tree()
    state = random_state(model, seed=1)
    realized = realize_velocity_jit()(model, state)
    qdot = realized.velocity.qdot
    pos = jax.jit(lambda q: model.realize(state.with_q(q), sx.Stage.Position).position.X_GB)
    h = FD_STEP
    Xp, Xm, X0 = pos(state.q + h * qdot), pos(state.q - h * qdot), pos(state.q)
    Rdot = (Xp.R - Xm.R) / (2 * h)
    w = vee(Rdot @ np.swapaxes(X0.R, -1, -2))
    v = (Xp.p - Xm.p) / (2 * h)
    np.testing.assert_allclose(realized.velocity.V_GB, np.concatenate([w, v], -1), atol=FD_TOL)
    station = jnp.array([0.3, -0.2, 0.5])
    for b in bodies[1:]:
        f = lambda q: b.find_station_location_in_ground(model.realize(state.with_q(q)), station)
        fd = (f(state.q + h * qdot) - f(state.q - h * qdot)) / (2 * h)
        np.testing.assert_allclose(b.find_station_velocity_in_ground(realized, station), fd, atol=FD_TOL)


def test_h_columns_are_velocity_partials():
    model, bodies = mixed_tree()
    state = model.realize(random_state(model, seed=2), sx.Stage.Position)
    V = jax.jacfwd(lambda u: model.realize(state.with_u(u), sx.Stage.Velocity).velocity)(state.u)
    for b in bodies[1:]:
        for k in range(b.num_u):
            j = b.first_u_index + k
            # H_FM column: d V_FM / d u_j;  H_PB_G column: d (V_GB - shifted V_GP) / d u_j.
            np.testing.assert_allclose(b.get_h_fm_col(state, k), V.V_FM[b.index, :, j], atol=1e-13)
            P = b.parent.index
            r = b.get_body_origin_location(state) - state.position.X_GB.p[P]
            dV_P = V.V_GB[P, :, j]
            expected = V.V_GB[b.index, :, j] - np.concatenate([dV_P[:3], dV_P[3:] + np.cross(dV_P[:3], r)])
            np.testing.assert_allclose(b.get_h_col(state, k), expected, atol=1e-13)


def test_euler_and_quaternion_modes_agree():
    model, bodies = mixed_tree()
    euler_model = model.with_euler_angles(True)
    assert euler_model.topology.nq == model.topology.nq - model.matter.get_num_quaternions_in_use(model.default_state())
    state = model.matter.normalize_quaternions(random_state(model, seed=5))
    euler_state = model.matter.convert_to_euler_angles(state)
    assert euler_state.topology is euler_model.topology
    a = realize_velocity_jit()(model, state)
    b = realize_velocity_jit()(euler_model, euler_state)
    np.testing.assert_allclose(b.position.X_GB.R, a.position.X_GB.R, atol=1e-13)
    np.testing.assert_allclose(b.position.X_GB.p, a.position.X_GB.p, atol=1e-13)
    np.testing.assert_allclose(b.velocity.V_GB, a.velocity.V_GB, atol=1e-12)
    back = euler_model.matter.convert_to_quaternions(euler_state)
    np.testing.assert_allclose(realize_velocity_jit()(model, back).position.X_GB.R, a.position.X_GB.R, atol=1e-13)


def test_vmap_matches_loop_and_jit_matches_eager():
    model, bodies = mixed_tree()
    states = [random_state(model, seed=s) for s in range(4)]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    batched = jax.jit(jax.vmap(lambda s: model.realize(s, sx.Stage.Velocity)))(batch)
    for i, s in enumerate(states):
        eager = model.realize(s, sx.Stage.Velocity)
        np.testing.assert_allclose(batched.velocity.V_GB[i], eager.velocity.V_GB, atol=1e-13)
        np.testing.assert_allclose(batched.position.X_GB.p[i], eager.position.X_GB.p, atol=1e-13)


def test_grad_wrt_q_u_and_model_parameters():
    model, bodies = mixed_tree()
    state = random_state(model, seed=6)
    tip = bodies[-1]

    def speed2(model, q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        v = tip.find_station_velocity_in_ground(s, jnp.array([0.1, 0.2, 0.3]))
        return v @ v

    gm, gq, gu = jax.grad(speed2, argnums=(0, 1, 2))(model, state.q, state.u)
    h = FD_STEP
    for arg, g in ((1, gq), (2, gu)):
        x0 = (state.q, state.u)[arg - 1]
        for i in range(0, x0.shape[0], 3):
            e = jnp.zeros_like(x0).at[i].set(h)
            args_p = [model, state.q, state.u]
            args_m = [model, state.q, state.u]
            args_p[arg], args_m[arg] = x0 + e, x0 - e
            fd = (speed2(*args_p) - speed2(*args_m)) / (2 * h)
            np.testing.assert_allclose(g[i], fd, atol=1e-7, rtol=1e-7)
    # Model parameters: the translation of one inboard frame.
    b = tip.index
    bump = lambda m, d: eqx.tree_at(lambda m: m.params.X_PF.p, m, m.params.X_PF.p.at[b, 0].add(d))
    fd = (speed2(bump(model, h), state.q, state.u) - speed2(bump(model, -h), state.q, state.u)) / (2 * h)
    np.testing.assert_allclose(gm.params.X_PF.p[b, 0], fd, atol=1e-7, rtol=1e-7)


def test_gradients_finite_at_identity_and_rest():
    system, matter, bodies = random_tree(("Free", "Ball", "Gimbal", "Pin"), seed=7, branching=False)
    model, state = system.realize_topology()

    def f(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        return jnp.sum(s.velocity.V_GB ** 2) + jnp.sum(s.position.X_GB.p)

    gq, gu = jax.grad(f, argnums=(0, 1))(state.q, state.u)
    assert np.all(np.isfinite(gq)) and np.all(np.isfinite(gu))


def test_float32_agrees_with_float64():
    model, bodies = mixed_tree()
    state = random_state(model, seed=8)
    m32 = model.astype(jnp.float32)
    s32 = m32.default_state().with_q(state.q.astype(jnp.float32)).with_u(state.u.astype(jnp.float32))
    a = realize_velocity_jit()(model, state)
    b = realize_velocity_jit()(m32, s32)
    assert b.velocity.V_GB.dtype == jnp.float32 and b.position.X_GB.R.dtype == jnp.float32
    np.testing.assert_allclose(b.position.X_GB.p, a.position.X_GB.p, atol=tol(np.float32) * 10)
    np.testing.assert_allclose(b.velocity.V_GB, a.velocity.V_GB, atol=tol(np.float32) * 10)


def test_stage_discipline():
    model, state, link1, link2 = double_pendulum()
    assert state.stage == sx.Stage.Model
    with pytest.raises(ValueError, match="needs Stage.Position .* only to Stage.Model"):
        link2.get_body_transform(state)
    s = model.realize(state, sx.Stage.Position)
    with pytest.raises(ValueError, match="get_body_velocity needs Stage.Velocity"):
        link2.get_body_velocity(s)
    s = model.realize(state, sx.Stage.Velocity)
    assert s.stage == sx.Stage.Velocity
    assert link1.set_one_u(s, 0, 1.0).stage == sx.Stage.Position
    assert link1.set_one_q(s, 0, 1.0).stage == sx.Stage.Time
    assert s.with_time(2.0).stage == sx.Stage.Time
    report = model.realize(s, sx.Stage.Report)  # the ladder's top: energies
    assert report.stage == sx.Stage.Report and report.acceleration is not None
    assert float(report.report.kinetic_energy) == pytest.approx(float(model.matter.calc_kinetic_energy(s)))
    assert float(report.report.total_energy) == pytest.approx(
        float(model.matter.calc_kinetic_energy(s) + model.forces.calc_potential_energy(s)))
    assert report.with_u(s.u).stage == sx.Stage.Position
    system = sx.MultibodySystem()
    sx.MobilizedBody.Pin(sx.SimbodyMatterSubsystem(system).Ground(), rigid())
    other_model, _ = system.realize_topology()
    with pytest.raises(ValueError, match="different model"):
        other_model.realize(state, sx.Stage.Position)


def test_models_built_by_the_same_code_share_states_handles_and_programs():
    """Rebuilding a system (a notebook cell run again) gives a Model equal in
    structure: the first one's States and handles work with it, and a
    jitted function taking the Model compiles once for both. A tree that
    differs, or the same tree with other constraints, is refused."""
    model, state, link1, _ = double_pendulum()
    again, _, link1_again, link2_again = double_pendulum()
    assert again.topology == model.topology and hash(again.topology) == hash(model.topology)
    state = model.realize(state.with_q(jnp.array([0.3, -0.8])), sx.Stage.Velocity)
    np.testing.assert_array_equal(again.realize(state, sx.Stage.Velocity).velocity.qdot, state.velocity.qdot)
    np.testing.assert_array_equal(link2_again.get_body_transform(state).p,
                                  link2_again.get_body_transform(again.realize(state)).p)
    np.testing.assert_array_equal(link1_again.get_one_q(state, 0), link1.get_one_q(state, 0))
    energy = jax.jit(lambda m, s: m.matter.calc_kinetic_energy(m.realize(s, sx.Stage.Velocity)))
    assert energy(model, state) == energy(again, state) and energy._cache_size() == 1

    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    link1 = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), rigid(), sx.Transform())
    link2 = sx.MobilizedBody.Pin(link1, sx.Transform([0, -1.0, 0]), rigid(), sx.Transform())
    sx.Constraint.Rod(matter.Ground(), [1.0, 0, 0], link2, [0, -1.0, 0], 1.5)
    constrained, _ = system.realize_topology()
    assert constrained.topology == model.topology
    with pytest.raises(ValueError, match="same tree but other constraints"):
        constrained.realize(state)
