"""Assembly: Simbody's Assembler with its Markers and QValue conditions.

Where ``project`` expects a State close to its constraint manifold,
``Assembler.assemble`` starts from any guess. It satisfies the *required*
conditions (by default the system's position constraints; any condition
adopted with weight ``inf``) to ``error_tolerance`` and, among those
configurations, minimizes the weighted sum of the *goals* (conditions with
finite weights): 1/2 sum_i w_i |r_i(q)|^2 for each goal's residuals r_i.

Each iteration is a damped Gauss-Newton step on the goals subject to the
linearized required conditions (a sequential-quadratic step), taken in
u-space on the free mobilities and mapped to q by N, with quaternions
normalized afterwards:

    min |J_g du + g|^2 + mu |du|^2   subject to   J_c du = -c

solved in the least-squares sense (redundant conditions are fine). A step
is taken when it lowers the merit 1/2 |g|^2 + 1/2 rho |c|^2 (rho = 1e6);
then mu (Levenberg-Marquardt's damping) shrinks and the step's fraction
grows back towards 1; a refused step grows mu and halves the fraction. Locked q
are never moved; restricted q are clipped to their ranges.

Pure and batchable: ``assemble`` is a ``lax.while_loop`` and returns its
status as arrays, so a vmapped batch of guesses assembles under one
compile. It is not differentiable (use ``project`` from an assembled State
for derivatives).
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.faults import fault_if
from simbodyx._xla.module import Module
from simbodyx.algorithms import coordinates
from simbodyx.builder.mobilized_body import MobilizedBody
from simbodyx.projection import ProjectStatus, enabled_position_errors
from simbodyx.stage import Stage
from simbodyx.state import State

#: penalty on the required conditions in the merit that accepts or refuses a step
_MERIT_PENALTY = 1e6


def _body_index(body, what: str) -> int:
    if isinstance(body, MobilizedBody):
        return body.index
    if isinstance(body, (int, np.integer)):
        return int(body)
    raise TypeError(f"{what}: expected a MobilizedBody handle or index, got {type(body).__name__}")


class Markers(Module):
    """Simbody's AssemblyCondition::Markers: stations fixed on bodies that should
    sit at observed locations in Ground; residual sqrt(w) (p_GS - observation)
    per marker (3 each)."""

    bodies: tuple = eqx.field(static=True)
    names: tuple = eqx.field(static=True)
    stations: jnp.ndarray  #: (k, 3) in each body's frame
    weights: jnp.ndarray  #: (k,)
    observations: jnp.ndarray  #: (k, 3) in Ground

    def __init__(self, markers, observations=None):
        """``markers``: (name, body, station) or (name, body, station, weight)
        tuples; ``observations`` (k, 3), default at the origin (set them with
        ``move_all_observations``)."""
        markers = list(markers)
        if not markers:
            raise ValueError("Markers: needs at least one marker")
        names, bodies, stations, weights = [], [], [], []
        for m in markers:
            if len(m) not in (3, 4):
                raise ValueError(f"Markers: each marker is (name, body, station[, weight]); got {m!r}")
            name, body, station = m[0], m[1], np.asarray(m[2], float)
            weight = float(m[3]) if len(m) == 4 else 1.0
            if station.shape != (3,) or not np.all(np.isfinite(station)):
                raise ValueError(f"Markers: marker {name!r}: station must be 3 finite numbers, got {m[2]!r}")
            if not weight >= 0:
                raise ValueError(f"Markers: marker {name!r}: weight must be >= 0, got {weight}")
            names.append(str(name))
            bodies.append(_body_index(body, f"Markers: marker {name!r}"))
            stations.append(station)
            weights.append(weight)
        if len(set(names)) != len(names):
            raise ValueError(f"Markers: marker names must be unique, got {names}")
        self.names, self.bodies = tuple(names), tuple(bodies)
        self.stations, self.weights = np.stack(stations), np.asarray(weights)
        self.observations = np.zeros((len(names), 3)) if observations is None else self._checked(observations)

    def _checked(self, observations):
        observations = jnp.asarray(observations)
        if observations.shape != (len(self.names), 3):
            raise ValueError(f"Markers: observations must have shape ({len(self.names)}, 3), got {observations.shape}")
        return observations

    def move_all_observations(self, observations) -> Markers:
        """These markers observed at ``observations`` (k, 3) in Ground."""
        return eqx.tree_at(lambda m: m.observations, self, self._checked(observations))

    def get_marker_index(self, name: str) -> int:
        return self.names.index(name)

    def residuals(self, s: State):
        p = s.position.X_GB[np.asarray(self.bodies)].apply(jnp.asarray(self.stations, s.q.dtype))
        return (jnp.sqrt(jnp.asarray(self.weights, s.q.dtype))[:, None] * (p - self.observations)).reshape(-1)


class QValue(Module):
    """Simbody's AssemblyCondition::QValue: one q of one mobilizer should equal
    ``value``; residual q - value."""

    body: int = eqx.field(static=True)
    which_q: int = eqx.field(static=True)
    value: jnp.ndarray

    def __init__(self, body, which_q: int, value):
        self.body, self.which_q = _body_index(body, "QValue"), int(which_q)
        self.value = np.asarray(float(value))

    def residuals(self, s: State):
        top = s.topology
        return (s.q[top.q_start[self.body] + self.which_q] - self.value)[None]


class AssembleResults(Module):
    """Status (a ProjectStatus), the required conditions' error norm (RMS or
    infinity), the goal 1/2 sum w |r|^2, and the iterations used."""

    status: jnp.ndarray
    error_norm: jnp.ndarray
    goal: jnp.ndarray
    num_iterations: jnp.ndarray

    @property
    def succeeded(self):
        return self.status == ProjectStatus.Succeeded


class Assembler(Module):
    """Simbody's Assembler over a Model: settings return a new Assembler.

    ``assembler.assemble(state)`` -> (State realized through Position,
    AssembleResults)."""

    model: object
    conditions: tuple = ()
    weights: tuple = eqx.field(static=True, default=())
    system_constraints_weight: float = eqx.field(static=True, default=math.inf)
    accuracy: float = eqx.field(static=True, default=1e-3)
    error_tolerance: float = eqx.field(static=True, default=0.0)
    use_rms_error_norm: bool = eqx.field(static=True, default=True)
    locked_q: frozenset = eqx.field(static=True, default=frozenset())
    ranges: tuple = eqx.field(static=True, default=())  #: (q index, lower, upper)
    max_iterations: int = eqx.field(static=True, default=100)

    # -- settings (Simbody's names) ------------------------------------------------------
    def set_accuracy(self, accuracy: float = 0.0) -> Assembler:
        """Relative change of the goal at which to stop (0: the default 1e-3)."""
        if not 0 <= accuracy < 1:
            raise ValueError(f"Assembler: accuracy must be in [0, 1), got {accuracy}")
        return dataclasses.replace(self, accuracy=float(accuracy) or 1e-3)

    def set_error_tolerance(self, tolerance: float = 0.0) -> Assembler:
        """Norm the required conditions must reach (0: accuracy / 10)."""
        if not tolerance >= 0:
            raise ValueError(f"Assembler: error tolerance must be >= 0, got {tolerance}")
        return dataclasses.replace(self, error_tolerance=float(tolerance))

    def get_error_tolerance_in_use(self) -> float:
        return self.error_tolerance if self.error_tolerance > 0 else self.accuracy / 10

    def get_accuracy_in_use(self) -> float:
        return self.accuracy

    def set_system_constraints_weight(self, weight: float) -> Assembler:
        """inf (default): constraints required; finite: a goal; 0: ignored."""
        return dataclasses.replace(self, system_constraints_weight=_weight(weight))

    def set_use_rms_error_norm(self, use_rms: bool) -> Assembler:
        return dataclasses.replace(self, use_rms_error_norm=bool(use_rms))

    def adopt_assembly_goal(self, condition, weight: float = 1.0) -> Assembler:
        """Add a Markers or QValue condition: a goal with a finite weight, required with inf."""
        if not isinstance(condition, (Markers, QValue)):
            raise TypeError(f"Assembler: expected Markers or QValue, got {type(condition).__name__}")
        return dataclasses.replace(self, conditions=self.conditions + (condition,),
                                   weights=self.weights + (_weight(weight),))

    def update_condition(self, index: int, condition) -> Assembler:
        """Replace condition ``index`` (e.g. Markers with new observations); no recompile."""
        conditions = list(self.conditions)
        conditions[index] = condition
        return dataclasses.replace(self, conditions=tuple(conditions))

    def lock_mobilizer(self, body) -> Assembler:
        b = self._body(body)
        top = self.model.topology
        return self._lock(range(top.q_start[b], top.q_start[b] + top.body_nq[b]), True)

    def unlock_mobilizer(self, body) -> Assembler:
        b = self._body(body)
        top = self.model.topology
        return self._lock(range(top.q_start[b], top.q_start[b] + top.body_nq[b]), False)

    def lock_q(self, body, which_q: int) -> Assembler:
        return self._lock([self._q_index(body, which_q, "lock_q")], True)

    def unlock_q(self, body, which_q: int) -> Assembler:
        return self._lock([self._q_index(body, which_q, "unlock_q")], False)

    def restrict_q(self, body, which_q: int, lower: float, upper: float) -> Assembler:
        """Keep one q within [lower, upper] during assembly."""
        i = self._q_index(body, which_q, "restrict_q")
        if not lower <= upper:
            raise ValueError(f"Assembler.restrict_q: need lower <= upper, got {lower} > {upper}")
        ranges = tuple(r for r in self.ranges if r[0] != i) + ((i, float(lower), float(upper)),)
        return dataclasses.replace(self, ranges=ranges)

    def unrestrict_q(self, body, which_q: int) -> Assembler:
        i = self._q_index(body, which_q, "unrestrict_q")
        return dataclasses.replace(self, ranges=tuple(r for r in self.ranges if r[0] != i))

    # -- helpers -------------------------------------------------------------------------
    def _body(self, body) -> int:
        b = _body_index(body, "Assembler")
        if not 0 < b < self.model.topology.num_bodies:
            raise ValueError(f"Assembler: no mobilized body {b} to lock or restrict (Ground has no q)")
        return b

    def _q_index(self, body, which_q: int, what: str) -> int:
        b, top = self._body(body), self.model.topology
        if top.kinds[b].quaternion_at is not None:
            raise ValueError(f"Assembler.{what}: {top.body_label(b)} uses a quaternion; lock or restrict "
                             "the whole mobilizer, or use Euler angles")
        if not 0 <= which_q < top.body_nq[b]:
            raise ValueError(f"Assembler.{what}: {top.body_label(b)} has {top.body_nq[b]} q; no q {which_q}")
        return top.q_start[b] + int(which_q)

    def _lock(self, indices, lock: bool) -> Assembler:
        indices = frozenset(int(i) for i in indices)
        locked = self.locked_q | indices if lock else self.locked_q - indices
        return dataclasses.replace(self, locked_q=locked)

    def __check_init__(self):
        """Every condition names bodies and q of this model, however the
        Assembler was made (its settings, ``adopt_assembly_goal``,
        ``update_condition`` or its constructor)."""
        for condition in self.conditions:
            self._check_bodies(condition)

    def _check_bodies(self, condition):
        bodies = condition.bodies if isinstance(condition, Markers) else (condition.body,)
        for b in bodies:
            if not 0 <= b < self.model.topology.num_bodies:
                raise ValueError(f"Assembler: condition refers to body {b}; the model has "
                                 f"{self.model.topology.num_bodies}")
        if isinstance(condition, QValue) and not 0 <= condition.which_q < self.model.topology.body_nq[condition.body]:
            raise ValueError(f"QValue: {self.model.topology.body_label(condition.body)} has "
                             f"{self.model.topology.body_nq[condition.body]} q; no q {condition.which_q}")

    def _free_u(self, dtype):
        """(nu,) 1 for mobilities whose q may move (locked q hold their mobility)."""
        top = self.model.topology
        free = np.ones(top.nu)
        for b in range(1, top.num_bodies):
            qs = range(top.q_start[b], top.q_start[b] + top.body_nq[b])
            us = range(top.u_start[b], top.u_start[b] + top.body_nu[b])
            if top.body_nq[b] == top.body_nu[b]:
                for q, u in zip(qs, us):
                    free[u] = q not in self.locked_q
            elif any(q in self.locked_q for q in qs):
                free[list(us)] = 0
        return jnp.asarray(free, dtype)

    def _residuals(self, state: State, q):
        """(required c, goal g) at q, each weighted."""
        s = self.model.realize(state.with_q(q), Stage.Position)
        required, goals = [], []
        conditions = [(c.residuals, w) for c, w in zip(self.conditions, self.weights)]
        if self.model.constraints:
            conditions.insert(0, (enabled_position_errors, self.system_constraints_weight))
        for residuals, weight in conditions:
            if weight == 0:
                continue
            r = residuals(s)
            if math.isinf(weight):
                required.append(r)
            else:
                goals.append(math.sqrt(weight) * r)
        empty = jnp.zeros(0, q.dtype)
        return (jnp.concatenate(required) if required else empty), (jnp.concatenate(goals) if goals else empty)

    def _error_norm(self, c):
        if c.shape[0] == 0:
            return jnp.zeros((), c.dtype)
        return jnp.sqrt(jnp.mean(c * c)) if self.use_rms_error_norm else jnp.max(jnp.abs(c))

    def _clip(self, q):
        for i, lower, upper in self.ranges:
            q = q.at[i].set(jnp.clip(q[i], lower, upper))
        return q

    # -- the solve -----------------------------------------------------------------------
    def assemble(self, state: State, throw: bool = True):
        """(state, AssembleResults): the free q moved to satisfy the required
        conditions to the error tolerance while minimizing the goals; the State
        comes back realized through Position. ``throw=True`` raises
        ``sx.RuntimeCheckError`` (also inside jit) when the tolerance is not met."""
        model = self.model
        state = model.matter._check(state)
        dtype, top = state.q.dtype, model.topology
        free = self._free_u(dtype)
        tolerance = self.get_error_tolerance_in_use()
        nu = top.nu

        def at(q):
            return self._residuals(state, q)

        def move(q, du, free):
            return coordinates.normalize_quaternions(top, q + coordinates.multiply_by_n(top, q, free * du))

        def merit(c, g):
            return 0.5 * (g @ g) + 0.5 * _MERIT_PENALTY * (c @ c)

        def solve(q, c, g, mu, alpha, free):
            Jc, Jg = jax.jacfwd(lambda du: at(move(q, du, free)))(jnp.zeros(nu, dtype))
            mc = c.shape[0]
            H = Jg.T @ Jg + (mu + 1e-12) * jnp.eye(nu, dtype=dtype)
            K = jnp.block([[H, Jc.T], [Jc, jnp.zeros((mc, mc), dtype)]])
            return move(q, alpha * jnp.linalg.lstsq(K, jnp.concatenate([-Jg.T @ g, -c]))[0][:nu], free)

        ranges = [(i, top.u_start[top.q_body[i]] + i - top.q_start[top.q_body[i]], lo, hi) for i, lo, hi in self.ranges]

        def step(q, c, g, mu, alpha):
            q_new = solve(q, c, g, mu, alpha, free)
            if not ranges:
                return q_new
            # a restricted q the step would carry out of its range: hold it at the bound and solve again
            held, q_bound = free, q
            for i, j, lo, hi in ranges:
                out = (q_new[i] < lo) | (q_new[i] > hi)
                held = held.at[j].set(jnp.where(out, 0.0, held[j]))
                q_bound = q_bound.at[i].set(jnp.where(out, jnp.clip(q_new[i], lo, hi), q[i]))
            c_b, g_b = at(q_bound)
            return self._clip(solve(q_bound, c_b, g_b, mu, alpha, held))

        q0 = self._clip(coordinates.normalize_quaternions(top, state.q))
        c0, g0 = at(q0)

        def cond(carry):
            q, c, g, mu, alpha, k, change = carry
            converged = (self._error_norm(c) <= tolerance) & (change <= self.accuracy * 0.5 * (g @ g) + tolerance ** 2)
            stalled = alpha < 1e-10  # every step refused: at a (local) optimum or stuck
            return (k < self.max_iterations) & ~converged & ~stalled

        def body(carry):
            q, c, g, mu, alpha, k, change = carry
            q_new = step(q, c, g, mu, alpha)
            c_new, g_new = at(q_new)
            better = merit(c_new, g_new) < merit(c, g)
            new_change = 0.5 * jnp.abs(g @ g - g_new @ g_new)
            return (jnp.where(better, q_new, q), jnp.where(better, c_new, c), jnp.where(better, g_new, g),
                    jnp.where(better, mu / 3, mu * 4), jnp.where(better, jnp.minimum(1.0, 2 * alpha), alpha / 2),
                    k + 1, jnp.where(better, new_change, change))

        mu0 = jnp.asarray(1e-3, dtype) * (1 + jnp.sum(g0 * g0))
        first_change = jnp.asarray(jnp.inf if g0.shape[0] else 0.0, dtype)  # no goals: done once c meets it
        q, c, g, _, _, iterations, _ = jax.lax.while_loop(
            cond, body, (q0, c0, g0, mu0, jnp.ones((), dtype), jnp.zeros((), jnp.int32), first_change))
        norm = self._error_norm(c)
        status = jnp.where(norm <= tolerance, ProjectStatus.Succeeded,
                           jnp.where(iterations >= self.max_iterations, ProjectStatus.FailedToConverge,
                                     ProjectStatus.FailedToAchieveAccuracy)).astype(jnp.int32)
        if throw:
            status = fault_if(status, status != ProjectStatus.Succeeded, 0,
                              ["Assembler.assemble failed: the required conditions did not reach the error "
                               "tolerance from this guess (pass throw=False to read the status)"])
        results = AssembleResults(status, norm, 0.5 * (g @ g), iterations)
        return model.realize(state.with_q(q), Stage.Position), results


def _weight(weight) -> float:
    weight = float(weight)
    if not weight >= 0:
        raise ValueError(f"Assembler: weights must be >= 0 (inf for required), got {weight}")
    return weight
