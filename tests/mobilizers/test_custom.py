"""Custom and FunctionBased mobilizers against the built-ins they reimplement,
the Function family, and build-time errors.

Comparisons build the same random tree twice (same frames and bodies; only
the one joint's definition differs), map u through qdot (u_b = NInv_b N_a u_a,
so both describe the same motion) and compare poses, velocities and body
accelerations under gravity to 1e-10: both sides are exact formulas evaluated
in float64, differing only by rounding (~1e-14) amplified by the dynamics'
conditioning.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import add_body, counting_compiles, random_state, rigid

import simbodyx as sx
from simbodyx import functions as fn
from simbodyx.algorithms.coordinates import multiply_by_n, normalize_quaternions
from simbodyx.spatial import quaternion_to_matrix, rot_z

Custom = sx.MobilizedBody.Custom.Implementation
ZERO3 = jnp.zeros(3)
IDENTITY = fn.Linear((1.0, 0.0))

CUSTOM = {
    "Pin": Custom(1, 1, lambda q: (rot_z(q[0]), ZERO3)),
    "Translation": Custom(3, 3, lambda q: (jnp.eye(3), q)),
    "Ball": Custom(4, 3, lambda q: (quaternion_to_matrix(q), ZERO3), num_angles=4),
    "Free": Custom(7, 6, lambda q: (quaternion_to_matrix(q[:4]), q[4:]), num_angles=4),
}


def function_based(n, slots):
    """FunctionBased arguments with the identity function of coordinate k in slot slots[k]."""
    functions, coordinates = [None] * 6, [()] * 6
    for k, slot in enumerate(slots):
        functions[slot], coordinates[slot] = IDENTITY, (k,)
    return (n, functions, coordinates)


# Built-in name -> FunctionBased (num_mobilities, functions, coordinates);
# slots 0-2 rotate about x, y, z (body-fixed), 3-5 translate along x, y, z in F.
FUNCTION_BASED = {
    "Pin": function_based(1, [2]),
    "Slider": function_based(1, [3]),
    "Cylinder": function_based(2, [2, 5]),
    "Universal": function_based(2, [0, 1]),
    "Planar": function_based(3, [2, 3, 4]),
    "Gimbal": function_based(3, [0, 1, 2]),
    "Translation": function_based(3, [3, 4, 5]),
    # Free in Euler-angle mode shares the q layout [X-Y-Z angles, p_FM];
    # FunctionBased's u = qdot then differs from Free's [w; v] (mapped via N).
    "Free": function_based(6, [0, 1, 2, 3, 4, 5]),
}


def twin_branches(pairs, euler=False):
    """One model whose Ground carries, per pair (a, b), two identical chains
    Pin -> joint -> Slider (same frames and bodies), the joint built as a in
    one and as b in the other (a kind name or (name, *arguments)). Branches on
    Ground move independently, so twins must move alike; one model keeps the
    test at one compilation."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0.0, -9.81, 0.0])
    twins = []
    for k, pair in enumerate(pairs):
        chains = []
        for joint in pair:
            rng = np.random.default_rng(k)
            chain = [matter.Ground()]
            for kind in ("Pin", joint, "Slider"):
                chain.append(add_body(kind, chain[-1], rng))
            chains.append([b.index for b in chain[1:]])
        twins.append(chains)
    matter.set_use_euler_angles(euler)
    return system.realize_topology()[0], twins


def twin_state(model, twins, seed=0):
    """A random state in which each b chain copies its a chain's q and moves
    alike: u_b = NInv_b N_a u_a per joint (quaternions normalized so NInv N = 1)."""
    top = model.topology
    s = random_state(model, seed, scale=0.5)
    q, u = np.array(normalize_quaternions(top, s.q)), np.array(s.u)
    for chain_a, chain_b in twins:
        for a, b in zip(chain_a, chain_b):
            qa = q[top.q_start[a]:top.q_start[a] + top.body_nq[a]]
            ua = u[top.u_start[a]:top.u_start[a] + top.body_nu[a]]
            q[top.q_start[b]:top.q_start[b] + top.body_nq[b]] = qa
            qdot = top.kinds[a].N(jnp.asarray(qa)) @ ua
            u[top.u_start[b]:top.u_start[b] + top.body_nu[b]] = top.kinds[b].N_inv(jnp.asarray(qa)) @ qdot
    return s.with_q(jnp.asarray(q)).with_u(jnp.asarray(u))


