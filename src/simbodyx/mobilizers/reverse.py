"""Direction.Reverse: a mobilizer whose q and u are defined as if the joint
were built from the child to the parent, while the tree keeps its direction.

The inner kind describes X_MF(q) (its "F" frame is this joint's M, on the
child; its "M" is this joint's F, on the parent) and V_MF = H_in u in M.
Then X_FM = X_MF^-1 = (R^T, -R^T p) and, per unit u_k with inner row
[w; v] (in M): w_FM = -R_FM w and v_FM = w_FM x p_FM - R_FM v (in F), the
time derivative in F of p_FM = -R_FM p_MF. q, u, N, NInv and defaults are
the inner kind's.
"""

from __future__ import annotations

import dataclasses

from simbodyx.mobilizers.base import Mobilizer
from simbodyx.spatial.vectors import cross, mat_vec, spatial_vec


@dataclasses.dataclass(frozen=True)
class Reversed(Mobilizer):
    inner: Mobilizer

    @property
    def nq(self):
        return self.inner.nq

    @property
    def nu(self):
        return self.inner.nu

    @property
    def num_params(self):
        return self.inner.num_params

    @property
    def qdot_is_u(self):
        return self.inner.qdot_is_u

    @property
    def quaternion_at(self):
        return self.inner.quaternion_at

    def default_q(self):
        return self.inner.default_q()

    def in_mode(self, use_euler_angles):
        return Reversed(self.inner.in_mode(use_euler_angles))

    def X_FM(self, q, params):
        R_MF, p_MF = self.inner.X_FM(q, params)
        return R_MF.T, -mat_vec(R_MF, p_MF, transpose=True)

    def H_FM(self, q, params):
        R_FM, p_FM = self.X_FM(q, params)
        H_MF = self.inner.H_FM(q, params)
        w = -mat_vec(R_FM, H_MF[:, :3])
        return spatial_vec(w, cross(w, p_FM) - mat_vec(R_FM, H_MF[:, 3:]))

    def fit_q(self, q, params, R=None, p=None):
        """Fit the inner joint to X_MF = X_FM^-1; a translation alone is taken
        with the current rotation (p_MF = -R_FM^T p)."""
        if R is None and p is None:
            return q
        if R is None:
            R_FM, _ = self.X_FM(q, params)
            return self.inner.fit_q(q, params, None, -mat_vec(R_FM, p, transpose=True))
        return self.inner.fit_q(q, params, R.T, None if p is None else -mat_vec(R, p, transpose=True))

    def N(self, q):
        return self.inner.N(q)

    def N_inv(self, q):
        return self.inner.N_inv(q)

    def N_dot(self, q, qdot):
        return self.inner.N_dot(q, qdot)
