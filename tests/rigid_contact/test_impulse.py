"""The impulse solvers on hand-built problems (no model to compile): PGS
and PLUS against closed forms (a point contact stopped or sliding, a
coupled contact on the verge of slipping), the conditions of the impulse
problem on random problems with every kind of row, PLUS's sliding
intervals against the sliding law integrated through the impact, and
PLUS's derivatives against central differences in both modes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import counting_compiles
from simbodyx.rigid_contact.impulse import Rows

#: a point contact: its normal row 0 (pushing impulses are negative) and its friction rows 1, 2
POINT = Rows(normal=(0,), sign=(1,), friction=((1, 2),), friction_contact=(0,))
#: one row of every kind: a bilateral row, a ratchet, a bounded row, a state-limited friction (2 rows)
#: and a contact with friction
EVERY_KIND = Rows(unconditional=(0,), speed=(1,), speed_sign=(1,), bounded=(2,), limited=((3, 4),),
                  normal=(5,), sign=(1,), friction=((6, 7),), friction_contact=(0,))
PLUS = sx.PLUSImpulseSolver(1e-6)
PGS = sx.PGSImpulseSolver(convergence_tolerance=1e-13, max_iterations=20_000)


@pytest.mark.parametrize("solver", [PLUS, PGS], ids=["PLUS", "PGS"])
def test_a_point_contact_stops_or_slides_by_coulomb(solver):
    """Unit compliance, approach 2 (so a normal impulse 2) and mu 1: a slip of
    (1, 0.5) is stopped (the friction needed, |(1, 0.5)| < 2, lies in the
    cone); a slip of 3 slides and loses mu N = 2; a separating contact gets
    nothing."""
    cases = jnp.array([[-2.0, 1.0, 0.5], [-2.0, 3.0, 0.0], [1.0, 0.5, 0.0]])
    pi, stats = jax.vmap(lambda rhs: solver.solve(jnp.eye(3), rhs, POINT, jnp.ones(3, bool), jnp.ones(1)))(cases)
    np.testing.assert_allclose(pi, [[-2.0, 1.0, 0.5], [-2.0, 2.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-12)
    np.testing.assert_array_equal(stats.active[:, 0], [True, True, False])
    assert bool(jnp.all(stats.converged))


@pytest.mark.parametrize("solver", [PLUS, PGS], ids=["PLUS", "PGS"])
def test_friction_on_the_verge_of_slipping_opposes_the_slip_it_is_about_to_have(solver):
    """A normal impulse that drags the contact sideways (A couples the rows),
    no slip to start with, mu 1/4: sticking would take a friction impulse of
    1 against a cone of 1/2, so the contact slips. Closed form: pi_t = mu N
    along the final slip v = -(pi_n + 2 pi_t), pi_n + pi_t = -1, so pi_t = 1/3,
    N = 4/3 and the final slip 2/3 (the same sign as pi_t: friction slows it).
    Called eagerly, the solve is one program that a second call reuses; it
    gives twice the impulses for twice the velocity error."""
    A = jnp.array([[1.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    rhs = jnp.array([-1.0, 0.0, 0.0])
    pi, _ = solver.solve(A, rhs, POINT, jnp.ones(3, bool), jnp.array([0.25]))
    np.testing.assert_allclose(pi, [-4 / 3, 1 / 3, 0.0], atol=1e-12)
    np.testing.assert_allclose(rhs - A @ pi, [0.0, 2 / 3, 0.0], atol=1e-12)
    rhs, participating, mu = 2 * rhs, jnp.ones(3, bool), jnp.array([0.25])
    with counting_compiles() as compiled:
        twice, _ = solver.solve(A, rhs, POINT, participating, mu)
    assert not compiled
    np.testing.assert_allclose(twice, 2 * pi, atol=1e-12)


@pytest.mark.parametrize("solver", [PLUS, PGS], ids=["PLUS", "PGS"])
def test_random_problems_of_every_row_kind_meet_their_conditions(solver):
    """64 random problems in one vmapped program (so with different active
    sets): bilateral rows are removed; ratchets and normals never pull; the
    bounded row stays within its bounds; both frictions stay within their
    limits. Where the impact is one interval (always for PGS), also: a
    pushing ratchet or normal is removed and a released one separates, the
    bounded row is removed inside its bounds, a friction inside its limit
    sticks. (Over several intervals a row may push, then let go.)"""
    rng = np.random.default_rng(0)
    n = 64
    G = rng.normal(size=(n, 8, 8)) * 0.4 + np.eye(8)
    A = jnp.asarray(G @ np.swapaxes(G, 1, 2))
    rhs = jnp.asarray(rng.normal(size=(n, 8)))
    mu = jnp.asarray(rng.uniform(0.1, 1.0, (n, 1)))
    bounds, limits = jnp.array([[-0.2, 0.3]]), jnp.array([0.1])
    pi, stats = jax.jit(jax.vmap(lambda A, rhs, mu: solver.solve(
        A, rhs, EVERY_KIND, jnp.ones(8, bool), mu, bounds=bounds, limits=limits)))(A, rhs, mu)
    pi, v = np.asarray(pi), np.asarray(rhs - jnp.einsum("nij,nj->ni", A, pi))
    one = np.asarray(stats.intervals) == 1
    tol = 1e-9
    assert bool(jnp.all(stats.converged)) and np.sum(one) > n / 2
    np.testing.assert_allclose(v[:, 0], 0, atol=tol)
    for r in (1, 5):  # ratchet, normal: push (pi <= 0) with no velocity error left, or let go and separate
        assert np.all(pi[:, r] <= tol)
        pushing = pi[:, r] < -tol
        np.testing.assert_allclose(v[one & pushing, r], 0, atol=tol)
        assert np.all(v[one & ~pushing, r] >= -tol)
    assert np.all((pi[:, 2] >= -0.2 - tol) & (pi[:, 2] <= 0.3 + tol))
    inside = (pi[:, 2] > -0.2 + tol) & (pi[:, 2] < 0.3 - tol)
    np.testing.assert_allclose(v[one & inside, 2], 0, atol=tol)
    for rows, limit in (([3, 4], np.full(n, 0.1)), ([6, 7], np.asarray(mu[:, 0]) * np.abs(pi[:, 5]))):
        magnitude = np.linalg.norm(pi[:, rows], axis=1)
        assert np.all(magnitude <= limit + tol)
        sticking = one & (magnitude < limit - 1e-6)
        np.testing.assert_allclose(v[sticking][:, rows], 0, atol=1e-8)
    assert 0 < np.sum(pi[:, 5] < -tol) < n  # both pushing and released normals occur


def _sliding_law(A_tt, slip, mu, normal_impulse, steps=20_000):
    """The slip at the end of an impact in which the normal impulse grows to
    ``normal_impulse`` while the contact slides: d slip / d p = -mu A_tt slip / |slip|."""
    dp = normal_impulse / steps
    for _ in range(steps):
        speed = np.linalg.norm(slip)
        if speed < 1e-12:
            break
        slip = slip - dp * mu * A_tt @ slip / speed
    return slip


def test_plus_follows_the_slip_through_the_impact():
    """A contact whose two friction rows have compliances 1 and 4 turns its
    slip as it slides; PLUS cuts the impact into intervals in which the slip
    turns by at most the given angle, so its final slip approaches the
    sliding law's as the angle shrinks (error about proportional to it),
    while PGS, which sees the final slip alone, ends elsewhere."""
    A = jnp.diag(jnp.array([1.0, 1.0, 4.0]))
    rhs, mu = jnp.array([-2.0, 1.0, 1.0]), jnp.array([0.3])
    exact = _sliding_law(np.diag([1.0, 4.0]), np.array([1.0, 1.0]), 0.3, 2.0)
    errors, counts = [], []
    for turn, intervals in ((np.pi / 6, 10), (0.01, 400)):
        solver = sx.PLUSImpulseSolver(1e-6, max_sliding_direction_change=turn, max_sliding_intervals=intervals)
        pi, stats = solver.solve(A, rhs, POINT, jnp.ones(3, bool), mu)
        assert bool(stats.converged)
        errors.append(np.linalg.norm((rhs - A @ pi)[1:] - exact))
        counts.append(int(stats.intervals))
        np.testing.assert_allclose(pi[0], -2.0, rtol=1e-12)
    assert errors[1] < 5e-3 and errors[1] < errors[0] / 20, errors
    assert counts[0] >= 2 and counts[1] > 50, counts
    pgs, _ = PGS.solve(A, rhs, POINT, jnp.ones(3, bool), mu)
    assert np.linalg.norm((rhs - A @ pgs)[1:] - exact) > 0.3


def test_plus_derivatives_match_central_differences_in_both_modes():
    """Through several sliding intervals (a 3-degree turn limit) with the
    normal and friction rows coupled: d pi / d (coupling, rhs, mu) by
    forward and reverse mode against central differences (1e-7 on entries
    of order 1; step 1e-6)."""
    solver = sx.PLUSImpulseSolver(1e-6, max_sliding_direction_change=0.05, max_sliding_intervals=100)

    def impulse(x):
        a, mu = x[0], x[4]
        A = jnp.array([[1.0, 0.1 * a, 0.0], [0.1 * a, 1.0, 0.2], [0.0, 0.2, 4.0]])
        pi, stats = solver.solve(A, x[1:4], POINT, jnp.ones(3, bool), mu[None])
        return pi, stats.intervals

    x = jnp.array([1.0, -2.0, 1.0, 1.0, 0.3])
    forward = jax.jit(jax.jacfwd(lambda x: impulse(x)[0]))(x)
    reverse = jax.jit(jax.jacrev(lambda x: impulse(x)[0]))(x)
    assert int(impulse(x)[1]) > 3
    h = 1e-6
    central = np.stack([(impulse(x + h * e)[0] - impulse(x - h * e)[0]) / (2 * h) for e in np.eye(5)], axis=1)
    np.testing.assert_allclose(forward, central, atol=1e-7)
    np.testing.assert_allclose(reverse, forward, atol=1e-12)


def test_plus_keeps_a_float32_problem_in_float32():
    """Under x64 (the suite's setting) a float32 problem stays float32 through
    every kind of row, in value and gradient."""
    A, rhs = jnp.eye(8, dtype=jnp.float32), jnp.arange(-4, 4, dtype=jnp.float32)

    def impulse(rhs):
        return PLUS.solve(A, rhs, EVERY_KIND, jnp.ones(8, bool), jnp.ones(1, jnp.float32),
                          bounds=jnp.array([[-1.0, 1.0]], jnp.float32), limits=jnp.array([0.5], jnp.float32))[0]

    assert impulse(rhs).dtype == jnp.float32
    assert jax.grad(lambda rhs: impulse(rhs).sum())(rhs).dtype == jnp.float32


def test_plus_settings_are_checked():
    with pytest.raises(ValueError, match="transition_velocity must be positive"):
        sx.PLUSImpulseSolver(0.0)
    with pytest.raises(ValueError, match="max_sliding_direction_change"):
        sx.PLUSImpulseSolver(1e-3, max_sliding_direction_change=2.0)
    with pytest.raises(ValueError, match="max_sliding_intervals must be a positive int"):
        sx.PLUSImpulseSolver(1e-3, max_sliding_intervals=0)
    assert sx.PLUSImpulseSolver(1e-3).get_max_rolling_speed() == 1e-3
