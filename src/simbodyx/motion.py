"""Prescribed motion: Simbody's Motion objects and mobilizer locks, one mechanism.

A mobilizer's motion is prescribed at one level (``Motion.Level``); lower
levels follow as its derivatives, higher ones stay free:

* Position: q = q(t), u from qdot(t) (u = N^-1 qdot), udot from qdotdot(t);
* Velocity: u = u(t), udot = du/dt (q integrates freely);
* Acceleration: udot = udot(t) (q and u integrate freely).

Two sources prescribe it. A **Motion** (``Motion.Sinusoid``, ``Steady``,
``Linear``, ``Custom``) belongs to a mobilized body from its construction; its
numbers are Model leaves (``jax.grad`` reaches them) and whether it is
enabled is Instance-stage State data (``motion.disable(state)``), so
switching it never recompiles. A **lock** (``mobod.lock(state, level)``,
``lock_at``, ``lock_by_default``) holds constant values, also as Instance
data (``State.locks``). A lock overrides its mobilizer's Motion while it is
held, as in Simbody.

Realizing a State applies the prescribed q and u (``prescription``);
forward dynamics solves for the free udot with the known ones given (see
``aba.forward_dynamics``); the generalized forces that realize the
prescription are ``tau`` (Simbody's motion multipliers, on the left of
``M udot + tau + G^T lambda + f_inertial = f_applied``): ``matter.find_motion_forces``,
``mobod.get_tau_as_vector``; a motor applies -tau, and ``calc_motion_power``
= -tau . u is the power the Motions deliver.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.algorithms.coordinates import multiply_by_n_dot, multiply_by_n_inv
from simbodyx.handles import builder_of, registering_matter
from simbodyx.state import Level, Locks, Method, State


class Motion(Module):
    """Base of Simbody's Motion objects: a prescription of one mobilizer as a
    pure function of time. The object made while building is the handle a
    user holds; the frozen Model holds a copy without its ``matter``
    reference (both answer the State queries). Built-ins:
    ``Motion.Sinusoid``, ``Motion.Steady``, ``Motion.Linear``, ``Motion.Custom``.
    ``Motion.Position`` / ``Velocity`` / ``Acceleration`` / ``NoLevel`` are
    the levels (``Motion.Level``), as in Simbody."""

    Level = Level
    Method = Method
    NoLevel = Level.NoLevel
    Acceleration = Level.Acceleration
    Velocity = Level.Velocity
    Position = Level.Position

    body: int = eqx.field(static=True)
    level: Level = eqx.field(static=True)
    index: int = eqx.field(static=True)
    size: int = eqx.field(static=True)  #: values per level: nq at Position, nu otherwise
    label: str = eqx.field(static=True)
    matter: object = eqx.field(static=True)  #: the handle's subsystem; None in the Model's element

    def _register(self, mobod, level, kind: str, allow_quaternions: bool = False) -> None:
        """Check the arguments common to every Motion; ``_attach`` then adds it to
        ``mobod`` (one Motion per mobilized body, before freezing)."""
        matter = registering_matter(f"Motion.{kind}", (mobod,))
        label = f"Motion.{kind} on {mobod._label}"
        if mobod.is_ground():
            raise ValueError(f"{label}: Ground has no mobilizer to drive")
        try:
            level = Level(level)
        except ValueError:
            raise ValueError(f"{label}: level must be Motion.Position, Velocity or Acceleration, got {level!r}") \
                from None
        if level == Level.NoLevel:
            raise ValueError(f"{label}: level must be Motion.Position, Velocity or Acceleration, not NoLevel")
        mode = mobod._kind.in_mode(matter.get_use_euler_angles())  # q counts as built
        if level == Level.Position and mobod._kind.quaternion_at is not None and not allow_quaternions:
            raise ValueError(f"{label}: a Position-level {kind} cannot drive a quaternion; use Motion.Custom "
                             "(returning a unit quaternion) or a mobilizer without one")
        self.body, self.level, self.label, self.matter = mobod.index, level, label, matter
        self.size = mode.nq if level == Level.Position else mode.nu

    def _attach(self) -> None:
        self.index = self.matter._add_motion(self)

    def _numbers(self, what: str, value):
        """A scalar or one number per prescribed coordinate, checked."""
        array = np.asarray(value, dtype=np.float64)
        if array.ndim > 1 or (array.ndim == 1 and array.shape != (self.size,)):
            raise ValueError(f"{self.label}: {what} must be a scalar or have shape ({self.size},), "
                             f"got {array.shape}")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{self.label}: {what} must be finite, got {value!r}")
        return jnp.asarray(array)

    # -- the prescription ----------------------------------------------------------------
    def prescribed(self, t):
        """(size,) the prescribed values at the Motion's level at time t (s)."""
        raise NotImplementedError

    def prescribed_derivatives(self, t):
        """(value, d/dt, d2/dt2) of ``prescribed`` at t, each (size,), by forward-mode
        differentiation (exact)."""
        one = jnp.ones_like(t)

        def with_rate(t):
            return jax.jvp(self.prescribed, (t,), (one,))

        (value, rate), (_, acceleration) = jax.jvp(with_rate, (t,), (one,))
        return value, rate, acceleration

    # -- the handle ----------------------------------------------------------------------
    def get_mobilized_body(self):
        return builder_of(self, "get_mobilized_body").get_mobilized_body(self.body)

    def set_disabled_by_default(self, disabled: bool = True) -> Motion:
        """Define this Motion but leave it off in the default State (before freezing)."""
        builder_of(self, "set_disabled_by_default")._set_motion_disabled_by_default(self.index, disabled)
        return self

    def is_disabled_by_default(self) -> bool:
        return builder_of(self, "is_disabled_by_default")._motion_disabled_by_default[self.index]

    def is_disabled(self, state):
        """Whether this Motion is off in ``state`` (a JAX bool when traced)."""
        return self._flags(state)[self.index]

    def set_disabled(self, state, disabled):
        """A new State with this Motion off (or on); Instance stage, no recompile."""
        flags = self._flags(state).at[self.index].set(jnp.asarray(disabled, bool))
        return state.replace(motion_disabled=flags)

    def disable(self, state):
        return self.set_disabled(state, True)

    def enable(self, state):
        return self.set_disabled(state, False)

    def get_level(self, state):
        """This Motion's level, NoLevel while disabled (Simbody's getLevel)."""
        return _unless_disabled(self.is_disabled(state), self.level, Level.NoLevel)

    def get_level_method(self, state):
        """Method.Prescribed, or Method.NoMethod while disabled."""
        return _unless_disabled(self.is_disabled(state), Method.Prescribed, Method.NoMethod)

    def _flags(self, state):
        if state.motion_disabled is None or state.motion_disabled.shape[0] <= self.index:
            raise ValueError(f"{self.label}: this State belongs to a model without this Motion")
        return state.motion_disabled


