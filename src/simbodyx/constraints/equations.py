"""The system's constraint equations: every constraint's errors stacked in
Simbody's order, and the operators G, G^T and b built on them.

Rows are ordered [P; V; A]: all holonomic rows (constraint by constraint),
then all nonholonomic rows, then all acceleration-only rows; multipliers
follow the same order. The acceleration-level errors are affine in
(A_GB, qdotdot, udot) and, through A_GB = J udot + JDot u and
qdotdot = N udot + NDot u, in udot:

    aerr(udot) = G udot - b,   b = -aerr(0)

so ``G v`` is their forward derivative along (J v, N v, v) and
``G^T lambda`` their transpose: body forces F (nb, 6) at each Bo in G,
q-space forces f_q and u-space forces f_u, which map to generalized forces
as J^T F + N^T f_q + f_u (O(n), no matrix formed). The explicit G uses
only the rows of J of the bodies the constraints push on. A constraint whose
Ancestor is a body sees kinematics relative to it; the transpose then
puts the reaction of its forces on the Ancestor, so they act only on the
mobilities between the Ancestor and the constrained bodies.
"""

from __future__ import annotations

import copy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx import tree
from simbodyx._xla.trace_context import per_context_jit
from simbodyx.algorithms import coordinates, jacobians, rnea
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.constraints.kinematics import Kinematics
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, mat_vec, shift_force
from simbodyx.state import State


class Layout:
    """Row offsets of each constraint's equations in the [P; V; A] order."""

    def __init__(self, constraints):
        self.mp = sum(c.mp for c in constraints)
        self.mv = sum(c.mv for c in constraints)
        self.ma = sum(c.ma for c in constraints)
        self.m = self.mp + self.mv + self.ma
        starts = np.cumsum([[0, 0, 0]] + [[c.mp, c.mv, c.ma] for c in constraints], axis=0)
        self.rows = tuple(
            np.concatenate([
                np.arange(starts[i, 0], starts[i + 1, 0]),
                self.mp + np.arange(starts[i, 1], starts[i + 1, 1]),
                self.mp + self.mv + np.arange(starts[i, 2], starts[i + 1, 2]),
            ]).astype(np.int32)
            for i in range(len(constraints))
        )
        #: (m,) the constraint owning each row
        self.owner = np.zeros(self.m, np.int32)
        for i, rows in enumerate(self.rows):
            self.owner[rows] = i

    def stack(self, per_constraint):
        """[P; V; A] from per-constraint (p, v, a) tuples."""
        parts = [x for level in range(3) for x in (pc[level] for pc in per_constraint)]
        return jnp.concatenate(parts) if parts else jnp.zeros(0)

    def enabled_rows(self, disabled):
        """(m,) 1.0 for rows of enabled constraints, 0.0 for disabled ones."""
        if disabled is None or self.m == 0:
            return None
        return 1.0 - jnp.asarray(disabled, jnp.float32)[self.owner]

    def zero_disabled(self, x, disabled):
        """x (k, ...), the first k rows of [P; V; A] (all m, or the holonomic
        mp, ...), with the rows of disabled constraints zeroed."""
        enabled = self.enabled_rows(disabled)
        if enabled is None:
            return x
        return x * enabled[:x.shape[0]].astype(x.dtype).reshape((-1,) + (1,) * (x.ndim - 1))


def _take_rows(X: Transform, index) -> Transform:
    """``X[index]`` for a static integer ``index``, as slices (``tree.take_rows``)."""
    return Transform(tree.take_rows(X.R, index), tree.take_rows(X.p, index))


def _relative(X_GA: Transform, V_GA, X_GB: Transform, V_GB=None):
    """(X_AB, V_AB) of bodies B relative to a moving frame A, in A."""
    R_AG = jnp.swapaxes(X_GA.R, -1, -2)
    X_AB = Transform(R_AG @ X_GB.R, mat_vec(R_AG, X_GB.p - X_GA.p))
    if V_GB is None:
        return X_AB, None
    w_A, r = V_GA[:3], X_GB.p - X_GA.p
    w = V_GB[:, :3] - w_A
    v = V_GB[:, 3:] - V_GA[3:] - cross(w_A, r)
    return X_AB, jnp.concatenate([mat_vec(R_AG, w), mat_vec(R_AG, v)], axis=-1)


