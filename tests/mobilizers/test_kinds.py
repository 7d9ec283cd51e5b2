"""Each mobilizer kind on its own: closed-form X_FM, H against autodiff of
X_FM along qdot = N u, N/NInv identities, NDot and HDot against finite
differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CUSTOM_FREE, FD_STEP, FD_TOL

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
    "BendStretch": mob.BendStretch(),
    "Ellipsoid": mob.Ellipsoid(),
    "Ellipsoid-euler": mob.Ellipsoid(use_euler_angles=True),
    "SphericalCoords": mob.SphericalCoords(),
    "SphericalCoords-options": mob.SphericalCoords(
        azimuth_offset=0.3, negate_azimuth=False, zenith_offset=np.pi / 2, negate_zenith=True,
        radial_axis="x", negate_radial=True,
    ),
    "LineOrientation": mob.LineOrientation(),
    "LineOrientation-euler": mob.LineOrientation(use_euler_angles=True),
    "FreeLine": mob.FreeLine(),
    "FreeLine-euler": mob.FreeLine(use_euler_angles=True),
    "Bushing": mob.Bushing(),
    "Custom-Free": CUSTOM_FREE,
    "Custom-Free-euler": CUSTOM_FREE.in_mode(True),
    **{f"{name}-reversed": mob.Reversed(kind) for name, kind in {
        "Screw": mob.Screw(), "Planar": mob.Planar(), "Free": mob.Free(), "Ellipsoid": mob.Ellipsoid(),
        "LineOrientation-euler": mob.LineOrientation(use_euler_angles=True), "Bushing": mob.Bushing(),
    }.items()},
}
RADII = np.array([0.7, 0.4, 0.3])


def params_for(kind):
    kind = getattr(kind, "inner", kind)
    if isinstance(kind, mob.Ellipsoid):
        return jnp.asarray(RADII)
    return jnp.full((kind.num_params,), PITCH)


def sample_q(kind, seed=0):
    q = np.random.default_rng(seed).uniform(-1.2, 1.2, size=kind.nq)
    if kind.quaternion_at is not None:
        q[kind.quaternion_at] += 1.5  # keep |q| well away from 0; not normalized
    return jnp.asarray(q)


def closed_form(name, q):
    """(R_FM, p_FM) written out by hand from the mobilizer definitions."""
    z3 = np.zeros(3)
    if name.endswith("-reversed"):  # X_FM = X_MF^-1 with X_MF the forward definition
        R, p = closed_form(name.removesuffix("-reversed"), q)
        return R.T, -R.T @ p
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
    if name == "BendStretch":
        return rot_z(q[0]), rot_z(q[0]) @ np.array([q[1], 0, 0])
    if name in ("Ellipsoid", "Ellipsoid-euler"):
        R, _ = closed_form("Ball" if name == "Ellipsoid" else "Gimbal", q)
        return R, RADII * R[:, 2]
    if name == "SphericalCoords":
        R = rot_z(q[0]) @ rot_y(q[1])
        return R, q[2] * R[:, 2]
    if name == "SphericalCoords-options":
        R = rot_z(q[0] + 0.3) @ rot_y(np.pi / 2 - q[1])
        return R, -q[2] * R[:, 0]
    if name in ("LineOrientation", "Custom-Free"):
        return closed_form("Ball" if name == "LineOrientation" else "Free", q)
    if name == "Custom-Free-euler":
        return closed_form("Free-euler", q)
    if name == "LineOrientation-euler":
        return closed_form("Gimbal", q)
    if name == "FreeLine":
        return closed_form("Free", q)
    if name in ("FreeLine-euler", "Bushing"):
        return closed_form("Free-euler", q)
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
        angular = 3 if isinstance(kind, mob.Custom) else kind.nu - getattr(kind, "inner", kind).num_translations
        expected[a:a + angular, a:a + angular] *= float(q[a:a + 4] @ q[a:a + 4])
        np.testing.assert_allclose(NInv @ N, expected, atol=1e-14)
    else:
        np.testing.assert_allclose(NInv @ N, np.eye(kind.nu), atol=1e-13)
        if kind.nq == kind.nu:
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


@pytest.mark.parametrize("name", ["LineOrientation", "LineOrientation-euler", "FreeLine"])
def test_line_orientation_u_is_w_in_M_without_spin(name):
    """u = (w_x, w_y) of w_FM expressed in M: no spin about Mz ever results."""
    kind = KINDS[name]
    q = sample_q(kind, 5)
    u = jnp.asarray(np.random.default_rng(6).normal(size=kind.nu))
    V = velocity_from_X_FM(kind, q, kind.N(q) @ u)
    R, _ = kind.X_FM(q, params_for(kind))
    np.testing.assert_allclose(R.T @ V[:3], [u[0], u[1], 0.0], atol=1e-13)


def test_ellipsoid_reference_pose_and_bend_stretch_lateral_speed():
    """Ellipsoid at q = identity puts Mo at (0, 0, rz); BendStretch's angular
    rate moves Mo sideways at radius * rate."""
    R, p = KINDS["Ellipsoid"].X_FM(jnp.array([1.0, 0, 0, 0]), jnp.asarray(RADII))
    np.testing.assert_allclose(R, np.eye(3), atol=0)
    np.testing.assert_allclose(p, [0, 0, RADII[2]], atol=0)
    H = KINDS["BendStretch"].H_FM(jnp.array([0.0, 2.0]), None)
    np.testing.assert_allclose(H[0], [0, 0, 1, 0, 2.0, 0], atol=1e-15)
