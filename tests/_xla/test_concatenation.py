"""simbodyx._xla.concatenation: long concatenations XLA's CPU compiler fuses."""

import jax
import jax.numpy as jnp
import numpy as np
from conftest import compiled_kernels

from simbodyx._xla.concatenation import MAX_FUSED_PIECES, concatenate


def test_many_pieces_concatenate_in_one_kernel_with_their_producers():
    """Past ``MAX_FUSED_PIECES`` pieces a concatenation is groups, zero-padded
    and added: the same array (axis 0 or 1, floats or booleans, and its
    gradient), and one kernel where a plain concatenation of computed pieces
    leaves each piece a kernel of its own (XLA's CPU compiler fuses into at
    most eight)."""
    n = 3 * MAX_FUSED_PIECES // 2
    x = jnp.linspace(0.1, 2.0, 4 * n).reshape(2 * n, 2)

    def pieces(x, axis=0):
        parts = [jnp.sin(x[2 * i:2 * i + 2]) * (i + 1) for i in range(n)]
        return parts if axis == 0 else [p.T for p in parts]

    for axis in (0, 1):
        np.testing.assert_array_equal(concatenate(pieces(x, axis), axis), jnp.concatenate(pieces(x, axis), axis))
    flags = [p > 0.5 for p in pieces(x)]
    np.testing.assert_array_equal(concatenate(flags), jnp.concatenate(flags))
    weights = jnp.arange(4.0 * n).reshape(2 * n, 2)
    grads = [jax.grad(lambda x: jnp.sum(weights * join(pieces(x))))(x) for join in (concatenate, jnp.concatenate)]
    np.testing.assert_array_equal(*grads)
    assert compiled_kernels(lambda x: concatenate(pieces(x)), x) == 1
    assert compiled_kernels(lambda x: jnp.concatenate(pieces(x)), x) == n  # and the concatenation
