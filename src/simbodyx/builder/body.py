"""Body: the mass properties a mobilized body carries (Simbody's ``Body``)."""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx.spatial.inertia import Inertia, MassProperties


class Body:
    """Namespace for body kinds: ``Body.Rigid(mass_properties)`` and ``Body.Massless()``."""

    def __init__(self, mass_properties: MassProperties):
        if not isinstance(mass_properties, MassProperties):
            raise TypeError(
                f"a Body needs a MassProperties, got {type(mass_properties).__name__}"
            )
        self.mass_properties = mass_properties

    def get_default_rigid_body_mass_properties(self) -> MassProperties:
        return self.mass_properties

    def set_default_rigid_body_mass_properties(self, mass_properties: MassProperties) -> Body:
        Body.__init__(self, mass_properties)
        return self


class Rigid(Body):
    """A rigid body; ``Body.Rigid()`` has Simbody's default mass 1, mass center at
    the origin and unit central inertia."""

    def __init__(self, mass_properties: MassProperties | None = None):
        if mass_properties is None:
            mass_properties = MassProperties(1.0, jnp.zeros(3), Inertia(1.0))
        super().__init__(mass_properties)


class Massless(Body):
    """A body with no mass (for example the intermediate of a compound joint)."""

    def __init__(self):
        super().__init__(MassProperties(0.0))


Body.Rigid = Rigid
Body.Massless = Massless
