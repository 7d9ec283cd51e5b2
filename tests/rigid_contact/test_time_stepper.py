"""Rigid contact under the SemiExplicitEulerTimeStepper against closed forms:
a ball rebounding to e^2 h (error shrinking with the step) or captured
below the capture velocity; a brick that sticks on an incline when
mu_s > tan(theta) and slides at g (sin(theta) - mu_d cos(theta)) when not;
a pendulum rebounding off a hard stop at e times its impact speed; a rope
that pulls only when taut; two equal spheres exchanging their velocities in
an elastic impact; state-limited friction on an incline and a puck that
stops where Coulomb says. Then batches, gradients and bad input. Each scene is
built once and each rollout shape compiled once (eqx.filter_jit, numbers
changed as Model leaves)."""

import functools
import pathlib
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import count_primitive, counting_compiles, equations

import simbodyx as sx
from simbodyx.rigid_contact import time_stepper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "examples"))
import rigid_contact  # noqa: E402  (the brick scene is the example's)

G = 9.81
RADIUS = 0.1
INCLINE, NORMAL = rigid_contact.INCLINE, rigid_contact.NORMAL
DOWNHILL = -np.array([np.cos(INCLINE), np.sin(INCLINE), 0.0])
TIGHT = sx.PGSImpulseSolver(convergence_tolerance=1e-10)


def _system(gravity=True):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    if gravity:
        sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    return system, matter


def _sphere(matter, name):
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.4 * RADIUS ** 2)))
    return sx.MobilizedBody.Translation(matter.Ground(), body, name=name)


@functools.lru_cache(maxsize=None)
def ball():
    """A ball (translations only) over the floor y = 0, min_cor 0.5, frictionless."""
    system, matter = _system()
    b = _sphere(matter, "ball")
    matter.adopt_unilateral_contact(
        sx.SpherePlaneContact(matter.Ground(), [0, 1, 0], 0.0, b, [0, 0, 0], RADIUS, 0.5, 0.0, 0.0, 0.0, name="floor"))
    return system.realize_topology()


@functools.lru_cache(maxsize=None)
def brick():
    """The example's free brick resting on the incline, a PointPlaneContact at
    each bottom corner (mu_s 0.6, mu_d 0.5: it sticks, tan(20 deg) = 0.36)."""
    return rigid_contact.brick_on_incline()


def with_friction(model, mu_s, mu_d):
    contacts = model.params.unilateral_contacts
    return eqx.tree_at(lambda m: [c.mu_s for c in m.params.unilateral_contacts]
                       + [c.mu_d for c in m.params.unilateral_contacts],
                       model, [jnp.asarray(mu_s)] * len(contacts) + [jnp.asarray(mu_d)] * len(contacts))


@eqx.filter_jit
def run(model, state, dt, num_steps, stepper, save_every=1):
    return sx.integrate.rollout(model, state, dt, num_steps, save_every, method=stepper, energy=False)


# -- impacts ------------------------------------------------------------------------------------

def _rebound_error(dt):
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper(restitution_model="Newton", constraint_tolerance=1e-5)
    _, traj = run(model, state.with_q(jnp.array([0.0, 1.0 + RADIUS, 0.0])), dt, int(0.9 / dt), stepper)
    y, v = np.asarray(traj.q[:, 1]), np.asarray(traj.u[:, 1])
    up = np.argmax(v > 0)
    return (y[up:].max() - RADIUS) / 0.25 - 1  # e^2 h = 0.25


@pytest.mark.smoke
def test_ball_rebounds_to_e_squared_h():
    coarse, fine = _rebound_error(1e-3), _rebound_error(1e-4)
    assert abs(fine) < 1e-3
    assert abs(coarse) > 3 * abs(fine)  # first order in dt


def test_poisson_and_newton_agree_for_one_contact_and_no_restitution_captures():
    model, state = ball()
    start = state.with_q(jnp.array([0.0, RADIUS + 0.05, 0.0]))
    finals = {}
    for restitution in ("Poisson", "Newton", "NoRestitution"):
        stepper = sx.SemiExplicitEulerTimeStepper(restitution_model=restitution)
        finals[restitution] = run(model, start, 1e-3, 200, stepper)[1]
    np.testing.assert_allclose(finals["Poisson"].u, finals["Newton"].u, atol=1e-6)  # the solver's tolerance
    rest = finals["NoRestitution"]
    # at rest to the impulse solver's convergence tolerance (1e-6 m/s RMS)
    assert np.abs(rest.u[-50:, 1]).max() < 1e-6 and abs(rest.q[-1, 1] - RADIUS) < 1e-9


