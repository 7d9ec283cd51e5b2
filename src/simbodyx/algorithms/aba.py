"""Forward dynamics by the articulated-body method, O(n) (Featherstone,
RBDA Table 7.1; Jain 2011), all spatial quantities about Bo in G.

Inward, per body with padded H rows (6, 6) and mask m:
  P = M + sum Phi^T Pa_c Phi,  z = b - F_applied + sum Phi^T za_c
  U = P H^T,  D = H U + diag(1 - m),  u_bar = T - H z
  Pa = P - U D^-1 U^T,  za = z + Pa a_c + U D^-1 u_bar
Outward: A' = Phi A_P + a_c,  udot = D^-1 (u_bar - U^T A'),  A = A' + H^T udot.
The padded slots carry D = 1, u_bar = 0, so they produce udot = 0.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx import tree
from simbodyx.algorithms.per_body import (
    pad_u,
    parent_offsets,
    shift_matrix,
    spatial_inertias_in_ground,
    unpad_u,
)
from simbodyx.topology import Topology


class Articulated(eqx.Module):
    """Per-body results of the inward pass (all (nb, ...), in G about Bo)."""

    P: jnp.ndarray  #: (nb, 6, 6) articulated-body inertia
    z: jnp.ndarray  #: (nb, 6) articulated bias force
    U: jnp.ndarray  #: (nb, 6, 6) P H^T
    D_inv: jnp.ndarray  #: (nb, 6, 6)
    u_bar: jnp.ndarray  #: (nb, 6)


def spd_inverse(D):
    """Inverse of a small symmetric positive-definite matrix by Gauss-Jordan
    elimination without pivoting (safe for SPD), unrolled into elementwise
    operations that XLA fuses; a batched LAPACK call per matrix is far slower
    for the 6x6 blocks here."""
    n = D.shape[-1]
    A = jnp.concatenate([D, jnp.broadcast_to(jnp.eye(n, dtype=D.dtype), D.shape)], axis=-1)
    for k in range(n):
        row = A[..., k, :] / A[..., k, k:k + 1]
        A = A - A[..., :, k:k + 1] * row[..., None, :]
        A = A.at[..., k, :].set(row)
    return A[..., n:]


def _mm(a, b):
    """a @ b for small matrices as a broadcast product and sum, which XLA's
    CPU backend fuses (a batched dot call per 6x6 product is ~10x slower)."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def _mv(a, x):
    return jnp.sum(a * x[..., None, :], axis=-1)


def padded_H(topology: Topology, position):
    """(nb, 6, 6): each body's H_PB_G rows, zero rows in unused slots."""
    H = jnp.concatenate([position.H_PB_G, jnp.zeros((1, 6), position.H_PB_G.dtype)])
    return H[topology.u_pad_index]


def articulate(topology: Topology, instance, position, coriolis, bias_forces, mobility_forces):
    """The inward pass; ``bias_forces`` (nb, 6) is b - F_applied."""
    dtype = bias_forces.dtype
    M = spatial_inertias_in_ground(instance, position.X_GB)
    H = padded_H(topology, position)
    free = jnp.asarray(1.0 - topology.u_pad_mask, dtype)
    T = pad_u(topology, mobility_forces)
    Phi = shift_matrix(parent_offsets(topology, position.X_GB))

    def step(inputs, children):
        M_b, H_b, free_b, T_b, c_b, bias_b, Phi_b = inputs
        P_c, z_c = children
        P = M_b + P_c
        z = bias_b + z_c
        U = _mm(P, H_b.T)
        D_inv = spd_inverse(_mm(H_b, U) + jnp.diag(free_b))
        u_bar = T_b - _mv(H_b, z)
        UD = _mm(U, D_inv)
        Pa = P - _mm(UD, U.T)
        za = z + _mv(Pa, c_b) + _mv(UD, u_bar)
        out = Articulated(P=P, z=z, U=U, D_inv=D_inv, u_bar=u_bar)
        return out, (_mm(_mm(Phi_b.T, Pa), Phi_b), _mv(Phi_b.T, za))

    zero = (jnp.zeros((6, 6), dtype), jnp.zeros(6, dtype))
    art, _ = tree.inward(topology.schedule, step, (M, H, free, T, coriolis, bias_forces, Phi), zero)
    return art, H, Phi


def accelerate(topology: Topology, art: Articulated, H, Phi, coriolis):
    """The outward pass: (udot (nu,), A_GB (nb, 6))."""

    def step(A_P, inputs):
        Phi_b, c_b, H_b, U_b, D_inv_b, u_bar_b = inputs
        A_prime = _mv(Phi_b, A_P) + c_b
        udot = _mv(D_inv_b, u_bar_b - _mv(U_b.T, A_prime))
        return A_prime + _mv(H_b.T, udot), udot

    A, udot = tree.outward(
        topology.schedule, lambda A_P, x: step(A_P[0], x),
        (jnp.zeros(6, coriolis.dtype), jnp.zeros(6, coriolis.dtype)),
        (Phi, coriolis, H, art.U, art.D_inv, art.u_bar),
    )
    return unpad_u(topology, udot), A


def forward_dynamics(topology: Topology, instance, position, velocity, mobility_forces, body_forces):
    """udot (nu,) and A_GB (nb, 6) with no constraints: M udot = T + J^T F - f_inertial."""
    bias = velocity.gyroscopic - body_forces
    art, H, Phi = articulate(topology, instance, position, velocity.mobilizer_coriolis, bias, mobility_forces)
    return accelerate(topology, art, H, Phi, velocity.mobilizer_coriolis)


def multiply_by_m_inv(topology: Topology, instance, position, v):
    """M^-1 v (nu,), O(n): the articulated-body method with zero velocities and no body forces."""
    zeros = jnp.zeros((topology.num_bodies, 6), v.dtype)
    art, H, Phi = articulate(topology, instance, position, zeros, zeros, v)
    return accelerate(topology, art, H, Phi, zeros)[0]


def articulated_inertias(topology: Topology, instance, position):
    """(nb, 6, 6) articulated-body inertias P (Ground's row zero)."""
    zeros = jnp.zeros((topology.num_bodies, 6), position.X_GB.p.dtype)
    return articulate(topology, instance, position, zeros, zeros, jnp.zeros(topology.nu, zeros.dtype))[0].P
