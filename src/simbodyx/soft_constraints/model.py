"""The soft constraints of one robot (``SoftConstraints``, the element a
Model holds) and the limits of its ball joints
(``simbodyx.soft_constraints``)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.crba import mass_matrix
from simbodyx.contact.detection import detect
from simbodyx.forces.compliant_contact import ContactForces
from simbodyx.soft_constraints.equalities import Connects, Couplings, Welds
from simbodyx.soft_constraints.rows import (Cones, Rows, contact_frames, point_jacobians, reference_parameters,
                                            regularizer)
from simbodyx.soft_constraints.solver import solve
from simbodyx.spatial.vectors import safe_norm
from simbodyx.stage import Stage
from simbodyx.state import State


class BallLimits(Module):
    """MuJoCo's limits of ball joints: for each, the angle of the joint's
    rotation (its quaternion q[``q_starts[i]``:+4], rad) at most ``range``
    (n,) less ``margin`` (n,): one row, -axis on the joint's three u
    (``u_starts[i]``; the rotation's axis is the same in F and M), its
    impedance from the violation. ``solref`` (n, 2), ``solimp`` (n, 5),
    ``invweight`` (n,)."""

    q_starts: tuple = eqx.field(static=True)
    u_starts: tuple = eqx.field(static=True)
    range: jnp.ndarray
    margin: jnp.ndarray
    solref: jnp.ndarray
    solimp: jnp.ndarray
    invweight: jnp.ndarray

    def rows(self, state: State, timestep):
        q = state.q[np.asarray(self.q_starts)[:, None] + np.arange(4)]
        w, v = q[:, 0], q[:, 1:]
        size = safe_norm(v, axis=1)
        angle = 2 * jnp.arctan2(size, jnp.abs(w))
        axis = jnp.where(w < 0, -1.0, 1.0)[:, None] * v / jnp.where(size > 0, size, 1.0)[:, None]
        violation = self.range - angle - self.margin
        active = violation < 0
        n = len(self.q_starts)
        J = jnp.zeros((n, state.topology.nu), q.dtype).at[np.arange(n)[:, None],
                                                          np.asarray(self.u_starts)[:, None] + np.arange(3)].set(
            -axis * active[:, None])
        k, b, d = reference_parameters(self.solref, self.solimp, violation, timestep)
        return J, -b * (J @ state.u) - k * d * violation * active, regularizer(d, self.invweight)


class SoftConstraints(Module):
    """MuJoCo's constraint model of one robot (module docstring), held by
    its Model (``model.soft_constraints``; set with
    ``matter.set_soft_constraints`` before ``realize_topology``), whose
    Acceleration stage solves it: every integrator, ``rollout``,
    ``sx.simulate`` and a loop of your own see the constrained
    accelerations. Built by ``sx.io.load_mjcf`` from a file's numbers.

    Contacts: the candidate point of ``surfaces`` (``groups``) on bodies
    ``contact_bodies`` (two static tuples, one entry per point), each with
    its pair's ``friction`` (n, 5: sliding twice, torsional, rolling twice,
    as MuJoCo's contact.friction), ``contact_solref`` (n, 2),
    ``contact_solimp`` (n, 5), ``contact_margin`` (m, margin less gap),
    ``contact_invweight`` (both bodies' translational inverse weight),
    ``dims`` (static: its condim, 1, 3, 4 or 6) and ``contact_axes``
    (static: the capsule surface whose axis seeds the tangents of a
    capsule-plane point, as MuJoCo's, else -1). Limits: length
    ``limit_q @ q`` (rad or m) within ``limit_range`` (nl, 2), Jacobian
    ``limit_u`` (nl, nu), with ``limit_margin``, ``limit_solref``,
    ``limit_solimp``, ``limit_invweight``. Friction loss: rows ``loss_u``
    (nf, nu), ``loss`` (N or N m), ``loss_solref``, ``loss_solimp``,
    ``loss_invweight``; the rows of a ball's or free joint's rotational dofs
    (MuJoCo's, about the body's axes) turn with it: ``loss_turning`` (static)
    holds for each (row, body, k, its joint's first u) and the row is then
    row k of R_MF on the joint's three angular u. Ball joints' limits:
    ``ball_limits``. Equalities: ``connects``, ``welds``, ``couplings``
    (None: none). ``timestep`` (s) the file's, which floors the time
    constants; ``impratio``; ``mean_inertia`` scales the solver's
    ``tolerance``; ``iterations`` bounds its Newton steps."""

    surfaces: tuple
    groups: tuple = eqx.field(static=True)
    contact_bodies: tuple = eqx.field(static=True)
    dims: tuple = eqx.field(static=True)
    contact_axes: tuple = eqx.field(static=True)
    friction: jnp.ndarray
    contact_solref: jnp.ndarray
    contact_solimp: jnp.ndarray
    contact_margin: jnp.ndarray
    contact_invweight: jnp.ndarray
    limit_q: jnp.ndarray
    limit_u: jnp.ndarray
    limit_range: jnp.ndarray
    limit_margin: jnp.ndarray
    limit_solref: jnp.ndarray
    limit_solimp: jnp.ndarray
    limit_invweight: jnp.ndarray
    loss_u: jnp.ndarray
    loss: jnp.ndarray
    loss_solref: jnp.ndarray
    loss_solimp: jnp.ndarray
    loss_invweight: jnp.ndarray
    timestep: jnp.ndarray
    impratio: jnp.ndarray
    mean_inertia: jnp.ndarray
    connects: Connects | None = None
    welds: Welds | None = None
    couplings: Couplings | None = None
    ball_limits: BallLimits | None = None
    loss_turning: tuple = eqx.field(static=True, default=())
    elliptic: bool = eqx.field(static=True, default=False)
    iterations: int = eqx.field(static=True, default=100)
    tolerance: float = eqx.field(static=True, default=1e-8)

    # -- rows ----------------------------------------------------------------------------------
    def _contact_rows(self, state: State):
        """((J, aref, R) of the pyramid edges, by dimension, then the
        frictionless points' rows; the elliptic cones, one term per
        dimension; the contact points with their tangents and surface pairs)."""
        position, u = state.position, state.u
        c, first, second, _ = detect(self.surfaces, self.groups, position.X_GB)
        J_rel = (point_jacobians(state, self.contact_bodies[1], c.location)
                 - point_jacobians(state, self.contact_bodies[0], c.location))  # (n, nu, 6): [w; v] of 2 in 1
        axes = np.asarray(self.contact_axes, np.int32)
        seed = jnp.zeros_like(c.normal)
        if np.any(axes >= 0):  # a capsule on a plane: its axis, as MuJoCo's
            capsules = [self.surfaces[i] for i in axes[axes >= 0]]
            R_BS = jnp.stack([surface.X_BS.R for surface in capsules])
            R_GS = jnp.einsum("nij,njk->nik", position.X_GB.R[np.array([x.body for x in capsules])], R_BS)
            seed = seed.at[np.flatnonzero(axes >= 0)].set(R_GS[:, :, 2])
        t1, t2 = contact_frames(c.normal, seed)
        frame = jnp.stack([c.normal, t1, t2], axis=1)  # (n, 3, 3): rows n, t1, t2
        # (n, 6, nu): sliding along n, t1, t2, then turning about them (torsion, rolling)
        J_frame = jnp.concatenate([jnp.einsum("nij,nuj->niu", frame, J_rel[..., 3:]),
                                   jnp.einsum("nij,nuj->niu", frame, J_rel[..., :3])], axis=1)
        violation = -c.depth - self.contact_margin  # MuJoCo's dist less its margin, < 0 where it acts
        active = (violation < 0)[:, None]
        J_frame = J_frame * active[:, :, None]
        k, b, d = reference_parameters(self.contact_solref, self.contact_solimp, violation, self.timestep)
        R_n = regularizer(d, self.contact_invweight)
        kdr = jnp.where(active[:, 0], k * d * violation, 0.0)
        dims = np.asarray(self.dims)
        contacts = (c, t1, t2, first, second)
        parts, cones = [], []
        for dim in sorted(set(dims.tolist()) - {1}):
            P = np.flatnonzero(dims == dim)
            f = self.friction[P, :dim - 1]
            if self.elliptic:  # one cone: rows n, then the frictions'; those with aref -b J u and R_1 mu_1^2 / mu_j^2
                J_c = J_frame[P, :dim]
                normal = jnp.zeros(dim, kdr.dtype).at[0].set(1.0)  # only the normal row has k d r
                aref_c = -b[P, None] * jnp.einsum("ckn,n->ck", J_c, u) - normal * kdr[P, None]
                R_1 = R_n[P] / self.impratio
                R = jnp.concatenate([R_n[P, None], R_1[:, None] * f[:, :1] ** 2 / f ** 2], axis=1)
                cones.append(Cones(J_c, aref_c, 1 / R, f[:, 0] / jnp.sqrt(self.impratio), f))
                continue
            # pyramid edges J_n +- f_k J_k, k = 1 ... dim - 1, all of one R
            J_k, f_k = J_frame[P, 1:dim], f[:, :, None]
            edges = jnp.stack([J_frame[P, :1] + f_k * J_k, J_frame[P, :1] - f_k * J_k], axis=2)  # (m, dim-1, 2, nu)
            J = edges.reshape(P.size * 2 * (dim - 1), -1)
            R = regularizer(d[P], 2 * f[:, 0] ** 2 * (1 + f[:, 0] ** 2) / self.impratio * self.contact_invweight[P])
            width = 2 * (dim - 1)
            parts.append((J, -jnp.repeat(b[P], width) * (J @ u) - jnp.repeat(kdr[P], width), jnp.repeat(R, width)))
        N = np.flatnonzero(dims == 1)
        J = J_frame[N, 0]
        parts.append((J, -b[N] * (J @ u) - kdr[N], R_n[N]))
        return tuple(jnp.concatenate(column) for column in zip(*parts)), tuple(cones), contacts

    def _limit_rows(self, state: State):
        length = self.limit_q @ state.q
        below, above = length - self.limit_range[:, 0], self.limit_range[:, 1] - length
        violation = jnp.minimum(below, above) - self.limit_margin
        sign = jnp.where(below < above, 1.0, -1.0) * (violation < 0)
        J = self.limit_u * sign[:, None]
        k, b, d = reference_parameters(self.limit_solref, self.limit_solimp, violation, self.timestep)
        R = regularizer(d, self.limit_invweight)
        return J, -b * (J @ state.u) - k * d * violation * (violation < 0), R

    def _loss_rows(self, state: State):
        zero = jnp.zeros_like(self.loss)
        _, b, d = reference_parameters(self.loss_solref, self.loss_solimp, zero, self.timestep)
        R = regularizer(d, self.loss_invweight)
        J = self.loss_u
        if self.loss_turning:  # a ball's or free joint's rotational dof: row k of R_MF on the joint's angular u
            row, body, k, column = (np.asarray(c) for c in zip(*self.loss_turning))
            J = J.at[row[:, None], column[:, None] + np.arange(3)].set(
                state.position.X_FM.R[body, :, k])
        return J, -b * (J @ state.u), R

    def terms(self, state: State) -> tuple:
        """The constraint's terms at a State realized to Velocity: its
        :class:`Rows` (the equalities' (connects, welds, couplings),
        friction loss, limits, ball joints' limits, then the contacts':
        the pyramid edges of the frictional points, by their dimension
        and in their order, two per friction, then a row per frictionless
        point), and with elliptic cones (``elliptic``) the frictional
        points as :class:`Cones`, one term per dimension."""
        return self._terms(state)[0]

    def _terms(self, state: State):
        """(the terms, the contact points with their tangents and surface pairs)."""
        contact_rows, cones, contacts = self._contact_rows(state)
        equalities = [family.rows(state, self.timestep) for family in (self.connects, self.welds, self.couplings)
                      if family is not None]
        ne = sum(J.shape[0] for J, _, _ in equalities)
        balls = [] if self.ball_limits is None else [self.ball_limits.rows(state, self.timestep)]
        groups = [*equalities, self._loss_rows(state), self._limit_rows(state), *balls, contact_rows]
        J, aref, R = (jnp.concatenate(parts) for parts in zip(*groups))
        nf = self.loss.shape[0]
        inf = jnp.full(J.shape[0] - ne - nf, jnp.inf, R.dtype)
        both = jnp.full(ne, jnp.inf, R.dtype)  # an equality's force has either sign
        reach = R[ne:ne + nf] * self.loss
        rows = Rows(J, aref, R, jnp.concatenate([-both, -reach, -inf]),
                    jnp.concatenate([both, reach, jnp.zeros_like(inf)]))
        return (rows, *cones), contacts

    # -- dynamics ------------------------------------------------------------------------------
    def accelerations(self, state: State, udot0):
        """(nu,) the constrained accelerations at a State realized to
        Velocity whose unconstrained ones (the Model's forces alone) are
        ``udot0``: the Acceleration stage's solve."""
        M = mass_matrix(state.topology, state.instance, state.position)
        scale = 1 / (self.mean_inertia * max(1, state.topology.nu))
        return solve(M, udot0, self.terms(state), self.tolerance, self.iterations, scale)

    def _solved(self, model, state: State):
        """(the terms at a State, each term's forces at its constrained
        accelerations, the contact points with their tangents and surface
        pairs)."""
        s = model.realize(state, Stage.Acceleration)
        terms, contacts = self._terms(s)
        return terms, [term.forces_at(s.acceleration.udot) for term in terms], contacts

    def constraint_forces(self, model, state: State):
        """(nu,) the generalized forces of the constraints at a State,
        J' f (N or N m per mobility; M (udot - udot0) at the solution)."""
        terms, forces, _ = self._solved(model, state)
        return sum(term.transposed(f) for term, f in zip(terms, forces))

    def contact_forces(self, model, state: State) -> ContactForces:
        """Every candidate contact point's location, normal (from surface 1
        into 2), depth (m, the overlap; MuJoCo's contact acts from its
        pair's margin apart) and force (N, on surface 2, in G: a pyramid's
        edge forces f_e give the normal force sum f_e and the tangential
        mu_1 (f_1 - f_2) t1 + mu_2 (f_3 - f_4) t2; an elliptic cone's,
        f_n n + f_1 t1 + f_2 t2; the torques of torsional and rolling
        friction are not reported), at the constrained accelerations of a
        State, as MuJoCo's ``mj_contactForce``; zero where a point is
        apart."""
        terms, forces, (c, t1, t2, first, second) = self._solved(model, state)
        dims = np.asarray(self.dims)
        on_points = jnp.zeros_like(c.location)
        frictional = sorted(set(dims.tolist()) - {1})
        edge_rows = 0 if self.elliptic else sum(2 * (dim - 1) * int(np.sum(dims == dim)) for dim in frictional)
        f = forces[0][terms[0].J.shape[0] - edge_rows - int(np.sum(dims == 1)):]  # the contacts' rows
        for k, dim in enumerate(frictional):
            P = np.flatnonzero(dims == dim)
            if self.elliptic:
                normal, slides = forces[1 + k][:, 0], forces[1 + k][:, 1:3]
            else:
                edges = f[:P.size * 2 * (dim - 1)].reshape(P.size, dim - 1, 2)
                f = f[P.size * 2 * (dim - 1):]
                normal = jnp.sum(edges, axis=(1, 2))
                slides = self.friction[P, :2] * (edges[:, :2, 0] - edges[:, :2, 1])
            on_points = on_points.at[P].set(normal[:, None] * c.normal[P] + slides[:, :1] * t1[P]
                                            + slides[:, 1:] * t2[P])
        N = np.flatnonzero(dims == 1)
        on_points = on_points.at[N].set(f[:, None] * c.normal[N])
        return ContactForces(c.location, c.normal, c.depth, on_points, tuple(first.tolist()), tuple(second.tolist()))