def test_impacts_below_the_capture_velocity_stick():
    """A drop of 1 mm arrives at 0.14 m/s, below a capture velocity of 0.2 m/s: no rebound."""
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper(default_impact_capture_velocity=0.2)
    _, traj = run(model, state.with_q(jnp.array([0.0, RADIUS + 1e-3, 0.0])), 1e-3, 100, stepper)
    assert np.asarray(traj.u[:, 1]).max() < 1e-6  # the solver's convergence tolerance
    assert abs(traj.q[-1, 1] - RADIUS) < 1e-9


def test_hard_stop_rebounds_at_e_times_the_impact_speed():
    system, matter = _system()
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0.5, 0, 0], sx.Inertia(0.001, 0.26, 0.26)))  # about Bo
    arm = sx.MobilizedBody.Pin(matter.Ground(), body, name="arm")
    matter.adopt_unilateral_contact(sx.HardStopLower(arm, 0, -np.pi / 4, 0.6, name="stop"))
    model, state = system.realize_topology()
    _, traj = run(model, state, 1e-4, 4000, sx.SemiExplicitEulerTimeStepper())
    u = np.asarray(traj.u[:, 0])
    k = np.argmax(u > 0)  # the step of the impact
    assert traj.q[:, 0].min() > -np.pi / 4 - 1e-3
    np.testing.assert_allclose(u[k], -0.6 * u[k - 1], rtol=1e-3)


def test_rope_pulls_only_when_taut():
    system, matter = _system()
    weight = _sphere(matter, "weight")
    matter.adopt_unilateral_contact(sx.Rope(matter.Ground(), [0, 0, 0], weight, [0, 0, 0], 1.0, 0.0, name="rope"))
    model, state = system.realize_topology()
    start = state.with_q(jnp.array([0.0, -0.5, 0.0])).with_u(jnp.array([0.3, 2.0, 0.0]))
    dt = 1e-3
    _, traj = run(model, start, dt, 1500, sx.SemiExplicitEulerTimeStepper())
    slack = np.linalg.norm(np.asarray(traj.q), axis=1) < 1.0 - 1e-2  # taut within the step after
    steps = np.flatnonzero(slack[:-1] & slack[1:])
    np.testing.assert_allclose(np.diff(traj.u[:, 1])[steps], -G * dt, rtol=1e-12)  # free flight while slack
    np.testing.assert_allclose(np.diff(traj.u[:, 0])[steps], 0.0, atol=1e-15)
    length = np.linalg.norm(np.asarray(traj.q), axis=1)
    assert length.max() < 1.0 + 1e-6 and slack[0] and not slack[-1]


def test_elastic_impact_of_equal_spheres_exchanges_velocities():
    system, matter = _system(gravity=False)
    a, b = _sphere(matter, "a"), _sphere(matter, "b")
    matter.adopt_unilateral_contact(
        sx.SphereSphereContact(a, [0, 0, 0], RADIUS, b, [0, 0, 0], RADIUS, 1.0, 0.0, 0.0, 0.0))
    model, state = system.realize_topology()
    start = state.with_q(jnp.array([-0.5, 0, 0, 0.5, 0.01, 0])).with_u(jnp.array([2.0, 0, 0, 0, 0, 0]))
    final, _ = run(model, start, 1e-3, 600, sx.SemiExplicitEulerTimeStepper())
    np.testing.assert_allclose(final.u[:3] + final.u[3:], [2.0, 0, 0], atol=1e-12)  # momentum
    np.testing.assert_allclose(final.u @ final.u, 4.0, rtol=1e-6)  # kinetic energy, to the solver's tolerance
    assert final.u[3] > final.u[0]  # the struck sphere leads


# -- friction -----------------------------------------------------------------------------------

def test_brick_sticks_when_mu_s_exceeds_tan_theta():
    model, state = brick()
    final, traj = run(model, state, 1e-3, 1000, sx.SemiExplicitEulerTimeStepper(solver=TIGHT), 100)
    assert np.abs(np.asarray(traj.q[:, 4:] - state.q[4:])).max() < 1e-9


def test_brick_slides_at_g_sin_minus_mu_d_cos():
    model, state = brick()
    model = with_friction(model, 0.2, 0.2)
    _, traj = run(model, state, 1e-3, 1000, sx.SemiExplicitEulerTimeStepper(solver=TIGHT), 100)
    x, t = np.asarray(traj.q[:, 4:]) @ DOWNHILL, np.asarray(traj.t)
    velocity = np.asarray(traj.u[:, 3:]) @ DOWNHILL
    accel = np.diff(velocity) / np.diff(t)
    expected = G * (np.sin(INCLINE) - 0.2 * np.cos(INCLINE))
    np.testing.assert_allclose(accel[1:], expected, rtol=1e-6)
    assert x[-1] > x[0]


