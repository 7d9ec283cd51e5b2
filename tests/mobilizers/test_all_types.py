"""The tree-dynamics identities on one random tree mixing every joint type
(all 19 besides Ground, plus a reversed Gimbal and a reversed Ellipsoid).

Every quantity comes out of one jitted function, so the tree compiles once
per rotation mode. Velocities and accelerations are checked against forward-
mode derivatives of the poses (exact, so 1e-10 relative covers rounding
through a 23-body tree), the dynamics against each other: M M^-1 = 1,
inverse dynamics of forward dynamics returns the applied forces, kinetic
energy = u^T M u / 2, the two reaction-force methods agree, J u = V_GB.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ALL_KINDS, random_state, with_forces

import simbodyx as sx
from simbodyx.algorithms.kinematics import realize_position, realize_velocity

REVERSE = sx.MobilizedBody.Direction.Reverse
KINDS = ALL_KINDS + (("Gimbal", REVERSE), ("Ellipsoid", (0.4, 0.3, 0.5), REVERSE))


@pytest.fixture(scope="module")
def model():
    system, _, _, _ = with_forces(KINDS, seed=31)
    return system.realize_topology()[0]


def identities(model, state):
    """Pairs (a, b) that must agree, and the scale to judge them by."""
    top, params, m = model.topology, model.params, model.matter
    s = model.realize(state, sx.Stage.Acceleration)
    q, u, qdot, udot = s.q, s.u, s.velocity.qdot, s.acceleration.udot
    # Body velocities = d/dt of the poses along qdot; body accelerations = d/dt
    # of the velocities along (qdot, udot): H, N, HDot and the Coriolis terms.
    X, X_dot = jax.jvp(lambda q: realize_position(top, params, q).X_GB, (q,), (qdot,))

    def velocity(q, u):
        return realize_velocity(top, params, realize_position(top, params, q), q, u).V_GB

    _, A_from_velocities = jax.jvp(velocity, (q, u), (qdot, udot))
    M, M_inv = m.calc_m(s), m.calc_m_inv(s)
    T, F = s.dynamics.mobility_forces, s.dynamics.body_forces
    return {
        "angular velocity": (sx.spatial.vee(jnp.einsum("bij,bkj->bik", X_dot.R, X.R)), s.velocity.V_GB[:, :3]),
        "origin velocity": (X_dot.p, s.velocity.V_GB[:, 3:]),
        "acceleration": (A_from_velocities, s.acceleration.A_GB),
        "M M^-1": (M @ M_inv, jnp.eye(top.nu)),
        "inverse of forward dynamics": (m.calc_residual_force_ignoring_constraints(s, T, F, udot), jnp.zeros(top.nu)),
        "kinetic energy": (m.calc_kinetic_energy(s), 0.5 * u @ M @ u),
        "reactions": (m.calc_mobilizer_reaction_forces(s), m.calc_mobilizer_reaction_forces_using_free_body_method(s)),
        "J u": (m.multiply_by_system_jacobian(s, u), s.velocity.V_GB),
    }


@pytest.mark.parametrize("euler", [False, True], ids=["quaternion", "euler"])
def test_identities_on_a_tree_of_every_joint_type(model, euler):
    model = model.with_euler_angles(euler)
    state = random_state(model, seed=2, scale=0.5)
    results = jax.jit(identities)(model, state)
    for name, (a, b) in results.items():
        scale = max(1.0, float(jnp.max(jnp.abs(b))))
        np.testing.assert_allclose(a, b, atol=1e-10 * scale, err_msg=name)


def test_euler_and_quaternion_modes_agree(model):
    """Same configuration and u in both modes: same poses, velocities, accelerations."""
    s_quat = model.realize(random_state(model, seed=3, scale=0.5), sx.Stage.Acceleration)
    euler_model = model.with_euler_angles(True)
    s_euler = euler_model.realize(model.matter.convert_to_euler_angles(s_quat), sx.Stage.Acceleration)
    for a, b in ((s_quat.position.X_GB.R, s_euler.position.X_GB.R), (s_quat.position.X_GB.p, s_euler.position.X_GB.p),
                 (s_quat.velocity.V_GB, s_euler.velocity.V_GB), (s_quat.acceleration.A_GB, s_euler.acceleration.A_GB)):
        np.testing.assert_allclose(a, b, atol=1e-10 * max(1.0, float(jnp.max(jnp.abs(a)))))
