"""Contact is differentiable everywhere: no non-finite value or first
derivative over 10,000 random states of a model with every pair kind
(touching and apart, exactly at onset, zero slip and coincident centres
included); derivatives agree with finite differences where the forces are
smooth; a rollout's gradient through impacts agrees with central
differences."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import simbodyx as sx

CG = sx.ContactGeometry
FLOOR = sx.Transform(sx.Rotation.about_z(-0.5 * np.pi), np.zeros(3))  # the half-space y < 0
SHAPES = (CG.Sphere(0.1), CG.Capsule(0.05, 0.15), CG.Ellipsoid([0.1, 0.07, 0.05]), CG.Sphere(0.08))


@functools.lru_cache(maxsize=None)
def scene():
    """Four free bodies (sphere, capsule, ellipsoid, sphere) over a floor: the
    ellipsoid in a contact set of its own with the floor (ellipsoid-sphere
    has no kernel) under a CompliantContactSubsystem (elliptical Hertz
    contact), the rest in one set with a Hunt-Crossley force. Every
    supported pair kind but capsule-capsule."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    contacts = sx.GeneralContactSubsystem(system)
    sets = contacts.create_contact_set(), contacts.create_contact_set()
    material = sx.ContactMaterial(1e6, 0.5, 0.9, 0.6, 0.1)
    for contact_set in sets:
        contacts.add_body(contact_set, matter.Ground(), CG.HalfSpace(), FLOOR, material=material)
    body = sx.Body.Rigid(sx.MassProperties(0.5, [0, 0, 0], sx.Inertia(0.002)))
    for i, shape in enumerate(SHAPES):
        mobod = sx.MobilizedBody.Free(matter.Ground(), body, name=f"body{i}")
        contacts.add_body(sets[isinstance(shape, CG.Ellipsoid)], mobod, shape, material=material)
    hc = sx.HuntCrossleyForce(forces, contacts, sets[0])
    sx.CompliantContactSubsystem(forces, contacts, sets[1])
    model, state = system.realize_topology()
    return model, state, hc


def _generalized_forces(model, state, q, u):
    s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
    mobility, body = model.forces.calc_forces(s)
    return mobility + model.matter.multiply_by_system_jacobian_transpose(s, body)


