"""The mobilizer protocol every joint kind implements.

A mobilizer kind is a small frozen (hashable) object: its fields are static
modelling choices (for example the Euler-angle option); the numbers of a
particular joint (a screw's pitch) arrive as ``params``. All kernels act on
one joint and are vmapped over the joints of a kind by the algorithms.

Frames (``spec/conventions.md``): F is fixed on the parent, M on the child;
X_FM(q) is the joint's pose, ``V_FM = H_FM u`` with H_FM's columns [w; v] in F
(stored here as the rows of an (nu, 6) array), ``qdot = N(q) u``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.mobilizers import fitting
from simbodyx.spatial.rotation import (
    body_fixed_xyz_to_quaternion,
    matrix_to_body_fixed_xyz,
    quaternion_to_matrix,
)


@dataclasses.dataclass(frozen=True)
class Mobilizer:
    nq: ClassVar[int]
    nu: ClassVar[int]
    num_params: ClassVar[int] = 0
    #: True when qdot = u (N is the identity); N, NInv and NDot are then skipped.
    qdot_is_u: ClassVar[bool] = True
    #: Index of the first q of the quaternion, or None if this kind has none in use.
    quaternion_at: ClassVar[int | None] = None

    def default_q(self) -> tuple[float, ...]:
        return (0.0,) * self.nq

    def in_mode(self, use_euler_angles: bool) -> Mobilizer:
        """This kind under the model's rotation option (kinds without a
        quaternion are the same in both modes)."""
        return self

    def X_FM(self, q, params):
        """(R_FM (3, 3), p_FM (3,)) for this joint's q (nq,)."""
        raise NotImplementedError

    def H_FM(self, q, params):
        """(nu, 6): row k is the spatial velocity [w; v] of M in F (in F) per unit u_k."""
        raise NotImplementedError

    def N(self, q):
        """(nq, nu) kinematic matrix of qdot = N(q) u."""
        return jnp.eye(self.nq, self.nu, dtype=q.dtype)

    def N_inv(self, q):
        """(nu, nq) matrix of u = NInv(q) qdot."""
        return jnp.eye(self.nu, self.nq, dtype=q.dtype)

    def N_dot(self, q, qdot):
        """(nq, nu) time derivative of N along qdot (exact, by forward-mode AD)."""
        return jax.jvp(self.N, (q,), (qdot,))[1]

    def fit_q(self, q, params, R=None, p=None):
        """q (nq,) whose X_FM best matches the rotation R (3, 3) and/or the
        translation p (3,) of M in F (None: not requested), starting from and
        otherwise keeping the current q; unreachable requests are projected
        onto the reachable poses. Generic rule: see :mod:`.fitting`."""
        return fitting.fit_q(self, q, params, R, p)

    def fit_u(self, q, u, params, w=None, v=None):
        """u (nu,) whose V_FM best matches w_FM and/or v_FM (in F) at this q."""
        return fitting.fit_u(self, q, u, params, w, v)

    def H_FM_dot(self, q, qdot, params):
        """(nu, 6) time derivative of H_FM along qdot; HDot_FM u is A_FM's bias."""
        return jax.jvp(lambda q_: self.H_FM(q_, params), (q,), (qdot,))[1]


def rows(*cols):
    """Stack spatial columns (each (6,)) into the (nu, 6) H layout."""
    return jnp.stack(cols, axis=0)


def unit(axis: int, dtype, linear: bool = False):
    """The spatial column with a unit angular (or linear) part along axis 0, 1 or 2."""
    return jnp.asarray(np.eye(6)[axis + 3 * linear], dtype)  # a constant, not a scatter


def quaternion_q_to_euler_q(q, at: int):
    """Replace the quaternion q[at:at+4] (..., nq) by body-fixed X-Y-Z angles."""
    xyz = matrix_to_body_fixed_xyz(quaternion_to_matrix(q[..., at:at + 4]))
    return jnp.concatenate([q[..., :at], xyz, q[..., at + 4:]], axis=-1)


def euler_q_to_quaternion_q(q, at: int, positive_w: bool = True):
    """Replace the body-fixed X-Y-Z angles q[at:at+3] by their unit quaternion,
    with w >= 0 (as Simbody converts a State), or else the one smooth in the
    angles (cheap to differentiate, to any order)."""
    quat = body_fixed_xyz_to_quaternion(q[..., at:at + 3])
    if positive_w:
        quat = jnp.where(quat[..., :1] < 0, -quat, quat)
    return jnp.concatenate([q[..., :at], quat, q[..., at + 3:]], axis=-1)
