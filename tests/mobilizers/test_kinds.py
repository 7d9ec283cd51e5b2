"""Each mobilizer kind on its own: closed-form X_FM, H against autodiff of
X_FM along qdot = N u, N/NInv identities, NDot and HDot against finite
differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FD_STEP, FD_TOL

from simbodyx import mobilizers as mob
from simbodyx.spatial import axis_angle_to_matrix, rot_x, rot_y, rot_z, vee

PITCH = 0.3
KINDS = {
    "Weld": mob.Weld(),
    "Pin": mob.Pin(),
    "Slider": mob.Slider(),
    "Screw": mob.Screw(),
    "Universal": mob.Universal(),
    "Cylinder": mob.Cylinder(),
    "Planar": mob.Planar(),
    "Gimbal": mob.Gimbal(),
    "Translation": mob.Translation(),
    "Ball": mob.Ball(),
    "Ball-euler": mob.Ball(use_euler_angles=True),
    "Free": mob.Free(),
    "Free-euler": mob.Free(use_euler_angles=True),
}


def params_for(kind):
    return jnp.full((kind.num_params,), PITCH)


def sample_q(kind, seed=0):
    q = np.random.default_rng(seed).uniform(-1.2, 1.2, size=kind.nq)
    if kind.quaternion_at is not None:
        q[kind.quaternion_at] += 1.5  # keep |q| well away from 0; not normalized
    return jnp.asarray(q)


def closed_form(name, q):
    """(R_FM, p_FM) written out by hand from the mobilizer definitions."""
    z3 = np.zeros(3)
    if name == "Weld":
        return np.eye(3), z3
    if name == "Pin":
        return rot_z(q[0]), z3
    if name == "Slider":
        return np.eye(3), np.array([q[0], 0, 0])
    if name == "Screw":
        return rot_z(q[0]), np.array([0, 0, PITCH * q[0]])
    if name == "Universal":
        return rot_x(q[0]) @ rot_y(q[1]), z3
    if name == "Cylinder":
        return rot_z(q[0]), np.array([0, 0, q[1]])
    if name == "Planar":
        return rot_z(q[0]), np.array([q[1], q[2], 0])
    if name in ("Gimbal", "Ball-euler"):
        return rot_x(q[0]) @ rot_y(q[1]) @ rot_z(q[2]), z3
    if name == "Translation":
        return np.eye(3), np.asarray(q)
    if name == "Ball":
        quat = np.asarray(q) / np.linalg.norm(q)
        angle = 2 * np.arctan2(np.linalg.norm(quat[1:]), quat[0])
        return axis_angle_to_matrix(quat[1:], angle), z3
    if name == "Free":
        R, _ = closed_form("Ball", q[:4])
        return R, np.asarray(q[4:])
    if name == "Free-euler":
        R, _ = closed_form("Gimbal", q[:3])
        return R, np.asarray(q[3:])
    raise KeyError(name)


@pytest.mark.parametrize("name", KINDS)
def test_X_FM_closed_form(name):
    kind = KINDS[name]
    q = sample_q(kind)
    R, p = kind.X_FM(q, params_for(kind))
    R_ref, p_ref = closed_form(name, q)
    np.testing.assert_allclose(R, R_ref, atol=1e-14)
    np.testing.assert_allclose(p, p_ref, atol=1e-14)
    assert len(kind.default_q()) == kind.nq


def velocity_from_X_FM(kind, q, qdot):
    """[w; v] of M in F from forward-mode AD of X_FM along qdot."""
    params = params_for(kind)
    (R, _), (Rdot, pdot) = jax.jvp(lambda q_: kind.X_FM(q_, params), (q,), (qdot,))
    return jnp.concatenate([vee(Rdot @ R.T), pdot])


@pytest.mark.parametrize("name", KINDS)
def test_H_matches_autodiff_of_X_FM(name):
    kind = KINDS[name]
    q = sample_q(kind, 1)
    for seed in range(3):
        u = jnp.asarray(np.random.default_rng(seed).normal(size=kind.nu))
        qdot = kind.N(q) @ u
        V_H = kind.H_FM(q, params_for(kind)).T @ u
        np.testing.assert_allclose(V_H, velocity_from_X_FM(kind, q, qdot), atol=1e-13)


@pytest.mark.parametrize("name", KINDS)
def test_N_inverse_identities(name):
    kind = KINDS[name]
    q = sample_q(kind, 2)
    N, NInv = kind.N(q), kind.N_inv(q)
    assert N.shape == (kind.nq, kind.nu) and NInv.shape == (kind.nu, kind.nq)
    # Simbody's quaternion blocks: NInv N = |q|^2 1 (exactly 1 for unit q).
    if kind.quaternion_at is not None:
        a = kind.quaternion_at
        expected = np.eye(kind.nu)
        expected[a:a + 3, a:a + 3] *= float(q[a:a + 4] @ q[a:a + 4])
        np.testing.assert_allclose(NInv @ N, expected, atol=1e-14)
    else:
        np.testing.assert_allclose(NInv @ N, np.eye(kind.nu), atol=1e-13)
        np.testing.assert_allclose(N @ NInv, np.eye(kind.nq), atol=1e-13)


@pytest.mark.parametrize("name", KINDS)
def test_N_dot_and_H_dot_match_finite_differences(name):
    kind = KINDS[name]
    q = sample_q(kind, 3)
    u = jnp.asarray(np.random.default_rng(4).normal(size=kind.nu))
    qdot = kind.N(q) @ u
    h = FD_STEP
    fd_N = (kind.N(q + h * qdot) - kind.N(q - h * qdot)) / (2 * h)
    np.testing.assert_allclose(kind.N_dot(q, qdot), fd_N, atol=FD_TOL)
    p = params_for(kind)
    fd_H = (kind.H_FM(q + h * qdot, p) - kind.H_FM(q - h * qdot, p)) / (2 * h)
    np.testing.assert_allclose(kind.H_FM_dot(q, qdot, p), fd_H, atol=FD_TOL)


def test_quaternion_N_is_half_quaternion_product():
    q = jnp.array([0.9, 0.1, -0.3, 0.2])
    w = jnp.array([0.4, -1.0, 2.0])
    w0, v = q[0], q[1:]
    expected = 0.5 * jnp.concatenate([-w @ v[None].T, w0 * w + jnp.cross(w, v)])
    np.testing.assert_allclose(KINDS["Ball"].N(q) @ w, expected, atol=1e-15)


def test_euler_N_is_singular_only_at_gimbal_lock():
    kind = KINDS["Ball-euler"]
    assert np.all(np.isfinite(kind.N(jnp.array([0.3, 1.0, -0.2]))))
    assert np.abs(kind.N(jnp.array([0.3, np.pi / 2, -0.2]))).max() > 1e15
