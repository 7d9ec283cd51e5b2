import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import FD_STEP, FD_TOL, compiled_kernels, primitive_names, tol

import simbodyx as sx
from simbodyx import spatial
from simbodyx._xla.scalarize import scalarize
from simbodyx.spatial.rotation import matrix3


def random_quaternions(n, seed=0):
    q = np.random.default_rng(seed).normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def test_elementary_rotations_closed_form():
    a = 0.7
    c, s = np.cos(a), np.sin(a)
    np.testing.assert_allclose(spatial.rot_x(a), [[1, 0, 0], [0, c, -s], [0, s, c]], atol=1e-15)
    np.testing.assert_allclose(spatial.rot_y(a), [[c, 0, s], [0, 1, 0], [-s, 0, c]], atol=1e-15)
    np.testing.assert_allclose(spatial.rot_z(a), [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-15)


def test_quaternion_matrix_round_trip_canonical_sign():
    q = random_quaternions(200)
    R = spatial.quaternion_to_matrix(jnp.asarray(q))
    np.testing.assert_allclose(R @ np.swapaxes(R, -1, -2), np.broadcast_to(np.eye(3), R.shape), atol=1e-14)
    np.testing.assert_allclose(np.linalg.det(R), 1, atol=1e-14)
    back = spatial.matrix_to_quaternion(R)
    assert np.all(back[:, 0] >= 0)
    np.testing.assert_allclose(back, q * np.sign(q[:, :1]), atol=1e-14)


def test_a_matrix_of_nine_computed_entries_is_one_kernel():
    # Stacked as three rows of three: XLA's CPU compiler fuses every entry
    # into the matrix's kernel (a stack of nine would leave each its own).
    q = jnp.asarray(random_quaternions(1)[0])
    assert compiled_kernels(lambda q: spatial.quaternion_to_matrix(jnp.sin(q)), q) == 1
    assert compiled_kernels(lambda q: spatial.skew(jnp.sin(q[1:])), q) == 1


def _stacked(entries):
    """The reference: the nine entries broadcast and stacked with jax.numpy."""
    entries = jnp.broadcast_arrays(*(jnp.asarray(e, jnp.result_type(*entries)) for e in entries))
    return jnp.stack(entries, axis=-1).reshape(entries[0].shape + (3, 3))


def test_matrix3_is_one_primitive_under_jit_vmap_and_both_modes():
    """``matrix3`` traces to one equation, its fixed entries among the
    parameters, and equals a stack of the entries eagerly, under jit, under
    vmap with fixed and unbatched entries, in float32, and on the scalar
    path; its derivatives in forward and reverse mode, second order
    included, equal the stack's (exact: both only move entries)."""
    rng = np.random.default_rng(5)
    x, y = jnp.asarray(rng.normal(size=(2, 4)))

    def fn(x, y):
        return matrix3([1.0, jnp.sin(x), 0.0, y, x * y, -x, 0.0, jnp.cos(y), 2])

    def reference(x, y):
        return _stacked([1.0, jnp.sin(x), 0.0, y, x * y, -x, 0.0, jnp.cos(y), 2.0])

    assert [e.primitive.name for e in jax.make_jaxpr(lambda x: matrix3([x, x, 0.0] * 3))(x).jaxpr.eqns] == ["matrix3"]
    np.testing.assert_array_equal(fn(x, y), reference(x, y))
    np.testing.assert_array_equal(jax.jit(fn)(x, y), reference(x, y))
    for axes in ((0, 0), (0, None), (None, 0)):
        args = (x, y if axes[1] == 0 else y[0]) if axes[0] == 0 else (x[0], y)
        np.testing.assert_array_equal(jax.vmap(fn, axes)(*args), jax.vmap(reference, axes)(*args))
    assert fn(x.astype(jnp.float32), y.astype(jnp.float32)).dtype == jnp.float32
    assert matrix3([np.float32(1.0), 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]).dtype == np.float32  # on the host

    def loss(f):
        return lambda x, y: jnp.sum(jnp.sin(f(x, y) * jnp.arange(9.0).reshape(3, 3)))

    for argnums in (0, 1):
        ours, theirs = (jax.grad(loss(f), argnums) for f in (fn, reference))
        np.testing.assert_allclose(ours(x[0], y[0]), theirs(x[0], y[0]), rtol=1e-15, atol=1e-15)
        np.testing.assert_allclose(jax.jacfwd(ours)(x[0], y[0]), jax.jacfwd(theirs)(x[0], y[0]), rtol=1e-15,
                                   atol=1e-15)
    scalar = scalarize(lambda x, y: fn(x, y) + 1.0)
    np.testing.assert_allclose(scalar(x[0], y[0]), reference(x[0], y[0]) + 1.0, rtol=1e-15, atol=1e-15)
    assert "matrix3" not in primitive_names(jax.make_jaxpr(scalar)(x[0], y[0]).jaxpr)


def test_quaternion_is_not_assumed_normalized():
    q = random_quaternions(5)
    np.testing.assert_allclose(spatial.quaternion_to_matrix(3.7 * q), spatial.quaternion_to_matrix(q), atol=1e-14)


@pytest.mark.parametrize("angle", [0.0, np.pi, np.pi - 1e-9, 1e-9])
def test_matrix_to_quaternion_near_special_angles(angle):
    for axis in np.eye(3):
        R = spatial.axis_angle_to_matrix(axis, angle)
        q = spatial.matrix_to_quaternion(R)
        np.testing.assert_allclose(spatial.quaternion_to_matrix(q), R, atol=1e-14)


def test_rotation_vector_inverts_axis_angle_and_is_smooth_at_the_identity():
    rng = np.random.default_rng(3)
    for axis, angle in zip(rng.normal(size=(20, 3)), rng.uniform(0.0, np.pi - 1e-3, 20)):
        n = axis / np.linalg.norm(axis)
        np.testing.assert_allclose(spatial.matrix_to_rotation_vector(spatial.axis_angle_to_matrix(n, angle)),
                                   angle * n, atol=1e-12)
    np.testing.assert_allclose(spatial.matrix_to_rotation_vector(spatial.axis_angle_to_matrix(n, -0.4)), -0.4 * n,
                               atol=1e-12)  # a negative angle: the same rotation the other way about n
    # at the identity, d(vector)/d(angles about x, y, z) is the identity
    J = jax.jit(jax.jacfwd(lambda a: spatial.matrix_to_rotation_vector(spatial.body_fixed_xyz_to_matrix(a))))(
        jnp.zeros(3))
    np.testing.assert_allclose(J, np.eye(3), atol=1e-12)
    batch = jax.vmap(spatial.matrix_to_rotation_vector)(spatial.axis_angle_to_matrix(np.eye(3), 0.3))
    np.testing.assert_allclose(batch, 0.3 * np.eye(3), atol=1e-12)
    single = jax.jit(spatial.matrix_to_rotation_vector)(spatial.axis_angle_to_matrix(n, 2.0).astype(jnp.float32))
    assert single.dtype == jnp.float32
    np.testing.assert_allclose(single, 2.0 * n, atol=tol(np.float32))


def test_quaternion_rotation_matches_axis_angle():
    axis, angle = np.array([1.0, -2.0, 0.5]), 1.1
    n = axis / np.linalg.norm(axis)
    q = np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * n])
    np.testing.assert_allclose(spatial.quaternion_to_matrix(q), spatial.axis_angle_to_matrix(axis, angle), atol=1e-15)