def _random_states(n, seed=0):
    """Bodies near the floor and each other; a quarter exactly touching the
    floor (depth 0), a quarter with zero velocity, some pairs coincident."""
    rng = np.random.default_rng(seed)
    nb = len(SHAPES)
    quat = rng.normal(size=(n, nb, 4))
    quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
    pos = rng.uniform([-0.1, -0.05, -0.1], [0.1, 0.15, 0.1], size=(n, nb, 3))
    pos[: n // 4, 0, 1] = 0.1  # sphere 0 exactly touching the floor
    pos[n // 4: n // 2, 3] = pos[n // 4: n // 2, 0]  # the two spheres' centres coincide
    u = rng.normal(size=(n, nb, 6))
    u[n // 2: 3 * n // 4] = 0.0  # at rest: zero slip and zero approach speed
    u[: n // 8, 0, 3:] = 0.0  # touching with zero slip
    q = np.concatenate([quat, pos], axis=-1).reshape(n, -1)
    return jnp.asarray(q), jnp.asarray(u.reshape(n, -1))


def test_values_and_derivatives_are_finite_over_10000_random_states():
    model, state, hc = scene()
    q, u = _random_states(10_000)

    @jax.jit
    @jax.vmap
    def forces_and_jacobians(q, u):
        f = _generalized_forces(model, state, q, u)
        dq, du = jax.jacrev(lambda q, u: _generalized_forces(model, state, q, u), argnums=(0, 1))(q, u)
        return f, dq, du

    f, dq, du = forces_and_jacobians(q, u)
    for name, value in (("forces", f), ("d/dq", dq), ("d/du", du)):
        assert np.all(np.isfinite(np.asarray(value))), name
    touching = np.asarray(jax.vmap(lambda q: hc.get_contact_forces(
        model, model.realize(state.with_q(q), sx.Stage.Velocity)).depth)(q[:200]))
    assert np.mean(touching > 0) > 0.1  # the sample does make contact


def test_derivatives_match_finite_differences_where_the_forces_are_smooth():
    model, state, hc = scene()
    # each body resting 1-2 mm into the floor, sliding, clear of the others
    q = jnp.asarray(np.concatenate([np.concatenate([[1.0, 0, 0, 0], [x, y, 0.0]])
                                    for x, y in ((-0.6, 0.099), (-0.2, 0.049), (0.2, 0.049), (0.6, 0.079))]))
    u = jnp.asarray(np.tile([0.1, -0.2, 0.3, 0.5, -0.05, 0.2], 4))
    # central differences with step 1e-6: truncation ~ 1e-12 x third derivatives ~ 1e9 N/m^3
    check_grads(jax.jit(lambda q, u: _generalized_forces(model, state, q, u)), (q, u), order=1, modes=("fwd", "rev"),
                eps=1e-6, atol=1e-4, rtol=1e-6)


@functools.lru_cache(maxsize=None)
def ball():
    """scene()'s first sphere alone over the floor (a Free body: the rollout
    gradient below compiles for it alone)."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    material = sx.ContactMaterial(1e6, 0.5, 0.9, 0.6, 0.1)
    contacts.add_body(contact_set, matter.Ground(), CG.HalfSpace(), FLOOR, material=material)
    mobod = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(0.5, [0, 0, 0], sx.Inertia(0.002))))
    contacts.add_body(contact_set, mobod, SHAPES[0], material=material)
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    model, state = system.realize_topology()
    return model, state, hc


def test_a_rollout_gradient_through_impacts_matches_central_differences():
    """d(final height)/d(stiffness, dissipation, drop height) for a sphere
    bouncing on the floor, against central differences."""
    model, state, hc = ball()
    element = hc.element(model)
    index = model.force_elements.index(element)

    def final_height(params):
        stiffness, dissipation, drop = params
        e = eqx.tree_at(lambda e: (e.stiffness, e.dissipation), element,
                        (jnp.full(2, stiffness), jnp.full(2, dissipation)))
        m = eqx.tree_at(lambda m: m.force_elements[index], model, e)
        q = jnp.zeros(7).at[0].set(1.0).at[5].set(drop)  # identity quaternion, the centre at height drop
        final, _ = sx.integrate.rollout(m, state.with_q(q).with_u(jnp.zeros(6)), 2e-4, 1500,
                                        save_every=1500, energy=False)
        return final.q[5]

    params = jnp.array([1e6, 0.5, 0.13])
    value, grad = jax.jit(jax.value_and_grad(final_height))(params)
    run = jax.jit(final_height)
    steps = np.array([1e-5 * 1e6, 1e-6, 1e-7])
    central = [(run(params.at[i].add(h)) - run(params.at[i].add(-h))) / (2 * h) for i, h in enumerate(steps)]
    assert float(value) < 0.13  # it fell and bounced
    np.testing.assert_allclose(np.asarray(grad), np.asarray(central), rtol=1e-4)


@pytest.mark.filterwarnings("error::FutureWarning")  # JAX's warning of a float64 value scattered into float32
def test_float32_values_and_derivatives_are_finite_too():
    model, state, _ = scene()
    model32 = model.astype(jnp.float32)
    state32 = model32.default_state()
    q, u = _random_states(1000, seed=1)

    @jax.jit
    @jax.vmap
    def forces_and_jacobian(q, u):
        f = functools.partial(_generalized_forces, model32, state32)
        return f(q, u), jax.jacfwd(f, argnums=1)(q, u)

    f, du = forces_and_jacobian(q.astype(jnp.float32), u.astype(jnp.float32))
    assert f.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(f))) and np.all(np.isfinite(np.asarray(du)))
    model.check()  # every contact number passes the Model's checks


def test_the_scalar_path_and_the_array_program_agree_on_contact():
    model, state, _ = scene()
    q, u = _random_states(8, seed=2)
    for path in (True, False):
        assert model.with_scalar_path(path).uses_scalar_path() is path
    derivatives = [jax.jit(jax.vmap(lambda q, u, m=model.with_scalar_path(path): sx.integrate.derivatives(
        m, state.with_q(q).with_u(u))[1]))(q, u) for path in (True, False)]
    np.testing.assert_allclose(derivatives[0], derivatives[1], rtol=1e-9, atol=1e-9)
