"""GeneralForceSubsystem: holds the force elements while building; the
frozen Model evaluates them through ``model.forces``
(``simbodyx.forces.subsystem``)."""

from __future__ import annotations

from simbodyx.builder.mobilized_body import MobilizedBody
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
        element.check()
        self.elements.append(element)

    def _adopt(self, handle):
        """Add a ForceHandle, frozen into its element by realize_topology."""
        self.system.check_not_frozen(f"add {handle.label}")
        handle._forces = self
        self.elements.append(handle)

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


class ForceHandle:
    """A force that, as in Simbody, is configured by setters after it is
    constructed; ``realize_topology`` stores ``freeze()``'s element in the
    Model, and ``element(model)`` finds it there."""

    label: str
    _forces: GeneralForceSubsystem
    _stage_needed = Stage.Velocity

    def freeze(self):
        raise NotImplementedError

    def element(self, model):
        """This force's element in ``model`` (a Model of this handle's system)."""
        flat = [e for fs in self._forces.system._force_subsystems for e in fs.elements]
        index = next(i for i, e in enumerate(flat) if e is self)
        return model.force_elements[index]
