"""MuJoCo's equality constraints as soft rows (``simbodyx.soft_constraints``):
connects, welds and joint and fixed-tendon couplings."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.soft_constraints.rows import point_jacobians, reference_parameters, regularizer
from simbodyx.spatial.rotation import matrix_to_quaternion, skew
from simbodyx.spatial.vectors import cross, safe_norm
from simbodyx.state import State


class Connects(Module):
    """MuJoCo's connect equalities (a ball joint between two bodies): for each,
    the point ``anchors[:, 0]`` fixed on body ``bodies[i][0]`` and
    ``anchors[:, 1]`` on ``bodies[i][1]`` (m, in each body's frame; static
    body indices, 0 for Ground) held together: three rows, the violation
    p_1 - p_2 in G, its impedance from the violation's length.
    ``solref`` (n, 2), ``solimp`` (n, 5), ``invweight`` (n,) both bodies'
    translational inverse weight."""

    bodies: tuple = eqx.field(static=True)
    anchors: jnp.ndarray
    solref: jnp.ndarray
    solimp: jnp.ndarray
    invweight: jnp.ndarray

    def rows(self, state: State, timestep):
        J, r, bias = _point_rows(state, self.bodies, self.anchors, _bias_accelerations(state))
        J = jnp.swapaxes(J[..., 3:], 1, 2).reshape(-1, state.topology.nu)  # three rows per connect
        return _equality_rows(state, J, r.reshape(-1), bias.reshape(-1), self, timestep, width=3,
                              invweight=jnp.repeat(self.invweight, 3))


class Welds(Module):
    """MuJoCo's weld equalities: for each, frame 1 (origin ``anchors[:, 0]``,
    orientation ``frames[:, 0]``, in body ``bodies[i][0]``) held on frame
    2 (``anchors[:, 1]``, ``frames[:, 1]`` in ``bodies[i][1]``): three
    rows p_1 - p_2 (m, in G) and three the vector part v of the quaternion
    of R_2' R_1 (MuJoCo's neg(q_2) q_1) times ``torquescale`` (n,), the
    impedance from the six rows' length. ``invweight`` (n, 2): both
    bodies' translational and rotational inverse weights."""

    bodies: tuple = eqx.field(static=True)
    anchors: jnp.ndarray
    frames: jnp.ndarray
    torquescale: jnp.ndarray
    solref: jnp.ndarray
    solimp: jnp.ndarray
    invweight: jnp.ndarray

    def rows(self, state: State, timestep):
        A0 = _bias_accelerations(state)
        J_rel, r_p, bias_p = _point_rows(state, self.bodies, self.anchors, A0)
        X, V = state.position.X_GB, state.velocity.V_GB
        first, second = (np.asarray([pair[k] for pair in self.bodies], np.int32) for k in (0, 1))
        R_1 = jnp.einsum("nij,njk->nik", X.R[first], self.frames[:, 0])
        R_2 = jnp.einsum("nij,njk->nik", X.R[second], self.frames[:, 1])
        e = matrix_to_quaternion(jnp.einsum("nji,njk->nik", R_2, R_1))
        w, v = e[:, :1, None], e[:, 1:]
        # v's rate: 1/2 (w I - [v]x) c, c = R_2' (omega_1 - omega_2)
        omega = J_rel[..., :3]  # (n, nu, 3): omega_1 - omega_2 per unit u
        A = 0.5 * (w * jnp.eye(3, dtype=e.dtype) - skew(v)) @ jnp.swapaxes(R_2, 1, 2)
        scale = self.torquescale[:, None]
        J_r = scale[:, :, None] * jnp.einsum("nij,nuj->niu", A, omega)
        # the rate's part free of udot: 1/2 (w I - [v]x) R_2' (alpha_1 - alpha_2 - omega_2 x (omega_1 -
        # omega_2)) - |c|^2 v / 4, alpha the angular accelerations at udot = 0
        difference = V[first, :3] - V[second, :3]
        c = jnp.einsum("nji,nj->ni", R_2, difference)
        bias_r = scale * (jnp.einsum("nij,nj->ni", A, A0[first, :3] - A0[second, :3]
                                     - cross(V[second, :3], difference)) - 0.25 * jnp.sum(c * c, axis=1)[:, None] * v)
        n, nu = len(self.bodies), state.topology.nu
        J = jnp.concatenate([jnp.swapaxes(J_rel[..., 3:], 1, 2), J_r], axis=1).reshape(6 * n, nu)
        r = jnp.concatenate([r_p, scale * v], axis=1).reshape(6 * n)
        bias = jnp.concatenate([bias_p, bias_r], axis=1).reshape(6 * n)
        invweight = jnp.repeat(self.invweight, 3, axis=1).reshape(6 * n)
        return _equality_rows(state, J, r, bias, self, timestep, width=6, invweight=invweight)


