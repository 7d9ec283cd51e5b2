"""Properties over random systems (hypothesis): random trees of every joint
type, with random constraints and random states, satisfy the identities of
the dynamics with finite values and gradients; random bad inputs raise an
error whose message docs/errors.md lists. A few examples run in the suite
(each new tree compiles its own programs); ``HYPOTHESIS_PROFILE=nightly``
runs many more."""

import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ALL_KINDS, add_body, rigid
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import simbodyx as sx
from simbodyx.algorithms.coordinates import normalize_quaternions

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "docs"))
import hooks  # noqa: E402  (docs/hooks.py: the error catalogue of docs/errors.md)

settings.register_profile("suite", max_examples=4, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 200)), deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

#: Constraints placed between two distinct bodies of a random tree.
CONSTRAINTS = ("Rod", "Ball", "PointInPlane", "ConstantAngle", "Weld")


def _catalogue_patterns():
    """Each message of docs/errors.md's catalogue as a regex, its fields as wildcards."""
    patterns = []
    for path in sorted(hooks.PACKAGE.rglob("*.py")):
        for _, _, message in hooks.raise_sites(path):
            parts = re.split(r"\{[^{}]*\}", message)
            patterns.append(re.compile(".*".join(re.escape(p) for p in parts), re.DOTALL))
    return patterns


CATALOGUE = _catalogue_patterns()


def assert_documented(error: Exception):
    message = str(error)
    if type(error).__name__ == hooks.RUNTIME_ERROR:  # equinox adds where it was raised
        found = any(p.search(message) for p in CATALOGUE)
    else:
        found = any(p.fullmatch(message) for p in CATALOGUE)
    assert found, f"not in docs/errors.md: {type(error).__name__}: {message}"