def test_the_plus_solver_meets_the_closed_forms_and_drops_the_brick_without_penetrating():
    """Simbody's PLUS impulse solver in the same scenes (one compiled
    rollout): the brick sticks (1e-9 over 1 s) and slides at
    g (sin(theta) - mu_d cos(theta)) (1e-6); two random drops, impacts and
    sliding included, stay above the incline to the constraint tolerance."""
    model, state = brick()
    stepper = sx.SemiExplicitEulerTimeStepper(impulse_solver_type="PLUS")
    _, stuck = run(model, state, 1e-3, 1000, stepper, 100)
    assert np.abs(np.asarray(stuck.q[:, 4:] - state.q[4:])).max() < 1e-9
    _, sliding = run(with_friction(model, 0.2, 0.2), state, 1e-3, 1000, stepper, 100)
    velocity = np.asarray(sliding.u[:, 3:]) @ DOWNHILL
    accel = np.diff(velocity) / np.diff(np.asarray(sliding.t))
    np.testing.assert_allclose(accel[1:], G * (np.sin(INCLINE) - 0.2 * np.cos(INCLINE)), rtol=1e-6)
    for key in jax.random.split(jax.random.PRNGKey(2), 2):
        _, drop = run(model, rigid_contact.dropped(state, key), 1e-3, 1000, stepper, 100)
        assert np.all(np.isfinite(np.asarray(drop.q)))
        heights = jax.vmap(rigid_contact.corner_heights)(drop.q)
        assert float(heights.min()) > -stepper.get_constraint_tolerance_in_use()


# -- batches, gradients, the State ---------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:SemiExplicitEulerTimeStepper. a derivative is taken through")  # the discrete map's, asked
def test_batched_drops_do_not_penetrate_and_values_and_derivatives_are_finite():
    """32 random drops in one program, with the forward derivative of every
    sample along a random direction of the initial q and u."""
    model, state = brick()
    starts = jax.vmap(functools.partial(rigid_contact.dropped, state))(jax.random.split(jax.random.PRNGKey(0), 32))
    stepper = sx.SemiExplicitEulerTimeStepper()

    def samples(q, u, start):
        return run(model, start.with_q(q).with_u(u), 2e-3, 500, stepper, 10)[1]

    dq, du = (jax.random.normal(k, (32, n)) for k, n in zip(jax.random.split(jax.random.PRNGKey(1)), (7, 6)))
    traj, tangent = jax.jit(jax.vmap(lambda q, u, s, dq, du: jax.jvp(
        lambda q, u: samples(q, u, s), (q, u), (dq, du))))(starts.q, starts.u, starts, dq, du)
    assert all(np.all(np.isfinite(x)) for x in (traj.q, traj.u, tangent.q, tangent.u))
    heights = jax.vmap(jax.vmap(rigid_contact.corner_heights))(traj.q[:, 1:])
    assert float(heights.min()) > -stepper.get_constraint_tolerance_in_use()


def test_localized_impacts_give_the_rebound_height_derivative_e_squared():
    """H = y + v^2 / 2g after the bounce; dH / dh0 = e^2 for a drop from h0
    (0.25; 1% at 2 ms steps), the derivative equal to central differences.
    A step that applies the impact at its start gives 1 instead."""
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper(restitution_model="Newton", localize_impacts=True)

    def rebound(h0):
        final, _ = run(model, state.with_q(jnp.stack([0.0, RADIUS + h0, 0.0])), 2e-3, 350, stepper, 350)
        return final.q[1] - RADIUS + final.u[1] ** 2 / (2 * G)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the derivative is the physical one
        height, slope = jax.jit(lambda h0: jax.jvp(rebound, (h0,), (1.0,)))(1.0)
    np.testing.assert_allclose(slope, 0.25, rtol=0.015)
    np.testing.assert_allclose(slope, (rebound(1.0 + 1e-6) - rebound(1.0 - 1e-6)) / 2e-6, rtol=1e-6)
    np.testing.assert_allclose(height, 0.25, rtol=0.02)