class Couplings(Module):
    """MuJoCo's joint and tendon equalities: for each, the length
    l_1 = ``q[:, 0] @ q`` (rad or m: a joint's coordinate, or a fixed
    tendon's sum) held at ref_1 + c_0 + c_1 x + ... + c_4 x^4 of
    x = l_2 - ref_2 (l_2 = ``q[:, 1] @ q``, zero when the equality names one
    object); ``u`` (n, 2, nu) the two lengths' rates per unit u, ``ref``
    (n, 2), ``polynomial`` (n, 5) c_0 ... c_4. One row each."""

    q: jnp.ndarray
    u: jnp.ndarray
    ref: jnp.ndarray
    polynomial: jnp.ndarray
    solref: jnp.ndarray
    solimp: jnp.ndarray
    invweight: jnp.ndarray

    def rows(self, state: State, timestep):
        lengths = jnp.einsum("nkq,q->nk", self.q, state.q) - self.ref
        x = lengths[:, 1]
        c = self.polynomial
        r = lengths[:, 0] - c[:, 0] - x * (c[:, 1] + x * (c[:, 2] + x * (c[:, 3] + x * c[:, 4])))
        slope = c[:, 1] + x * (2 * c[:, 2] + x * (3 * c[:, 3] + x * 4 * c[:, 4]))
        J = self.u[:, 0] - slope[:, None] * self.u[:, 1]
        return _equality_rows(state, J, r, jnp.zeros_like(r), self, timestep, width=1, invweight=self.invweight)


def _point_rows(state: State, bodies, anchors, A0):
    """(J (n, nu, 6): [w; v] of anchor 1 relative to anchor 2 per unit u, in
    G; r (n, 3): p_1 - p_2 (m, in G); bias (n, 3): the rate of J_v u at
    udot = 0) of each body pair holding anchor 1 on anchor 2, with ``A0``
    the bodies' accelerations at udot = 0 (:func:`_bias_accelerations`)."""
    X, V = state.position.X_GB, state.velocity.V_GB
    first, second = (np.asarray([pair[k] for pair in bodies], np.int32) for k in (0, 1))
    points, biases = [], []
    for side, which in ((first, 0), (second, 1)):
        r = jnp.einsum("nij,nj->ni", X.R[side], anchors[:, which])  # from Bo, in G
        w = V[side, :3]
        points.append(X.p[side] + r)
        biases.append(A0[side, 3:] + cross(A0[side, :3], r) + cross(w, cross(w, r)))
    J = point_jacobians(state, first, points[0]) - point_jacobians(state, second, points[1])
    return J, points[0] - points[1], biases[0] - biases[1]


def _bias_accelerations(state: State):
    """(nb, 6) A_GB at udot = 0 (the velocity-product part), in G."""
    return body_accelerations(state.topology, state.position, jnp.zeros_like(state.u),
                              state.velocity.mobilizer_coriolis)


def _equality_rows(state: State, J, r, bias, family, timestep, *, width: int, invweight):
    """(J, aref, R) of equality rows in groups of ``width`` (one group per
    equality of ``family``, with its solref and solimp, its impedance from
    the group's violation length) and inverse weights ``invweight``: aref is the
    reference acceleration of r less ``bias``, the part of r's second
    derivative free of udot (MuJoCo's Jdot v), so that J udot + bias
    follows it."""
    size = jnp.repeat(safe_norm(r.reshape(-1, width), axis=1), width)
    k, b, d = reference_parameters(jnp.repeat(family.solref, width, axis=0), jnp.repeat(family.solimp, width, axis=0),
                                   size, timestep)
    return J, -b * (J @ state.u) - k * d * r - bias, regularizer(d, invweight)
