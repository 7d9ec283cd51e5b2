"""Inverse dynamics by the recursive Newton-Euler method, O(n).

Outward: A_GB from udot (accelerations.py). Inward, per body about Bo in G:
F_B = M_B A_B + b_B - F_applied_B + sum over children of Phi(r_c)^T F_c,
then the residual f = H_PB_G F + diag(armature) udot - T
(spec/conventions.md: f_res = M udot + f_inertial - f_applied; the
armature is M's mobility-space part). The same inward sweep, with only
applied forces, is J^T F.
"""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx import tree
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.per_body import parent_offsets, spatial_inertias_in_ground
from simbodyx.spatial.vectors import mat_vec, shift_force
from simbodyx.topology import Topology


def shift_force_to_parent(F, r):
    """A spatial force at Bo moved to Po, r = p_PoBo: [t + r x f; f]."""
    return shift_force(F, -r)


def subtree_forces(topology: Topology, position, F_own):
    """(nb, 6): each body's own force plus its whole subtree's, at Bo, in G;
    and the sum over Ground's children moved to the Ground origin."""
    r = parent_offsets(topology, position.X_GB)

    def step(inputs, children):
        own, r_b = inputs
        total = own + children
        return total, shift_force_to_parent(total, r_b)

    return tree.inward(topology.schedule, step, (F_own, r), jnp.zeros(6, F_own.dtype), vectorized=True)


def project_onto_mobilities(topology: Topology, position, F):
    """(nu,): f_k = H_PB_G[k] . F_{body of k} for body-indexed spatial forces F."""
    return jnp.sum(position.H_PB_G * tree.take_rows(F, topology.u_body), axis=-1)


def jacobian_transpose_times(topology: Topology, position, body_forces):
    """J^T F (nu,): generalized forces of spatial forces (nb, 6) at Bo in G."""
    return project_onto_mobilities(topology, position, subtree_forces(topology, position, body_forces)[0])


def body_inertial_forces(instance, position, A_GB, gyroscopic=None):
    """(nb, 6): M_B A_B (+ b_B), about Bo in G."""
    M = spatial_inertias_in_ground(instance, position.X_GB)
    F = mat_vec(M, A_GB)
    return F if gyroscopic is None else F + gyroscopic


def with_rotors(instance, f, udot):
    """f + diag(armature) udot (nu,): the rotors' share of M udot, none without armature."""
    return f if instance.armature is None else f + instance.armature * udot


def residual_forces(topology: Topology, instance, position, velocity, udot, mobility_forces, body_forces):
    """f_res = M udot + f_inertial - J^T F - T (nu,); also returns A_GB."""
    A = body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)
    F_own = body_inertial_forces(instance, position, A, velocity.gyroscopic) - body_forces
    return with_rotors(instance, jacobian_transpose_times(topology, position, F_own), udot) - mobility_forces, A


def multiply_by_m(topology: Topology, instance, position, v):
    """M v (nu,), O(n): inverse dynamics with zero velocities and forces."""
    A = body_accelerations(topology, position, v)
    F = body_inertial_forces(instance, position, A)
    return with_rotors(instance, jacobian_transpose_times(topology, position, F), v)