def test_a_derivative_through_an_unlocalized_impact_warns_that_it_is_the_discrete_maps():
    """The default stepper's d(rebound height)/d(drop height) is 1 (its
    discrete map's), where the physical answer is e^2 = 0.25: a user
    optimizing through impacts was not told. jax.grad through a rollout
    that crosses an impact now warns, naming localize_impacts; the same
    rollout without a derivative, or a derivative with no impact, does not."""
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper(restitution_model="Newton")

    def rebound(h0, num_steps=350):
        final, _ = run(model, state.with_q(jnp.stack([0.0, RADIUS + h0, 0.0])), 2e-3, num_steps, stepper, num_steps)
        return final.q[1] - RADIUS + final.u[1] ** 2 / (2 * G)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rebound(1.0)  # no derivative
        jax.grad(rebound)(1.0, 50)  # falling, no impact yet
    with pytest.warns(UserWarning, match=r"derivative is taken through a step with an impact.*"
                                         r"localize_impacts=True\) splits the step") as caught:
        slope = jax.grad(rebound)(1.0)
    np.testing.assert_allclose(slope, 1.0, rtol=1e-6)
    assert all(str(w.message) == time_stepper.IMPACT_DERIVATIVE_WARNING for w in caught)


@pytest.mark.parametrize("stepper", [
    pytest.param(sx.SemiExplicitEulerTimeStepper(solver=TIGHT), marks=pytest.mark.smoke),
    sx.SemiExplicitEulerTimeStepper(impulse_solver_type="PLUS")], ids=["PGS", "PLUS"])
def test_gradients_are_exact_while_sliding(stepper):
    """A block (a point contact) sliding down the incline at constant
    deceleration: d x(T) / d v0 = T, d x(T) / d mu_d = -g cos(theta) T^2 / 2,
    with either impulse solver. Reverse mode runs no solver iterations of its
    own: the rollout's checkpoints keep what the solves found, so the
    gradient's reverse pass holds no while loop."""
    system, matter = _system()
    block = _sphere(matter, "block")
    matter.adopt_unilateral_contact(sx.PointPlaneContact(matter.Ground(), NORMAL, 0.0, block, [0, 0, 0], 0.0, 0.2,
                                                         0.2, 0.0))
    model, state = system.realize_topology()
    dt, steps = 1e-3, 100

    def downhill(v0, mu_d):
        m = eqx.tree_at(lambda m: m.params.unilateral_contacts[0].mu_d, model, mu_d)
        start = state.with_u(v0 * jnp.asarray(DOWNHILL))
        final, _ = run(m, start, dt, steps, stepper, steps)
        return final.q @ jnp.asarray(DOWNHILL)

    gradient = jax.jit(jax.grad(downhill, argnums=(0, 1))).trace(1.0, 0.2)
    backward = [eqn for eqn in equations(gradient.jaxpr.jaxpr)
                if eqn.primitive.name == "scan" and eqn.params["reverse"]]
    assert count_primitive(gradient.jaxpr.jaxpr, "while") and backward  # the forward pass's solves, the reverse pass
    assert not any(count_primitive(eqn.params["jaxpr"].jaxpr, "while") for eqn in backward)
    d_v0, d_mu = gradient.lower().compile()(1.0, 0.2)
    T = steps * dt
    np.testing.assert_allclose(d_v0, T, rtol=1e-9)
    # semi-explicit Euler: x_n = x0 + v0 T - a dt^2 n (n + 1) / 2 for a constant deceleration a
    np.testing.assert_allclose(d_mu, -G * np.cos(INCLINE) * dt ** 2 * steps * (steps + 1) / 2, rtol=1e-9)


def test_a_step_reports_and_enables_the_contacts_in_play():
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper()
    start = state.with_q(jnp.array([0.0, RADIUS, 0.0])).with_u(jnp.array([0.0, -1.0, 0.0]))
    contact = model.unilateral_contacts[0]
    assert not contact.is_enabled(start)
    after, report = jax.jit(stepper.take_step, static_argnums=())(model, start, 1e-3)
    assert bool(report.proximal[0]) and bool(report.impacters[0]) and int(report.num_impact_rounds) >= 1
    # eagerly (a Python loop of steps, Simbody's way): one compiled program, reused by the next call
    eager, _ = stepper.take_step(model, start, 1e-3)
    np.testing.assert_allclose(eager.u, after.u, atol=1e-12)
    with counting_compiles() as compiled:
        stepper.take_step(model, eager, 2e-3)
    assert not compiled
    assert contact.is_enabled(after)
    s = model.realize(after, sx.Stage.Velocity)
    assert float(contact.get_verr(s)) > 0  # rebounding
    assert contact.calc_effective_cor(0.002, 0.002, 1.0) == 0.5
    # Simbody's queries: perr the height over the floor, aerr its second derivative, no slip along it
    s = model.realize(after, sx.Stage.Acceleration)
    assert contact.get_sign_convention() == 1 and contact.has_friction()  # with zero coefficients
    np.testing.assert_allclose(contact.get_perr(s), after.q[1] - RADIUS, atol=1e-15)
    np.testing.assert_allclose(contact.get_aerr(s), s.acceleration.udot[1], atol=1e-12)
    assert bool(contact.is_proximal(s, abs(float(contact.get_perr(s))) + 1e-9))
    np.testing.assert_array_equal(contact.get_slip_velocity(s), [0.0, 0.0])
    assert contact.calc_effective_cof(0.01, 0.5) == 0


