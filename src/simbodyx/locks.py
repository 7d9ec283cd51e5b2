"""Mobilizer locks (Simbody's lock / lockAt / lockByDefault).

A lock prescribes a mobilizer's motion at one level (Simbody's
``Motion::Level``):

* Position: q is held at the lock value, u = 0 and udot = 0;
* Velocity: u is held at the lock value and udot = 0 (q moves);
* Acceleration: udot is held at the lock value (0 by default).

Locks are Instance-stage data of a State: ``State.locks`` is None while no
mobilizer is locked (forward dynamics then runs its unmodified path) and a
:class:`Locks` of arrays otherwise, so locking and unlocking never recompile
once a locked State has been traced. Realizing applies the prescribed q and
u; forward dynamics solves for the free udot only (the locked mobilities
move as the prescription says, see ``aba.forward_dynamics``), and the
generalized forces that realize the prescription are ``tau`` (Simbody's
getTauAsVector): the inverse-dynamics residual at the locked mobilities.
"""

from __future__ import annotations

import enum

import jax.numpy as jnp
import numpy as np

from simbodyx.module import Module


class Motion(enum.IntEnum):
    """Simbody's Motion::Level, the level at which a mobilizer is locked."""

    NoLevel = -1
    Acceleration = 0
    Velocity = 1
    Position = 2


class Locks(Module):
    level: jnp.ndarray  #: (nb,) int32 Motion level per body, -1 unlocked
    q: jnp.ndarray  #: (nq,) values held by Position locks
    u: jnp.ndarray  #: (nu,) values held by Velocity locks
    udot: jnp.ndarray  #: (nu,) values held by Acceleration locks

    @classmethod
    def unlocked(cls, topology, q, u) -> Locks:
        return cls(jnp.full(topology.num_bodies, Motion.NoLevel, jnp.int32), q, u, jnp.zeros_like(u))

    def u_level(self, topology):
        """(nu,) the lock level of each mobility's body."""
        return self.level[np.asarray(topology.u_body, dtype=np.int32)]

    def prescribed_udot(self, topology):
        """(locked (nu,) 0/1, udot (nu,)): which udot are prescribed and their values."""
        level = self.u_level(topology)
        locked = (level >= Motion.Acceleration).astype(self.udot.dtype)
        return locked, jnp.where(level == Motion.Acceleration, self.udot, 0.0)

    def apply(self, topology, q, u):
        """(q, u) with the Position and Velocity prescriptions applied."""
        q_level = self.level[np.asarray(topology.q_body, dtype=np.int32)]
        q = jnp.where(q_level == Motion.Position, self.q, q)
        level = self.u_level(topology)
        u = jnp.where(level == Motion.Position, 0.0, jnp.where(level == Motion.Velocity, self.u, u))
        return q, u


def prescribed_udot(state):
    """(locked, udot values) of a State's locks, or None when nothing is locked."""
    return None if state.locks is None else state.locks.prescribed_udot(state.topology)
