"""model.matter operators: N, NInv, NDot products with transposes, qdot and
qdotdot, quaternion bookkeeping and conversion between representations."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ALL_KINDS, FD_STEP, FD_TOL, counting_compiles, primitive_names, random_state, random_tree, tol

import simbodyx as sx


@functools.lru_cache(maxsize=None)
def models():
    system, matter, bodies = random_tree(ALL_KINDS + ("Ball",), seed=21)
    model, _ = system.realize_topology()
    return model, model.with_euler_angles(True), bodies


@pytest.fixture(params=["quaternion", "euler"])
def model_state(request):
    model, euler_model, bodies = models()
    state = random_state(model, seed=3)
    if request.param == "euler":
        return euler_model, model.matter.convert_to_euler_angles(state).with_u(state.u)
    return model, state


def rand(n, seed):
    return jnp.asarray(np.random.default_rng(seed).normal(size=n))


def test_counts_and_options(model_state):
    model, state = model_state
    m = model.matter
    euler = model.topology.use_euler_angles
    assert m.get_use_euler_angles(state) == euler
    assert m.get_num_quaternions_in_use(state) == (0 if euler else 7)  # 6 kinds and Custom
    assert m.get_num_bodies() == len(ALL_KINDS) + 2 and m.get_num_mobilities() == model.topology.nu
    assert m.get_num_q() == model.topology.nq and m.get_num_constraints() == 0
    assert repr(model) == (f"Model(Topology({m.get_num_bodies()} bodies incl. Ground, nq={m.get_num_q()}, "
                           f"nu={m.get_num_mobilities()}, euler_angles={euler}), dtype=float64)")
    ball_index = model.topology.quaternion_bodies[0] if not euler else 9
    assert m.is_using_quaternion(state, ball_index) == (not euler)
    assert m.get_quaternion_pool_index(state, ball_index) == (-1 if euler else 0)
    assert m.get_quaternion_pool_index(state, 0) == -1
    assert m.get_total_q_alloc() == model.with_euler_angles(False).topology.nq >= model.topology.nq
    assert not m.is_position_kinematics_realized(state)
    p = m.realize_position_kinematics(state)
    assert m.is_position_kinematics_realized(p) and not m.is_velocity_kinematics_realized(p)
    assert m.is_articulated_body_inertias_realized(m.realize_articulated_body_inertias(state))
    assert m.is_composite_body_inertias_realized(m.realize_composite_body_inertias(state))
    assert m.is_articulated_body_velocity_realized(m.realize_articulated_body_velocity(p))
    assert m.is_velocity_kinematics_realized(m.realize_velocity_kinematics(state))


def test_n_products_and_transposes(model_state):
    model, state = model_state
    m, nq, nu = model.matter, model.topology.nq, model.topology.nu
    x_q, x_u = rand(nq, 1), rand(nu, 2)
    Nu = m.multiply_by_n(state, False, x_u)
    assert Nu.shape == (nq,)
    # Adjoint identities: x_q . (N x_u) = (N^T x_q) . x_u, and likewise for NInv, NDot.
    np.testing.assert_allclose(x_q @ Nu, m.multiply_by_n(state, True, x_q) @ x_u, rtol=1e-13)
    np.testing.assert_allclose(x_u @ m.multiply_by_n_inv(state, False, x_q), m.multiply_by_n_inv(state, True, x_u) @ x_q, rtol=1e-13)
    np.testing.assert_allclose(x_q @ m.multiply_by_n_dot(state, False, x_u), m.multiply_by_n_dot(state, True, x_q) @ x_u, rtol=1e-12)
    # NInv N = 1 except |q|^2 on quaternion blocks: check after normalizing.
    unit = m.normalize_quaternions(state)
    np.testing.assert_allclose(m.multiply_by_n_inv(unit, False, m.multiply_by_n(unit, False, x_u)), x_u, atol=1e-12)
    np.testing.assert_allclose(m.calc_qdot(state, state.u), m.multiply_by_n(state, False, state.u))


def test_qdotdot_matches_finite_differences(model_state):
    model, state = model_state
    m = model.matter
    udot = rand(model.topology.nu, 5)
    qdot = m.calc_qdot(state, state.u)
    h = FD_STEP

    def qdot_at(sign):
        s = state.with_q(state.q + sign * h * qdot)
        return m.calc_qdot(s, state.u + sign * h * udot)

    np.testing.assert_allclose(m.calc_qdotdot(state, udot), (qdot_at(1) - qdot_at(-1)) / (2 * h), atol=FD_TOL)


def test_normalize_quaternions():
    model, _, bodies = models()
    state = random_state(model, seed=9)
    unit = model.matter.normalize_quaternions(state)
    for b in model.topology.quaternion_bodies:
        i = model.topology.q_start[b]
        np.testing.assert_allclose(np.linalg.norm(unit.q[i:i + 4]), 1.0, rtol=1e-15)
        np.testing.assert_allclose(unit.q[i:i + 4] / state.q[i:i + 4], np.linalg.norm(state.q[i:i + 4]) ** -1, rtol=1e-14)
    assert unit.stage == sx.Stage.Model
    quaternion_entries = [model.topology.q_start[b] + k for b in model.topology.quaternion_bodies for k in range(4)]
    others = np.setdiff1d(np.arange(state.q.shape[0]), quaternion_entries)
    np.testing.assert_array_equal(unit.q[others], state.q[others])
    # q is put together by a static row selection: no scatter forward or in reverse
    def total(q):
        return jnp.sum(jnp.sin(model.matter.normalize_quaternions(state.with_q(q)).q))
    for fn in (total, jax.grad(total)):
        assert not primitive_names(jax.make_jaxpr(fn)(state.q).jaxpr) & {"scatter", "scatter-add"}


def test_conversion_keeps_u_and_round_trips():
    model, euler_model, _ = models()
    state = model.matter.normalize_quaternions(random_state(model, seed=12))
    e = model.matter.convert_to_euler_angles(state)
    np.testing.assert_array_equal(e.u, state.u)
    back = euler_model.matter.convert_to_quaternions(e)
    # Same rotation; the quaternion comes back with w >= 0.
    for b in model.topology.quaternion_bodies:
        i = model.topology.q_start[b]
        qa, qb = state.q[i:i + 4], back.q[i:i + 4]
        np.testing.assert_allclose(qb, qa * np.sign(qa[0]), atol=1e-13)
    with pytest.raises(ValueError, match="different model"):
        model.matter.calc_qdot(e, e.u)


def test_operators_under_jit_vmap_grad(dtype):
    model, _, _ = models()
    model = model.astype(dtype)
    states = [random_state(model, seed=s) for s in range(3)]
    batch = jax.tree.map(lambda *x: jnp.stack(x), *states)
    f = lambda s: model.matter.calc_qdotdot(s, s.u)
    out = jax.jit(jax.vmap(f))(batch)
    assert out.dtype == dtype
    for i, s in enumerate(states):
        np.testing.assert_allclose(out[i], f(s), atol=tol(dtype) * 10)
    g = jax.grad(lambda q: jnp.sum(model.matter.multiply_by_n(states[0].with_q(q), False, states[0].u) ** 2))(states[0].q)
    assert g.dtype == dtype and np.all(np.isfinite(g))


def test_wrong_vector_shapes_are_reported():
    model, _, _ = models()
    state = model.default_state()
    with pytest.raises(ValueError, match="input vector has shape \\(3,\\), expected"):
        model.matter.multiply_by_n(state, False, jnp.zeros(3))


@pytest.mark.parametrize("x64", [True, False], ids=["float64", "float32"])
def test_building_a_model_compiles_no_program(x64):
    """A model of Simbody-style value types (frames, rotations, inertias,
    mass properties), a force element and a constraint, frozen with its
    default State, asks JAX for no program, in JAX's default precision
    either way: its numbers are computed on the host
    (spatial.vectors.array_module). Counted as lowerings, which come before
    any persistent-cache lookup, after dropping the compiled programs."""
    jax.clear_caches()
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        with counting_compiles("jaxpr_to_mlir_module_duration") as lowered:
            system = sx.MultibodySystem()
            matter = sx.SimbodyMatterSubsystem(system)
            forces = sx.GeneralForceSubsystem(system)
            sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
            cylinder = sx.UnitInertia.cylinder_along_z(0.02, 0.5).matrix
            body = sx.Body.Rigid(sx.MassProperties.from_central(
                1.0, [0, -0.5, 0], sx.Inertia(cylinder).re_express(sx.Rotation.about_x(1.0))))
            pin = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), body, sx.Transform())
            X_PF = sx.Transform(sx.Rotation.about_y(0.2), [0, -1, 0])
            ball = sx.MobilizedBody.Ball(pin, X_PF, body, sx.Transform())
            free = sx.MobilizedBody.Free(matter.Ground(), sx.Transform([1.0, 0, 0]), body, sx.Transform())
            sx.Constraint.Rod(ball, [0, -0.5, 0], free, [0, 0, 0], 1.0)
            pin.set_default_angle(0.5)
            model, state = system.realize_topology()
    finally:
        jax.config.update("jax_enable_x64", previous)
    dtype = np.float64 if x64 else np.float32
    assert model.topology.nq == 1 + 4 + 7
    assert all(x.dtype == dtype for x in (state.t, state.q, state.u, model.params.X_PF.R, model.params.central_inertia))
    assert not lowered, f"{len(lowered)} programs"
