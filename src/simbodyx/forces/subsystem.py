"""GeneralForceSubsystem (building) and ``model.forces`` (evaluating)."""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx.forces.base import zeros
from simbodyx.stage import Stage


class GeneralForceSubsystem:
    """Holds force elements; ``Force.<Kind>(forces, ...)`` adds one."""

    def __init__(self, system):
        system.check_not_frozen("add a force subsystem")
        self.system = system
        self.elements = []
        system._force_subsystems.append(self)

    def _add(self, element):
        self.system.check_not_frozen(f"add {type(element).__name__}")
        self.elements.append(element)

    def _check_matter(self, matter, label):
        if getattr(matter, "system", None) is not self.system:
            raise ValueError(f"{label}: the matter subsystem belongs to a different MultibodySystem")

    def _check_body(self, body, label):
        from simbodyx.builder.mobilized_body import MobilizedBody

        if not isinstance(body, MobilizedBody):
            raise TypeError(f"{label}: expected a MobilizedBody, got {type(body).__name__}")
        if body._matter.system is not self.system:
            raise ValueError(f"{label}: {body._label} belongs to a different MultibodySystem")

    def get_num_forces(self) -> int:
        return len(self.elements)


class Forces:
    """``model.forces``: evaluate every force element of the Model."""

    def __init__(self, model):
        self.model = model

    def calc_forces(self, state):
        """(mobility_forces (nu,), body_forces (nb, 6) [torque; force] at each Bo,
        in G, Ground row included) for a State realized to Velocity."""
        state.require(Stage.Velocity, "model.forces.calc_forces")
        mobility, body = zeros(state)
        for element in self.model.force_elements:
            m, b = element.calc(self.model, state)
            mobility, body = mobility + m, body + b
        return mobility, body

    def calc_potential_energy(self, state):
        """Sum of the elements' potential energies (J), State realized to Position."""
        state.require(Stage.Position, "model.forces.calc_potential_energy")
        return sum((e.potential_energy(self.model, state) for e in self.model.force_elements),
                   jnp.zeros((), state.q.dtype))
