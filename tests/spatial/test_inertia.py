import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from simbodyx import spatial


def test_inertia_constructors():
    np.testing.assert_allclose(sx.Inertia(2.0).matrix, 2 * np.eye(3))
    np.testing.assert_allclose(sx.Inertia(1, 2, 3).matrix, np.diag([1, 2, 3]))
    np.testing.assert_allclose(sx.Inertia(np.array([1.0, 2.0, 3.0])).matrix, np.diag([1, 2, 3]))  # Inertia(Vec3)
    with pytest.raises(ValueError, match=r"Inertia: a vector of moments has shape \(3,\) .*got \(2,\)"):
        sx.Inertia([1.0, 2.0])
    m = sx.Inertia(1, 2, 3, 0.1, 0.2, 0.3).matrix
    np.testing.assert_allclose(m, [[1, 0.1, 0.2], [0.1, 2, 0.3], [0.2, 0.3, 3]])
    np.testing.assert_allclose(sx.Inertia(m).moments(), [1, 2, 3])
    np.testing.assert_allclose(sx.Inertia(m).products(), [0.1, 0.2, 0.3])
    # a point mass m at p: m (|p|^2 1 - p p^T), e.g. 2 kg on the x axis at 3 m has 18 kg m^2 about y and z
    np.testing.assert_allclose(sx.Inertia.point_mass(2.0, [3.0, 0.0, 0.0]).matrix, np.diag([0.0, 18.0, 18.0]))
    p = np.array([0.3, -0.4, 1.2])
    np.testing.assert_allclose(sx.Inertia.point_mass(2.0, p).matrix, 2.0 * (p @ p * np.eye(3) - np.outer(p, p)),
                               atol=1e-15)


@pytest.mark.parametrize(
    "matrix, message",
    [
        (np.diag([1.0, 1.0, 3.0]), "triangle"),
        (np.diag([-1.0, 1.0, 1.0]), "negative"),
        (np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "symmetric"),
        (np.diag([np.nan, 1.0, 1.0]), "NaN"),
    ],
)
def test_invalid_inertia_rejected(matrix, message):
    with pytest.raises(ValueError, match=message):
        sx.Inertia(matrix).check()


def test_unit_inertia_shapes():
    np.testing.assert_allclose(sx.UnitInertia.sphere(2.0).matrix, 1.6 * np.eye(3))
    np.testing.assert_allclose(sx.UnitInertia.brick(1, 2, 3).matrix, np.diag([13, 10, 5]) / 3)
    np.testing.assert_allclose(sx.UnitInertia.cylinder_along_z(1, 3).matrix, np.diag([3.25, 3.25, 0.5]))


def test_mass_properties_shift_and_central():
    c = np.array([0.1, -0.2, 0.3])
    Ic = sx.Inertia(0.02, 0.03, 0.04, 0.001, -0.002, 0.003)
    mp = sx.MassProperties.from_central(2.0, c, Ic)
    np.testing.assert_allclose(mp.calc_central_inertia().matrix, Ic.matrix, atol=1e-15)
    expected = Ic.matrix + 2.0 * (c @ c * np.eye(3) - np.outer(c, c))
    np.testing.assert_allclose(mp.inertia.matrix, expected, atol=1e-15)
    Q = np.array([1.0, 0.5, -0.5])
    d = c - Q
    np.testing.assert_allclose(mp.calc_shifted_inertia(Q).matrix, Ic.matrix + 2.0 * (d @ d * np.eye(3) - np.outer(d, d)), atol=1e-14)


def test_mass_properties_transform_and_spatial_matrix():
    mp = sx.MassProperties.from_central(2.0, [0.1, -0.2, 0.3], sx.Inertia(0.02, 0.03, 0.04))
    X_BC = sx.Transform(sx.Rotation.from_body_fixed_xyz([0.3, -0.4, 1.0]), [0.5, 0.1, -0.2])
    mc = mp.calc_transformed_mass_props(X_BC)
    # The same body described about C in C has the same central inertia, rotated.
    R_CB = X_BC.R.T
    np.testing.assert_allclose(mc.com, R_CB @ (mp.com - X_BC.p), atol=1e-15)
    np.testing.assert_allclose(mc.calc_central_inertia().matrix, R_CB @ mp.calc_central_inertia().matrix @ R_CB.T, atol=1e-15)
    M = mp.to_spatial_mat()
    mcx = spatial.skew(2.0 * mp.com)
    np.testing.assert_allclose(M[:3, 3:], mcx)
    np.testing.assert_allclose(M[3:, :3], -mcx)
    np.testing.assert_allclose(M[3:, 3:], 2 * np.eye(3))
    # Kinetic energy 1/2 V^T M V equals 1/2 m |v_c|^2 + 1/2 w^T I_c w.
    V = jnp.array([0.3, -0.1, 0.7, 1.0, 2.0, -0.5])
    w, v = V[:3], V[3:]
    v_c = v + np.cross(w, mp.com)
    ke = 0.5 * 2.0 * v_c @ v_c + 0.5 * w @ mp.calc_central_inertia().matrix @ w
    np.testing.assert_allclose(0.5 * V @ M @ V, ke, rtol=1e-14)


