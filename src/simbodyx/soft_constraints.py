"""MuJoCo's constraint model for robots from MJCF files: contacts, joint and
tendon limits, dof friction loss and equality constraints (connect, weld,
joint and fixed-tendon couplings) as soft constraints, solved as one
convex problem in the Model's Acceleration stage (``SoftConstraints``,
``model.soft_constraints``), so every integrator steps them.
``sx.io.load_mjcf`` builds them from a file's own numbers, and
``robot.stepper`` (``sx.integrate.MuJoCoStepper``) steps them as MuJoCo
does, so the robot moves as its authors tuned it, at the file's own time
step.

Each evaluation, at (q, u), with the Model's forces (gravity, springs,
dampers, actuators, controls) giving the unconstrained accelerations a0 and
the mass matrix M (armature included), finds

    a = argmin_a  1/2 (a - a0)' M (a - a0) + sum_i s_i(J_i a - aref_i)

(MuJoCo's primal problem). Row i has Jacobian J_i (1/s per unit u),
regularizer R_i = (1 - d) / d A_i and reference acceleration
aref_i = -b (J_i u) - k d r_i, from its violation r_i (m or rad; < 0 when
violated), its solref (time constant, at least twice ``timestep``, and
damping ratio: k and b) and solimp (the impedance d(|r|)), A_i an
approximate inverse inertia (MuJoCo's ``dof_invweight0``,
``body_invweight0`` and ``tendon_invweight0``). s_i is R_i^-1 x^2 / 2 where
row i pushes and zero where it would pull (a contact's pyramid edge, a
limit): its force is -x / R_i there; a friction-loss row's force is that
too, clipped to its frictionloss. A contact of condim 3 has four rows, the
edges J_n +- mu J_t1 and J_n +- mu J_t2 of MuJoCo's pyramid (tangents as
MuJoCo's ``mju_makeFrame`` builds them, a plane-capsule point's seeded by
the capsule's axis; R = 2 mu^2 (1 + mu^2) R_n / impratio, R_n a
frictionless row's); of condim 1, its normal row. A contact exists where the surfaces are within
the pair's margin less its gap, and its rows act only there. An equality's
rows act always, with either sign, their impedance from the length of
the equality's whole violation (three rows of a connect, six of a weld),
and a connect's or weld's aref less the part of its violation's second
derivative that udot does not give (MuJoCo's Jdot v), so that the rows
follow the reference.

The problem is strictly convex and piecewise quadratic; Newton's method
with an exact line search (the root of the cost's piecewise-linear slope,
bracketed) solves it to the file's tolerance in a few iterations, as
MuJoCo's Newton solver does. Its derivative is the implicit one: one more
Newton step taken from the solution with the rows that push there held,
whose value is the solution and whose derivative with respect to q, u,
the forces and the Model's parameters is exact wherever the set of
pushing, sticking and sliding rows does not change. A contact row starts
to act with a force set by its approach speed (aref's -b J u), a jump in
time: a step in which a contact begins is differentiated with that
moment held, as an impulsive stepper's step is without localized impacts.

Not modelled (``load_mjcf`` says which of a file's elements it left out):
elliptic friction cones, condim 4 and 6, equalities that start inactive
or hold spatial tendons or flexes, spatial tendons, tendons' friction
loss, adhesion.
A Model with soft constraints has no Simbody constraints or Motions
(``realize_topology`` says so where it would).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.crba import mass_matrix
from simbodyx.algorithms.jacobians import body_jacobians
from simbodyx.contact.detection import detect
from simbodyx.forces.compliant_contact import ContactForces
from simbodyx.spatial.rotation import matrix_to_quaternion, skew
from simbodyx.spatial.vectors import cross, safe_norm, shift_velocity
from simbodyx.stage import Stage
from simbodyx.state import State

#: MuJoCo's bounds on an impedance and its smallest positive number
MIN_IMPEDANCE, MAX_IMPEDANCE, MIN_VALUE = 0.0001, 0.9999, 1e-15
#: bracketed Newton iterations of the exact line search (each halves the bracket at worst)
LINE_SEARCH_ITERATIONS = 50


def reference_parameters(solref, solimp, violation, timestep):
    """(k, b, d) of constraint rows: stiffness k (1/s^2) and damping b (1/s)
    of the reference acceleration and the impedance d in (0, 1) at
    ``violation`` (m or rad), MuJoCo's: solref (time constant, damping
    ratio), its time constant at least 2 ``timestep``, or (-stiffness,
    -damping) directly; solimp (d0, dmax, width, midpoint, power)."""
    timeconst, ratio = solref[..., 0], solref[..., 1]
    timeconst = jnp.where(timeconst > 0, jnp.maximum(timeconst, 2 * timestep), timeconst)
    d0 = jnp.clip(solimp[..., 0], MIN_IMPEDANCE, MAX_IMPEDANCE)
    dmax = jnp.clip(solimp[..., 1], MIN_IMPEDANCE, MAX_IMPEDANCE)
    width = jnp.maximum(solimp[..., 2], MIN_VALUE)
    mid = jnp.clip(solimp[..., 3], MIN_IMPEDANCE, MAX_IMPEDANCE)
    power = jnp.maximum(solimp[..., 4], 1.0)
    standard = timeconst > 0
    safe_tc = jnp.where(standard, timeconst, 1.0)
    safe_ratio = jnp.where(ratio > 0, ratio, 1.0)
    k = jnp.where(standard, 1 / (dmax ** 2 * safe_tc ** 2 * safe_ratio ** 2), -timeconst / dmax ** 2)
    b = jnp.where(ratio > 0, 2 / (dmax * safe_tc), -ratio / dmax)
    x = jnp.minimum(jnp.abs(violation) / width, 1.0)
    rising = x ** power / mid ** (power - 1)
    settling = 1 - (1 - x) ** power / (1 - mid) ** (power - 1)
    d = d0 + jnp.where(x < mid, rising, settling) * (dmax - d0)
    return k, b, jnp.clip(d, MIN_IMPEDANCE, MAX_IMPEDANCE)


def regularizer(d, invweight):
    """MuJoCo's R = (1 - d) / d A of rows of impedance d and approximate
    inverse inertia A, at least its smallest positive number."""
    return jnp.maximum((1 - d) / d * invweight, MIN_VALUE)


def contact_frames(normal, seed):
    """(t1, t2) (n, 3) tangents of unit normals (n, 3) as MuJoCo's
    ``mju_makeFrame``: t1 the part of ``seed`` (n, 3) normal to n, or where
    the seed is zero, of y (z where |n_y| >= 1/2); t2 = n x t1."""
    axis = jnp.where((jnp.abs(normal[:, 1]) < 0.5)[:, None], jnp.array([0.0, 1.0, 0.0], normal.dtype),
                     jnp.array([0.0, 0.0, 1.0], normal.dtype))
    seed = jnp.where((jnp.sum(seed * seed, axis=1) < 0.25)[:, None], axis, seed)
    t1 = seed - jnp.sum(seed * normal, axis=1, keepdims=True) * normal
    t1 = t1 / jnp.linalg.norm(t1, axis=1, keepdims=True)
    return t1, cross(normal, t1)


def point_jacobians(state: State, bodies, points):
    """(n, nu, 3): the velocity in G of each point (n, 3) (m, in G) fixed on
    its body of ``bodies`` (n,) (static indices) per unit u; zero on Ground."""
    bodies = np.asarray(bodies, np.int32)
    moving = np.unique(bodies[bodies > 0])
    position = state.position
    if not moving.size:
        return jnp.zeros((len(bodies), state.topology.nu, 6), points.dtype)
    rows = np.searchsorted(moving, bodies).clip(max=moving.size - 1)  # a Ground point's row is masked below
    J_B = body_jacobians(state.topology, position, moving)[rows]  # (n, nu, 6) at Bo, in G
    J_B = J_B * jnp.asarray(bodies > 0, J_B.dtype)[:, None, None]
    r = points - position.X_GB.p[bodies]
    return shift_velocity(J_B, r[:, None, :])


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
        J, r, bias = _point_rows(state, self.bodies, self.anchors)
        return _equality_rows(state, J, r, bias, self, timestep, width=3, invweight=jnp.repeat(self.invweight, 3))


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
        J_p, r_p, bias_p = _point_rows(state, self.bodies, self.anchors)  # (3n, nu), (3n,), (3n,)
        X, V = state.position.X_GB, state.velocity.V_GB
        first, second = (np.asarray([pair[k] for pair in self.bodies], np.int32) for k in (0, 1))
        R_1 = jnp.einsum("nij,njk->nik", X.R[first], self.frames[:, 0])
        R_2 = jnp.einsum("nij,njk->nik", X.R[second], self.frames[:, 1])
        e = matrix_to_quaternion(jnp.einsum("nji,njk->nik", R_2, R_1))
        w, v = e[:, :1, None], e[:, 1:]
        # v's rate: 1/2 (w I - [v]x) c, c = R_2' (omega_1 - omega_2)
        omega = _angular_jacobians(state, first) - _angular_jacobians(state, second)  # (n, nu, 3)
        A = 0.5 * (w * jnp.eye(3, dtype=e.dtype) - skew(v)) @ jnp.swapaxes(R_2, 1, 2)
        scale = self.torquescale[:, None]
        J_r = scale[:, :, None] * jnp.einsum("nij,nuj->niu", A, omega)
        # the rate's part free of udot: 1/2 (w I - [v]x) R_2' (alpha_1 - alpha_2 - omega_2 x (omega_1 -
        # omega_2)) - |c|^2 v / 4, alpha the angular accelerations at udot = 0
        A0 = _bias_accelerations(state)
        difference = V[first, :3] - V[second, :3]
        c = jnp.einsum("nji,nj->ni", R_2, difference)
        bias_r = scale * (jnp.einsum("nij,nj->ni", A, A0[first, :3] - A0[second, :3]
                                     - cross(V[second, :3], difference)) - 0.25 * jnp.sum(c * c, axis=1)[:, None] * v)
        n, nu = len(self.bodies), state.topology.nu
        J = jnp.concatenate([J_p.reshape(n, 3, nu), J_r], axis=1).reshape(6 * n, nu)
        r = jnp.concatenate([r_p.reshape(n, 3), scale * v], axis=1).reshape(6 * n)
        bias = jnp.concatenate([bias_p.reshape(n, 3), bias_r], axis=1).reshape(6 * n)
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


def _point_rows(state: State, bodies, anchors):
    """(J (3n, nu), r (3n,), the rows' rate of J u at udot = 0 (3n,)): the rows
    holding anchor 1 of each body pair on anchor 2."""
    X, V = state.position.X_GB, state.velocity.V_GB
    A0 = _bias_accelerations(state)
    first, second = (np.asarray([pair[k] for pair in bodies], np.int32) for k in (0, 1))
    points, biases = [], []
    for side, which in ((first, 0), (second, 1)):
        r = jnp.einsum("nij,nj->ni", X.R[side], anchors[:, which])  # from Bo, in G
        w = V[side, :3]
        points.append(X.p[side] + r)
        biases.append(A0[side, 3:] + cross(A0[side, :3], r) + cross(w, cross(w, r)))
    J = (point_jacobians(state, first, points[0]) - point_jacobians(state, second, points[1]))[..., 3:]  # (n, nu, 3)
    return (jnp.swapaxes(J, 1, 2).reshape(-1, state.topology.nu), (points[0] - points[1]).reshape(-1),
            (biases[0] - biases[1]).reshape(-1))


def _bias_accelerations(state: State):
    """(nb, 6) A_GB at udot = 0 (the velocity-product part), in G."""
    return body_accelerations(state.topology, state.position, jnp.zeros_like(state.u),
                              state.velocity.mobilizer_coriolis)


def _angular_jacobians(state: State, bodies):
    """(n, nu, 3): each body's angular velocity in G per unit u; zero on Ground."""
    return point_jacobians(state, bodies, state.position.X_GB.p[np.asarray(bodies, np.int32)])[..., :3]


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


class Rows(Module):
    """Constraint rows at one State: ``J`` (nr, nu), reference accelerations
    ``aref`` (nr,), regularizers ``R`` (nr,) and the interval [``lower``,
    ``upper``] of each row's J a - aref within which its force -x / R is
    not clipped (-inf, 0 for rows that only push; +-R f for friction loss
    f)."""

    J: jnp.ndarray
    aref: jnp.ndarray
    R: jnp.ndarray
    lower: jnp.ndarray
    upper: jnp.ndarray

    def forces(self, x):
        """(nr,) each row's force at x = J a - aref."""
        return -jnp.clip(x, self.lower, self.upper) / self.R

    def quadratic(self, x):
        """(nr,) whether each row's cost is quadratic (its force unclipped) at x."""
        return (x > self.lower) & (x < self.upper)

    def cost(self, x):
        """Sum of the rows' costs s_i at x (the integral of minus their forces)."""
        inner = jnp.clip(x, self.lower, self.upper)
        return jnp.sum((inner * (2 * x - inner)) / (2 * self.R))


def solve(M, a0, rows: Rows, tolerance, iterations: int, scale):
    """The accelerations a (nu,) minimizing 1/2 (a - a0)' M (a - a0) plus the
    rows' costs, by Newton's method with an exact line search, from a0,
    until the gradient's norm or a step's decrease of the cost, times
    ``scale`` (1 / (mean inertia * nu), as MuJoCo's), is below
    ``tolerance``, or after ``iterations``; its derivative is the implicit
    one (module docstring)."""
    problem = jax.lax.stop_gradient((M, a0, rows))
    a = jax.lax.stop_gradient(_minimize(*problem, tolerance, iterations, scale))
    return a + _newton_step(M, a0, rows, a)[0]


def _cost(M, a0, rows: Rows, a):
    return 0.5 * (a - a0) @ (M @ (a - a0)) + rows.cost(rows.J @ a - rows.aref)


def _newton_step(M, a0, rows: Rows, a):
    """(Newton's step p from a, the cost's gradient g at a)."""
    x = rows.J @ a - rows.aref
    g = M @ (a - a0) - rows.J.T @ rows.forces(x)
    H = M + (rows.J.T * jnp.where(rows.quadratic(x), 1 / rows.R, 0.0)) @ rows.J
    return -jsl.cho_solve(jsl.cho_factor(H), g), g


def _line_search(M, a0, rows: Rows, a, p):
    """The step length alpha >= 0 minimizing the cost along p from a: the
    root of its slope (nondecreasing, piecewise linear, at least
    p' M p alpha above its value at 0), by Newton's method on the slope
    kept inside a shrinking bracket, from alpha = 1 (Newton's full step,
    the root when no row changes its piece)."""
    Jp = rows.J @ p
    x0 = rows.J @ a - rows.aref
    linear, curvature = p @ (M @ (a - a0)), p @ (M @ p)

    def slope(alpha):  # the cost's first and second derivatives along p
        x = x0 + alpha * Jp
        return (linear + alpha * curvature - rows.forces(x) @ Jp,
                curvature + jnp.sum(jnp.where(rows.quadratic(x), Jp * Jp / rows.R, 0.0)))

    start = slope(0.0)[0]
    high = jnp.where(start < 0, -start / jnp.maximum(curvature, MIN_VALUE), 0.0)  # the slope is >= 0 there
    alpha = jnp.minimum(1.0, high)

    eps = 4 * jnp.finfo(a.dtype).eps

    def searching(carry):
        i, alpha, low, high, d1, _ = carry
        return (i < LINE_SEARCH_ITERATIONS) & (high - low > eps * high) & (jnp.abs(d1) > eps * jnp.abs(start))

    def narrow(carry):
        i, alpha, low, high, d1, d2 = carry
        low, high = jnp.where(d1 < 0, alpha, low), jnp.where(d1 < 0, high, alpha)
        newton = alpha - d1 / jnp.maximum(d2, MIN_VALUE)
        alpha = jnp.where((newton > low) & (newton < high), newton, 0.5 * (low + high))
        return i + 1, alpha, low, high, *slope(alpha)

    return jax.lax.while_loop(searching, narrow, (0, alpha, jnp.zeros_like(high), high, *slope(alpha)))[1]


def _minimize(M, a0, rows: Rows, tolerance, iterations: int, scale):
    def improving(carry):
        i, _, _, g, _, decrease = carry
        return (i < iterations) & (scale * jnp.linalg.norm(g) > tolerance) & (scale * decrease > tolerance)

    def iterate(carry):
        i, a, p, _, cost, _ = carry
        a = a + _line_search(M, a0, rows, a, p) * p
        p, g = _newton_step(M, a0, rows, a)
        new_cost = _cost(M, a0, rows, a)
        return i + 1, a, p, g, new_cost, cost - new_cost

    p, g = _newton_step(M, a0, rows, a0)
    start = (0, a0, p, g, _cost(M, a0, rows, a0), jnp.asarray(jnp.inf, a0.dtype))
    return jax.lax.while_loop(improving, iterate, start)[1]


class SoftConstraints(Module):
    """MuJoCo's constraint model of one robot (module docstring), held by
    its Model (``model.soft_constraints``; set with
    ``matter.set_soft_constraints`` before ``realize_topology``), whose
    Acceleration stage solves it: every integrator, ``rollout``,
    ``sx.simulate`` and a loop of your own see the constrained
    accelerations. Built by ``sx.io.load_mjcf`` from a file's numbers.

    Contacts: the candidate point of ``surfaces`` (``groups``) on bodies
    ``contact_bodies`` (two static tuples, one entry per point), each with
    its pair's ``friction`` (sliding), ``contact_solref`` (n, 2),
    ``contact_solimp`` (n, 5), ``contact_margin`` (m, margin less gap),
    ``contact_invweight`` (both bodies' translational inverse weight) and
    ``frictional`` (static: condim 3, else 1) and ``contact_axes``
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
    frictional: tuple = eqx.field(static=True)
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
    iterations: int = eqx.field(static=True, default=100)
    tolerance: float = eqx.field(static=True, default=1e-8)

    # -- rows ----------------------------------------------------------------------------------
    def _contact_rows(self, state: State):
        position, u = state.position, state.u
        c, first, second, _ = detect(self.surfaces, self.groups, position.X_GB)
        J_rel = (point_jacobians(state, self.contact_bodies[1], c.location)
                 - point_jacobians(state, self.contact_bodies[0], c.location))[..., 3:]
        axes = np.asarray(self.contact_axes, np.int32)
        seed = jnp.zeros_like(c.normal)
        if np.any(axes >= 0):  # a capsule on a plane: its axis, as MuJoCo's
            capsules = [self.surfaces[i] for i in axes[axes >= 0]]
            R_BS = jnp.stack([surface.X_BS.R for surface in capsules])
            R_GS = jnp.einsum("nij,njk->nik", position.X_GB.R[np.array([x.body for x in capsules])], R_BS)
            seed = seed.at[np.flatnonzero(axes >= 0)].set(R_GS[:, :, 2])
        t1, t2 = contact_frames(c.normal, seed)
        J_n, J_1, J_2 = (jnp.einsum("nuk,nk->nu", J_rel, axis) for axis in (c.normal, t1, t2))
        violation = -c.depth - self.contact_margin  # MuJoCo's dist less its margin, < 0 where it acts
        active = (violation < 0)[:, None]
        k, b, d = reference_parameters(self.contact_solref, self.contact_solimp, violation, self.timestep)
        R_n = regularizer(d, self.contact_invweight)
        mu = self.friction[:, None]
        frictional = np.asarray(self.frictional, bool)
        edges = jnp.stack([J_n + mu * J_1, J_n - mu * J_1, J_n + mu * J_2, J_n - mu * J_2], axis=1)
        R_edge = regularizer(d, 2 * self.friction ** 2 * (1 + self.friction ** 2) / self.impratio
                             * self.contact_invweight)
        F, N = np.flatnonzero(frictional), np.flatnonzero(~frictional)
        J = jnp.concatenate([(edges[F] * active[F, None]).reshape(-1, J_n.shape[1]), J_n[N] * active[N]])
        R = jnp.concatenate([jnp.repeat(R_edge[F], 4), R_n[N]])
        kdr = jnp.where(active[:, 0], k * d * violation, 0.0)
        aref = -jnp.concatenate([jnp.repeat(b[F], 4), b[N]]) * (J @ u) - jnp.concatenate([jnp.repeat(kdr[F], 4),
                                                                                             kdr[N]])
        return (J, aref, R), (c, t1, t2, first, second)

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

    def rows(self, state: State) -> Rows:
        """The constraint rows at a State realized to Velocity: the
        equalities' (connects, welds, couplings), friction loss, limits,
        ball joints' limits, then the contacts' (four pyramid edges per frictional point, in
        ``frictional``'s order, then a row per frictionless one)."""
        return self._rows(state)[0]

    def _rows(self, state: State):
        """(the rows, the contact points with their tangents and surface pairs)."""
        contact_rows, contacts = self._contact_rows(state)
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
        return Rows(J, aref, R, jnp.concatenate([-both, -reach, -inf]),
                    jnp.concatenate([both, reach, jnp.zeros_like(inf)])), contacts

    # -- dynamics ------------------------------------------------------------------------------
    def accelerations(self, state: State, udot0):
        """(nu,) the constrained accelerations at a State realized to
        Velocity whose unconstrained ones (the Model's forces alone) are
        ``udot0``: the Acceleration stage's solve."""
        M = mass_matrix(state.topology, state.instance, state.position)
        scale = 1 / (self.mean_inertia * max(1, state.topology.nu))
        return solve(M, udot0, self.rows(state), self.tolerance, self.iterations, scale)

    def _solved(self, model, state: State):
        """(the rows at a State, their forces at its constrained
        accelerations, the contact points with their tangents and surface pairs)."""
        s = model.realize(state, Stage.Acceleration)
        rows, contacts = self._rows(s)
        return rows, rows.forces(rows.J @ s.acceleration.udot - rows.aref), contacts

    def constraint_forces(self, model, state: State):
        """(nu,) the generalized forces of the constraint rows at a State,
        J' f (N or N m per mobility; M (udot - udot0) at the solution)."""
        rows, f, _ = self._solved(model, state)
        return rows.J.T @ f

    def contact_forces(self, model, state: State) -> ContactForces:
        """Every candidate contact point's location, normal (from surface 1
        into 2), depth (m, the overlap; MuJoCo's contact acts from its
        pair's margin apart) and force (N, on surface 2, in G: a frictional
        point's pyramid edge forces f_e give the normal force sum f_e and
        the tangential mu (f_1 - f_2) t1 + mu (f_3 - f_4) t2), at the
        constrained accelerations of a State, as MuJoCo's
        ``mj_contactForce``; zero where a point is apart."""
        rows, f, (c, t1, t2, first, second) = self._solved(model, state)
        frictional = np.asarray(self.frictional, bool)
        F, N = np.flatnonzero(frictional), np.flatnonzero(~frictional)
        f = f[rows.J.shape[0] - (4 * F.size + N.size):]
        edges = f[:4 * F.size].reshape(-1, 4)
        mu = self.friction[F][:, None]
        on_points = jnp.zeros_like(c.location)
        on_points = on_points.at[F].set(jnp.sum(edges, axis=1)[:, None] * c.normal[F]
                                        + mu * (edges[:, 0] - edges[:, 1])[:, None] * t1[F]
                                        + mu * (edges[:, 2] - edges[:, 3])[:, None] * t2[F])
        on_points = on_points.at[N].set(f[4 * F.size:, None] * c.normal[N])
        return ContactForces(c.location, c.normal, c.depth, on_points, tuple(first.tolist()), tuple(second.tolist()))
