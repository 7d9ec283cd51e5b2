"""Best-fit q and u for a requested pose or velocity, for any mobilizer.

Simbody's setQToFit* / setUToFit* never fail: a request the joint cannot
reach is projected onto what it can reach. Here:

* u: the least-squares u, changed from the current u as little as possible
  (minimum-norm correction, so mobilities the request says nothing about keep
  their value). The angular velocity is matched first; the linear velocity is
  then matched without disturbing that angular fit. Exact when reachable.
* q (the generic rule, used by Custom and FunctionBased; built-in kinds have
  closed forms): Levenberg-Marquardt from the current q on the residual
  [R_FM(q) - R (9 entries); p_FM(q) - p (m)], i.e. the closest reachable pose
  in the chordal rotation metric plus the Euclidean translation distance.
All are pure JAX (jit, vmap and grad work).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx.spatial.rotation import axis_angle_to_matrix
from simbodyx.spatial.vectors import cross, safe_norm

#: Levenberg-Marquardt iterations and starting damping of the generic q fit.
LM_ITERATIONS = 50
LM_DAMPING = 1e-3


def closest_z_angle(R):
    """Angle of the rotation about z closest to R (Frobenius norm):
    argmax tr(Rz(t)^T R) = atan2(R10 - R01, R00 + R11)."""
    return jnp.arctan2(R[1, 0] - R[0, 1], R[0, 0] + R[1, 1])


def pick(target, rule, current):
    """rule(target) for a requested target, else the current value."""
    return current if target is None else rule(target)


def rotation_between(a, b):
    """The smallest rotation turning unit vector a to the direction of b
    (identity when b = 0; about an axis normal to a when b is opposite)."""
    b_norm = safe_norm(b)
    e = b / jnp.where(b_norm > 0, b_norm, 1.0)
    axis = cross(a, e)
    sine = safe_norm(axis)
    normal = cross(a, jnp.where(jnp.abs(a[0]) < 0.9, jnp.array([1.0, 0, 0], a.dtype), jnp.array([0, 1.0, 0], a.dtype)))
    R = axis_angle_to_matrix(jnp.where(sine > 1e-12, axis, normal), jnp.arctan2(sine, a @ e))
    return jnp.where(b_norm > 0, R, jnp.eye(3, dtype=a.dtype))


def fit_u(kind, q, u, params, w=None, v=None):
    """u (nu,) whose V_FM = H_FM^T u best matches w_FM and/or v_FM (in F)."""
    H = kind.H_FM(q, params)
    eye = jnp.eye(kind.nu, dtype=u.dtype)
    null = eye  # directions of u still free to change
    for target, part in ((w, slice(0, 3)), (v, slice(3, 6))):
        if target is None:
            continue
        A = H[:, part].T @ null
        A_pinv = jnp.linalg.pinv(A)
        u = u + null @ A_pinv @ (jnp.asarray(target, u.dtype) - H[:, part].T @ u)
        null = null @ (eye - A_pinv @ A)
    return u


def fit_q(kind, q, params, R=None, p=None):
    """q (nq,) whose X_FM best matches R_FM and/or p_FM, by damped Gauss-Newton
    (Levenberg-Marquardt) from the current q; quaternions are renormalized."""
    if R is None and p is None:
        return q

    def residual(q_):
        R_q, p_q = kind.X_FM(q_, params)
        parts = []
        if R is not None:
            parts.append((R_q - jnp.asarray(R, q.dtype)).ravel())
        if p is not None:
            parts.append(p_q - jnp.asarray(p, q.dtype))
        return jnp.concatenate(parts)

    def cost(q_):
        r = residual(q_)
        return r @ r

    def step(_, carry):
        q_, damping, c = carry
        r, J = residual(q_), jax.jacfwd(residual)(q_)
        JtJ = J.T @ J
        scale = jnp.diag(jnp.diag(JtJ)) + 1e-12 * jnp.eye(len(q_), dtype=q_.dtype)
        trial = q_ - jnp.linalg.solve(JtJ + damping * scale, J.T @ r)
        trial = _normalized(kind, trial)
        c_trial = cost(trial)
        better = c_trial < c
        return (jnp.where(better, trial, q_), jnp.where(better, damping / 3, damping * 4),
                jnp.where(better, c_trial, c))

    q0 = _normalized(kind, q)
    carry = (q0, jnp.asarray(LM_DAMPING, q.dtype), cost(q0))
    return jax.lax.fori_loop(0, LM_ITERATIONS, step, carry)[0]


def _normalized(kind, q):
    at = kind.quaternion_at
    if at is None:
        return q
    quat = q[at:at + 4]
    return q.at[at:at + 4].set(quat / jnp.sqrt(quat @ quat))
