"""Gradients of forward and inverse dynamics (jax.test_util.check_grads,
forward and reverse mode; armature on a third of the joints), including
the identity quaternion and zero velocity, no NaN over 10,000 random
states, and the Euler-angle singularities: where they are and what stays
finite."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from conftest import random_state, with_forces

import simbodyx as sx

KINDS = ("Free", "Ball", "Pin", "Gimbal", "Slider", "Universal", "Screw", "Cylinder", "Planar", "Translation", "Weld", "Ball")


@functools.lru_cache(maxsize=None)
def setup():
    system, matter, forces, bodies = with_forces(KINDS, seed=17)
    sx.Force.GlobalDamper(forces, matter, 0.1)
    for b in bodies[2::3]:
        b.set_armature(np.full(b.num_u, 0.2))
    model, state = system.realize_topology()
    return model, state


def forward(model, state):
    def f(q, u, tau):
        udot, _ = model.matter.calc_acceleration_ignoring_constraints(
            model.realize(state.with_q(q).with_u(u), sx.Stage.Dynamics), tau, None)
        return udot
    return f


def inverse(model, state):
    def f(q, u, udot):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Dynamics)
        return model.matter.calc_residual_force_ignoring_constraints(s, None, s.dynamics.body_forces, udot)
    return f


@functools.lru_cache(maxsize=None)
def jitted(dynamics):
    """``dynamics(*setup())`` jitted once for the file: the checks at two
    points share its traces and compiled programs (values, JVP, VJP)."""
    return jax.jit(dynamics(*setup()))


def test_check_grads_random_state():
    model, _ = setup()
    s = random_state(model, seed=2, scale=0.5)
    tau = jnp.asarray(np.random.default_rng(3).normal(size=model.topology.nu))
    check_grads(jitted(forward), (s.q, s.u, tau), order=1, modes=["fwd", "rev"])
    check_grads(jitted(inverse), (s.q, s.u, tau), order=1, modes=["fwd", "rev"])


def test_check_grads_at_identity_and_rest():
    model, state = setup()  # default q: identity quaternions, zero angles; u = 0
    zeros = jnp.zeros(model.topology.nu)
    check_grads(jitted(forward), (state.q, zeros, zeros), order=1, modes=["fwd", "rev"])
    check_grads(jitted(inverse), (state.q, zeros, zeros), order=1, modes=["fwd", "rev"])


def test_gradient_wrt_model_parameters_matches_finite_differences():
    import equinox as eqx

    model, state = setup()
    s = random_state(model, seed=4, scale=0.5)
    loss = jax.jit(lambda m: jnp.sum(m.realize(s, sx.Stage.Acceleration).acceleration.udot ** 2))
    g = jax.grad(loss)(model)
    h = 1e-6
    for b in (2, 5):
        bump = lambda d: eqx.tree_at(lambda m: m.params.mass, model, model.params.mass.at[b].add(d))
        fd = (loss(bump(h)) - loss(bump(-h))) / (2 * h)
        np.testing.assert_allclose(g.params.mass[b], fd, rtol=1e-6)
    for k in (0, 7):  # a zero armature, a set one
        bump = lambda d: eqx.tree_at(lambda m: m.params.armature, model, model.params.armature.at[k].add(d))
        fd = (loss(bump(h)) - loss(bump(-h))) / (2 * h)
        np.testing.assert_allclose(g.params.armature[k], fd, rtol=1e-6)


def test_no_nan_over_10000_random_states():
    model, state = setup()
    n = 10_000
    rng = np.random.default_rng(5)
    q = jnp.asarray(np.asarray(state.q) + rng.uniform(-np.pi, np.pi, size=(n, model.topology.nq)))
    u = jnp.asarray(rng.normal(scale=3.0, size=(n, model.topology.nu)))

    @jax.jit
    @jax.vmap
    def all_outputs(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Acceleration)
        return jnp.concatenate([s.acceleration.udot, s.acceleration.A_GB.ravel(), s.acceleration.qdotdot])

    out = all_outputs(q, u)
    assert np.all(np.isfinite(np.asarray(out)))
    grads = jax.jit(jax.vmap(jax.grad(lambda q, u: jnp.sum(forward(model, state)(q, u, jnp.zeros_like(u)) ** 2))))(q[:256], u[:256])
    assert np.all(np.isfinite(np.asarray(grads)))


@pytest.mark.parametrize("kind", ["Ball", "Gimbal", "Pin"])
def test_long_chains_stay_accurate(kind):
    """30-body chains run as one scanned tree segment. Forward dynamics and
    M^-1 agree with a dense solve to within 100 cond(M) eps (cond(M) ~ 1e6
    here); before the articulated inertias were symmetrized per body, the
    Ball chain's M M^-1 was off by 2.6."""
    system, matter, forces, bodies = with_forces((kind,) * 30, seed=5, branching=False)
    model, _ = system.realize_topology()
    assert len(model.topology.schedule.segments) == 1 and model.topology.schedule.segments[0].scanned
    state = model.realize(model.matter.normalize_quaternions(random_state(model, seed=5, scale=0.3)),
                          sx.Stage.Acceleration)
    M = np.asarray(model.matter.calc_m(state))
    tol = 100 * np.linalg.cond(M) * np.finfo(float).eps
    np.testing.assert_allclose(np.asarray(model.matter.calc_m_inv(state)) @ M, np.eye(len(M)), atol=tol)
    bias = np.asarray(model.matter.calc_residual_force_ignoring_constraints(
        state, state.dynamics.mobility_forces, state.dynamics.body_forces, jnp.zeros(model.topology.nu)))
    udot = np.linalg.solve(M, -bias)
    np.testing.assert_allclose(state.acceleration.udot, udot, atol=tol * np.abs(udot).max())