@st.composite
def systems(draw, max_bodies=3, constrained=True):
    """(model, state, number of constraints): a random tree of 1 to
    ``max_bodies`` bodies of any joint type under gravity, with up to two
    random constraints between distinct bodies, at a random state with
    normalized quaternions."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    kinds = draw(st.lists(st.sampled_from(ALL_KINDS), min_size=1, max_size=max_bodies))
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    bodies = [matter.Ground()]
    for kind in kinds:
        bodies.append(add_body(kind, bodies[draw(st.integers(0, len(bodies) - 1))], rng, rigid()))
    sx.Force.UniformGravity(forces, matter, [0.0, -9.81, 0.0])
    added = 0
    if constrained:
        pairs = [(a, b) for a in range(len(bodies)) for b in range(a + 1, len(bodies))]
        for a, b in draw(st.lists(st.sampled_from(pairs), max_size=2, unique=True)):
            kind = draw(st.sampled_from(CONSTRAINTS))
            A, B = bodies[a], bodies[b]
            p, r = rng.normal(size=3) * 0.3, rng.normal(size=3) * 0.3
            if kind == "Rod":
                sx.Constraint.Rod(A, p, B, r, 0.5 + rng.uniform())
            elif kind == "Ball":
                sx.Constraint.Ball(A, p, B, r)
            elif kind == "PointInPlane":
                sx.Constraint.PointInPlane(A, [0.0, 1.0, 0.0], 0.1, B, r)
            elif kind == "ConstantAngle":
                sx.Constraint.ConstantAngle(A, [1.0, 0.0, 0.0], B, [0.0, 1.0, 0.0])
            else:
                sx.Constraint.Weld(A, sx.Transform(p), B, sx.Transform(r))
            added += 1
    model, state = system.realize_topology()
    q = np.asarray(state.q) + rng.normal(size=state.q.shape)
    state = state.with_q(normalize_quaternions(model.topology, jnp.asarray(q))).with_u(rng.normal(size=state.u.shape))
    return model, state, added


def _energy(model, state, q, u):
    return sx.integrate.total_energy(model, state.with_q(q).with_u(u))


@given(systems(constrained=False))
def test_a_random_tree_conserves_energy_and_inverts_its_forward_dynamics(system):
    """Forward dynamics under gravity: ID(FD) = 0, dE/dt = 0 along (qdot,
    udot), and the gradient of |udot|^2 with respect to q is finite."""
    model, state, _ = system
    s = model.realize(state, sx.Stage.Acceleration)
    udot, qdot = s.acceleration.udot, s.velocity.qdot
    T, F = model.forces.calc_forces(s)
    residual = model.matter.calc_residual_force_ignoring_constraints(s, T, F, udot)
    scale = 1.0 + float(jnp.max(jnp.abs(model.matter.multiply_by_m(s, udot)), initial=0.0))
    np.testing.assert_allclose(residual, 0.0, atol=1e-10 * scale)
    _, power = jax.jvp(lambda q, u: _energy(model, state, q, u), (state.q, state.u), (qdot, udot))
    np.testing.assert_allclose(power, 0.0, atol=1e-9 * (1.0 + abs(float(_energy(model, state, state.q, state.u)))))
    grad = jax.grad(lambda q: jnp.sum(model.realize(state.with_q(q), sx.Stage.Acceleration).acceleration.udot ** 2))
    assert np.all(np.isfinite(grad(state.q)))


@given(systems())
def test_random_constraints_hold_at_the_acceleration_level(system):
    """With random constraints (redundant ones included), G udot = b where
    G has full row rank, values and gradients finite everywhere."""
    model, state, added = system
    s = model.realize(state, sx.Stage.Acceleration)
    udot = s.acceleration.udot
    assert np.all(np.isfinite(udot))
    if added:
        G = np.asarray(model.matter.calc_g(s))
        b = np.asarray(model.matter.calc_bias_for_acceleration_constraints(s))
        if G.shape[0] and np.linalg.matrix_rank(G) == G.shape[0]:
            np.testing.assert_allclose(G @ udot, -b, atol=1e-8 * (1 + np.abs(b).max()))
    grad = jax.grad(lambda q: jnp.sum(model.realize(state.with_q(q), sx.Stage.Acceleration).acceleration.udot ** 2))
    assert np.all(np.isfinite(grad(state.q)))


BAD_INPUTS = ("q of the wrong length", "a batched q", "a float32 State", "NaN q, checks on", "a zero quaternion, checks on")


@given(systems(max_bodies=2, constrained=False), st.sampled_from(BAD_INPUTS))
def test_bad_inputs_raise_a_documented_error(system, bad):
    """Each bad input raises, and its message is one docs/errors.md lists
    (the checks mode's come with equinox's note on where it was raised)."""
    model, state, _ = system
    nq = state.q.shape[0]
    quaternions = model.matter.get_num_quaternions_in_use(state)
    assume(bad != "a zero quaternion, checks on" or quaternions)
    checked = model.with_checks(True)
    with pytest.raises(Exception) as caught:
        if bad == "q of the wrong length":
            state.with_q(np.zeros(nq + 1))
        elif bad == "a batched q":
            state.replace(q=np.zeros((3, nq)))
        elif bad == "a float32 State":  # the Model is float64
            model.realize(state.astype(jnp.float32), sx.Stage.Position)
        elif bad == "NaN q, checks on":
            checked.realize(state.with_q(np.full(nq, np.nan)), sx.Stage.Acceleration)
        else:
            checked.realize(state.with_q(np.zeros(nq)), sx.Stage.Acceleration)
    assert_documented(caught.value)


def test_a_model_without_mobilities_has_empty_operators():
    """Found by the properties above: a welded body with a Rod to Ground (no
    mobilities, one constraint equation) realizes, and G is (1, 0); its
    energy's gradient through the scalar path is empty, not an error."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    welded = sx.MobilizedBody.Weld(matter.Ground(), sx.Transform([0, 1, 0]), rigid(), sx.Transform())
    sx.Constraint.Rod(matter.Ground(), [0, 0, 0], welded, [0, 0, 0], 0.7)
    sx.Force.UniformGravity(forces, matter, [0.0, -9.81, 0.0])
    model, state = system.realize_topology()
    s = model.realize(state, sx.Stage.Acceleration)
    assert model.matter.calc_g(s).shape == (1, 0) and model.matter.calc_m(s).shape == (0, 0)
    assert jax.grad(lambda q: _energy(model, state, q, state.u))(state.q).shape == (0,)