def assert_twins_move_alike(model, twins):
    s = model.realize(twin_state(model, twins), sx.Stage.Acceleration)
    for chain_a, chain_b in twins:
        for values in (s.position.X_GB.R, s.position.X_GB.p, s.velocity.V_GB, s.acceleration.A_GB):
            np.testing.assert_allclose(values[np.asarray(chain_b)], values[np.asarray(chain_a)], atol=1e-10)


@pytest.mark.parametrize("euler", [False, True], ids=["quaternion", "euler"])
def test_custom_reimplementations_match_builtins(euler):
    model, twins = twin_branches([(kind, ("Custom", impl)) for kind, impl in CUSTOM.items()], euler)
    assert_twins_move_alike(model, twins)
    # The reimplementations keep Simbody's u, so the N products agree too.
    s = twin_state(model, twins, seed=1)
    qdot = multiply_by_n(model.topology, s.q, s.u)
    top = model.topology
    for chain_a, chain_b in twins:
        rows = [np.arange(top.q_start[b], top.q_start[b] + top.body_nq[b]) for b in (chain_a[1], chain_b[1])]
        np.testing.assert_allclose(qdot[rows[1]], qdot[rows[0]], atol=1e-12)


def test_function_based_reimplementations_match_builtins():
    # Euler-angle mode so that Free shares FunctionBased's q layout [angles, p_FM].
    pairs = [(kind, ("FunctionBased", *args)) for kind, args in FUNCTION_BASED.items()]
    assert_twins_move_alike(*twin_branches(pairs, euler=True))


def test_function_based_coupled_translation_has_analytic_velocity():
    """x = q0^2 sin(q1), y = q0 q1 (functions of two coordinates), rotation
    0.5 q0^3 + q1 about z: V_FM against the hand-differentiated formula."""
    functions = (None, None, lambda x: 0.5 * x[0] ** 3 + x[1],
                 lambda x: x[0] ** 2 * jnp.sin(x[1]), lambda x: x[0] * x[1], None)
    coordinates = ((), (), (0, 1), (0, 1), (0, 1), ())
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    body = sx.MobilizedBody.FunctionBased(matter.Ground(), rigid(), 2, functions, coordinates)
    model, state = system.realize_topology()
    q0, q1, u0, u1 = 0.7, -0.4, 1.3, -0.6
    s = model.realize(state.with_q(jnp.array([q0, q1])).with_u(jnp.array([u0, u1])), sx.Stage.Velocity)
    expected = [0, 0, 1.5 * q0**2 * u0 + u1,
                2 * q0 * np.sin(q1) * u0 + q0**2 * np.cos(q1) * u1, q1 * u0 + q0 * u1, 0]
    np.testing.assert_allclose(body.get_mobilizer_velocity(s), expected, atol=1e-14)


def test_custom_under_jit_vmap_grad():
    """Batched accelerations and their q-gradient: Custom Free's chain equals
    the built-in Free's chain (the twin copies q and u)."""
    model, twins = twin_branches([("Free", ("Custom", CUSTOM["Free"]))])
    (chain_a, chain_b), = twins
    top = model.topology
    u_rows = [np.concatenate([np.arange(top.u_start[b], top.u_start[b] + top.body_nu[b]) for b in c])
              for c in (chain_a, chain_b)]
    states = [twin_state(model, twins, seed) for seed in range(3)]
    q, u = jnp.stack([s.q for s in states]), jnp.stack([s.u for s in states])

    def udot(q, u):
        s = model.default_state().with_q(q).with_u(u)
        return model.realize(s, sx.Stage.Acceleration).acceleration.udot

    batched = jax.jit(jax.vmap(udot))(q, u)
    np.testing.assert_allclose(batched[:, u_rows[1]], batched[:, u_rows[0]], atol=1e-10)
    # d|udot_chain|^2 / dq: the twins' q rows must agree.
    J = jax.jacrev(lambda q: jnp.stack([jnp.sum(udot(q, u[0])[r] ** 2) for r in u_rows]))(q[0])
    q_rows = [np.concatenate([np.arange(top.q_start[b], top.q_start[b] + top.body_nq[b]) for b in c])
              for c in (chain_a, chain_b)]
    np.testing.assert_allclose(J[1, q_rows[1]], J[0, q_rows[0]], rtol=1e-9, atol=1e-9)


# -- Functions -----------------------------------------------------------------------