# -- Simbody's rules and bad input ---------------------------------------------------------------

def test_coefficient_rules_are_simbodys():
    cor = sx.ConditionalConstraint.calc_effective_cor
    assert cor(0.5, 0.1, 1.0, 0.05) == 0 and cor(0.5, 0.1, 1.0, 2.0) == 0.5
    np.testing.assert_allclose(cor(0.5, 0.1, 1.0, 0.5), 1 - 0.5 * 0.5)
    cof = sx.ConditionalConstraint.calc_effective_cof
    assert cof(0.6, 0.5, 0.1, 0.01, 0.005) == pytest.approx(0.6005)
    assert cof(0.6, 0.5, 0.0, 0.01, 0.02) == 0.5


def test_bad_input_names_the_element():
    system, matter = _system()
    b = _sphere(matter, "b")
    with pytest.raises(ValueError, match="restitution must be between 0 and 1"):
        sx.HardStopUpper(b, 0, 1.0, 1.5)
    with pytest.raises(ValueError, match="nonnegative.*mu_s=-0.1"):
        sx.PointPlaneContact(matter.Ground(), [0, 1, 0], 0, b, [0, 0, 0], 0.5, -0.1, 0.0, 0.0)
    with pytest.raises(ValueError, match="can't be larger"):
        sx.SpherePlaneContact(matter.Ground(), [0, 1, 0], 0, b, [0, 0, 0], 0.1, 0.5, 0.2, 0.3, 0.0)
    with pytest.raises(ValueError, match="between a body and itself"):
        sx.PointPlaneContact(matter.Ground(), [0, 1, 0], 0, matter.Ground(), [0, 0, 0], 0.5, 0.1, 0.1, 0.0,
                             name="ground-ground")
    matter.adopt_unilateral_contact(sx.HardStopUpper(b, 0, 0.1, 0.5, name="upper"))
    with pytest.raises(ValueError, match="'lower'.*lower limit 0.2 exceeds the upper limit 0.1 of HardStopUpper 'upper'"):
        matter.adopt_unilateral_contact(sx.HardStopLower(b, 0, 0.2, 0.5, name="lower"))
    with pytest.raises(TypeError, match="expected a unilateral contact"):
        matter.adopt_unilateral_contact(sx.Constraint.Rod(matter.Ground(), [0, 0, 0], b, [0, 0, 0], 1.0))
    speed = [sx.Constraint.ConstantSpeed(b, i, 0.0) for i in range(3)]
    with pytest.raises(ValueError, match="StateLimitedFriction: Constraint.Rod .*velocity rows only.*\\(1, 0, 0\\)"):
        sx.StateLimitedFriction(sx.Constraint.Rod(matter.Ground(), [0, 0, 0], b, [0, 0, 0], 1.0), 1.0, 0.5, 0.5, 0)
    with pytest.raises(ValueError, match="4 velocity rows; a friction has 1 to 3"):
        sx.StateLimitedFriction(speed + [sx.Constraint.ConstantSpeed(b, 0, 1.0)], 1.0, 0.5, 0.5, 0)
    with pytest.raises(ValueError, match="normal_force must be nonnegative, got -1"):
        sx.StateLimitedFriction(speed[0], -1, 0.5, 0.5, 0)
    with pytest.raises(ValueError, match="StateLimitedFriction: the dynamic coefficient"):
        sx.StateLimitedFriction(speed[0], 1.0, 0.2, 0.5, 0)
    with pytest.raises(TypeError, match="expected constraint handles, got float"):
        sx.StateLimitedFriction(1.0, 1.0, 0.5, 0.5, 0)
    with pytest.raises(TypeError, match="adopt_state_limited_friction: expected an sx.StateLimitedFriction"):
        matter.adopt_state_limited_friction(speed[0])
    with pytest.raises(ValueError, match="min_significant_force must be a positive number"):
        sx.SemiExplicitEulerTimeStepper(min_significant_force=0.0)
    with pytest.raises(ValueError, match="Sequential is not provided"):
        sx.SemiExplicitEulerTimeStepper(induced_impact_model="Sequential")
    with pytest.raises(ValueError, match="impulse_solver_type PLUS disagrees with the solver given, a PGSImpulse"):
        sx.SemiExplicitEulerTimeStepper(impulse_solver_type="PLUS", solver=sx.PGSImpulseSolver())
    with pytest.raises(TypeError, match="solver must be a PGSImpulseSolver or a PLUSImpulseSolver, got str"):
        sx.SemiExplicitEulerTimeStepper(solver="PLUS")
    plus = sx.SemiExplicitEulerTimeStepper(impulse_solver_type="PLUS")
    assert plus.get_impulse_solver().get_max_rolling_speed() == plus.get_default_friction_transition_velocity_in_use()
    # the settings read back as given, by Simbody's getters and names
    stepper = sx.SemiExplicitEulerTimeStepper(
        restitution_model="Newton", position_projection_method="Unilateral", accuracy=1e-3,
        default_impact_capture_velocity=0.01, default_impact_min_cor_velocity=0.02,
        default_friction_transition_velocity=0.03, solver=sx.PGSImpulseSolver(convergence_tolerance=1e-8,
                                                                              max_iterations=50))
    T = sx.SemiExplicitEulerTimeStepper
    assert (T.get_restitution_model_name(stepper.get_restitution_model()),
            T.get_induced_impact_model_name(stepper.get_induced_impact_model()),
            T.get_position_projection_method_name(stepper.get_position_projection_method()),
            T.get_impulse_solver_type_name(stepper.get_impulse_solver_type())) == (
        "Newton", "Simultaneous", "Unilateral", "PGS")
    assert (stepper.get_accuracy_in_use(), stepper.get_default_impact_capture_velocity(),
            stepper.get_default_impact_min_cor_velocity(), stepper.get_default_friction_transition_velocity()) == (
        1e-3, 0.01, 0.02, 0.03)
    pgs, solver = stepper.get_impulse_solver(), sx.PLUSImpulseSolver(1e-3, convergence_tolerance=1e-9, max_iterations=7)
    assert (pgs.get_convergence_tol(), pgs.get_max_iterations(), solver.get_convergence_tol(),
            solver.get_max_iterations()) == (1e-8, 50, 1e-9, 7)
    assert sx.SemiExplicitEulerTimeStepper(solver=sx.PLUSImpulseSolver(1e-3)).get_impulse_solver_type().name == "PLUS"
    with pytest.raises(ValueError, match="unknown restitution_model 'Hertz'"):
        sx.SemiExplicitEulerTimeStepper(restitution_model="Hertz")
    model, state = ball()
    with pytest.raises(TypeError, match="fixed steps of your choosing.*integrate.rollout"):
        sx.simulate(model, state, sx.SemiExplicitEulerTimeStepper(), [0.1])


