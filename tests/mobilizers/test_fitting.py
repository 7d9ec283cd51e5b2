"""set_q_to_fit_* and set_u_to_fit_*: round trips for every kind (reachable
requests are met to 1e-10: closed forms are exact to rounding, the generic
least-squares fit converges quadratically far below that), and unreachable
requests land on the closest reachable pose or velocity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import COUPLED_FUNCTIONS, CUSTOM_FREE, rigid
from test_kinds import KINDS, params_for, sample_q

import simbodyx as sx
from simbodyx import mobilizers as mob
from simbodyx.spatial import Rotation, Transform, rot_z

FIT_KINDS = {
    **{name: kind for name, kind in KINDS.items() if name != "Weld"},
    "Custom-Free": CUSTOM_FREE,
    "Custom-Pin": mob.Custom(1, 1, lambda q: (rot_z(q[0]), jnp.zeros(3))),
    "FunctionBased-coupled": mob.FunctionBased(2, *COUPLED_FUNCTIONS),
    "FunctionBased-reversed": mob.Reversed(mob.FunctionBased(2, *COUPLED_FUNCTIONS)),
}


def pose(kind, q):
    return kind.X_FM(q, params_for(kind))


@pytest.mark.parametrize("name", FIT_KINDS)
def test_q_round_trip(name):
    """Set q, read X_FM, fit q to it from another q: the same pose."""
    kind = FIT_KINDS[name]
    q, start = sample_q(kind, 7), sample_q(kind, 8)
    R, p = pose(kind, q)
    fitted = jax.jit(lambda s, R, p: kind.fit_q(s, params_for(kind), R, p))(start, R, p)
    R_fit, p_fit = pose(kind, fitted)
    np.testing.assert_allclose(R_fit, R, atol=1e-10)
    np.testing.assert_allclose(p_fit, p, atol=1e-10)


@pytest.mark.parametrize("name", FIT_KINDS)
def test_u_round_trip(name):
    """Set u, read V_FM, fit u to it from zero: the same u (H has full rank)."""
    kind = FIT_KINDS[name]
    q = sample_q(kind, 9)
    u = jnp.asarray(np.random.default_rng(10).normal(size=kind.nu))
    V = kind.H_FM(q, params_for(kind)).T @ u
    fitted = kind.fit_u(q, jnp.zeros_like(u), params_for(kind), V[:3], V[3:])
    np.testing.assert_allclose(fitted, u, atol=1e-10)


@pytest.mark.parametrize("name", ["Free", "Free-euler", "Bushing", "Planar", "Cylinder", "FreeLine", "Free-reversed"])
def test_rotation_and_translation_fits_are_separate(name):
    """Fitting the rotation keeps the translation's q (and vice versa) where
    the joint's rotation and translation are independent."""
    kind = FIT_KINDS[name]
    params = params_for(kind)
    q, start = sample_q(kind, 11), sample_q(kind, 12)
    R, p = pose(kind, q)
    by_rotation = kind.fit_q(start, params, R=R)
    np.testing.assert_allclose(pose(kind, by_rotation)[0], R, atol=1e-10)
    if not name.endswith("reversed"):  # reversed: p_FM = -R_FM p_MF moves with R
        np.testing.assert_allclose(pose(kind, by_rotation)[1], pose(kind, start)[1], atol=1e-12)
    by_translation = kind.fit_q(by_rotation, params, p=p)
    np.testing.assert_allclose(pose(kind, by_translation)[1], p, atol=1e-10)
    np.testing.assert_allclose(pose(kind, by_translation)[0], R, atol=1e-10)


def chordal_distance(kind, q, R):
    return jnp.sum((pose(kind, q)[0] - R) ** 2)


@pytest.mark.parametrize("name", ["Pin", "Custom-Pin", "Cylinder", "Planar", "Screw"])
def test_unreachable_rotation_goes_to_the_closest_z_rotation(name):
    """A general rotation asked of a one-axis joint: no angle on a fine grid
    is closer (Frobenius) than the fit, and the generic least-squares fit of
    a Custom Pin agrees with the built-in closed form."""
    kind = FIT_KINDS[name]
    R = np.asarray(Rotation.from_body_fixed_xyz(jnp.array([0.4, -0.7, 1.1])).matrix)
    q = kind.fit_q(jnp.zeros(kind.nq).at[0].set(0.3), params_for(kind), R=jnp.asarray(R))
    best = chordal_distance(kind, q, R)
    grid = jax.vmap(lambda angle: chordal_distance(kind, q.at[0].set(angle), R))(jnp.linspace(-np.pi, np.pi, 2001))
    assert best <= jnp.min(grid) + 1e-12
    np.testing.assert_allclose(q[0], FIT_KINDS["Pin"].fit_q(jnp.zeros(1), None, R=jnp.asarray(R))[0], atol=1e-9)