def _unless_disabled(off, value, disabled_value):
    """``value``, or ``disabled_value`` where ``off`` (a JAX array when traced)."""
    if isinstance(off, jax.core.Tracer):
        return jnp.where(off, disabled_value, value)
    return disabled_value if bool(off) else value


class Sinusoid(Motion):
    """amplitude sin(rate t + phase) for every prescribed coordinate (Simbody's
    Motion::Sinusoid); each number a scalar or one per coordinate."""

    amplitude: jnp.ndarray
    rate: jnp.ndarray  #: rad/s
    phase: jnp.ndarray  #: rad

    def __init__(self, mobilized_body, level, amplitude, rate, phase):
        self._register(mobilized_body, level, "Sinusoid")
        self.amplitude = self._numbers("amplitude", amplitude)
        self.rate = self._numbers("rate", rate)
        self.phase = self._numbers("phase", phase)
        self._attach()

    def prescribed(self, t):
        return jnp.broadcast_to(self.amplitude * jnp.sin(self.rate * t + self.phase), (self.size,))


class Steady(Motion):
    """A constant velocity u for every mobility (Simbody's Motion::Steady, a
    Velocity-level Motion: q integrates, udot = 0)."""

    u: jnp.ndarray

    def __init__(self, mobilized_body, u):
        self._register(mobilized_body, Level.Velocity, "Steady")
        self.u = self._numbers("u", u)
        self._attach()

    def prescribed(self, t):
        return jnp.broadcast_to(self.u + 0 * t, (self.size,))