def test_spatial_inertia_algebra():
    a = sx.SpatialInertia.from_mass_properties(sx.MassProperties.from_central(1.0, [0.1, 0, 0], sx.Inertia(0.01)))
    b = sx.SpatialInertia.from_mass_properties(sx.MassProperties.from_central(3.0, [0, 0.2, 0], sx.Inertia(0.02)))
    s = a + b
    np.testing.assert_allclose(s.to_spatial_mat(), a.to_spatial_mat() + b.to_spatial_mat(), atol=1e-15)
    # Shifting to p then back is the identity; shifting matches the 6x6 rule
    # M_Q = Phi^T M Phi with Phi = [[1, 0], [skew(p), 1]] (p from old origin O to Q,
    # since V_O = [w; v_Q + p x w] = Phi V_Q).
    p = jnp.array([0.3, -0.4, 0.5])
    np.testing.assert_allclose(s.shift(p).shift(-p).to_spatial_mat(), s.to_spatial_mat(), atol=1e-14)
    Phi = np.block([[np.eye(3), np.zeros((3, 3))], [np.asarray(spatial.skew(p)), np.eye(3)]])
    np.testing.assert_allclose(s.shift(p).to_spatial_mat(), Phi.T @ s.to_spatial_mat() @ Phi, atol=1e-14)
    R = sx.Rotation.about_y(0.4).matrix
    E = np.block([[R, np.zeros((3, 3))], [np.zeros((3, 3)), R]])
    np.testing.assert_allclose(s.re_express(R).to_spatial_mat(), E @ s.to_spatial_mat() @ E.T, atol=1e-14)


def test_mass_properties_grad_and_jit():
    def central_trace(m):
        return jnp.trace(sx.MassProperties(m, jnp.array([0.1, 0.2, 0.0]), sx.Inertia(1.0)).calc_central_inertia().matrix)

    g = jax.grad(central_trace)(2.0)
    np.testing.assert_allclose(g, -2 * 0.05, rtol=1e-14)  # d/dm of -m * 2|c|^2
    np.testing.assert_allclose(jax.jit(central_trace)(2.0), 3 - 2 * 2 * 0.05, rtol=1e-14)


def test_concrete_values_are_computed_on_the_host_and_traced_ones_by_jax():
    """Built from numbers, the value types hold JAX arrays of JAX's default
    float computed with NumPy (no XLA program: tests/test_matter.py); traced
    under jit, vmap and grad the same functions give the same numbers."""
    X = sx.Transform(sx.Rotation.about_z(0.3), [0.1, -0.2, 0.4])

    def props(mass, radius):
        central = sx.UnitInertia.cylinder_along_z(radius, 0.5).matrix * mass
        central = sx.Inertia(central).re_express(sx.Rotation.about_x(np.pi / 2))
        mp = sx.MassProperties.from_central(mass, [0.0, -0.5, 0.1], central)
        return mp.calc_transformed_mass_props(X).inertia.matrix

    eager = props(2.0, 0.02)
    assert isinstance(eager, jax.Array) and eager.dtype == jnp.result_type(float)
    np.testing.assert_allclose(jax.jit(props)(2.0, 0.02), eager, rtol=0, atol=1e-15)
    batch = jax.vmap(props)(jnp.array([2.0, 3.0]), jnp.array([0.02, 0.05]))
    np.testing.assert_allclose(batch[0], eager, rtol=0, atol=1e-15)
    np.testing.assert_allclose(batch[1], props(3.0, 0.05), rtol=0, atol=1e-15)
    grad = jax.grad(lambda m: jnp.trace(props(m, 0.02)))(2.0)
    np.testing.assert_allclose(grad, jnp.trace(props(1.0, 0.02)), rtol=1e-14)  # linear in the mass
    assert isinstance(sx.Inertia(1, 2, 3).matrix, jax.Array) and sx.Inertia(1, 2, 3).matrix.dtype == eager.dtype
