"""The terms of MuJoCo's constraint problem (``simbodyx.soft_constraints``):
a row's impedance, regularizer and reference acceleration from its
solref and solimp, contact tangents, point Jacobians, and the two kinds
of term the solve minimizes over: scalar :class:`Rows` and elliptic
:class:`Cones`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.jacobians import body_jacobians
from simbodyx.spatial.vectors import cross, safe_norm, shift_velocity
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

    # the terms of the solve, at accelerations a (nu,)
    def cost_at(self, a):
        return self.cost(self.J @ a - self.aref)

    def derivatives(self, a):
        """(gradient (nu,), Hessian (nu, nu)) of the rows' cost at accelerations a."""
        x = self.J @ a - self.aref
        return -self.transposed(self.forces(x)), (self.J.T * jnp.where(self.quadratic(x), 1 / self.R, 0.0)) @ self.J

    def forces_at(self, a):
        """(nr,) the rows' forces at accelerations a."""
        return self.forces(self.J @ a - self.aref)

    def transposed(self, f):
        """(nu,) J' f: the generalized forces of row forces f."""
        return self.J.T @ f

    def line(self, a, p):
        """slope(alpha): the first and second derivatives of the cost along p from a."""
        Jp, x0 = self.J @ p, self.J @ a - self.aref

        def slope(alpha):
            x = x0 + alpha * Jp
            return -self.forces(x) @ Jp, jnp.sum(jnp.where(self.quadratic(x), Jp * Jp / self.R, 0.0))

        return slope


class Cones(Module):
    """Contacts of one dimension (3, 4 or 6) with MuJoCo's elliptic friction
    cone, at one State: for each, the rows ``J`` (nc, dim, nu) (normal,
    the two tangents, then torsion and rolling), reference accelerations
    ``aref`` (nc, dim), ``D`` (nc, dim) their 1 / R, the regularized cone's
    ``mu`` (nc,) and the ``friction`` (nc, dim - 1) of each other row.
    At x = J a - aref, with N = mu x_0 and T = |friction x_t|, a contact
    costs nothing where N >= mu T (apart, or sticking inside the cone),
    1/2 sum D x^2 where mu N + T <= 0, and 1/2 D_0 / (mu^2 (1 + mu^2))
    (N - mu T)^2 between (sliding on the cone), as MuJoCo's."""

    J: jnp.ndarray
    aref: jnp.ndarray
    D: jnp.ndarray
    mu: jnp.ndarray
    friction: jnp.ndarray

    def costs(self, x):
        """(nc,) each contact's cost at x (nc, dim)."""
        return jax.vmap(_cone_cost)(x, self.D, self.mu, self.friction)

    def forces(self, x):
        """(nc, dim) each contact's forces (normal, then the frictions') at x: minus the cost's gradient."""
        return -jax.vmap(jax.grad(_cone_cost))(x, self.D, self.mu, self.friction)

    def residual(self, a):
        return jnp.einsum("ckn,n->ck", self.J, a) - self.aref

    def forces_at(self, a):
        """(nc, dim) the cones' forces at accelerations a."""
        return self.forces(self.residual(a))

    def transposed(self, f):
        """(nu,) the generalized forces of cone forces f (nc, dim)."""
        return jnp.einsum("ckn,ck->n", self.J, f)

    def cost_at(self, a):
        return jnp.sum(self.costs(self.residual(a)))

    def derivatives(self, a):
        """(gradient (nu,), Hessian (nu, nu)) of the cones' cost at accelerations a."""
        g, H = self._slopes(self.residual(a))
        return self.transposed(g), jnp.einsum("ckn,ckl,clm->nm", self.J, H, self.J)

    def line(self, a, p):
        """slope(alpha): the first and second derivatives of the cost along p from a."""
        Jp, x0 = jnp.einsum("ckn,n->ck", self.J, p), self.residual(a)

        def slope(alpha):
            g, H = self._slopes(x0 + alpha * Jp)
            return jnp.sum(g * Jp), jnp.einsum("ck,ckl,cl->", Jp, H, Jp)

        return slope

    def _slopes(self, x):
        """(gradients (nc, dim), Hessians (nc, dim, dim)) of each contact's cost at x, in one pass."""
        gradient = jax.grad(_cone_cost)

        def both(x, D, mu, friction):
            H, g = jax.jacfwd(lambda y: (gradient(y, D, mu, friction),) * 2, has_aux=True)(x)
            return g, H

        return jax.vmap(both)(x, self.D, self.mu, self.friction)


def _cone_cost(x, D, mu, friction):
    """One elliptic contact's cost at x (dim,) (:class:`Cones`)."""
    N, tangential = mu * x[0], friction * x[1:]
    T = safe_norm(tangential)
    sliding = 0.5 * D[0] / (mu ** 2 * (1 + mu ** 2)) * (N - mu * T) ** 2
    pressing = 0.5 * jnp.sum(D * x * x)
    return jnp.where(N >= mu * T, 0.0, jnp.where(mu * N + T <= 0, pressing, sliding))