class Linear(Motion):
    """value + slope t at the given level, for every prescribed coordinate."""

    value: jnp.ndarray  #: at t = 0
    slope: jnp.ndarray  #: per second

    def __init__(self, mobilized_body, level, slope, value=0.0):
        self._register(mobilized_body, level, "Linear")
        self.slope = self._numbers("slope", slope)
        self.value = self._numbers("value", value)
        self._attach()

    def prescribed(self, t):
        return jnp.broadcast_to(self.value + self.slope * t, (self.size,))


class Custom(Motion):
    """``function(t) -> (n,)`` a pure JAX function of time at the given level
    (n = nq at Position, nu otherwise); its derivatives come by automatic
    differentiation, so they are exact (Simbody's Motion::Custom, whose
    Implementation supplies the value and its derivatives by hand)."""

    function: Callable = eqx.field(static=True)

    def __init__(self, mobilized_body, level, function):
        self._register(mobilized_body, level, "Custom", allow_quaternions=True)
        if not callable(function):
            raise TypeError(f"{self.label}: function must be callable: function(t) -> ({self.size},)")
        self.function = function
        shape = jax.eval_shape(function, jax.ShapeDtypeStruct((), jnp.float64)).shape
        if shape not in ((self.size,), ()):
            raise ValueError(f"{self.label}: function(t) must return shape ({self.size},), got {shape}")
        self._attach()

    def prescribed(self, t):
        return jnp.broadcast_to(self.function(t), (self.size,))


Motion.Sinusoid = Sinusoid
Motion.Steady = Steady
Motion.Linear = Linear
Motion.Custom = Custom


class Prescription(Module):
    """What is prescribed at one State: per coordinate the level its body is
    driven at (-1 free) and the prescribed values (meaningful where driven)."""

    body_level: jnp.ndarray  #: (nb,) int32
    q: jnp.ndarray  #: (nq,)
    u: jnp.ndarray  #: (nu,)
    udot: jnp.ndarray  #: (nu,)

    def q_level(self, topology):
        return self.body_level[np.asarray(topology.q_body, np.int32)]

    def u_level(self, topology):
        return self.body_level[np.asarray(topology.u_body, np.int32)]

    def held_q(self, topology):
        """(nq,) bool: the q a Position-level prescription holds."""
        return self.q_level(topology) == Level.Position

    def held_u(self, topology):
        """(nu,) bool: the u a Position- or Velocity-level prescription holds."""
        return self.u_level(topology) >= Level.Velocity

    def known(self, topology):
        """(nu,) bool: the u whose udot is prescribed (any level)."""
        return self.u_level(topology) >= Level.Acceleration

    def apply(self, topology, q, u):
        """(q, u) with the Position- and Velocity-level prescriptions applied."""
        return jnp.where(self.held_q(topology), self.q, q), jnp.where(self.held_u(topology), self.u, u)

    def known_udot(self, topology):
        """(known (nu,) 0/1, udot (nu,)): which udot are prescribed and their values."""
        known = self.known(topology)
        return known.astype(self.udot.dtype), jnp.where(known, self.udot, 0.0)


