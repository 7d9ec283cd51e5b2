"""Direction.Reverse: a reversed joint from A to B moves exactly like the same
joint built forward from B to A.

One model carries, per joint type, two free-floating pairs hanging from
Ground by identity-framed Free mobilizers: A -(reversed J)-> B, and
B' -(forward J)-> A' with F and M swapped (F on B' = B's M frame, M on A' =
A's F frame). With J's q and u copied and B' placed and moving as B, the
pairs must have the same poses, velocities and, under gravity, accelerations.
Tolerance 1e-10: both are exact formulas in float64 (agreement ~1e-14),
amplified by the dynamics' conditioning.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import COUPLED_FUNCTIONS, CUSTOM_FREE, random_state, random_transform, rigid

import simbodyx as sx
from simbodyx.algorithms.coordinates import normalize_quaternions
from simbodyx.spatial import matrix_to_quaternion

Reverse = sx.MobilizedBody.Direction.Reverse
EXTRA = {
    "Screw": (0.3,),
    "Ellipsoid": ((0.6, 0.4, 0.3),),
    "SphericalCoords": (0.2, True, 0.4, False, "x", True),
    "Custom": (CUSTOM_FREE,),
    "FunctionBased": (2, *COUPLED_FUNCTIONS),
}
KINDS = (
    "Pin", "Slider", "Screw", "Universal", "Cylinder", "BendStretch", "Planar", "Gimbal", "Ball", "Ellipsoid",
    "Translation", "SphericalCoords", "LineOrientation", "FreeLine", "Free", "Bushing", "Custom", "FunctionBased",
)


@pytest.fixture(scope="module")
def pairs():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0.0, -9.81, 0.0])
    ground = matter.Ground()
    quads = []
    for k, kind in enumerate(KINDS):
        rng = np.random.default_rng(k)
        X_AF, X_BM = random_transform(rng), random_transform(rng)
        body_a, body_b = rigid(1.5, (0.1, 0.2, -0.1)), rigid(0.7, (-0.2, 0.1, 0.3))
        joint = getattr(sx.MobilizedBody, kind)
        extra = EXTRA.get(kind, ())
        a = sx.MobilizedBody.Free(ground, body_a)
        b = joint(a, X_AF, body_b, X_BM, *extra, Reverse)
        b2 = sx.MobilizedBody.Free(ground, body_b)
        a2 = joint(b2, X_BM, body_a, X_AF, *extra)
        quads.append((a, b, b2, a2))
    model, _ = system.realize_topology()
    return model, quads


def test_reversed_joints_have_forward_defaults_and_reject_weld(pairs):
    _, quads = pairs
    for a, b, b2, a2 in quads:
        assert b.is_reversed() and not a2.is_reversed()
        np.testing.assert_array_equal(b.get_default_q(), a2.get_default_q())
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    with pytest.raises(ValueError, match="Weld has no direction"):
        sx.MobilizedBody.Weld(matter.Ground(), rigid(), direction=Reverse)


@pytest.mark.parametrize("seed", [0, 1])
def test_reversed_joint_moves_like_the_forward_built_one(pairs, seed):
    model, quads = pairs
    state = random_state(model, seed, scale=0.6)
    state = state.with_q(normalize_quaternions(model.topology, state.q))
    for a, b, b2, a2 in quads:  # the forward joint takes the reversed joint's q and u
        state = a2.set_q_from_vector(state, b.get_q_as_vector(state))
        state = a2.set_u_from_vector(state, b.get_u_as_vector(state))
    s = model.realize(state, sx.Stage.Acceleration)  # the stage of the realize below: one program for both
    for a, b, b2, a2 in quads:  # B' placed and moving as B (identity frames: q = X_GB, u = V_GB)
        X = b.get_body_transform(s)
        state = b2.set_q_from_vector(state, jnp.concatenate([matrix_to_quaternion(X.R), X.p]))
        state = b2.set_u_from_vector(state, b.get_body_velocity(s))
    s = model.realize(state, sx.Stage.Acceleration)
    for kind, (a, b, b2, a2) in zip(KINDS, quads):
        for one, other in ((a, a2), (b, b2)):
            for query in ("get_body_transform", "get_body_velocity", "get_body_acceleration"):
                x, y = getattr(one, query)(s), getattr(other, query)(s)
                if query == "get_body_transform":
                    x, y = jnp.concatenate([x.R.ravel(), x.p]), jnp.concatenate([y.R.ravel(), y.p])
                np.testing.assert_allclose(x, y, atol=1e-10, err_msg=f"{kind}: {query} of {one.name}")
