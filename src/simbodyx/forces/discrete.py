"""Forces whose values are State data: Simbody's Force::DiscreteForces and
Force::MobilityDiscreteForce, the channel for controls, and
MobilityActuator (a control through MuJoCo's affine actuator law).

Their values live in ``State.discrete`` (one entry per such element), not
in the Model: setting them returns a new State whose caches up to Velocity
are kept, never recompiles a jitted function, and ``jax.grad`` with
respect to the State reaches them. Body forces are [torque; force] at each
body origin, in G, like every force element's.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx.forces.base import ForceElement, as_param, forces_at, zeros
from simbodyx.forces.mobility import _mobility_index
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
        return self._with(state, (mobility, body + forces_at(state, mobilized_body.index, r, f)))

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


class MobilityActuator(_Discrete):
    """A control on one mobility whose qdot is its u, MuJoCo's affine actuator
    on a joint: the State holds the control c (``default`` in a default
    State), clamped to ``ctrl_range``; the actuator force
    a = gain c + bias[0] + bias[1] gear q + bias[2] gear qdot, clamped to
    ``force_range``, acts as the generalized force gear a. A motor has
    bias 0; a position servo gain kp and bias (0, -kp, -kv); a velocity
    servo gain kv and bias (0, 0, -kv). A range (-inf, inf) is no limit."""

    body: int = eqx.field(static=True)
    which: int = eqx.field(static=True)
    gear: jnp.ndarray
    gain: jnp.ndarray
    bias: jnp.ndarray  #: (3,)
    ctrl_range: jnp.ndarray  #: (2,)
    force_range: jnp.ndarray  #: (2,)
    default: jnp.ndarray

    def __init__(self, forces, mobilized_body, which_u: int, gear=1.0, gain=1.0, bias=(0.0, 0.0, 0.0),
                 ctrl_range=(-np.inf, np.inf), force_range=(-np.inf, np.inf), default=0.0):
        self.label = "Force.MobilityActuator"
        self.body, self.which = _mobility_index(forces, mobilized_body, which_u, self.label, need_q=True)
        self.gear = as_param(gear, (), "gear", self.label)
        self.gain = as_param(gain, (), "gain", self.label)
        self.bias = as_param(bias, (3,), "bias", self.label)
        self.ctrl_range = _range(ctrl_range, "ctrl_range", self.label)
        self.force_range = _range(force_range, "force_range", self.label)
        self.default = as_param(default, (), "default", self.label)
        self.slot = self._claim_slot(forces)
        forces._add(self)

    def check(self) -> None:
        label = self.label
        for what in ("gear", "gain", "bias", "default"):
            if not np.all(np.isfinite(np.asarray(getattr(self, what)))):
                raise ValueError(f"{label}: {what} contains NaN or infinity")
        for what in ("ctrl_range", "force_range"):
            low, high = np.asarray(getattr(self, what))
            if np.isnan(low) or np.isnan(high) or low > high:
                raise ValueError(f"{label}: {what} must be (low, high) with low <= high, got {(low, high)}")

    def default_discrete(self, topology, dtype):
        return jnp.asarray(self.default, dtype)

    def calc(self, model, state):
        return self.mobility_forces(state, self._values(state)), zeros(state)[1]

    def mobility_forces(self, state, control):
        """(nu,) the generalized force this actuator applies at ``state``'s q
        and u with ``control`` (the number ``set_control`` would hold)."""
        top = state.topology
        q, qdot = state.q[top.q_start[self.body] + self.which], state.u[top.u_start[self.body] + self.which]
        c = jnp.clip(control, self.ctrl_range[0], self.ctrl_range[1])
        a = self.gain * c + self.bias[0] + self.gear * (self.bias[1] * q + self.bias[2] * qdot)
        a = jnp.clip(a, self.force_range[0], self.force_range[1])
        return zeros(state)[0].at[top.u_start[self.body] + self.which].set(self.gear * a)

    def set_control(self, state, control):
        """A new State with this control (caches through Velocity kept)."""
        return self._with(state, jnp.asarray(control, state.u.dtype).reshape(()))

    def get_control(self, state):
        return self._values(state)


def with_controls(actuators, state, controls):
    """A new State whose ``actuators`` (MobilityActuators, in order) hold
    ``controls`` (one number each)."""
    for actuator, control in zip(actuators, controls):
        state = actuator.set_control(state, control)
    return state


def _range(bounds, what, label):
    """(low, high) as a float64 array: infinities allowed, NaN not."""
    a = np.asarray(bounds, dtype=np.float64)
    if a.shape != (2,) or np.any(np.isnan(a)) or a[0] > a[1]:
        raise ValueError(f"{label}: {what} must be (low, high) with low <= high, got {bounds!r}")
    return a