def prescription(motions, state) -> Prescription | None:
    """The Prescription of a State's locks and enabled ``motions`` at its (t, q,
    u), a lock overriding its mobilizer's Motion; None when nothing can be
    prescribed (no locks and no Motions: dynamics then runs its unprescribed path)."""
    topology, t, q, u = state.topology, state.t, state.q, state.u
    locks, motion_disabled = state.locks, state.motion_disabled
    if locks is None and not motions:
        return None
    if locks is None:
        locks = Locks.unlocked(topology, q, u)
    u_level = locks.level[np.asarray(topology.u_body, np.int32)]
    held_u = jnp.where(u_level == Level.Velocity, locks.u, 0.0)
    held_udot = jnp.where(u_level == Level.Acceleration, locks.udot, 0.0)
    body_level, p_q, p_u, p_udot = locks.level, locks.q, held_u, held_udot
    qdot, qdotdot = jnp.zeros_like(q), jnp.zeros_like(q)  # of Position-level Motions, for N^-1
    from_q = np.zeros(topology.nu, bool)  # u entries whose u, udot come from qdot, qdotdot
    for m in motions:
        on = ~motion_disabled[m.index] & (locks.level[m.body] == Level.NoLevel)
        qs = slice(topology.q_start[m.body], topology.q_start[m.body] + topology.body_nq[m.body])
        us = slice(topology.u_start[m.body], topology.u_start[m.body] + topology.body_nu[m.body])
        value, rate, acceleration = m.prescribed_derivatives(t)
        body_level = body_level.at[m.body].set(jnp.where(on, m.level, body_level[m.body]))
        pick = lambda new, old: jnp.where(on, new, old)  # noqa: E731
        if m.level == Level.Position:
            p_q = p_q.at[qs].set(pick(value, p_q[qs]))
            qdot, qdotdot = qdot.at[qs].set(rate), qdotdot.at[qs].set(acceleration)
            from_q[us] = True
        elif m.level == Level.Velocity:
            p_u, p_udot = p_u.at[us].set(pick(value, p_u[us])), p_udot.at[us].set(pick(rate, p_udot[us]))
        else:
            p_udot = p_udot.at[us].set(pick(value, p_udot[us]))
    if from_q.any():
        q_now = jnp.where(body_level[np.asarray(topology.q_body, np.int32)] == Level.Position, p_q, q)
        u_q = multiply_by_n_inv(topology, q_now, qdot)
        udot_q = multiply_by_n_inv(topology, q_now, qdotdot - multiply_by_n_dot(topology, q_now, u_q, u_q))
        driven = jnp.asarray(from_q) & (body_level[np.asarray(topology.u_body, np.int32)] == Level.Position) \
            & (u_level == Level.NoLevel)
        p_u, p_udot = jnp.where(driven, u_q, p_u), jnp.where(driven, udot_q, p_udot)
    return Prescription(body_level, p_q, p_u, p_udot)


def model_prescription(model, state) -> Prescription | None:
    """The Prescription of ``state`` under ``model``'s Motions (any stage)."""
    return prescription(model.params.motions, state)


def prescribe_q(model, state):
    """The State with its prescribed q set to their values at its time (Simbody's
    prescribeQ); the State itself when nothing is prescribed."""
    p = model_prescription(model, state)
    if p is None:
        return state
    return state.with_q(jnp.where(p.held_q(state.topology), p.q, state.q))


def prescribe_u(model, state):
    """The State with its prescribed u set (Simbody's prescribeU): Velocity-level
    values, and u = N^-1 qdot(t) where q is prescribed."""
    p = model_prescription(model, state)
    if p is None:
        return state
    return state.with_u(jnp.where(p.held_u(state.topology), p.u, state.u))


def prescription_of(state) -> Prescription | None:
    """The Prescription of a State realized through Instance (its Model's Motions
    ride in its Instance cache)."""
    motions = state.instance.motions if State.has(state, "instance") else ()
    return prescription(motions, state)


def prescribed_udot(state):
    """(known, udot values) of a realized State, or None when nothing is prescribed."""
    p = prescription_of(state)
    return None if p is None else p.known_udot(state.topology)
