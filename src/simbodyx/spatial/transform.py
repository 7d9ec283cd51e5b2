"""Rigid transforms X_AB = (R_AB, p_AB): pose of frame B measured from and
expressed in A, so that ``p_AS = X_AB @ p_BS`` for a station S."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.spatial.rotation import Rotation, _float_array
from simbodyx.spatial.vectors import mat_mul, mat_vec


class Transform(Module):
    """Pose X_AB with ``R`` (..., 3, 3) and ``p`` (..., 3).

    ``Transform()`` is the identity; ``Transform(p)`` a pure translation;
    ``Transform(R)`` (a :class:`Rotation` or a 3x3 array) a pure rotation;
    ``Transform(R, p)`` both, as in Simbody. ``X_AB @ X_BC`` composes,
    ``X_AB @ p_BS`` maps a station, ``X.inverse()`` is Simbody's ``~X``.
    """

    R: jnp.ndarray
    p: jnp.ndarray

    def __init__(self, R=None, p=None):
        if p is None and R is not None and not isinstance(R, Rotation) and np.ndim(R) == 1:
            R, p = None, R  # Transform(p)
        if isinstance(R, Rotation):
            R = R.matrix
        R = _float_array(np.eye(3) if R is None else R)
        p = _float_array(np.zeros(R.shape[:-1], R.dtype) if p is None else p)
        if R.shape[-2:] != (3, 3) or p.shape[-1:] != (3,):
            raise ValueError(
                f"Transform needs R of shape (..., 3, 3) and p of shape (..., 3); "
                f"got {R.shape} and {p.shape}"
            )
        self.R, self.p = R, p

    def __getitem__(self, index) -> Transform:
        """One pose (or a sub-batch) of a batched Transform: ``X_AB[1]``."""
        return Transform(self.R[index], self.p[index])

    @property
    def rotation(self) -> Rotation:
        return Rotation(self.R)

    def inverse(self) -> Transform:
        """X_BA = ~X_AB = (R_AB^T, -R_AB^T p_AB)."""
        Rt = jnp.swapaxes(self.R, -1, -2)
        return Transform(Rt, -mat_vec(Rt, self.p))

    def compose(self, X_BC: Transform) -> Transform:
        """X_AC = X_AB * X_BC."""
        return Transform(mat_mul(self.R, X_BC.R), self.p + mat_vec(self.R, X_BC.p))

    def apply(self, p_BS):
        """Station re-measured in A: p_AS = R_AB p_BS + p_AB."""
        return self.p + mat_vec(self.R, jnp.asarray(p_BS))

    def rotate(self, v_B):
        """Vector re-expressed in A (no shift): v_A = R_AB v_B."""
        return mat_vec(self.R, jnp.asarray(v_B))

    def __matmul__(self, other):
        if isinstance(other, Transform):
            return self.compose(other)
        return self.apply(other)

    def matrix(self):
        """The 4x4 homogeneous matrix [[R, p], [0, 1]]."""
        top = jnp.concatenate([self.R, self.p[..., None]], axis=-1)
        bottom = jnp.broadcast_to(
            jnp.array([0, 0, 0, 1], self.R.dtype), top.shape[:-2] + (1, 4)
        )
        return jnp.concatenate([top, bottom], axis=-2)
