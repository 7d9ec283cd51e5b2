"""The kinematic differential equations qdot = N(q) u and their relatives.

N is block diagonal, one (nq_b, nu_b) block per mobilizer, so every product
here is O(n): kinds with qdot = u copy, the others apply their blocks
vmapped per kind group. qdotdot = N udot + NDot u (spec/conventions.md).
The public functions are jitted (topology static) for fast eager calls;
inside a user's jit they are inlined.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.trace_context import per_context_jit
from simbodyx.mobilizers.orientation import Ball
from simbodyx.spatial.rotation import quaternion_to_matrix
from simbodyx.spatial.vectors import mat_vec, small_sum
from simbodyx.topology import Topology
from simbodyx.tree import take_rows


def _apply_blocks(topology: Topology, q, x, block, rows_are_q: bool, transpose: bool, qdot=None):
    """out = B x (or B^T x) for the block-diagonal B whose block per body is
    ``block(kind, q_b, qdot_b)``, with rows indexed by q (``rows_are_q``) or u."""
    rows_q = rows_are_q != transpose
    x = jnp.asarray(x, dtype=q.dtype)
    expected = topology.nu if rows_q else topology.nq
    if x.shape != (expected,):
        raise ValueError(f"input vector has shape {x.shape}, expected ({expected},)")
    per_group = []
    for group in topology.groups:
        x_g = take_rows(x, group.u_array if rows_q else group.q_array)
        if group.kind.qdot_is_u:
            y_g = jnp.zeros_like(x_g) if block is _n_dot else x_g
        else:
            q_g = take_rows(q, group.q_array)
            extra = q_g if qdot is None else take_rows(qdot, group.q_array)
            B = jax.vmap(lambda qb, eb, k=group.kind: block(k, qb, eb))(q_g, extra)
            y_g = mat_vec(jnp.swapaxes(B, -1, -2) if transpose else B, x_g)
        per_group.append(y_g)
    return topology.from_groups("q" if rows_q else "u", per_group, jnp.zeros((), x.dtype))


_jit = per_context_jit(functools.partial(jax.jit, static_argnames="topology"))
_jit_t = per_context_jit(functools.partial(jax.jit, static_argnames=("topology", "transpose")))


def _n(kind, q, _):
    return kind.N(q)


def _n_inv(kind, q, _):
    return kind.N_inv(q)


def _n_dot(kind, q, qdot):
    return kind.N_dot(q, qdot)


@_jit_t
def multiply_by_n(topology: Topology, q, u, transpose: bool = False):
    """N(q) u (nq,), or N^T f_q (nu,) with ``transpose`` (f_u = N^T f_q)."""
    return _apply_blocks(topology, q, u, _n, rows_are_q=True, transpose=transpose)


@_jit_t
def multiply_by_n_inv(topology: Topology, q, qdot, transpose: bool = False):
    """NInv(q) qdot (nu,), or NInv^T x (nq,) with ``transpose``."""
    return _apply_blocks(topology, q, qdot, _n_inv, rows_are_q=False, transpose=transpose)


@_jit_t
def multiply_by_n_dot(topology: Topology, q, u, x, transpose: bool = False):
    """NDot(q, u) x (nq,), or NDot^T x (nu,), with NDot = dN/dt along qdot = N u."""
    qdot = multiply_by_n(topology, q, u)
    return _apply_blocks(topology, q, x, _n_dot, rows_are_q=True, transpose=transpose, qdot=qdot)


@_jit
def calc_qdotdot(topology: Topology, q, u, udot):
    """qdotdot = N udot + NDot u."""
    return multiply_by_n(topology, q, udot) + multiply_by_n_dot(topology, q, u, u)


def _with_quaternions(topology: Topology, q, replace):
    """q with each group's quaternions in use (q rows ``idx``, (n, 4))
    replaced by ``replace(idx)`` (n, 4), q's other entries and the new
    quaternions put together by one static row selection, no scatter."""
    where, new = [], []
    for group in topology.groups:
        at = group.kind.quaternion_at
        if at is not None:
            idx = group.q_array[:, at:at + 4]
            new.append(replace(idx).reshape(-1))
            where.append(idx.reshape(-1))
    if not where:
        return q
    rows = np.concatenate(where)
    index = np.arange(q.shape[0])
    index[rows] = q.shape[0] + np.arange(rows.size)
    return take_rows(jnp.concatenate([q, *new]), index)


@_jit
def normalize_quaternions(topology: Topology, q):
    """q with every quaternion in use scaled to unit length."""

    def unit(idx):
        quat = take_rows(q, idx)
        return quat / jnp.sqrt(small_sum(quat * quat, -1))[:, None]

    return _with_quaternions(topology, q, unit)


def _quaternion_product(a, b):
    """Hamilton products a b of scalar-first quaternions (n, 4)."""
    w1, v1, w2, v2 = a[:, :1], a[:, 1:], b[:, :1], b[:, 1:]
    return jnp.concatenate([w1 * w2 - small_sum(v1 * v2, -1)[:, None],
                            w1 * v2 + w2 * v1 + jnp.cross(v1, v2)], axis=1)


@_jit
def advance_q(topology: Topology, q, u, h):
    """q advanced by h at constant generalized speeds u, MuJoCo's
    ``mj_integratePos``: q + h N(q) u, except that each quaternion turns
    exactly, by the rotation of angle h |w| about w that its rate
    qdot = N u describes (w = 2 qdot q* / |q|^2, in the frame the
    quaternion's rotation is measured from), so it stays unit."""
    qdot = multiply_by_n(topology, q, u)

    def turned(idx):
        quat, rate = take_rows(q, idx), take_rows(qdot, idx)
        conjugate = quat * jnp.asarray([1.0, -1.0, -1.0, -1.0], q.dtype)
        half = h * _quaternion_product(rate, conjugate)[:, 1:] / small_sum(quat * quat, -1)[:, None]
        angle = jnp.sqrt(small_sum(half * half, -1) + jnp.finfo(q.dtype).tiny)[:, None]
        return _quaternion_product(jnp.concatenate([jnp.cos(angle), half * jnp.sinc(angle / jnp.pi)], axis=1), quat)

    return _with_quaternions(topology, q + h * qdot, turned)


def angular_velocities_in_m(topology: Topology, q, u, back: bool = False):
    """u with each ball's and free joint's angular velocity (its first
    three u, w_FM in F) expressed in M, as MuJoCo's qvel holds it; with
    ``back``, from M to F. The same map takes udot to MuJoCo's qacc and a
    generalized force to MuJoCo's."""
    bodies = [b for b in topology.quaternion_bodies if isinstance(topology.kinds[b], Ball)]
    if not bodies:
        return u
    rows = np.asarray([topology.u_start[b] for b in bodies])[:, None] + np.arange(3)
    quaternions = q[np.asarray([topology.q_start[b] for b in bodies])[:, None] + np.arange(4)]
    R_FM = jax.vmap(quaternion_to_matrix)(quaternions)
    return u.at[rows].set(jnp.einsum("bij,bj->bi" if back else "bji,bj->bi", R_FM, u[rows]))
