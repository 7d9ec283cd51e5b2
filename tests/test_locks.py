"""Mobilizer locks: Position, Velocity and Acceleration locks, lock_by_default,
unlock, the locking forces tau, and derivatives through locked dynamics.

Independent checks: a Position-locked Pin moves its subtree exactly like a
Weld at that angle (1e-10 over 0.5 s of RK4, rounding only); locked forward
dynamics against a dense solve of the free rows, M_ff udot_f = f_f - M_fL
udot_L (1e-10 relative: cond(M) ~ 1e2 here); the static holding torque of a
pendulum against m g l sin(theta); gradients against central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FD_STEP, random_state, rigid, with_forces

import simbodyx as sx
from simbodyx.integrate import rollout

Motion = sx.Motion


@pytest.fixture(scope="module")
def tree():
    system, matter, _, bodies = with_forces(("Pin", "Ball", "Pin", "Free", "Slider", "Gimbal"), seed=1)
    model, _ = system.realize_topology()
    return model, bodies


def locked_state(model, bodies, seed=0):
    s = random_state(model, seed, 0.5)
    s = bodies[2].lock(s, Motion.Position)  # Ball: q held, u = 0
    s = bodies[3].lock(s, Motion.Velocity)  # Pin: u held
    return bodies[4].lock_at(s, [0.1, 0.2, 0.3, 0.0, 0.0, 1.0], Motion.Acceleration)  # Free: udot held


def test_locked_forward_dynamics_solves_the_free_rows(tree):
    model, bodies = tree
    s = model.realize(locked_state(model, bodies), sx.Stage.Acceleration)
    m = model.matter
    locked = np.zeros(model.topology.nu, bool)
    for b in bodies[2:5]:
        locked[b.first_u_index:b.first_u_index + b.num_u] = True
    udot = np.asarray(s.acceleration.udot)
    np.testing.assert_array_equal(udot[bodies[2].first_u_index:][:3], 0.0)
    assert udot[bodies[3].first_u_index] == 0.0
    np.testing.assert_allclose(udot[bodies[4].first_u_index:][:6], [0.1, 0.2, 0.3, 0.0, 0.0, 1.0])
    # Dense check: M udot + tau = f_applied - f_inertial, tau zero on free rows.
    M = np.asarray(m.calc_m(s))
    bias = np.asarray(m.calc_residual_force_ignoring_constraints(
        s, s.dynamics.mobility_forces, s.dynamics.body_forces, jnp.zeros(model.topology.nu)))
    free = ~locked
    expected = np.linalg.solve(M[np.ix_(free, free)], -bias[free] - M[np.ix_(free, locked)] @ udot[locked])
    np.testing.assert_allclose(udot[free], expected, rtol=1e-10, atol=1e-10)
    # tau (on the left, Simbody's sign): minus the residual on the locked rows, zero elsewhere.
    tau = np.concatenate([np.asarray(b.get_tau_as_vector(s)) for b in bodies[1:]])
    np.testing.assert_allclose(tau[locked], -(M @ udot + bias)[locked], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.find_motion_forces(s), tau, rtol=1e-12, atol=1e-12)
    assert float(m.calc_motion_power(s)) == pytest.approx(-tau @ np.asarray(s.u), abs=1e-12)
    np.testing.assert_array_equal(tau[free], 0.0)
    # Reactions: the articulated and free-body methods agree with locks too.
    np.testing.assert_allclose(m.calc_mobilizer_reaction_forces(s),
                               m.calc_mobilizer_reaction_forces_using_free_body_method(s), atol=1e-10)


def test_lock_queries_unlock_and_realize_applies_prescriptions(tree):
    model, bodies = tree
    s = locked_state(model, bodies)
    ball, pin, free = bodies[2], bodies[3], bodies[4]
    assert ball.get_lock_level(s) == Motion.Position and pin.is_locked(s) and not bodies[1].is_locked(s)
    np.testing.assert_array_equal(ball.get_lock_value_as_vector(s), ball.get_q_as_vector(s))
    np.testing.assert_array_equal(ball.get_u_as_vector(s), 0.0)
    assert bodies[1].get_lock_value_as_vector(s).shape == (0,)
    # Realizing re-applies the prescription even if q or u were changed afterwards.
    moved = ball.set_q_from_vector(s, jnp.array([0.0, 1.0, 0.0, 0.0]))
    moved = pin.set_u_from_vector(moved, jnp.array([9.0]))
    r = model.realize(moved, sx.Stage.Velocity)
    np.testing.assert_array_equal(ball.get_q_as_vector(r), ball.get_lock_value_as_vector(s))
    np.testing.assert_array_equal(pin.get_u_as_vector(r), pin.get_lock_value_as_vector(s))
    # Unlocked again, the dynamics are the free ones.
    for b in (ball, pin, free):
        s = b.unlock(s)
    assert not free.is_locked(s)
    unlocked = s.with_locks(None)
    np.testing.assert_allclose(model.realize(s, sx.Stage.Acceleration).acceleration.udot,
                               model.realize(unlocked, sx.Stage.Acceleration).acceleration.udot, atol=1e-12)
    with pytest.raises(ValueError, match="Position lock value needs 4 entries"):
        ball.lock_at(s, [1.0, 0.0], Motion.Position)
    with pytest.raises(ValueError, match="no mobilities to lock"):
        sx.MobilizedBody.Weld(sx.SimbodyMatterSubsystem(sx.MultibodySystem()).Ground(), rigid()).lock_by_default()


def double_pendulum(lock_first_as_weld_at=None):
    """Two Pin links under gravity; the first may instead be a Weld at that angle."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0.0, -9.81, 0.0])
    body = rigid(1.0, (0.0, -0.5, 0.0))
    if lock_first_as_weld_at is None:
        first = sx.MobilizedBody.Pin(matter.Ground(), body)
    else:
        first = sx.MobilizedBody.Weld(matter.Ground(), sx.Transform(sx.Rotation.about_z(lock_first_as_weld_at)),
                                      body, sx.Transform())
    second = sx.MobilizedBody.Pin(first, sx.Transform([0.0, -1.0, 0.0]), body, sx.Transform())
    return system, first, second


