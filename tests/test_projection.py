"""Projection (Simbody's project, projectQ, projectU): closed forms for a
particle on a Rod, weights, the derivative as the manifold's tangent
projector, a closed chain with a quaternion, error estimates, locks, batches
where some States fail, and the failure paths."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import link, new_system

C = sx.Constraint
EXACT = sx.ProjectOptions(accuracy=1e-12)


@functools.lru_cache(maxsize=None)
def _particle_on_rod():
    """A particle on a Translation mobilizer held at distance 1 from Ground's origin."""
    system, matter, _ = new_system()
    system.set_default_time_scale(0.5).set_default_length_scale(0.01)
    particle = sx.MobilizedBody.Translation(matter.Ground(), sx.Body.Rigid(sx.MassProperties(2.0, [0, 0, 0],
                                                                                              sx.Inertia(0.0))))
    C.Rod(matter.Ground(), [0, 0, 0], particle, [0, 0, 0], 1.0)
    return system.realize_topology()


@functools.lru_cache(maxsize=None)
def _ball_loop():
    """A Ball-jointed link and a Pin-jointed link closed by a Ball constraint
    to a Ground point (5 q with a quaternion, 3 position equations)."""
    system, matter, _ = new_system()
    b1 = sx.MobilizedBody.Ball(matter.Ground(), link())
    b2 = sx.MobilizedBody.Pin(b1, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    C.Ball(b2, [1.0, 0, 0], matter.Ground(), [1.2, 0.6, 0.3])
    model, state = system.realize_topology()
    # an assembled State: project a rough guess exactly once
    guess = state.with_q(jnp.array([0.95, 0.05, -0.1, 0.3, 1.2])).with_u(jnp.array([0.3, -0.2, 0.1, 0.5]))
    assembled, results = model.project(guess, EXACT)
    assert bool(results.succeeded)
    return model, state, guess, assembled, b2


def test_particle_on_rod_closed_form_with_weights():
    model, state = _particle_on_rod()
    q, u = np.array([1.1, 0.2, -0.1]), np.array([0.3, 0.1, 0.2])
    s, results = model.project(state.with_q(q).with_u(u))  # Simbody's defaults: accuracy 1e-4, RMS
    n = q / np.linalg.norm(q)
    np.testing.assert_allclose(s.q, n, atol=1e-12)  # the Rod's errors are linear along the radius
    np.testing.assert_allclose(s.u, u - (u @ n) * n, atol=1e-12)
    assert s.stage >= sx.Stage.Velocity and bool(results.succeeded) and bool(results.any_change_made)
    # position errors unweighted (RMS of one; the length scale, a hint, weighs nothing); velocity errors weighted
    # by the system's time scale (0.5)
    assert (model.get_default_time_scale(), model.get_default_length_scale()) == (0.5, 0.01)
    assert float(model.project_q(state.with_q(q))[1].norm_on_entrance) == pytest.approx(np.linalg.norm(q) - 1)
    _, ru = model.project_u(state.with_q(n).with_u(u))
    assert float(ru.norm_on_entrance) == pytest.approx(0.5 * abs(u @ n))
    # weighted: the least change in |Wu du| moves the light-weighted u the most
    w = np.array([1.0, 2.0, 4.0])
    s, _ = model.project_u(state.with_q(n).with_u(u), EXACT, u_weights=w)
    expected = u - (u @ n) * (n / w ** 2) / (n @ (n / w ** 2))
    np.testing.assert_allclose(s.u, expected, atol=1e-12)


def test_derivative_is_the_tangent_projector():
    """d q*/d q at a point of the manifold is the projector onto its tangent
    along the weighted least-change direction; reverse mode agrees."""
    model, state = _particle_on_rod()
    n = np.array([0.6, 0.0, 0.8])
    w = np.array([1.0, 3.0, 2.0])

    def projected(q):
        return model.project_q(state.with_q(q), EXACT, u_weights=w)[0].q

    J = jax.jacfwd(projected)(jnp.asarray(n))
    oblique = np.eye(3) - np.outer(n / w ** 2, n) / (n @ (n / w ** 2))
    np.testing.assert_allclose(J, oblique, atol=1e-12)
    g = jax.grad(lambda q: projected(q) @ jnp.array([1.0, -2.0, 0.5]))(jnp.asarray(n))
    np.testing.assert_allclose(g, oblique.T @ np.array([1.0, -2.0, 0.5]), atol=1e-12)
    # and the derivative with respect to a constraint number (the rod's length): dq*/dL = n
    def with_length(L):
        m = eqx.tree_at(lambda m: m.params.constraints[0].length, model, L)
        return m.project_q(state.with_q(jnp.asarray(n)), EXACT)[0].q

    np.testing.assert_allclose(jax.jacfwd(with_length)(jnp.asarray(1.0)), n, atol=1e-12)


def test_closed_chain_with_a_quaternion_and_error_estimates():
    model, state, guess, s, _ = _ball_loop()
    constraint = model.constraints[0]
    assert np.abs(constraint.get_position_errors_as_vector(s)).max() < 1e-12
    assert np.abs(constraint.get_velocity_errors_as_vector(s)).max() < 1e-12
    assert np.linalg.norm(s.q[:4]) == pytest.approx(1.0, abs=1e-15)
    # error estimates come back tangent to the manifold (and along no quaternion)
    rng = np.random.default_rng(0)
    _, _, e_q = model.project_q(s, EXACT, error_estimate=rng.standard_normal(5))
    Pq = model.matter.calc_pq(s)
    np.testing.assert_allclose(Pq @ e_q, 0.0, atol=1e-12)
    assert abs(s.q[:4] @ e_q[:4]) < 1e-12
    _, _, e_u = model.project_u(s, EXACT, error_estimate=rng.standard_normal(4))
    np.testing.assert_allclose(model.matter.calc_p(s) @ e_u, 0.0, atol=1e-12)
    # q's derivative on the manifold: a projector (idempotent) whose range Pq annihilates
    J = jax.jacfwd(lambda q: model.project_q(s.with_q(q), EXACT)[0].q)(s.q)
    np.testing.assert_allclose(Pq @ J, 0.0, atol=1e-10)
    np.testing.assert_allclose(J @ J, J, atol=1e-10)


def test_batches_report_per_state_and_throw_names_the_failure():
    model, state, guess, assembled, _ = _ball_loop()
    far = guess.with_q(jnp.array([0.0, 1.0, 0.0, 0.0, -2.5]))
    qs = jnp.stack([guess.q, assembled.q, far.q])
    once = sx.ProjectOptions(accuracy=1e-10, max_iterations=2)

    @jax.jit
    @jax.vmap
    def run(q):
        s, r = model.project_q(state.with_q(q), once, throw=False)
        return r.status, r.num_iterations, constraint_norm(s)

    def constraint_norm(s):
        return jnp.linalg.norm(model.constraints[0].get_position_errors_as_vector(s))

    status, iterations, norm = run(qs)
    assert status[1] == sx.ProjectStatus.Succeeded and iterations[1] == 0  # already assembled: untouched
    assert status[2] != sx.ProjectStatus.Succeeded and norm[2] > 1e-10  # two Newton steps are not enough
    with pytest.raises(Exception, match="project_q failed"):
        model.project_q(far, once)
    limited, r = model.project(guess, sx.ProjectOptions(projection_limit=1e-3), throw=False)
    assert r.status == sx.ProjectStatus.FailedToConverge and bool(r.projection_limit_exceeded)
    np.testing.assert_array_equal(limited.q, guess.q)


def test_locked_coordinates_are_not_moved():
    model, state, guess, assembled, b2 = _ball_loop()
    start = guess.with_q(guess.q.at[4].set(assembled.q[4]))  # the Pin held where the loop can close
    s, r = model.project_q(b2.lock(start, sx.Motion.Position), EXACT)
    assert bool(r.succeeded) and int(r.num_iterations) > 0
    assert s.q[4] == start.q[4]
    assert np.abs(model.constraints[0].get_position_errors_as_vector(s)).max() < 1e-12
    with pytest.raises(ValueError, match="u_weights must have shape"):
        model.project(guess, u_weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="time scale must be a positive"):
        sx.MultibodySystem().set_default_time_scale(0.0)


def test_state_error_vectors():
    """get_q_err / get_u_err / get_udot_err (Simbody's qErr, uErr, udotErr):
    the constraint's own error vectors, then |q| - 1 of the quaternion; all
    zero at the projected State."""
    model, _, guess, assembled, _ = _ball_loop()
    m, ball = model.matter, model.matter.get_constraint(0)
    s = model.realize(guess.with_q(guess.q.at[:4].multiply(1.1)), sx.Stage.Velocity)
    qerr, uerr = m.get_q_err(s), m.get_u_err(s)
    assert qerr.shape == (4,) and uerr.shape == (3,)
    np.testing.assert_allclose(qerr[:3], ball.get_position_errors_as_vector(s), atol=1e-14)
    assert float(qerr[3]) == pytest.approx(float(jnp.linalg.norm(s.q[:4])) - 1, abs=1e-14)
    np.testing.assert_allclose(uerr, ball.get_velocity_errors_as_vector(s), atol=1e-14)
    a = model.realize(assembled, sx.Stage.Acceleration)
    for err in (m.get_q_err(a), m.get_u_err(a), m.get_udot_err(a)):
        np.testing.assert_allclose(err, 0.0, atol=1e-10)
