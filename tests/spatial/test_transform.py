import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx


def X(seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    return sx.Transform(sx.Rotation.from_quaternion(q), rng.normal(size=3))


def test_constructor_forms():
    np.testing.assert_allclose(sx.Transform().matrix(), np.eye(4))
    t = sx.Transform([1.0, 2, 3])
    np.testing.assert_allclose(t.p, [1, 2, 3])
    np.testing.assert_allclose(t.R, np.eye(3))
    r = sx.Transform(sx.Rotation.about_x(0.2))
    np.testing.assert_allclose(r.p, 0)
    with pytest.raises(ValueError, match="shape"):
        sx.Transform(np.eye(2), [0, 0])


def test_compose_inverse_apply():
    A, B = X(0), X(1)
    p = jnp.array([0.3, -0.2, 0.9])
    np.testing.assert_allclose((A @ B) @ p, A @ (B @ p), atol=1e-14)
    np.testing.assert_allclose((A @ A.inverse()).matrix(), np.eye(4), atol=1e-14)
    np.testing.assert_allclose((A @ B).matrix(), A.matrix() @ B.matrix(), atol=1e-14)
    np.testing.assert_allclose(A.rotate(p), A.R @ p, atol=1e-15)


def test_batched_and_vmapped():
    Xs = jax.vmap(lambda s: sx.Transform(sx.Rotation.about_z(s), jnp.stack([s, 0 * s, 1 + s])))(jnp.linspace(0, 1, 5))
    p = jnp.ones(3)
    batched = Xs @ p  # leading batch dimension broadcasts
    looped = np.stack([sx.Transform(Xs.R[i], Xs.p[i]) @ p for i in range(5)])
    np.testing.assert_allclose(batched, looped, atol=1e-15)
