"""Forward dynamics by the articulated-body method, O(n) (Featherstone,
RBDA Table 7.1; Jain 2011), all spatial quantities about Bo in G.

Inward, per body with H rows (k, 6) (k: the widest mobilizer of the body's
tree segment; a body's unused rows are zero and marked by ``used``):
  P = M + sum Phi^T Pa_c Phi,  z = b - F_applied + sum Phi^T za_c
  U = P H^T,  D = H U + diag(armature + 1 - used),  u_bar = T - H z
  Pa = P - U D^-1 U^T,  za = z + Pa a_c + U D^-1 u_bar
Outward: A' = Phi A_P + a_c,  udot = D^-1 (u_bar - U^T A'),  A = A' + H^T udot.
Unused slots carry D = 1, u_bar = 0 and so produce udot = 0.

Pa is symmetrized at every body: without it, rounding asymmetry grows
geometrically down chains of multi-mobility joints (a 30-body Ball chain
had |M M^-1 - 1| = 2.6; with it, 1e-10, about cond(M) eps). Both sweeps
work in the tree's level layout (``tree.outward_levels``), so the
per-mobility quantities U, D^-1, u_bar pass from one to the other at their
natural width: a Pin chain's D is 1x1, not a padded 6x6. Once U and D^-1
are known, further solves with M (``solve``) need only the vector sweeps;
the derivative of forward dynamics uses that.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from simbodyx import tree
from simbodyx._xla import trace_context
from simbodyx._xla.module import Module
from simbodyx.algorithms import residual_tangent
from simbodyx.algorithms.accelerations import body_accelerations_tangent
from simbodyx.algorithms.kinematics import realize_position, realize_velocity, sum_per_body
from simbodyx.algorithms.per_body import (
    parent_offsets,
    shift_inertia_to_parent,
    spatial_inertias_in_ground,
)
from simbodyx.algorithms.rnea import multiply_by_m, residual_forces
from simbodyx.linalg import spd_inverse
from simbodyx.spatial.vectors import mat_mul, mat_vec, shift_force, shift_velocity
from simbodyx.topology import Topology


class Articulated(Module):
    """Per-body results of the inward pass, in the level layout (in G about Bo)."""

    r: tuple  #: (L, n, 3) p_PoBo
    H: tuple  #: (L, n, k, 6) H_PB_G rows
    c: tuple  #: (L, n, 6) mobilizer Coriolis acceleration
    P: tuple  #: (L, n, 6, 6) articulated-body inertia
    z: tuple  #: (L, n, 6) articulated bias force
    U: tuple  #: (L, n, 6, k) P H^T
    D_inv: tuple  #: (L, n, k, k)
    u_bar: tuple  #: (L, n, k)
    free: tuple | None = None  #: (L, n, k) 0 where a lock prescribes udot (None: no locks)


def articulate(topology: Topology, instance, position, coriolis, bias_forces, mobility_forces,
               free=None) -> Articulated:
    """The inward pass; ``bias_forces`` (nb, 6) is b - F_applied. ``free`` (nu,)
    is 0 for mobilities whose udot a lock prescribes: their H rows are dropped
    (the joint is rigid here; a prescribed nonzero udot belongs in ``coriolis``)
    and their slots behave like unused ones."""
    schedule = topology.schedule
    M = spatial_inertias_in_ground(instance, position.X_GB)
    r = parent_offsets(topology, position.X_GB)
    bodies = tree.to_levels(schedule, (r, M, coriolis, bias_forces))
    H_PB_G = position.H_PB_G if free is None else position.H_PB_G * free[:, None]
    H = tree.mobilities_to_levels(schedule, H_PB_G)
    T = tree.mobilities_to_levels(schedule, mobility_forces)
    used = tuple(jnp.asarray(s.u_used, r.dtype) for s in schedule.segments)
    free_levels = None
    if free is not None:
        free_levels = tuple(u * f for u, f in zip(used, tree.mobilities_to_levels(schedule, free)))
        used = free_levels
    added = tuple(1 - u for u in used)  # D's own diagonal: 1 on unused slots, the armature on used ones
    if instance.armature is not None:
        rotors = tree.mobilities_to_levels(schedule, instance.armature)
        added = tuple(d + a * u for d, a, u in zip(added, rotors, used))

    def step(inputs, children):
        (r_b, M_b, c_b, bias_b), H_b, used_b, added_b, T_b = inputs
        P_c, z_c = children
        P = M_b + P_c
        z = bias_b + z_c
        U = mat_mul(P, H_b, transpose_b=True)
        D_inv = spd_inverse(mat_mul(H_b, U) + added_b[..., None] * jnp.eye(added_b.shape[-1], dtype=U.dtype))
        u_bar = (T_b - mat_vec(H_b, z)) * used_b
        UD = mat_mul(U, D_inv)
        Pa = P - mat_mul(UD, U, transpose_b=True)
        Pa = 0.5 * (Pa + jnp.swapaxes(Pa, -1, -2))  # see the module notes
        za = z + mat_vec(Pa, c_b) + mat_vec(UD, u_bar)
        return (P, z, U, D_inv, u_bar), (shift_inertia_to_parent(Pa, r_b), shift_force(za, -r_b))

    dtype = bias_forces.dtype
    zero = (jnp.zeros((6, 6), dtype), jnp.zeros(6, dtype))
    out, _ = tree.inward_levels(schedule, step, tuple(zip(bodies, H, used, added, T)), zero, vectorized=True)
    P, z, U, D_inv, u_bar = (tuple(o[i] for o in out) for i in range(5))
    return Articulated(tuple(b[0] for b in bodies), H, tuple(b[2] for b in bodies), P, z, U, D_inv, u_bar,
                       free_levels)


def accelerate(topology: Topology, art: Articulated, dtype, with_coriolis=True):
    """The outward pass: (udot (nu,), A_GB (nb, 6))."""

    def step(A_P, inputs):
        r_b, c_b, H_b, U_b, D_inv_b, u_bar_b = inputs
        A_prime = shift_velocity(A_P, r_b) + c_b
        udot = mat_vec(D_inv_b, u_bar_b - mat_vec(U_b, A_prime, transpose=True))
        return A_prime + mat_vec(H_b, udot, transpose=True), udot

    schedule = topology.schedule
    root = jnp.zeros(6, dtype)
    c = art.c if with_coriolis else tuple(jnp.zeros_like(c) for c in art.c)
    A, udot = tree.outward_levels(schedule, step, root, tuple(zip(art.r, c, art.H, art.U, art.D_inv, art.u_bar)),
                                  vectorized=True)
    return tree.mobilities_from_levels(schedule, udot, jnp.zeros(0, dtype)), tree.from_levels(schedule, A, root)


def innovations(schedule: tree.TreeSchedule, art: Articulated, v, F=None, F_bodies=None):
    """The inward half of a solve with M, reusing ``art``: the innovations
    u_bar (level layout, per mobility slot) of the generalized forces
    v (nu,) plus J^T F for body forces F (nb, 6) at each Bo in G (or
    (len(F_bodies), 6) at the static ``F_bodies`` only).

    The articulated-body method factors M^-1 = L^T D^-1 L (the innovations
    factorization of Rodriguez, Jain and Kreutz-Delgado), u_bar = L (v + J^T F)
    being this pass, so ``innovation_product`` of two of them is
    (v + J^T F)^T M^-1 (w + J^T E) and ``respond`` to one is M^-1 (v + J^T F):
    the outward pass alone. Only vector sweeps run (no 6x6 algebra).
    ``schedule`` is the topology's, or one ``tree.restricted`` to the bodies
    where v and F are nonzero, with ``art`` in its layout (``restrict``):
    u_bar is then in that layout (``tree.expand_levels`` for ``respond``)."""

    def step(inputs, z_c):
        r_b, H_b, U_b, D_inv_b, v_b, *F_b = inputs
        z = z_c - F_b[0] if F_b else z_c  # z is b - F_applied, as in the articulation
        u_bar = v_b - mat_vec(H_b, z)
        za = z + mat_vec(U_b, mat_vec(D_inv_b, u_bar))
        return u_bar, shift_force(za, -r_b)

    v_levels = tree.mobilities_to_levels(schedule, v)
    if art.free is not None:  # prescribed (locked) udot stay zero
        v_levels = tuple(x * f for x, f in zip(v_levels, art.free))
    F_levels = () if F is None else (tree.to_levels(schedule, F, F_bodies),)
    inputs = (art.r, art.H, art.U, art.D_inv, v_levels) + F_levels
    u_bar, _ = tree.inward_levels(schedule, step, tuple(zip(*inputs)), jnp.zeros(6, v.dtype), vectorized=True)
    return u_bar


def restrict(art: Articulated, schedule: tree.TreeSchedule) -> Articulated:
    """``art`` in the layout of a ``tree.restricted`` schedule."""
    return Articulated(*(None if f is None else tree.restrict_levels(schedule, f)
                         for f in (art.r, art.H, art.c, art.P, art.z, art.U, art.D_inv, art.u_bar, art.free)))


def innovation_product(art: Articulated, a, b):
    """(m, p): sum over the mobilities of a_i D^-1 b_j for stacks of innovations
    a (m, ...) and b (p, ...) (level layout with a leading axis), that is
    g_i^T M^-1 h_j for the forces they came from."""
    total = 0.0
    for a_s, b_s, D_inv in zip(a, b, art.D_inv):
        x = mat_vec(D_inv, b_s)  # (p, L, n, k)
        total = total + jnp.sum(a_s[:, None] * x[None], axis=tuple(range(2, a_s.ndim + 1)))
    return total


def combine_innovations(weights, u_bars):
    """sum_i weights_i u_bar_i for stacked innovations (m, ...) and weights (m,)."""
    return jax.tree.map(lambda x: jnp.sum(weights.reshape((-1,) + (1,) * (x.ndim - 1)) * x, axis=0), u_bars)


def respond(topology: Topology, art: Articulated, u_bar, dtype):
    """The outward half of a solve with M: (M^-1 g (nu,), J M^-1 g (nb, 6)) for
    the innovations u_bar of g (``innovations``)."""
    return accelerate(topology, eqx.tree_at(lambda a: a.u_bar, art, u_bar), dtype, with_coriolis=False)


def solve(topology: Topology, art: Articulated, v):
    """M^-1 v (nu,) reusing the articulated quantities of ``art``: only the
    vector sweeps run (no 6x6 algebra)."""
    return respond(topology, art, innovations(topology.schedule, art, v), v.dtype)[0]


class ForwardInputs(NamedTuple):
    """What forward dynamics is a function of, as one record: a State's
    numbers, coordinates and kinematics, the applied forces and the locks."""

    instance: Any  #: the Model's numbers (Parameters)
    q: jnp.ndarray  #: (nq,)
    u: jnp.ndarray  #: (nu,)
    position: Any  #: the Position cache of (instance, q)
    velocity: Any  #: the Velocity cache of (instance, q, u)
    mobility_forces: jnp.ndarray  #: (nu,) T
    body_forces: jnp.ndarray  #: (nb, 6) F, in G about Bo
    #: (locked (nu,) 0/1, udot values (nu,)): the locks' prescribed udot (None: no locks)
    prescribed: tuple | None = None

    @classmethod
    def at(cls, state, mobility_forces=None, body_forces=None, prescribed=None) -> ForwardInputs:
        """The record of a State realized to Velocity; without forces, the
        applied forces of its Dynamics stage."""
        if mobility_forces is None and body_forces is None:
            mobility_forces, body_forces = state.dynamics.mobility_forces, state.dynamics.body_forces
        return cls(state.instance, state.q, state.u, state.position, state.velocity, mobility_forces, body_forces,
                   prescribed)


def forward_dynamics(topology: Topology, x: ForwardInputs):
    """udot (nu,) and A_GB (nb, 6) with no constraints: M udot = T + J^T F - f_inertial
    on the free mobilities. ``x.prescribed`` fixes the locked mobilities'
    udot (simbodyx.motion); the generalized forces that produce them are the
    inverse-dynamics residual there.

    Differentiated analytically (a custom JVP, so forward and reverse mode
    both work): the solution makes the inverse-dynamics residual
    f(x, udot) = M udot + f_inertial - T - J^T F vanish for the inputs x, so
    d udot = -M^-1 (df/dx dx), one linearized inverse dynamics and one
    articulated-body solve, instead of differentiating through the
    articulated-body recursion (Carpentier and Mansard 2018 take the same
    route). Reverse mode transposes both: the linearized inverse dynamics
    and a solve with M^-1 (M is symmetric). On bushy trees df/dx for q, u, T
    and F is ``residual_tangent``'s rigid-body-twist form, so the caches' own
    derivatives (the kinematics) are never differentiated: the derivative is
    that of a function of (instance, q, u, T, F), caches recomputed from them.
    Tangents of the Model's parameters go through the kinematics by autodiff.
    With locks, the solve acts on the free mobilities (M_ff), the prescribed
    udot's own tangents enter the residual, and the residual is linearized
    through the caches' tangents; so it is for trees with chain segments of
    more than ``residual_tangent.MAX_SEGMENT_LEVELS`` levels, where that is
    faster.
    """
    return _forward_dynamics(topology, x)


def articulate_with_locks(topology: Topology, x: ForwardInputs) -> Articulated:
    """The articulation for forward dynamics of ``x``: locked mobilities
    rigid, their prescribed udot moved into the Coriolis term."""
    coriolis, free = x.velocity.mobilizer_coriolis, None
    if x.prescribed is not None:
        locked, udot_p = x.prescribed
        coriolis = coriolis + sum_per_body(topology, x.position.H_PB_G, locked * udot_p)
        free = 1 - locked
    bias = x.velocity.gyroscopic - x.body_forces
    return articulate(topology, x.instance, x.position, coriolis, bias, x.mobility_forces, free)


@trace_context.custom_jvp(nondiff_argnums=(0,))
def _forward_dynamics(topology, x):
    return _solve_forward(topology, x)[:2]


def forward_dynamics_articulated(topology: Topology, x: ForwardInputs):
    """``forward_dynamics`` and the articulation it made: (udot, A_GB, Articulated),
    for further solves with M by ``symmetric_solve`` or the vector sweeps.
    For use inside a derivative rule of the caller's (constrained dynamics),
    which evaluates it without differentiating it: differentiating the rule
    (second derivatives) differentiates the method itself, the articulation
    included, as the tangents of its further uses need."""
    return _solve_forward(topology, x)


def _solve_forward(topology, x: ForwardInputs):
    with jax.named_scope("articulated_body_method"):  # names in the HLO, for benchmarks/profile_kernels.py
        art = articulate_with_locks(topology, x)
        udot, A_GB = accelerate(topology, art, x.body_forces.dtype)
    if x.prescribed is not None:
        locked, udot_p = x.prescribed
        udot = udot + locked * udot_p  # the articulation leaves locked slots at 0
    return udot, A_GB, art


def _is_zero(tangent):
    return isinstance(tangent, SymbolicZero)


def _instantiate(tangents):
    """Symbolic zero tangents as arrays of zeros."""
    return jax.tree.map(lambda t: jnp.zeros(t.shape, t.dtype) if _is_zero(t) else t, tangents, is_leaf=_is_zero)


def _forward_dynamics_jvp(topology, primals, tangents):
    """((udot, A_GB), their tangents) for the inputs x and their tangents dx:
    the rule of ``forward_dynamics``'s notes."""
    (x,), (dx,) = primals, tangents
    udot, A_GB, art = _solve_forward(topology, x)

    def residual(instance, position, velocity, mobility_forces, body_forces, udot):
        return residual_forces(topology, instance, position, velocity, udot, mobility_forces, body_forces)[0]

    with jax.named_scope("linearized_inverse_dynamics"):
        if x.prescribed is None and residual_tangent.applies(topology):
            q_dot, u_dot, T_dot, F_dot = _instantiate((dx.q, dx.u, dx.mobility_forces, dx.body_forces))
            f_dot = residual_tangent.residual_tangent(
                topology, x, udot, dx._replace(q=q_dot, u=u_dot, mobility_forces=T_dot, body_forces=F_dot))
            if not all(_is_zero(t) for t in jax.tree.leaves(dx.instance, is_leaf=_is_zero)):
                def through_kinematics(instance):  # the Model's parameters
                    position = realize_position(topology, instance, x.q)
                    velocity = realize_velocity(topology, instance, position, x.q, x.u)
                    return residual(instance, position, velocity, x.mobility_forces, x.body_forces, udot)

                f_dot = f_dot + jax.jvp(through_kinematics, (x.instance,), (_instantiate(dx.instance),))[1]
            udot_dot = -symmetric_solve(topology, x.instance, x.position, art, f_dot, None)
        else:  # through the caches' tangents; prescribed udot move with their own, the free rows of f stay 0
            free = None if x.prescribed is None else 1 - x.prescribed[0]
            udot_given = (jnp.zeros_like(udot) if x.prescribed is None
                          else x.prescribed[0] * _instantiate(dx.prescribed)[1])
            inputs = (x.instance, x.position, x.velocity, x.mobility_forces, x.body_forces, udot)
            input_tangents = _instantiate((dx.instance, dx.position, dx.velocity, dx.mobility_forces,
                                           dx.body_forces)) + (udot_given,)
            _, f_dot = jax.jvp(residual, inputs, input_tangents)
            udot_dot = udot_given - symmetric_solve(topology, x.instance, x.position, art, f_dot, free)
    A_dot = body_accelerations_tangent(topology, x.position, x.velocity, udot,
                                       *_instantiate((dx.position, dx.velocity)), udot_dot)
    return (udot, A_GB), (udot_dot, A_dot)