def test_bilateral_constraints_hold_while_a_contact_strikes():
    """A free body held at one point by a Ball constraint (an unconditional row)
    swings down into a frictionless floor and rebounds: the Ball's error stays
    within the tolerance and the impact reverses the floor-normal speed."""
    system, matter = _system()
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.01)))
    bob = sx.MobilizedBody.Free(matter.Ground(), body, name="bob")
    ball = sx.Constraint.Ball(matter.Ground(), [0, 0.5, 0], bob, [-0.5, 0, 0], name="pivot")
    matter.adopt_unilateral_contact(sx.PointPlaneFrictionlessContact(
        matter.Ground(), [0, 1, 0], 0.2, bob, [0, 0, 0], 0.8, name="floor"))
    model, state = system.realize_topology()
    start = state.with_q(jnp.array([1.0, 0, 0, 0, 0.5, 0.5, 0]))  # the arm horizontal
    for method in ("Bilateral", "Unilateral"):
        stepper = sx.SemiExplicitEulerTimeStepper(position_projection_method=method)
        _, traj = run(model, start, 1e-3, 400, stepper)
        y, vy = np.asarray(traj.q[:, 5]), np.asarray(traj.u[:, 4])
        assert y.min() > 0.2 - stepper.get_constraint_tolerance_in_use()
        k = np.argmax(vy > 0)  # the impact
        assert 0 < k < 400
        np.testing.assert_allclose(vy[k], -0.8 * vy[k - 1], rtol=1e-2)  # e, within a step of gravity
        errors = jax.vmap(lambda q: ball.get_position_errors_as_vector(model.realize(state.with_q(q))))(traj.q)
        assert float(jnp.abs(errors).max()) < 2 * stepper.get_constraint_tolerance_in_use()