def test_gradients_through_a_scanned_chain():
    """A 12-body chain is scanned (more than tree.UNROLL_MAX_LEVELS levels):
    forward and reverse mode through forward dynamics against central
    differences (the reverse mode once failed inside JAX's scan transpose)."""
    system, _, _, _ = with_forces(("Pin", "Ball") * 6, seed=5, branching=False)
    model, state = system.realize_topology()
    assert any(segment.scanned for segment in model.topology.schedule.segments)
    s = random_state(model, seed=1, scale=0.5)
    check_grads(forward(model, s), (s.q, s.u, jnp.zeros(model.topology.nu)), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)


def test_euler_angle_singularities():
    """Ground -> Ball (Euler angles) -> Gimbal -> Universal, each middle angle
    at 90 deg: the Ball's and the Universal's dynamics are regular there
    (u is the angular velocity; two perpendicular axes), with finite forward
    and reverse derivatives; the Gimbal's 1e-3 rad short of it too. At the
    Gimbal's lock its axes are coplanar: udot is NaN, as documented."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.1, 0.2, 0.3], sx.Inertia(0.3, 0.4, 0.5)))
    ball = sx.MobilizedBody.Ball(matter.Ground(), body)
    gimbal = sx.MobilizedBody.Gimbal(ball, sx.Transform([0, -0.5, 0]), body, sx.Transform())
    sx.MobilizedBody.Universal(gimbal, sx.Transform([0, -0.5, 0]), body, sx.Transform())
    matter.set_use_euler_angles(True)
    model, state = system.realize_topology()
    udot = jax.jit(lambda q: forward(model, state)(q, jnp.full(8, 0.3), jnp.zeros(8)))
    q = jnp.array([0.2, jnp.pi / 2, -0.4, 0.1, jnp.pi / 2 - 1e-3, 0.3, 0.5, jnp.pi / 2])
    assert np.all(np.isfinite(udot(q)))
    for jacobian in (jax.jacfwd, jax.jacrev):
        assert np.all(np.isfinite(jax.jit(jacobian(udot))(q)))
    assert np.all(np.isnan(udot(q.at[4].set(jnp.pi / 2))))