def _relative_acceleration(X_GA, V_GA, A_GA, X_GB, V_GB, A_GB):
    """A_AB: d/dt in A of V_AB, expressed in A (Coriolis and transport terms included)."""
    R_AG = jnp.swapaxes(X_GA.R, -1, -2)
    w, r = V_GA[:3], X_GB.p - X_GA.p
    w_r = V_GB[:, :3] - w
    v_r = V_GB[:, 3:] - V_GA[3:] - cross(w, r)
    alpha = A_GB[:, :3] - A_GA[:3] - cross(w, w_r)
    a = A_GB[:, 3:] - A_GA[3:] - cross(A_GA[:3], r) - cross(w, cross(w, r)) - 2 * cross(w, v_r)
    return jnp.concatenate([mat_vec(R_AG, alpha), mat_vec(R_AG, a)], axis=-1)


def _alike(c):
    """A built-in constraint as every one of its kind: a copy whose static
    fields that only name it (index, label, bodies, mobilizers, Ancestor,
    handle) are its kind's, so that alike constraints (a mechanism's Rods,
    Balls or Welds, a brick's corner contacts) share one traced program of
    each level's errors (:func:`_position_level`, :func:`_velocity_level`,
    :func:`_acceleration_level`) and the derivatives, transposes and
    batches JAX caches for them; otherwise the trace of constrained
    dynamics grows by a few hundred ms per constraint. Kinds whose errors
    may read those fields (``Constraint.ALIKE`` false) are passed as they
    are."""
    if not type(c).ALIKE:
        return c
    alike = copy.copy(c)
    for field, value in (("index", 0), ("label", f"Constraint.{type(c).__name__}"), ("bodies", ()),
                         ("mobilizers", (0,) * len(c.mobilizers)), ("ancestor", 0), ("matter", None)):
        object.__setattr__(alike, field, value)
    return alike


@per_context_jit(eqx.filter_jit)
def _position_level(c, t, X_AB, q):
    """Constraint c's perr (mp,), jitted as :func:`_acceleration_level` is."""
    return c.position_level(t, X_AB, q)


@per_context_jit(eqx.filter_jit)
def _velocity_level(c, k: Kinematics):
    """Constraint c's (pverr (mp,), verr (mv,)), jitted as :func:`_acceleration_level` is."""
    return c.velocity_level(k, k.V_AB, k.qdot, k.u)


@per_context_jit(eqx.filter_jit)
def _acceleration_level(c, k: Kinematics, rows: tuple, ancestor, A, qdotdot: tuple, udot: tuple):
    """Constraint c's (paerr, vaerr, aerr) for its touched bodies' A_GB (t, 6)
    (its bodies at ``rows``; ``ancestor``: None, or the Ancestor's row and
    the poses and velocities that turn A_GB into A_AB) and its mobilizers'
    qdotdot and udot. Jitted so that each constraint's errors, and their
    derivatives and transposes, are traced once however often the
    equations use them (the nested derivatives are most of a trace)."""
    A_AB = A if rows == tuple(range(A.shape[0])) else tree.take_rows(A, rows)
    if ancestor is not None:
        row, X_GA, V_GA, X_GB, V_GB = ancestor
        A_AB = _relative_acceleration(X_GA, V_GA, A[row], X_GB, V_GB, A_AB)
    return c.acceleration_level(k, A_AB, qdotdot, udot)