def test_position_lock_moves_like_a_weld():
    angle = 0.4
    system, first, second = double_pendulum()
    model, state = system.realize_topology()
    state = second.set_one_u(first.lock_at(state, angle), 0, 1.5)
    weld_system, _, weld_second = double_pendulum(lock_first_as_weld_at=angle)
    weld_model, weld_state = weld_system.realize_topology()
    weld_state = weld_second.set_one_u(weld_state, 0, 1.5)
    _, locked = rollout(model, state, 0.005, 100, energy=False)
    _, welded = rollout(weld_model, weld_state, 0.005, 100, energy=False)
    np.testing.assert_array_equal(locked.q[:, 0], angle)
    np.testing.assert_array_equal(locked.u[:, 0], 0.0)
    np.testing.assert_allclose(locked.q[:, 1], welded.q[:, 0], atol=1e-10)
    np.testing.assert_allclose(locked.u[:, 1], welded.u[:, 0], atol=1e-10)


def test_velocity_and_acceleration_locks_over_time():
    system, first, second = double_pendulum()
    model, state = system.realize_topology()
    s = first.lock_at(second.set_one_q(state, 0, 0.3), 0.8, Motion.Velocity)
    _, trajectory = rollout(model, s, 0.01, 50, save_every=10, energy=False)
    np.testing.assert_allclose(trajectory.u[:, 0], 0.8, atol=1e-14)
    np.testing.assert_allclose(trajectory.q[:, 0], 0.8 * trajectory.t, atol=1e-12)
    s = first.lock_at(state, -2.0, Motion.Acceleration)
    _, trajectory = rollout(model, s, 0.01, 50, save_every=10, energy=False)
    np.testing.assert_allclose(trajectory.u[:, 0], -2.0 * trajectory.t, atol=1e-12)


def test_holding_torque_of_a_locked_pendulum():
    """Both joints locked at rest: the holding torque -tau is minus gravity's
    generalized force, for the top joint m g (l1 sin(q1) + l2 sin(q1 + q2))
    summed over the links (tau on the left of the equations, Simbody's sign)."""
    system, first, second = double_pendulum()
    first.lock_by_default()
    second.lock_by_default()
    q1, q2 = 0.3, -0.5
    first.set_default_q([q1])
    second.set_default_q([q2])
    assert first.is_locked_by_default() and second.get_lock_by_default_level() == Motion.Position
    model, state = system.realize_topology()
    s = model.realize(state, sx.Stage.Acceleration)
    np.testing.assert_array_equal(s.acceleration.udot, 0.0)
    g = 9.81
    # Link 1's center 0.5 m down its link; link 2 hangs from 1.0 m down link 1.
    tau_2 = g * 0.5 * np.sin(q1 + q2)
    tau_1 = g * 0.5 * np.sin(q1) + g * (1.0 * np.sin(q1) + 0.5 * np.sin(q1 + q2))
    np.testing.assert_allclose(second.get_tau_as_vector(s), [-tau_2], rtol=1e-12)
    np.testing.assert_allclose(first.get_tau_as_vector(s), [-tau_1], rtol=1e-12)


def test_gradients_through_locked_dynamics(tree):
    """jit(vmap) of locked forward dynamics, and its derivatives with respect to
    q and to the Acceleration lock's value, against central differences."""
    model, bodies = tree
    s = locked_state(model, bodies)
    free = bodies[4]

    def udot(q, held):
        state = free.lock_at(s.with_q(q), held, Motion.Acceleration)
        return model.realize(state, sx.Stage.Acceleration).acceleration.udot

    q0, held0 = s.q, jnp.array([0.1, 0.2, 0.3, 0.0, 0.0, 1.0])
    batched = jax.jit(jax.vmap(udot, in_axes=(0, None)))(jnp.stack([q0, q0 + 0.01]), held0)
    np.testing.assert_allclose(batched[0], udot(q0, held0), atol=1e-12)
    direction_q = jnp.asarray(np.random.default_rng(3).normal(size=q0.shape))
    direction_h = jnp.asarray(np.random.default_rng(4).normal(size=6))
    for args, tangents in (((q0, held0), (direction_q, jnp.zeros(6))), ((q0, held0), (jnp.zeros_like(q0), direction_h))):
        _, jvp = jax.jvp(udot, args, tangents)
        plus = udot(*(a + FD_STEP * t for a, t in zip(args, tangents)))
        minus = udot(*(a - FD_STEP * t for a, t in zip(args, tangents)))
        np.testing.assert_allclose(jvp, (plus - minus) / (2 * FD_STEP), atol=1e-7)
    grad = jax.grad(lambda held: jnp.sum(udot(q0, held) ** 2))(held0)
    assert np.all(np.isfinite(grad))


def test_euler_conversion_keeps_locks(tree):
    model, bodies = tree
    s = locked_state(model, bodies)
    euler = model.matter.convert_to_euler_angles(s)
    a = model.realize(s, sx.Stage.Acceleration).acceleration.udot
    b = model.with_euler_angles(True).realize(euler, sx.Stage.Acceleration).acceleration.udot
    np.testing.assert_allclose(a, b, atol=1e-10)
    assert bodies[2].get_lock_level(euler) == Motion.Position