def test_body_fixed_xyz_round_trip_and_order():
    rng = np.random.default_rng(1)
    a = rng.uniform([-3, -1.5, -3], [3, 1.5, 3], size=(100, 3))
    R = spatial.body_fixed_xyz_to_matrix(jnp.asarray(a))
    np.testing.assert_allclose(R[0], spatial.rot_x(a[0, 0]) @ spatial.rot_y(a[0, 1]) @ spatial.rot_z(a[0, 2]), atol=1e-15)
    np.testing.assert_allclose(spatial.matrix_to_body_fixed_xyz(R), a, atol=1e-12)


def test_body_fixed_xyz_quaternion_closed_form():
    rng = np.random.default_rng(2)
    a = jnp.asarray(rng.uniform(-4, 4, size=(100, 3)))  # past half turns too
    q = spatial.body_fixed_xyz_to_quaternion(a)
    np.testing.assert_allclose(jnp.linalg.norm(q, axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(spatial.quaternion_to_matrix(q), spatial.body_fixed_xyz_to_matrix(a), atol=1e-15)
    # The same rotation's quaternion up to sign, and smooth: its Jacobian is
    # the matrix route's wherever both have w > 0.
    by_matrix = spatial.matrix_to_quaternion(spatial.body_fixed_xyz_to_matrix(a))
    np.testing.assert_allclose(q * jnp.sign(q[:, :1]), by_matrix, atol=1e-14)
    a0 = jnp.array([0.4, -0.7, 0.9])
    np.testing.assert_allclose(jax.jacfwd(spatial.body_fixed_xyz_to_quaternion)(a0),
                               jax.jacfwd(lambda a: spatial.matrix_to_quaternion(spatial.body_fixed_xyz_to_matrix(a)))(a0),
                               atol=1e-14)


def test_rotation_class_api():
    R1 = sx.Rotation.about_z(0.3)
    R2 = sx.Rotation.from_axis_angle(0.3, [0, 0, 2.0])
    np.testing.assert_allclose(R1.matrix, R2.matrix, atol=1e-15)
    v = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose((R1 @ R1.inverse()).matrix, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(R1 @ v, R1.matrix @ v)
    q = sx.Rotation.from_body_fixed_xyz([0.1, 0.2, 0.3]).to_quaternion()
    np.testing.assert_allclose(sx.Rotation.from_quaternion(q).to_body_fixed_xyz(), [0.1, 0.2, 0.3], atol=1e-14)


def test_rotation_gradients_finite_at_identity():
    # d/dq of quaternion_to_matrix at identity, and of matrix_to_quaternion at I.
    J = jax.jacfwd(spatial.quaternion_to_matrix)(jnp.array([1.0, 0, 0, 0]))
    assert np.all(np.isfinite(J))
    Jq = jax.jacrev(lambda a: spatial.matrix_to_quaternion(spatial.body_fixed_xyz_to_matrix(a)))(jnp.zeros(3))
    np.testing.assert_allclose(Jq, 0.5 * np.vstack([np.zeros(3), np.eye(3)]), atol=1e-14)
    Je = jax.jacrev(lambda a: spatial.matrix_to_body_fixed_xyz(spatial.body_fixed_xyz_to_matrix(a)))(jnp.zeros(3))
    np.testing.assert_allclose(Je, np.eye(3), atol=1e-14)


def test_matrix_to_quaternion_gradient_matches_finite_differences():
    a = jnp.array([0.4, -0.7, 2.9])  # trace < 0: a non-w branch is taken
    f = lambda a: spatial.matrix_to_quaternion(spatial.body_fixed_xyz_to_matrix(a))
    J = jax.jacfwd(f)(a)
    fd = np.stack([(f(a + FD_STEP * e) - f(a - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(3)], -1)
    np.testing.assert_allclose(J, fd, atol=1e-8)


def test_quaternion_to_matrix_derivatives_match_finite_differences():
    """The [omega]x R rule of a quaternion of length 1.7: its Jacobian by
    forward and reverse mode, batched, against central differences (FD_TOL's
    truncation and rounding), also under jit in float32 (at its tolerance); its
    second derivative differentiates the rule again, checked against
    differences of the Jacobian."""
    q = jnp.asarray(1.7 * random_quaternions(3, seed=5))
    f = spatial.quaternion_to_matrix
    fd = np.stack([(f(q + FD_STEP * e) - f(q - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(4)], -1)
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(f))(q), fd, atol=FD_TOL)
    np.testing.assert_allclose(jax.vmap(jax.jacrev(f))(q), fd, atol=FD_TOL)
    J32 = jax.jit(jax.vmap(jax.jacrev(f)))(q.astype(jnp.float32))
    assert J32.dtype == jnp.float32
    np.testing.assert_allclose(J32, fd, atol=tol(jnp.float32))
    J = jax.jacfwd(f)
    second = np.stack([(J(q[0] + FD_STEP * e) - J(q[0] - FD_STEP * e)) / (2 * FD_STEP) for e in np.eye(4)], -1)
    np.testing.assert_allclose(jax.hessian(f)(q[0]), second, atol=FD_TOL)


def test_rotation_float32_follows_dtype():
    q = jnp.asarray(random_quaternions(3), jnp.float32)
    R = spatial.quaternion_to_matrix(q)
    assert R.dtype == jnp.float32
    np.testing.assert_allclose(spatial.matrix_to_quaternion(R), q * np.sign(q[:, :1]), atol=tol(np.float32))


def test_skew_vee_cross():
    a, b = jnp.array([1.0, 2, 3]), jnp.array([-2.0, 0.5, 4])
    np.testing.assert_allclose(spatial.skew(a) @ b, np.cross(a, b))
    np.testing.assert_allclose(spatial.cross(a, b), np.cross(a, b))
    np.testing.assert_allclose(spatial.vee(spatial.skew(a)), a)
