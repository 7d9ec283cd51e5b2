"""GeneralForceSubsystem: holds the force elements while building; the
frozen Model evaluates them through ``model.forces``
(``simbodyx.forces.subsystem``)."""

from __future__ import annotations

from simbodyx.builder.mobilized_body import MobilizedBody


class GeneralForceSubsystem:
    """Holds force elements; ``Force.<Kind>(forces, ...)`` adds one."""

    def __init__(self, system):
        system.check_not_frozen("add a force subsystem")
        self.system = system
        self.elements = []
        system._force_subsystems.append(self)

    def _add(self, element):
        self.system.check_not_frozen(f"add {type(element).__name__}")
        element.check()
        self.elements.append(element)

    def _check_matter(self, matter, label):
        if getattr(matter, "system", None) is not self.system:
            raise ValueError(f"{label}: the matter subsystem belongs to a different MultibodySystem")

    def _check_body(self, body, label):
        if not isinstance(body, MobilizedBody):
            raise TypeError(f"{label}: expected a MobilizedBody, got {type(body).__name__}")
        if body._matter.system is not self.system:
            raise ValueError(f"{label}: {body._label} belongs to a different MultibodySystem")

    def get_num_forces(self) -> int:
        return len(self.elements)