def test_function_family_values():
    x = jnp.array([0.7])
    assert fn.Constant(2.5)(x) == 2.5
    assert fn.Linear((2.0, -1.0, 0.5))(jnp.array([1.0, 3.0])) == 2.0 - 3.0 + 0.5
    np.testing.assert_allclose(fn.Polynomial((2.0, 0.0, -1.0, 3.0))(x), 2 * 0.7**3 - 0.7 + 3)
    np.testing.assert_allclose(fn.Sinusoid(1.5, 2.0, 0.1)(x), 1.5 * np.sin(1.4 + 0.1))
    step = fn.Step(1.0, 3.0, 0.0, 2.0)
    assert step(jnp.array([-1.0])) == 1.0 and step(jnp.array([5.0])) == 3.0
    np.testing.assert_allclose(step(jnp.array([1.0])), 2.0)
    d1 = jax.grad(lambda t: step(t[None]))
    d2 = jax.grad(d1)
    for end in (0.0, 2.0):  # flat and curvature-free at both ends
        assert abs(d1(end)) < 1e-14 and abs(d2(end)) < 1e-12


def test_natural_spline_interpolates_with_continuous_curvature():
    x = np.array([-1.0, 0.0, 0.5, 2.0, 3.0])
    y = np.array([0.3, -0.2, 0.4, 1.0, 0.0])
    spline = fn.Spline(x, y)
    f = lambda t: spline(jnp.atleast_1d(t))  # noqa: E731
    np.testing.assert_allclose([f(t) for t in x], y, atol=1e-14)
    d1, d2 = jax.grad(f), jax.grad(jax.grad(f))
    for end in (x[0], x[-1]):  # natural: zero curvature at the ends
        assert abs(d2(end)) < 1e-12
    for knot in x[1:-1]:  # C2 at interior knots
        np.testing.assert_allclose(d1(knot - 1e-9), d1(knot + 1e-9), atol=1e-7)
        np.testing.assert_allclose(d2(knot - 1e-12), d2(knot + 1e-12), atol=1e-9)
    # A spline through samples of a straight line is that line, also beyond the ends.
    line = fn.Spline(x, 2 * x - 1)
    np.testing.assert_allclose([line(jnp.array([t])) for t in (-3.0, 0.25, 5.0)], [-7.0, -0.5, 9.0], atol=1e-13)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: fn.Spline((0.0, 0.0, 1.0), (1.0, 2.0, 3.0)), "strictly increasing"),
        (lambda: fn.Step(0.0, 1.0, 1.0, 1.0), "x1 > x0"),
        (lambda: Custom(4, 3, lambda q: (jnp.eye(3), ZERO3)), "needs n_matrix"),
        (lambda: sx.mobilizers.FunctionBased(2, (IDENTITY,) + (None,) * 5, ((0,),) + ((),) * 5), "coordinates \\[1\\]"),
        (lambda: sx.mobilizers.FunctionBased(
            1, (IDENTITY,) + (None,) * 5, ((0,),) + ((),) * 5, ((1, 0, 0), (2, 0, 0), (0, 0, 1)) + ((1, 0, 0), (0, 1, 0), (0, 0, 1))
        ), "rotation axes 0 and 1 are parallel"),
        (lambda: sx.mobilizers.FunctionBased(1, (fn.Linear((1.0, 2.0, 0.0)),) + (None,) * 5, ((0,),) + ((),) * 5),
         "takes 2 arguments"),
    ],
)
def test_bad_definitions_are_rejected(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_custom_transform_names_the_body():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    not_rotation = Custom(1, 1, lambda q: (2.0 * jnp.eye(3), ZERO3))
    with pytest.raises(ValueError, match="'knee'.*proper rotation"):
        sx.MobilizedBody.Custom(matter.Ground(), rigid(), not_rotation, name="knee")
    wrong_shape = Custom(1, 1, lambda q: (jnp.eye(3), jnp.zeros(2)))
    with pytest.raises(ValueError, match="'hip'.*p_FM has shape"):
        sx.MobilizedBody.Custom(matter.Ground(), rigid(), wrong_shape, name="hip")


def test_adding_bodies_checks_each_implementation_in_one_program():
    """A Custom body is checked at its default q (transform, H, N and N^-1)
    in one compiled program per implementation, which later bodies of the
    same implementation reuse; the rest of the build is computed on the host."""
    jax.clear_caches()
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    with counting_compiles("jaxpr_to_mlir_module_duration") as lowered:
        knee = sx.MobilizedBody.Custom(matter.Ground(), rigid(), CUSTOM["Ball"])
        sx.MobilizedBody.Custom(knee, sx.Transform([0, -1.0, 0]), rigid(), sx.Transform(), CUSTOM["Ball"])
        sx.MobilizedBody.FunctionBased(knee, rigid(), *FUNCTION_BASED["Gimbal"])
        system.realize_topology()
    assert len(lowered) == 2
