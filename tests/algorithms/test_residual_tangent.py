"""The inverse-dynamics residual's tangent by rigid-body twists
(algorithms/residual_tangent.py) against forward-mode AD through the
kinematics and the Newton-Euler recursion, on a random tree of every joint
type (reversed joints, body frames offset from M, unnormalized quaternions),
and on a tree of the kinds with rotation coordinates in Euler-angle mode;
and the forward-dynamics gradient built on it against the same derivative
taken through the caches."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ALL_KINDS, random_state, with_forces

import simbodyx as sx
from simbodyx.algorithms.aba import ForwardInputs, forward_dynamics
from simbodyx.algorithms.kinematics import realize_position, realize_velocity
from simbodyx.algorithms import residual_tangent as twists
from simbodyx.algorithms.residual_tangent import residual_tangent
from simbodyx.algorithms.rnea import residual_forces

REVERSE = sx.MobilizedBody.Direction.Reverse
KINDS = ALL_KINDS + (("Gimbal", REVERSE), ("Free", REVERSE), ("Pin", REVERSE))
#: The kinds whose coordinates change with the rotation mode (the others are
#: the same in both, and covered in quaternion mode), and one that does not.
EULER_KINDS = ("Ball", "Free", "Ellipsoid", "LineOrientation", "FreeLine", "Custom", ("Free", REVERSE), "Pin")


@functools.lru_cache(maxsize=None)
def setup(euler_angles):
    system, _, _, _ = with_forces(EULER_KINDS if euler_angles else KINDS, seed=7)
    model, _ = system.realize_topology()
    assert twists.applies(model.topology)  # forward dynamics' rule uses the twist form here
    return model.with_euler_angles(euler_angles) if euler_angles else model


def caches(model, q, u):
    position = realize_position(model.topology, model.params, q)
    return position, realize_velocity(model.topology, model.params, position, q, u)


@pytest.mark.parametrize("euler_angles", [False, True])
def test_tangent_matches_autodiff_through_the_kinematics(euler_angles):
    model = setup(euler_angles)
    top, params = model.topology, model.params
    s = random_state(model, seed=2)
    rng = np.random.default_rng(3)
    udot, T, q_dot, u_dot, T_dot = (jnp.asarray(rng.normal(size=n)) for n in (top.nu, top.nu, top.nq, top.nu, top.nu))
    F, F_dot = (jnp.asarray(rng.normal(size=(top.num_bodies, 6))) for _ in range(2))

    def residual(q, u, T, F):
        return residual_forces(top, params, *caches(model, q, u), udot, T, F)[0]

    @jax.jit
    def both(q, u):
        expected = jax.jvp(residual, (q, u, T, F), (q_dot, u_dot, T_dot, F_dot))[1]
        x = ForwardInputs(params, q, u, *caches(model, q, u), T, F)
        got = residual_tangent(top, x, udot, ForwardInputs(None, q_dot, u_dot, None, None, T_dot, F_dot))
        return expected, got

    expected, got = both(s.q, s.u)
    # O(100) entries from sums over the tree: a few hundred ulps each.
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(expected))) * 10)


#: The gradient test's tree: the rule's assembly, not each joint (the test
#: above covers every joint type); a quaternion, a reversed joint and a joint
#: parameter (the screw's pitch). All twenty kinds took 228 s to compile cold.
GRADIENT_KINDS = ("Free", "Ball", "Pin", "Screw", "Universal", "Gimbal", ("Pin", REVERSE), ("Free", REVERSE))


def test_forward_dynamics_gradient_equals_the_one_through_the_caches():
    """Reverse mode of the twist form against reverse mode through the caches'
    own derivatives (the rule used with locks), for q, u, T, F and the
    Model's parameters at once."""
    system, _, _, _ = with_forces(GRADIENT_KINDS, seed=7)
    model, _ = system.realize_topology()
    top = model.topology
    assert twists.applies(top) and any(p.size for p in model.params.joint_params)
    s = random_state(model, seed=4)
    rng = np.random.default_rng(6)
    T, F = jnp.asarray(rng.normal(size=top.nu)), jnp.asarray(rng.normal(size=(top.num_bodies, 6)))
    no_locks = (jnp.zeros(top.nu), jnp.zeros(top.nu))  # the locked-path rule, nothing locked

    def loss(model, q, u, T, F, prescribed):
        udot, A = forward_dynamics(top, ForwardInputs(model.params, q, u, *caches(model, q, u), T, F, prescribed))
        return jnp.sum(jnp.sin(udot)) + jnp.sum(A ** 2) * 1e-3

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)), static_argnums=5)
    twist = grads(model, s.q, s.u, T, F, None)
    through_caches = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))(model, s.q, s.u, T, F, no_locks)
    # Two exact methods: rounding only. At this state the gradient itself moves
    # by up to 5e-11 of its largest entry (the central inertias') when q moves
    # by one part in 1e15, so that is the rounding to allow for, with room.
    scale = max(float(jnp.max(jnp.abs(b))) for b in jax.tree.leaves(through_caches) if b.size)
    for a, b in zip(jax.tree.leaves(twist), jax.tree.leaves(through_caches)):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-10 * scale)


def test_forward_and_reverse_mode_agree_under_vmap():
    """jvp and vjp of forward dynamics are transposes of each other (<J v, w> =
    <v, J^T w>), batched (a small branched tree: compiling both modes under
    vmap for every joint type took minutes)."""
    system, _, _, _ = with_forces(("Free", "Ball", "Pin", "Universal", "Pin", "Gimbal"), seed=3)
    model, _ = system.realize_topology()
    assert twists.applies(model.topology)
    s = random_state(model, seed=8)
    top = model.topology
    zero_F = jnp.zeros((top.num_bodies, 6))

    def udot(q, u):
        return forward_dynamics(top, ForwardInputs(model.params, q, u, *caches(model, q, u), jnp.zeros(top.nu),
                                                   zero_F))[0]

    rng = np.random.default_rng(9)
    qs = s.q + 0.1 * jnp.asarray(rng.normal(size=(3, top.nq)))
    v_q, v_u, w = (jnp.asarray(rng.normal(size=(3, n))) for n in (top.nq, top.nu, top.nu))

    @jax.jit
    @jax.vmap
    def pairings(q, v_q, v_u, w):
        jv = jax.jvp(udot, (q, s.u), (v_q, v_u))[1]
        jtw = jax.vjp(udot, q, s.u)[1](w)
        return jnp.dot(jv, w), jnp.dot(v_q, jtw[0]) + jnp.dot(v_u, jtw[1])

    forward, reverse = pairings(qs, v_q, v_u, w)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10)
