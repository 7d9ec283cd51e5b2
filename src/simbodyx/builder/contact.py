"""Contact while building: ``GeneralContactSubsystem`` (contact sets of
shapes on bodies) and the handles of the contact force elements,
``HuntCrossleyForce``, ``CompliantContactSubsystem`` and
``SmoothSphereHalfSpaceForce``, which Simbody
configures with setters after construction; ``realize_topology`` freezes
each into its element (``simbodyx.forces.compliant_contact``), with the candidate
pairs of its set fixed then."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np

from simbodyx._xla.trace_context import per_context_jit
from simbodyx.builder.forces import ForceHandle
from simbodyx.builder.mobilized_body import MobilizedBody
from simbodyx.contact.detection import candidate_pairs
from simbodyx.contact.geometry import ContactMaterial, ContactSurface, Shape
from simbodyx.forces.base import as_frame, as_param
from simbodyx.forces.compliant_contact import CompliantContact, HuntCrossley, SmoothSphereHalfSpace
from simbodyx.spatial.transform import Transform


class GeneralContactSubsystem:
    """Contact sets: within a set, every two surfaces on different bodies (not
    both on Ground) can touch unless ``exclude_pair`` says otherwise;
    surfaces in different sets never do."""

    def __init__(self, system):
        system.check_not_frozen("add a contact subsystem")
        self.system = system
        self._sets: list[list[tuple]] = []
        self._excluded: list[set] = []

    def create_contact_set(self) -> int:
        """A new, empty contact set; returns its index."""
        self.system.check_not_frozen("create a contact set")
        self._sets.append([])
        self._excluded.append(set())
        return len(self._sets) - 1

    def get_num_contact_sets(self) -> int:
        return len(self._sets)

    def _set(self, contact_set, label):
        if not isinstance(contact_set, (int, np.integer)) or not 0 <= contact_set < len(self._sets):
            raise IndexError(f"{label}: no contact set {contact_set!r} (this subsystem has {len(self._sets)})")
        return self._sets[contact_set]

    def add_body(self, contact_set: int, mobilized_body, geometry, X_BS: Transform | None = None,
                 name: str | None = None, material: ContactMaterial | None = None, margin: float = 0.0) -> int:
        """Put ``geometry`` on ``mobilized_body`` (Ground included) with its frame
        S at ``X_BS`` (in B; identity by default); returns the surface index.
        ``name`` labels the surface in messages; ``material`` (Simbody's
        ContactSurface's) gives the surface's parameters to the set's contact
        forces (a CompliantContactSubsystem needs one on every surface);
        ``margin`` (m, >= 0; not Simbody's, MuJoCo's geom margin) makes the
        surface touch others from that distance apart: a pair's depth is its
        overlap plus the sum of its two margins."""
        label = "GeneralContactSubsystem.add_body"
        self.system.check_not_frozen("add a contact surface")
        members = self._set(contact_set, label)
        if not isinstance(mobilized_body, MobilizedBody):
            raise TypeError(f"{label}: expected a MobilizedBody, got {type(mobilized_body).__name__}")
        if mobilized_body._matter.system is not self.system:
            raise ValueError(f"{label}: {mobilized_body._label} belongs to a different MultibodySystem")
        if not isinstance(geometry, Shape):
            raise TypeError(f"{label}: geometry must be a ContactGeometry shape (Sphere, HalfSpace, ...), "
                            f"got {type(geometry).__name__}")
        if material is not None and not isinstance(material, ContactMaterial):
            raise TypeError(f"{label}: material must be a ContactMaterial, got {type(material).__name__}")
        if not (np.isfinite(margin) and margin >= 0):
            raise ValueError(f"{label}: margin must be finite and >= 0, got {margin}")
        members.append((mobilized_body, geometry, as_frame(Transform() if X_BS is None else X_BS, "X_BS", label),
                        name, material, float(margin)))
        return len(members) - 1

    def exclude_pair(self, contact_set: int, surface1: int, surface2: int) -> None:
        """Never check these two surfaces of the set against each other (what
        Simbody's contact cliques and MuJoCo's contype/conaffinity filters
        and ``<exclude>`` express)."""
        self.system.check_not_frozen("exclude a contact pair")
        for surface in (surface1, surface2):
            self._member(contact_set, surface)
        if surface1 == surface2:
            raise ValueError(f"GeneralContactSubsystem.exclude_pair: surface {surface1} twice")
        self._excluded[contact_set].add((min(surface1, surface2), max(surface1, surface2)))

    def get_num_bodies(self, contact_set: int) -> int:
        return len(self._set(contact_set, "GeneralContactSubsystem.get_num_bodies"))

    def get_body(self, contact_set: int, surface: int):
        return self._member(contact_set, surface)[0]

    def get_body_geometry(self, contact_set: int, surface: int):
        return self._member(contact_set, surface)[1]

    def get_body_transform(self, contact_set: int, surface: int) -> Transform:
        return self._member(contact_set, surface)[2]

    def get_body_material(self, contact_set: int, surface: int) -> ContactMaterial | None:
        return self._member(contact_set, surface)[4]

    def _member(self, contact_set, surface):
        members = self._set(contact_set, "GeneralContactSubsystem")
        if not isinstance(surface, (int, np.integer)) or not 0 <= surface < len(members):
            raise IndexError(f"GeneralContactSubsystem: contact set {contact_set} has no surface {surface!r} "
                             f"({len(members)} surfaces)")
        return members[surface]

    def _surfaces(self, contact_set) -> tuple:
        return tuple(
            ContactSurface(body.index, shape, X_BS,
                           f"surface {i}{f' {name!r}' if name else ''} ({shape.kind} on {body._label})", margin)
            for i, (body, shape, X_BS, name, _, margin) in enumerate(self._set(contact_set, "GeneralContactSubsystem")))


class _PointContactHandle(ForceHandle):
    """What HuntCrossleyForce and CompliantContactSubsystem share: a contact
    set, the transition velocity (default 0.01 m/s, Simbody's), the
    per-point forces, and per-surface parameters frozen into the element."""

    def __init__(self, forces, contacts: GeneralContactSubsystem, contact_set: int):
        if not isinstance(contacts, GeneralContactSubsystem) or contacts.system is not forces.system:
            raise ValueError(f"{self.label}: needs a GeneralContactSubsystem of the same MultibodySystem")
        contacts._set(contact_set, self.label)
        self._contacts, self._set_index = contacts, contact_set
        self._transition_velocity = 0.01
        forces._adopt(self)

    def get_transition_velocity(self) -> float:
        return self._transition_velocity

    def set_transition_velocity(self, v) -> None:
        self._forces.system.check_not_frozen(f"change {self.label}")
        v = float(as_param(v, (), "transition velocity", self.label))
        if not v > 0:
            raise ValueError(f"{self.label}: the transition velocity must be positive, got {v}")
        self._transition_velocity = v

    def get_contact_set_index(self) -> int:
        return self._set_index

    def get_contact_forces(self, model, state):
        """Every candidate contact point's ``ContactForces`` (location, normal,
        depth, force on surface 2) for a State realized to Velocity."""
        state.require(self._stage_needed, f"{self.label}.get_contact_forces")
        return _contact_forces(self.element(model), model, state)

    def _surface_parameters(self, surface: int) -> tuple:
        """(stiffness, dissipation, static, dynamic, viscous friction) of one surface."""
        raise NotImplementedError

    def _freeze(self, element_type, **options):
        surfaces = self._contacts._surfaces(self._set_index)
        columns = np.array([self._surface_parameters(i) for i in range(len(surfaces))]).reshape(-1, 5).T
        pairs = candidate_pairs(surfaces, self.label, frozenset(self._contacts._excluded[self._set_index]))
        return element_type(surfaces, pairs, *columns, np.asarray(self._transition_velocity), self.label, **options)


@per_context_jit(eqx.filter_jit)
def _contact_forces(element, model, state):
    """An element's contact forces as one compiled program: called eagerly,
    operation by operation, they would compile each operation on its own."""
    return element.contact_forces(model, state)


class HuntCrossleyForce(_PointContactHandle):
    """Simbody's HuntCrossleyForce on the point contacts of one contact set.

    ``set_body_parameters(surface, stiffness, dissipation, static_friction,
    dynamic_friction, viscous_friction)`` per surface; a surface without
    them takes its ContactMaterial's, or Simbody's defaults 1, 0, 0, 0, 0.
    ``set_transition_velocity`` (default 0.01 m/s). A contact whose
    Hunt-Crossley force would pull is given zero force.
    """

    def __init__(self, forces, contacts: GeneralContactSubsystem, contact_set: int):
        self.label = "HuntCrossleyForce"
        self._parameters: dict[int, tuple] = {}
        super().__init__(forces, contacts, contact_set)

    def set_body_parameters(self, surface: int, stiffness, dissipation, static_friction, dynamic_friction,
                            viscous_friction) -> None:
        self._forces.system.check_not_frozen(f"change {self.label}")
        self._contacts._member(self._set_index, surface)
        names = ("stiffness", "dissipation", "static friction", "dynamic friction", "viscous friction")
        values = tuple(float(as_param(x, (), name, self.label)) for x, name in zip(
            (stiffness, dissipation, static_friction, dynamic_friction, viscous_friction), names))
        negative = [name for name, x in zip(names, values) if x < 0]
        if negative:
            raise ValueError(f"{self.label}: surface {surface}'s {negative[0]} must be >= 0, got {values}")
        if values[3] > values[2]:
            raise ValueError(f"{self.label}: surface {surface}'s dynamic friction {values[3]} is above its "
                             f"static friction {values[2]}")
        self._parameters[surface] = values

    def _surface_parameters(self, surface: int) -> tuple:
        material = self._contacts.get_body_material(self._set_index, surface)
        return self._parameters.get(surface, (1.0, 0.0, 0.0, 0.0, 0.0) if material is None else material.values())

    def freeze(self) -> HuntCrossley:
        return self._freeze(HuntCrossley)


class CompliantContactSubsystem(_PointContactHandle):
    """Simbody's CompliantContactSubsystem on the surfaces of one contact set,
    each with its ContactMaterial (``GeneralContactSubsystem.add_body(...,
    material=)``): Hertz contact, elliptical where the surfaces' curvatures
    differ (an ellipsoid on a half-space), a brick's vertices on a half-space
    by Simbody's penalty law, and Simbody's quintic Stribeck friction with
    the transition velocity (``set_transition_velocity``, default 0.01
    m/s). Simbody's is a force subsystem with a contact tracker; here it is
    an element of a GeneralForceSubsystem on a contact set, whose candidate
    pairs are fixed by ``realize_topology``.
    """

    def __init__(self, forces, contacts: GeneralContactSubsystem, contact_set: int):
        self.label = "CompliantContactSubsystem"
        self._track_dissipated_energy, self._frozen = False, None
        super().__init__(forces, contacts, contact_set)

    def set_track_dissipated_energy(self, should_track: bool = True) -> None:
        """Integrate the power the contacts dissipate into an auxiliary state
        z (off by default, as in Simbody), read with ``get_dissipated_energy``."""
        self._forces.system.check_not_frozen(f"change {self.label}")
        self._track_dissipated_energy = bool(should_track)

    def get_track_dissipated_energy(self) -> bool:
        return self._track_dissipated_energy

    def _energy_index(self, what: str) -> int:
        if not self._track_dissipated_energy or self._frozen is None:
            raise ValueError(f"{self.label}.{what}: the dissipated energy is not tracked; call "
                             "set_track_dissipated_energy() before realize_topology")
        return self._frozen.z_start

    def get_dissipated_energy(self, state):
        """The energy (J) the contacts have dissipated since it was last set (Simbody's: since 0)."""
        return state.z[self._energy_index("get_dissipated_energy")]

    def set_dissipated_energy(self, state, energy):
        """A new State with the dissipated energy set (>= 0)."""
        index = self._energy_index("set_dissipated_energy")
        if not isinstance(energy, jax.core.Tracer) and np.any(np.asarray(energy) < 0):
            raise ValueError(f"{self.label}.set_dissipated_energy: the energy must be >= 0, got {energy}")
        return state.with_z(state.z.at[index].set(energy))

    def _surface_parameters(self, surface: int) -> tuple:
        material = self._contacts.get_body_material(self._set_index, surface)
        if material is None:
            name = self._contacts._surfaces(self._set_index)[surface].name
            raise ValueError(f"{self.label}: {name} has no ContactMaterial (give one with "
                             f"GeneralContactSubsystem.add_body(..., material=sx.ContactMaterial(...)))")
        return material.values()

    def freeze(self) -> CompliantContact:
        self._frozen = self._freeze(CompliantContact, track_dissipated_energy=self._track_dissipated_energy)
        return self._frozen  # realize_topology places its z (z_start)


class SmoothSphereHalfSpaceForce(ForceHandle):
    """Simbody's SmoothSphereHalfSpaceForce (see ``forces.compliant_contact.SmoothSphereHalfSpace``
    for the formula): set the bodies, the sphere and the half-space frame,
    and the parameters (Simbody's defaults: stiffness 1, dissipation 0,
    frictions 0, transition velocity 0.01 m/s, cf 1e-5, bd 300, bv 50)."""

    _NAMES = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction",
              "transition_velocity", "constant_contact_force", "hertz_smoothing", "hunt_crossley_smoothing")

    def __init__(self, forces):
        self.label = "SmoothSphereHalfSpaceForce"
        self._values = dict(zip(self._NAMES, (1.0, 0.0, 0.0, 0.0, 0.0, 0.01, 1e-5, 300.0, 50.0)))
        self._sphere_body = self._half_space_body = None
        self._sphere_location, self._radius = np.zeros(3), None
        self._half_space_frame = Transform()
        forces._adopt(self)

    def _set(self, name, value):
        self._forces.system.check_not_frozen(f"change {self.label}")
        value = float(as_param(value, (), name, self.label))
        if value < 0:
            raise ValueError(f"{self.label}: {name} must be >= 0, got {value}")
        self._values[name] = value

    def set_parameters(self, stiffness, dissipation, static_friction, dynamic_friction, viscous_friction,
                       transition_velocity, cf, bd, bv) -> None:
        for name, value in zip(self._NAMES, (stiffness, dissipation, static_friction, dynamic_friction,
                                             viscous_friction, transition_velocity, cf, bd, bv)):
            self._set(name, value)

    def set_stiffness(self, v): self._set("stiffness", v)
    def set_dissipation(self, v): self._set("dissipation", v)
    def set_static_friction(self, v): self._set("static_friction", v)
    def set_dynamic_friction(self, v): self._set("dynamic_friction", v)
    def set_viscous_friction(self, v): self._set("viscous_friction", v)
    def set_transition_velocity(self, v): self._set("transition_velocity", v)
    def set_constant_contact_force(self, v): self._set("constant_contact_force", v)
    def set_hertz_smoothing(self, v): self._set("hertz_smoothing", v)
    def set_hunt_crossley_smoothing(self, v): self._set("hunt_crossley_smoothing", v)

    def _body(self, body):
        self._forces.system.check_not_frozen(f"change {self.label}")
        self._forces._check_body(body, self.label)
        return body

    def set_contact_sphere_body(self, body) -> None:
        self._sphere_body = self._body(body)

    def set_contact_half_space_body(self, body) -> None:
        self._half_space_body = self._body(body)

    def set_contact_sphere_location_in_body(self, location) -> None:
        self._sphere_location = as_param(location, (3,), "sphere location", self.label)

    def set_contact_sphere_radius(self, radius) -> None:
        radius = float(as_param(radius, (), "radius", self.label))
        if not radius > 0:
            raise ValueError(f"{self.label}: the contact sphere's radius must be positive, got {radius}")
        self._radius = radius

    def set_contact_half_space_frame(self, X: Transform) -> None:
        self._half_space_frame = as_frame(X, "half-space frame", self.label)

    def get_body_sphere(self):
        return self._sphere_body

    def get_body_half_space(self):
        return self._half_space_body

    def get_contact_sphere_location_in_body(self):
        return self._sphere_location

    def get_contact_sphere_radius(self):
        return self._radius

    def get_contact_half_space_transform(self) -> Transform:
        return self._half_space_frame

    def get_contact_force(self, model, state):
        """(contact point (3,), force (3,) on the half-space body) in G, for a
        State realized to Velocity; the sphere's body gets the negative."""
        state.require(self._stage_needed, f"{self.label}.get_contact_force")
        return self.element(model).contact_force(model, state)

    def freeze(self) -> SmoothSphereHalfSpace:
        missing = [what for what, v in (("set_contact_sphere_body", self._sphere_body),
                                        ("set_contact_half_space_body", self._half_space_body),
                                        ("set_contact_sphere_radius", self._radius)) if v is None]
        if missing:
            raise ValueError(f"{self.label}: call {', '.join(missing)} before realize_topology")
        return SmoothSphereHalfSpace(self._sphere_body.index, self._half_space_body.index, self._sphere_location,
                                     np.asarray(self._radius), self._half_space_frame,
                                     *(np.asarray(self._values[n]) for n in self._NAMES))
