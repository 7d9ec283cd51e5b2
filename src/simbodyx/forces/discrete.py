"""Forces whose values are State data: Simbody's Force::DiscreteForces and
Force::MobilityDiscreteForce, the channel for controls.

Their values live in ``State.discrete`` (one entry per such element), not
in the Model: setting them returns a new State whose caches up to Velocity
are kept, never recompiles a jitted function, and ``jax.grad`` with
respect to the State reaches them. Body forces are [torque; force] at each
body origin, in G, like every force element's.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx.forces.base import ForceElement, as_param, zeros
from simbodyx.forces.mobility import _mobility_index
from simbodyx.spatial.vectors import cross
from simbodyx.stage import Stage


class _Discrete(ForceElement):
    """An element whose values are the State's ``discrete[slot]``."""

    slot: int = eqx.field(static=True)
    label: str = eqx.field(static=True)

    def _claim_slot(self, forces) -> int:
        return sum(isinstance(e, _Discrete) for fs in forces.system._force_subsystems for e in fs.elements)

    def _values(self, state):
        if len(state.discrete) <= self.slot:
            raise ValueError(f"{self.label}: this State has no values for it; make States with model.default_state()")
        return state.discrete[self.slot]

    def _with(self, state, values):
        discrete = state.discrete[:self.slot] + (values,) + state.discrete[self.slot + 1:]
        return state.replace(discrete=discrete, keep=Stage.Velocity)


class DiscreteForces(_Discrete):
    """Mobility forces (nu,) and body forces (nb, 6) held in the State, all zero
    by default (Simbody's Force::DiscreteForces)."""

    def __init__(self, forces, matter):
        forces._check_matter(matter, "Force.DiscreteForces")
        self.label = "Force.DiscreteForces"
        self.slot = self._claim_slot(forces)
        forces._add(self)

    def default_discrete(self, topology, dtype):
        return jnp.zeros(topology.nu, dtype), jnp.zeros((topology.num_bodies, 6), dtype)

    def calc(self, model, state):
        return self._values(state)

    def get_all_mobility_forces(self, state):
        return self._values(state)[0]

    def get_all_body_forces(self, state):
        return self._values(state)[1]

    def set_all_mobility_forces(self, state, mobility_forces):
        """A new State with these (nu,) mobility forces (all of them replaced)."""
        mobility, body = self._values(state)
        return self._with(state, (self._like(mobility, mobility_forces, "mobility_forces"), body))

    def set_all_body_forces(self, state, body_forces):
        """A new State with these (nb, 6) body forces [torque; force] at each Bo, in G."""
        mobility, body = self._values(state)
        return self._with(state, (mobility, self._like(body, body_forces, "body_forces")))

    def _like(self, held, value, what):
        """``value`` in the dtype of the ``held`` values it replaces, of their shape."""
        value = jnp.asarray(value, held.dtype)
        if value.shape != held.shape:
            raise ValueError(f"{self.label}: {what} must have shape {held.shape}, got {value.shape}")
        return value

    def set_one_mobility_force(self, state, mobilized_body, which_u: int, force):
        index = state.topology.u_start[mobilized_body.index] + mobilized_body._which(which_u, mobilized_body.num_u, "u")
        mobility, body = self._values(state)
        return self._with(state, (mobility.at[index].set(force), body))

    def add_force_to_body_point(self, state, mobilized_body, station_on_B, force_in_G):
        """A new State with a force (in G) added at a station of B (in B): torque
        r x f about Bo, r = R_GB p_BS (State realized through Position)."""
        state.require(Stage.Position, f"{self.label}.add_force_to_body_point")
        f = jnp.asarray(force_in_G, state.u.dtype)
        r = mobilized_body.express_vector_in_ground_frame(state, jnp.asarray(station_on_B, state.u.dtype))
        mobility, body = self._values(state)
        return self._with(state, (mobility, body.at[mobilized_body.index].add(jnp.concatenate([cross(r, f), f]))))

    def clear_all_forces(self, state):
        return self._with(state, tuple(jnp.zeros_like(v) for v in self._values(state)))


class MobilityDiscreteForce(_Discrete):
    """One generalized force on one mobility, held in the State (Simbody's
    Force::MobilityDiscreteForce), ``default`` in a default State."""

    body: int = eqx.field(static=True)
    which: int = eqx.field(static=True)
    default: jnp.ndarray

    def __init__(self, forces, mobilized_body, which_u: int, default=0.0):
        self.label = "Force.MobilityDiscreteForce"
        self.body, self.which = _mobility_index(forces, mobilized_body, which_u, self.label)
        self.default = as_param(default, (), "default", self.label)
        self.slot = self._claim_slot(forces)
        forces._add(self)

    def default_discrete(self, topology, dtype):
        return jnp.asarray(self.default, dtype)

    def calc(self, model, state):
        mobility, body = zeros(state)
        return mobility.at[state.topology.u_start[self.body] + self.which].set(self._values(state)), body

    def set_mobility_force(self, state, force):
        """A new State with this generalized force (caches through Velocity kept)."""
        return self._with(state, jnp.asarray(force, state.u.dtype).reshape(()))

    def get_mobility_force(self, state):
        return self._values(state)
