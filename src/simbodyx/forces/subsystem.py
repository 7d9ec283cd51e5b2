"""``model.forces``: the force subsystems' elements evaluated on a State
(``simbodyx.builder.forces.GeneralForceSubsystem`` builds them)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.scalarize import entry_point
from simbodyx.forces.base import zeros
from simbodyx.spatial.vectors import array_module, device_array
from simbodyx.stage import Stage


class Forces:
    """``model.forces``: evaluate every force element of the Model."""

    def __init__(self, model):
        self.model = model

    def calc_forces(self, state):
        """(mobility_forces (nu,), body_forces (nb, 6) [torque; force] at each Bo,
        in G, Ground row included) for a State realized to Velocity. One
        compiled program per Model structure, as ``model.realize`` uses."""
        state.require(Stage.Velocity, "model.forces.calc_forces")
        return _calc_forces(self.model, state)

    def calc_potential_energy(self, state):
        """Sum of the elements' potential energies (J), State realized to Position."""
        state.require(Stage.Position, "model.forces.calc_potential_energy")
        return _calc_potential_energy(self.model, state)


def applied_forces(model, state):
    """(mobility_forces, body_forces) of every force element (``calc_forces``'s
    body, which ``realize`` traces into its own program)."""
    mobility, body = zeros(state)
    for element in model.force_elements:
        m, b = element.calc(model, state)
        mobility, body = mobility + m, body + b
    return mobility, body


def _z_owners(model):
    """The elements with auxiliary states, in the order of their z."""
    return sorted((e for e in model.force_elements if e.num_z()), key=lambda e: e.z_start)


def z_derivatives(model, state):
    """zdot (nz,): the elements' ``calc_zdot``, each at its place in ``state.z``."""
    owners = _z_owners(model)
    return jnp.concatenate([e.calc_zdot(model, state) for e in owners]) if owners else jnp.zeros_like(state.z)


def default_z(model, dtype):
    """z (nz,) of a default State: the elements' ``default_z``, each at its place."""
    parts = [e.default_z(dtype) for e in _z_owners(model)] or [np.zeros(0, dtype)]
    return device_array(array_module(*parts).concatenate(parts), dtype)


def potential_energy(model, state):
    """The force elements' potential energy (J) (``calc_potential_energy``'s body)."""
    return sum((e.potential_energy(model, state) for e in model.force_elements), jnp.zeros((), state.q.dtype))


_calc_forces = entry_point(eqx.filter_jit)(applied_forces)
_calc_potential_energy = entry_point(eqx.filter_jit)(potential_energy)
