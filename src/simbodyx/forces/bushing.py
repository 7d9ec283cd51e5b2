"""Force.LinearBushing: Simbody's six-spring-and-damper bushing between a
frame F on body 1 and a frame M on body 2."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx.forces.base import ForceElement, as_frame, as_param, velocity_at, zeros
from simbodyx.mobilizers.euler import Gimbal
from simbodyx.spatial.rotation import matrix_to_body_fixed_xyz
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, spatial_vec


class LinearBushing(ForceElement):
    """The bushing's coordinates are q = (the body-fixed X-Y-Z angles of
    R_FM, p_FM in F), zero when F and M coincide; the generalized force on
    them is f = -(k q + c qdot) with ``stiffness`` k and ``damping`` c, each
    (6,) ((N m/rad, N m s/rad) for the angles, then (N/m, N s/m)), applied
    to body 2 at M's origin and its negative to body 1, as Simbody's
    Force::LinearBushing. Potential energy 1/2 sum k q^2. Singular where the
    middle angle is +-90 deg."""

    NONNEGATIVE = ("stiffness", "damping")

    body1: int = eqx.field(static=True)
    body2: int = eqx.field(static=True)
    X_B1F: Transform
    X_B2M: Transform
    stiffness: jnp.ndarray
    damping: jnp.ndarray

    def __init__(self, forces, body1, frame_on_body1, body2, frame_on_body2, stiffness, damping):
        label = "Force.LinearBushing"
        for body in (body1, body2):
            forces._check_body(body, label)
        self.body1, self.body2 = body1.index, body2.index
        self.X_B1F = as_frame(frame_on_body1, "frame on body 1", label)
        self.X_B2M = as_frame(frame_on_body2, "frame on body 2", label)
        self.stiffness = as_param(stiffness, (6,), "stiffness", label)
        self.damping = as_param(damping, (6,), "damping", label)
        forces._add(self)

    def _frames(self, state):
        X = state.position.X_GB
        X_GF, X_GM = X[self.body1].compose(self.X_B1F), X[self.body2].compose(self.X_B2M)
        return X_GF, X_GM, X_GF.inverse().compose(X_GM)

    def coordinates(self, state):
        """q (6,): the angles of R_FM and p_FM in F (State realized to Position)."""
        _, _, X_FM = self._frames(state)
        return jnp.concatenate([matrix_to_body_fixed_xyz(X_FM.R), X_FM.p])

    def calc(self, model, state):
        X, V = state.position.X_GB, state.velocity.V_GB
        X_GF, X_GM, X_FM = self._frames(state)
        q = jnp.concatenate([matrix_to_body_fixed_xyz(X_FM.R), X_FM.p])
        p_B1F = X.R[self.body1] @ self.X_B1F.p  # in G
        p_B2M = X.R[self.body2] @ self.X_B2M.p
        p_FM = X_GF.R @ X_FM.p
        w1, w2 = V[self.body1, :3], V[self.body2, :3]
        v_F, v_M = velocity_at(state, self.body1, p_B1F), velocity_at(state, self.body2, p_B2M)
        w_FM = X_GF.R.T @ (w2 - w1)  # in F
        v_FM = X_GF.R.T @ (v_M - v_F - cross(w1, p_FM))  # derivative taken in F
        A = Gimbal().H_FM(q[:3], None)[:, :3].T  # w_FM (in F) = A qdot of the angles
        qdot = jnp.concatenate([jnp.linalg.solve(A, w_FM), v_FM])
        f = -(self.stiffness * q + self.damping * qdot)
        moment = X_GF.R @ jnp.linalg.solve(A.T, f[:3])  # on body 2, in G
        force = X_GF.R @ f[3:]  # on body 2 at M's origin, in G
        F_M = spatial_vec(moment + cross(p_B2M, force), force)
        F_F = spatial_vec(-(moment + cross(p_FM, force)) + cross(p_B1F, -force), -force)
        mobility, F = zeros(state)
        return mobility, F.at[self.body2].add(F_M).at[self.body1].add(F_F)

    def potential_energy(self, model, state):
        q = self.coordinates(state)
        return 0.5 * jnp.sum(self.stiffness * q * q)