def test_unreachable_translations_project():
    p = jnp.array([0.3, -0.4, 0.5])
    np.testing.assert_allclose(KINDS["Slider"].fit_q(jnp.zeros(1), None, p=p), [0.3])
    np.testing.assert_allclose(KINDS["Planar"].fit_q(jnp.zeros(3), None, p=p)[1:], [0.3, -0.4])
    # BendStretch: the in-plane point at the same polar angle, radius |(x, y)|.
    q = KINDS["BendStretch"].fit_q(jnp.zeros(2), None, p=p)
    np.testing.assert_allclose(pose(KINDS["BendStretch"], q)[1], [0.3, -0.4, 0.0], atol=1e-14)
    # Ellipsoid: Mo on the surface exactly in p's direction.
    kind = KINDS["Ellipsoid"]
    q = kind.fit_q(sample_q(kind, 1), params_for(kind), p=p)
    reached = pose(kind, q)[1]
    np.testing.assert_allclose(reached / jnp.linalg.norm(reached), p / jnp.linalg.norm(p), atol=1e-12)


def test_unreachable_velocity_is_least_squares_and_keeps_unasked_mobilities():
    pin = KINDS["Pin"]
    fitted = pin.fit_u(jnp.zeros(1), jnp.zeros(1), None, w=jnp.array([1.0, 2.0, 3.0]), v=jnp.array([4.0, 5.0, 6.0]))
    np.testing.assert_allclose(fitted, [3.0])
    free = KINDS["Free"]
    q, u = sample_q(free, 2), jnp.arange(6.0)
    fitted = free.fit_u(q, u, None, w=jnp.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(fitted, [1.0, 2.0, 3.0, 3.0, 4.0, 5.0], atol=1e-14)


def test_handles_fit_and_read_back_through_the_model():
    """On a built model: fit q to a pose and u to a velocity, realize, read
    X_FM and V_FM back (forward and reversed joints; Weld is a no-op)."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    ground = matter.Ground()
    free = sx.MobilizedBody.Free(ground, rigid())
    bushing = sx.MobilizedBody.Bushing(free, rigid(), direction=sx.MobilizedBody.Direction.Reverse)
    weld = sx.MobilizedBody.Weld(bushing, rigid())
    model, state = system.realize_topology()
    X = Transform(Rotation.from_body_fixed_xyz(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.1, 0.2, -0.3]))
    V = jnp.array([0.5, -1.0, 0.2, 0.3, 0.0, -0.7])
    for body in (free, bushing):
        state = body.set_q_to_fit_transform(state, X)
    assert weld.set_q_to_fit_transform(state, X) is state
    s = model.realize(state, sx.Stage.Position)
    for body in (free, bushing):
        state = body.set_u_to_fit_velocity(s, V)
        s = model.realize(state, sx.Stage.Velocity)
        np.testing.assert_allclose(body.get_mobilizer_transform(s).R, X.R, atol=1e-12)
        np.testing.assert_allclose(body.get_mobilizer_transform(s).p, X.p, atol=1e-12)
        np.testing.assert_allclose(body.get_mobilizer_velocity(s), V, atol=1e-12)
    # the rotation alone (a Rotation) keeps the translation; the angular and linear fits each keep the other half
    R = Rotation.from_body_fixed_xyz(jnp.array([-0.5, 0.1, 0.2]))
    s = model.realize(free.set_q_to_fit_rotation(state, R), sx.Stage.Position)
    np.testing.assert_allclose(free.get_mobilizer_transform(s).R, R.matrix, atol=1e-12)
    np.testing.assert_allclose(free.get_mobilizer_transform(s).p, X.p, atol=1e-12)
    s = model.realize(free.set_u_to_fit_linear_velocity(free.set_u_to_fit_angular_velocity(s, V[3:]), V[:3]),
                      sx.Stage.Velocity)
    np.testing.assert_allclose(free.get_mobilizer_velocity(s), jnp.concatenate([V[3:], V[:3]]), atol=1e-12)
    with pytest.raises(ValueError, match="Bushing 'body2'.*p_FM has shape"):
        bushing.set_q_to_fit_translation(state, jnp.zeros(2))