class Equations:
    """One State's constraint equations (a trace-time helper, not a pytree).

    ``X_GB`` is the position cache's body poses; ``V_GB``, ``qdot`` and ``u``
    are needed from the velocity level on."""

    def __init__(self, topology, constraints, t, q, X_GB: Transform, *, V_GB=None, qdot=None, u=None):
        self.topology, self.constraints = topology, tuple(constraints)
        self.layout = Layout(self.constraints)
        self.t, self.q, self.X_GB, self.V_GB, self.qdot, self.u = t, q, X_GB, V_GB, qdot, u

    @classmethod
    def of_state(cls, state, constraints=None, velocity: bool = True) -> Equations:
        """The equations of a State realized to Position (its Instance-stage
        constraints unless ``constraints`` is given). Without the velocity
        level (or when ``velocity`` is False) velocities count as zero: G,
        which depends on q only, is still exact."""
        constraints = state.instance.constraints if constraints is None else constraints
        if not velocity:
            return cls(state.topology, constraints, state.t, state.q, state.position.X_GB)
        if not State.has(state, "velocity"):
            V = jnp.zeros((state.topology.num_bodies, 6), state.u.dtype)
            qdot, u = jnp.zeros_like(state.q), jnp.zeros_like(state.u)
        else:
            V, qdot, u = state.velocity.V_GB, state.velocity.qdot, state.u
        return cls(state.topology, constraints, state.t, state.q, state.position.X_GB, V_GB=V, qdot=qdot, u=u)

    # -- per-constraint gathering -------------------------------------------------------
    def _slices(self, c, x, start, size):
        top = self.topology
        return tuple(x[getattr(top, start)[b]:getattr(top, start)[b] + getattr(top, size)[b]] for b in c.mobilizers)

    def _q(self, c, x):
        return self._slices(c, x, "q_start", "body_nq")

    def _u(self, c, x):
        return self._slices(c, x, "u_start", "body_nu")

    def _bodies(self, c):
        return np.asarray(c.bodies, np.int32)

    def kinematics(self, c) -> Kinematics:
        """Constraint ``c``'s Kinematics at this State's level."""
        idx, a = self._bodies(c), c.ancestor
        X_GB = _take_rows(self.X_GB, idx)
        V_GB = None if self.V_GB is None else tree.take_rows(self.V_GB, idx)
        if a != 0:
            X_GA = self.X_GB[a]
            X_GB, V_GB = _relative(X_GA, None if self.V_GB is None else self.V_GB[a], X_GB, V_GB)
        if self.V_GB is None:
            return Kinematics(self.t, X_GB, self._q(c, self.q))
        return Kinematics(self.t, X_GB, self._q(c, self.q), V_GB, self._q(c, self.qdot), self._u(c, self.u))

    def _touched(self, c):
        """Static: the bodies whose accelerations c's errors read, sorted (its
        constrained bodies and its Ancestor), and where its bodies are among them."""
        touched = sorted({*c.bodies, c.ancestor})
        return touched, [touched.index(b) for b in c.bodies]

    def _acceleration_function(self, c):
        """(A_GB of c's touched bodies (t, 6), qdotdot (nq,), udot (nu,)) -> c's (paerr, vaerr, aerr)."""
        k, idx, a = self.kinematics(c), self._bodies(c), c.ancestor
        touched, rows = self._touched(c)
        ancestor = None if a == 0 else (touched.index(a), self.X_GB[a], self.V_GB[a], _take_rows(self.X_GB, idx),
                                        tree.take_rows(self.V_GB, idx))

        def f(A, qdotdot, udot):
            return _acceleration_level(_alike(c), k, tuple(rows), ancestor, A, self._q(c, qdotdot), self._u(c, udot))

        return f

    # -- stacked errors -------------------------------------------------------------------
    def position_errors(self):
        """perr (mp,) of every constraint."""
        parts = []
        for c in self.constraints:
            k = self.kinematics(c)
            parts.append(_position_level(_alike(c), self.t, k.X_AB, k.q))
        return jnp.concatenate(parts) if parts else jnp.zeros(0, self.t.dtype)

    def velocity_errors(self):
        """[pverr (mp,); verr (mv,)]."""
        per = []
        for c in self.constraints:
            k = self.kinematics(c)
            per.append(_velocity_level(_alike(c), k) + (jnp.zeros(0, self.t.dtype),))
        return self.layout.stack(per) if per else jnp.zeros(0, self.t.dtype)

    def acceleration_errors(self, A_GB, qdotdot, udot):
        """[paerr; vaerr; aerr] (m,) for the given accelerations."""
        per = [self._acceleration_function(c)(tree.take_rows(A_GB, self._touched(c)[0]), qdotdot, udot)
               for c in self.constraints]
        return self.layout.stack(per).astype(self.t.dtype) if per else jnp.zeros(0, self.t.dtype)

    # -- the operators G, b, G^T -----------------------------------------------------------
    def acceleration_errors_at(self, position, velocity, udot):
        """G udot - b, from the caches' Coriolis terms (A_GB and qdotdot of udot)."""
        top = self.topology
        A_GB = body_accelerations(top, position, udot, velocity.mobilizer_coriolis)
        return self.acceleration_errors(A_GB, coordinates.calc_qdotdot(top, self.q, self.u, udot), udot)

    def bias(self, position, velocity):
        """b (m,) = -aerr(udot = 0)."""
        return -self.acceleration_errors_at(position, velocity, jnp.zeros_like(self.u))

    def multiply_by_g(self, position, v):
        """G v (m,) for a u-like v: the linear part of the acceleration errors."""
        top = self.topology
        A = body_accelerations(top, position, v)
        qdd = coordinates.multiply_by_n(top, self.q, v)
        zeros = (jnp.zeros_like(A), jnp.zeros_like(qdd), jnp.zeros_like(v))
        return jax.jvp(self.acceleration_errors, zeros, (A, qdd, v))[1]

    def forces(self, multipliers):
        """G^T lambda as (body forces (nb, 6) at each Bo in G, q forces (nq,),
        mobility forces (nu,)), each constraint's share from its own rows."""
        shares = [self.constraint_forces(c, multipliers[rows]) for c, rows in zip(self.constraints, self.layout.rows)]
        if not shares:
            top, dtype = self.topology, self.X_GB.p.dtype
            return jnp.zeros((top.num_bodies, 6), dtype), jnp.zeros(top.nq, dtype), jnp.zeros(top.nu, dtype)
        return tuple(sum(parts[1:], parts[0]) for parts in zip(*shares))

    def constraint_forces(self, c, lam, bodies=None):
        """Constraint c's G^T lambda for its own multipliers ``lam``, as in
        ``forces``, with the body forces at ``bodies`` only (static; default:
        every body, (nb, 6))."""
        top, dtype = self.topology, self.X_GB.p.dtype
        bodies = list(range(top.num_bodies) if bodies is None else bodies)
        if c.constraint_forces is None:
            return self.transpose(c, lam, bodies)
        zeros = jnp.zeros((top.num_bodies, 6), dtype), jnp.zeros(top.nq, dtype), jnp.zeros(top.nu, dtype)
        F, fq, fu = self._add_override(c, lam, *zeros)
        return tree.take_rows(F, bodies), fq, fu

    def transpose(self, c, lam, bodies=None):
        """c's G^T lambda by differentiation: (F (nb, 6), f_q (nq,), f_u (nu,)) from a
        vector-Jacobian product of its acceleration-level errors (affine, so
        taken at zero) with respect to its touched bodies' accelerations; F
        at ``bodies`` only when given."""
        top, dtype = self.topology, self.X_GB.p.dtype
        touched, _ = self._touched(c)
        zeros = (jnp.zeros((len(touched), 6), dtype), jnp.zeros(top.nq, dtype), jnp.zeros(top.nu, dtype))
        f = self._acceleration_function(c)
        F, fq, fu = jax.vjp(lambda *x: jnp.concatenate(f(*x)), *zeros)[1](lam)
        bodies = range(top.num_bodies) if bodies is None else bodies
        return tree.take_rows(F, [touched.index(b) if b in touched else len(touched) for b in bodies]), fq, fu

    def _add_override(self, c, lam, F, fq, fu):
        """Add a hand-written constraint_forces: its A-frame body forces turned to G,
        with the reaction on the Ancestor, and its q and u forces scattered."""
        top, k, idx = self.topology, self.kinematics(c), self._bodies(c)
        F_A, f_q, f_u = c.constraint_forces(k, lam)
        F_A = jnp.reshape(jnp.asarray(F_A, F.dtype), (len(idx), 6))
        if c.ancestor != 0:
            X_GA = self.X_GB[c.ancestor]
            F_G = jnp.concatenate([mat_vec(X_GA.R, F_A[:, :3]), mat_vec(X_GA.R, F_A[:, 3:])], axis=-1)
            r = self.X_GB.p[idx] - X_GA.p  # move each to Ao: torque + r x f
            F = F.at[c.ancestor].add(-jnp.sum(shift_force(F_G, -r), axis=0))
        else:
            F_G = F_A
        F = F.at[idx].add(F_G)
        for b, x in zip(c.mobilizers, f_q if f_q is not None else ()):
            fq = fq.at[top.q_start[b]:top.q_start[b] + top.body_nq[b]].add(jnp.asarray(x, fq.dtype))
        for b, x in zip(c.mobilizers, f_u if f_u is not None else ()):
            fu = fu.at[top.u_start[b]:top.u_start[b] + top.body_nu[b]].add(jnp.asarray(x, fu.dtype))
        return F, fq, fu

    def generalized_forces(self, position, multipliers):
        """G^T lambda (nu,) = J^T F + N^T f_q + f_u."""
        F, fq, fu = self.forces(multipliers)
        top = self.topology
        return rnea.jacobian_transpose_times(top, position, F) + coordinates.multiply_by_n(top, self.q, fq, True) + fu

    def force_bodies(self):
        """The bodies other than Ground that constraint forces act on: the
        constrained bodies and the non-Ground Ancestors (static, sorted)."""
        return sorted({b for c in self.constraints for b in (*c.bodies, c.ancestor)} - {0})

    def swept_bodies(self):
        """The bodies at which some row's G^T e_i has body or mobility forces
        (``force_bodies`` and the constrained mobilizers), static and sorted."""
        return tuple(sorted(set(self.force_bodies()) | {b for c in self.constraints for b in c.mobilizers} - {0}))

    def row_forces(self):
        """Each row's forces G^T e_i, no sweep: body forces (m, s, 6) at the
        Bo in G of the s ``force_bodies`` (none act elsewhere but on Ground)
        and generalized mobility forces (m, nu) (N^T f_q + f_u). Each
        constraint is transposed for its own rows only, and only constraints
        with constrained mobilizers have q or u forces."""
        top, dtype = self.topology, self.X_GB.p.dtype
        bodies = self.force_bodies()
        F, G = [], []
        for c, rows in zip(self.constraints, self.layout.rows):
            F_c, fq, fu = jax.vmap(lambda lam, c=c: self.constraint_forces(c, lam, bodies))(
                jnp.eye(len(rows), dtype=dtype))
            F.append(F_c)
            if c.mobilizers:
                G.append(fu + jax.vmap(lambda f: coordinates.multiply_by_n(top, self.q, f, True))(fq))
            else:  # its errors read no qdotdot or udot
                G.append(jnp.zeros((len(rows), top.nu), dtype))
        if not F:
            return jnp.zeros((0, len(bodies), 6), dtype), jnp.zeros((0, top.nu), dtype)
        order = np.argsort(np.concatenate(self.layout.rows))  # constraint by constraint -> [P; V; A]
        return tuple(tree.take_rows(jnp.concatenate(x), order) for x in (F, G))

    def g_matrix(self, position):
        """G (m, nu): the rows' forces G^T e_i (``row_forces``) applied through
        the rows of J of the bodies they act on (``jacobians.body_jacobians``)."""
        top = self.topology
        F, G = self.row_forces()
        bodies = self.force_bodies()
        if bodies:
            J = jacobians.body_jacobians(top, position, bodies)  # (s, nu, 6)
            G = G + jnp.sum(F[:, :, None, :] * J[None], axis=(1, 3))  # a product and a sum, which XLA fuses
        return G


def constraint_forces_of(state, multipliers=None):
    """(body forces (nb, 6) at each Bo in G, mobility forces (nu,)): G^T lambda of
    a State's constraints for ``multipliers`` (default: the realized ones)."""
    if multipliers is None:
        multipliers = state.acceleration.multipliers
    top = state.topology
    if not state.instance.constraints:
        return jnp.zeros((top.num_bodies, 6), state.u.dtype), jnp.zeros(top.nu, state.u.dtype)
    F, fq, fu = Equations.of_state(state).forces(multipliers)
    return F, coordinates.multiply_by_n(top, state.q, fq, True) + fu


def net_applied_forces(state):
    """(mobility (nu,), body (nb, 6)) forces that move the bodies of an
    Acceleration-stage State: the applied ones minus the constraints' G^T lambda."""
    F_c, f_c = constraint_forces_of(state)
    return state.dynamics.mobility_forces - f_c, state.dynamics.body_forces - F_c