_forward_dynamics.defjvp(_forward_dynamics_jvp, symbolic_zeros=True)


def symmetric_solve(topology, instance, position, art, v, free):
    """solve(art, v) declared to JAX as the symmetric linear solve it is, so
    reverse mode transposes it by calling it again (JAX cannot transpose the
    scans of long chains inside a custom JVP rule by itself). With locks the
    operator is M_ff^-1 on the free rows and 0 on the locked ones; ``matvec``
    states its inverse (M_ff on free rows, identity on locked) for JAX's checks;
    ``free`` (nu,) is the articulation's free mask (None: no locks)."""

    def matvec(x):
        if free is None:
            return multiply_by_m(topology, instance, position, x)
        return free * multiply_by_m(topology, instance, position, free * x) + (1 - free) * x

    # The solution's derivative comes from matvec alone; without its own
    # tangent, art cannot leave JAX's rule with a symbolic-zero right-hand
    # side to solve (a TypeError in jax 0.6), as when only the applied forces
    # of a constrained model carry a tangent.
    art = jax.lax.stop_gradient(art)
    with jax.named_scope("solve_with_m"):
        return jax.lax.custom_linear_solve(matvec, v, lambda _, b: solve(topology, art, b), symmetric=True)


def multiply_by_m_inv(topology: Topology, instance, position, v):
    """M^-1 v (nu,), O(n): the articulated-body method with zero velocities and no body forces."""
    zeros = jnp.zeros((topology.num_bodies, 6), v.dtype)
    return accelerate(topology, articulate(topology, instance, position, zeros, zeros, v), v.dtype)[0]


def articulated_inertias(topology: Topology, instance, position):
    """(nb, 6, 6) articulated-body inertias P (Ground's row zero)."""
    dtype = position.X_GB.p.dtype
    zeros = jnp.zeros((topology.num_bodies, 6), dtype)
    art = articulate(topology, instance, position, zeros, zeros, jnp.zeros(topology.nu, dtype))
    return tree.from_levels(topology.schedule, art.P, jnp.zeros((6, 6), dtype))