def test_without_projection_a_resting_contact_drifts_only_by_the_solver_tolerance():
    model, state = ball()
    stepper = sx.SemiExplicitEulerTimeStepper(position_projection_method="NoPositionProjection")
    _, traj = run(model, state.with_q(jnp.array([0.0, RADIUS, 0.0])), 1e-3, 200, stepper)
    assert abs(float(traj.q[-1, 1]) - RADIUS) < 200 * 1e-3 * 1e-6


def test_an_edge_comes_to_rest_across_another():
    """EdgeEdgeContact: a falling body's edge (along z) lands across a Ground
    edge (along x) and rests on it (min_cor 0: no bounce)."""
    system, matter = _system()
    falling = _sphere(matter, "falling")
    down_z = sx.Transform(np.array([[0.0, -1, 0], [0, 0, -1], [1, 0, 0]]), [0, -0.1, 0])  # x = z_B, z = -y_B
    up_x = sx.Transform(np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]]), [0, 0, 0])  # x = x_G, z = y_G
    matter.adopt_unilateral_contact(sx.EdgeEdgeContact(matter.Ground(), up_x, 0.5, falling, down_z, 0.5, 0.0, 0.5,
                                                       0.5, 0.0))
    model, state = system.realize_topology()
    final, traj = run(model, state.with_q(jnp.array([0.0, 0.3, 0.0])), 1e-3, 400, sx.SemiExplicitEulerTimeStepper())
    assert float(traj.q[:, 1].min()) > 0.1 - 1e-3
    np.testing.assert_allclose(final.q, [0.0, 0.1, 0.0], atol=1e-6)


def test_a_ratchet_turns_one_way_and_a_limited_motor_ramps_at_its_torque():
    """A pendulum on a ratchet (UnilateralSpeedConstraint, u >= 0) released
    at rest swings only forward; a free wheel (no gravity) driven by a
    BoundedSpeedConstraint to 10 rad/s with at most 2 N m accelerates at
    2 / I until it reaches the speed, and holds it."""
    system, matter = _system()
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0.5, 0, 0], sx.Inertia(0.001, 0.26, 0.26)))
    arm = sx.MobilizedBody.Pin(matter.Ground(), body, name="arm")
    ratchet = sx.UnilateralSpeedConstraint(arm, 0, -1, name="ratchet")
    assert matter.adopt_unilateral_speed_constraint(ratchet) == ratchet.get_my_index() == 0
    wheel = sx.MobilizedBody.Pin(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.5))),
                                 name="wheel")
    motor = sx.BoundedSpeedConstraint(wheel, 0, 10.0, -2.0, 2.0, name="motor")
    assert matter.adopt_bounded_speed_constraint(motor) == 0
    assert (matter.get_num_unilateral_speed_constraints(), matter.get_num_bounded_speed_constraints(),
            matter.get_num_unilateral_contacts()) == (1, 1, 0)
    model, state = system.realize_topology()
    _, traj = run(model, state, 1e-3, 3000, sx.SemiExplicitEulerTimeStepper())
    swing = np.asarray(traj.u[:, 0])
    assert swing.max() <= 1e-6 and swing.min() < -1  # falls (clockwise) and never swings back
    spin, t = np.asarray(traj.u[:, 1]), np.asarray(traj.t)
    ramp = t <= 2.4
    np.testing.assert_allclose(spin[ramp], np.minimum(4.0 * t[ramp], 10.0), atol=1e-9)  # 2 N m / 0.5 kg m^2
    np.testing.assert_allclose(spin[t >= 2.6], 10.0, atol=1e-6)
    assert model.params.bounded_speeds[0].calc_effective_bounds() == (-2.0, 2.0)
    # the wrapped ConstantSpeed, disabled by default; the handle enables and disables it, also under jit
    assert ratchet.get_sign_convention() == -1 and ratchet.get_constraint().index == ratchet.constraint
    on = jax.jit(ratchet.enable)(state)
    assert bool(ratchet.is_enabled(on)) and not bool(motor.is_enabled(on)) and not bool(ratchet.is_enabled(state))
    np.testing.assert_array_equal(ratchet.disable(on).constraint_disabled, state.constraint_disabled)


def test_state_limited_friction_sticks_slides_and_stops_a_puck_where_coulomb_says():
    """StateLimitedFriction with a known normal force: a block on a Slider
    pushed down a 30 degree incline (m g sin(theta) along it; its friction a
    ConstantSpeed(block, 0, 0), N = m g cos(theta)) sticks while mu_s >
    tan(theta) and otherwise slides at g (sin(theta) - mu_d cos(theta)),
    exactly per step; a puck on a plane (Translation; friction on x and z, N
    = m g from a function of the State) slides straight along its initial
    velocity and stops after v0^2 / (2 mu g) (1%, the steps'
    discretization), and that distance's derivative with respect to v0 is
    v0 / (mu g) (1%) and the central difference's (1e-6)."""
    theta, m, h, steps = np.radians(30.0), 2.0, 1e-3, 700
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties(m, [0, 0, 0], sx.Inertia(0.01)))
    block = sx.MobilizedBody.Slider(matter.Ground(), body, name="block")
    puck = sx.MobilizedBody.Translation(matter.Ground(), body, name="puck")
    sx.Force.MobilityConstantForce(forces, block, 0, -m * G * np.sin(theta))
    incline = sx.StateLimitedFriction(sx.Constraint.ConstantSpeed(block, 0, 0.0), m * G * np.cos(theta),
                                      0.8, 0.8, 0.0, name="incline")
    plane = sx.StateLimitedFriction(
        [sx.Constraint.ConstantSpeed(puck, 0, 0.0), sx.Constraint.ConstantSpeed(puck, 2, 0.0)],
        lambda state: m * G + 0.0 * state.t, 0.3, 0.3, 0.0, name="plane")
    assert (matter.adopt_state_limited_friction(incline), matter.adopt_state_limited_friction(plane)) == (0, 1)
    assert matter.get_num_state_limited_frictions() == 2 and matter.get_state_limited_friction(1) is plane
    model, state = system.realize_topology()
    stepper = sx.SemiExplicitEulerTimeStepper(solver=TIGHT)

    _, stuck = run(model, state, h, steps, stepper)
    assert np.abs(np.asarray(stuck.u)).max() < 1e-9  # the solver's tolerance, 1e-10 per step, not accumulating
    slippery = eqx.tree_at(lambda m: (m.params.state_limited_frictions[0].mu_s,
                                      m.params.state_limited_frictions[0].mu_d), model, (jnp.asarray(0.3),) * 2)
    _, sliding = run(slippery, state, h, steps, stepper)
    a = -G * (np.sin(theta) - 0.3 * np.cos(theta))
    n = np.arange(steps + 1)
    np.testing.assert_allclose(sliding.u[:, 0], a * h * n, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sliding.q[:, 0], a * h * h * n * (n + 1) / 2, rtol=0, atol=1e-12)

    v0, direction = 1.5, np.array([0.6, 0.0, 0.8])

    def stop(v0):
        start = state.with_u(jnp.concatenate([jnp.zeros(1), v0 * jnp.asarray(direction)]))
        final, _ = run(model, start, h, steps, stepper, steps)
        return final.q[1:]

    where = np.asarray(stop(v0))
    distance = np.linalg.norm(where)
    np.testing.assert_allclose(where / distance, direction, atol=1e-12)
    np.testing.assert_allclose(distance, v0 ** 2 / (2 * 0.3 * G), rtol=1e-2)
    slope = jax.grad(lambda v0: jnp.dot(stop(v0), jnp.asarray(direction)))(v0)
    np.testing.assert_allclose(slope, v0 / (0.3 * G), rtol=1e-2)
    fd = (np.dot(stop(v0 + 1e-6), direction) - np.dot(stop(v0 - 1e-6), direction)) / 2e-6
    np.testing.assert_allclose(slope, fd, rtol=1e-6)
    s = model.realize(state, sx.Stage.Velocity)
    assert float(model.params.state_limited_frictions[1].get_normal_force_magnitude(s)) == m * G
    assert float(incline.get_normal_force_magnitude(s)) == m * G * np.cos(theta)
    assert float(plane.get_slip_speed(s)) == 0.0
    # the wrapped constraints, disabled by default; the element enables and disables them together, also under jit
    assert plane.get_my_index() == 1 and [c.index for c in plane.get_constraints()] == list(plane.constraints)
    on = jax.jit(lambda s: plane.enable(s))(state)
    assert bool(plane.is_enabled(on)) and not bool(incline.is_enabled(on)) and not bool(plane.is_enabled(state))
    assert not np.asarray(on.constraint_disabled)[list(plane.constraints)].any()
    np.testing.assert_array_equal(plane.disable(on).constraint_disabled, state.constraint_disabled)
