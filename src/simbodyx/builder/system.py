"""MultibodySystem and SimbodyMatterSubsystem: the mutable, Simbody-shaped
construction API that ends in ``realize_topology() -> (Model, State)``."""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.builder.forces import ForceHandle
from simbodyx.builder.mobilized_body import MobilizedBody
from simbodyx.rigid_contact.unilateral import (
    BoundedSpeedConstraint,
    HardStopLower,
    HardStopUpper,
    StateLimitedFriction,
    UnilateralContact,
    UnilateralSpeedConstraint,
)
from simbodyx.model import Model
from simbodyx.parameters import Parameters
from simbodyx.soft_constraints import SoftConstraints
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import device_array
from simbodyx.state import State
from simbodyx.topology import Topology


def _positive_scale(x, what: str) -> float:
    value = float(x)
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"MultibodySystem: the default {what} must be a positive finite number, got {x!r}")
    return value


def _element(handle):
    """The frozen Model's copy of a Constraint or Motion handle: the same numbers
    and indices, no reference to the builder."""
    element = copy.copy(handle)
    object.__setattr__(element, "matter", None)
    return element


def _frozen(force):
    """The Model's element of a force: a ForceHandle's ``freeze()``, checked."""
    if not isinstance(force, ForceHandle):
        return force
    element = force.freeze()
    element.check()
    return element


def _place_z(elements) -> None:
    """Each element's auxiliary states z after the previous elements' (its
    static ``z_start``, set on the element itself: the handle or the
    element the user holds reads it there)."""
    start = 0
    for element in elements:
        if element.num_z():
            object.__setattr__(element, "z_start", start)
            start += element.num_z()


class MultibodySystem:
    """A system: one matter subsystem (and, later, force subsystems).

    Build it, then call :meth:`realize_topology` once; after that the system
    is frozen and further building is an error.
    """

    def __init__(self):
        self._matter = None
        self._force_subsystems = []
        self._realized: tuple[Model, State] | None = None
        self._time_scale, self._length_scale = 0.1, 1.0

    def set_default_time_scale(self, time_scale: float) -> MultibodySystem:
        """Simbody's characteristic time (default 0.1): the time scale on which
        velocity constraints are stabilized, and an integrator's first step."""
        self.check_not_frozen("set the default time scale")
        self._time_scale = _positive_scale(time_scale, "time scale")
        return self

    def get_default_time_scale(self) -> float:
        return self._time_scale

    def set_default_length_scale(self, length_scale: float) -> MultibodySystem:
        """Simbody's unit length hint (default 1; e.g. 0.01 for a toy car in MKS)."""
        self.check_not_frozen("set the default length scale")
        self._length_scale = _positive_scale(length_scale, "length scale")
        return self

    def get_default_length_scale(self) -> float:
        return self._length_scale

    def get_matter_subsystem(self):
        if self._matter is None:
            raise ValueError("this MultibodySystem has no SimbodyMatterSubsystem yet")
        return self._matter

    @property
    def is_frozen(self) -> bool:
        return self._realized is not None

    def check_not_frozen(self, action: str) -> None:
        if self.is_frozen:
            raise RuntimeError(
                f"cannot {action}: this MultibodySystem was frozen by realize_topology(); "
                "build a new system to change the model"
            )

    def realize_topology(self) -> tuple[Model, State]:
        """Freeze the system: return the Model and its default State (stage Model).

        Called again, it returns the same pair.
        """
        if self._realized is None:
            matter = self.get_matter_subsystem()
            topology = matter.topology()
            dtype = jnp.result_type(float)
            elements = tuple(_frozen(e) for fs in self._force_subsystems for e in fs.elements)
            _place_z(elements)
            elements = jax.tree.map(lambda a: device_array(a, dtype), elements)
            model = Model(topology, matter.parameters(), elements, tuple(matter._constraint_disabled_by_default),
                          tuple(matter._motion_disabled_by_default), self._time_scale, self._length_scale)
            self._realized = (model, model.default_state())
        return self._realized


class SimbodyMatterSubsystem:
    """The tree of mobilized bodies; ``Ground()`` is body 0."""

    def __init__(self, system: MultibodySystem):
        if not isinstance(system, MultibodySystem):
            raise TypeError(f"SimbodyMatterSubsystem needs a MultibodySystem, got {type(system).__name__}")
        system.check_not_frozen("add a matter subsystem")
        if system._matter is not None:
            raise ValueError("this MultibodySystem already has a SimbodyMatterSubsystem")
        system._matter = self
        self.system = system
        self._use_euler_angles = False
        self._bodies = []
        self._constraints = []
        self._constraint_disabled_by_default = []
        self._motions = []
        self._motion_disabled_by_default = []
        self._unilateral_contacts = []
        self._unilateral_speeds = []
        self._bounded_speeds = []
        self._state_limited_frictions = []
        self._soft_constraints = None
        self._topology_cache: Topology | None = None
        self._ground = MobilizedBody.Ground._create(self)

    # -- building --------------------------------------------------------------------
    def Ground(self):
        """The Ground mobilized body (index 0)."""
        return self._ground

    get_ground = Ground

    def set_use_euler_angles(self, use_euler_angles: bool) -> None:
        """Model-stage option: replace every quaternion by body-fixed X-Y-Z angles."""
        self.system.check_not_frozen("change the Euler-angle option")
        self._use_euler_angles = bool(use_euler_angles)
        self._invalidate()

    def get_use_euler_angles(self) -> bool:
        return self._use_euler_angles

    def get_num_bodies(self) -> int:
        """Number of mobilized bodies, Ground included."""
        return len(self._bodies)

    def get_mobilized_body(self, index: int):
        if not 0 <= int(index) < len(self._bodies):
            raise IndexError(f"no mobilized body {index}; this subsystem has {len(self._bodies)}")
        return self._bodies[int(index)]

    def _add(self, body) -> int:
        self.system.check_not_frozen(f"add {type(body).__name__}")
        self._bodies.append(body)
        self._invalidate()
        return len(self._bodies) - 1

    def _check_handles(self, what: str, handles) -> None:
        """The registration check of an element's handles (a Constraint's or a
        Motion's): each a MobilizedBody of this subsystem."""
        for h in handles:
            if not isinstance(h, MobilizedBody):
                raise TypeError(f"{what}: expected MobilizedBody handles, got {type(h).__name__}")
            if h._matter is not self:
                raise ValueError(f"{what}: {h._label} belongs to a different matter subsystem")

    def _add_constraint(self, constraint) -> None:
        self.system.check_not_frozen(f"add {constraint.label}")
        self._constraints.append(constraint)
        self._constraint_disabled_by_default.append(False)

    def get_num_constraints(self) -> int:
        return len(self._constraints)

    def get_constraint(self, index: int):
        """The constraint handle with this ConstraintIndex."""
        if not 0 <= int(index) < len(self._constraints):
            raise IndexError(f"no constraint {index}; this subsystem has {len(self._constraints)}")
        return self._constraints[int(index)]

    def _set_constraint_disabled_by_default(self, index: int, disabled: bool) -> None:
        self.system.check_not_frozen(f"change {self._constraints[index].label}")
        self._constraint_disabled_by_default[index] = bool(disabled)

    # -- MuJoCo's constraint model ------------------------------------------------------
    def set_soft_constraints(self, constraints) -> None:
        """Give the Model MuJoCo's constraint model of this tree
        (``simbodyx.soft_constraints.SoftConstraints``, which
        ``sx.io.load_mjcf`` builds from a file): its Acceleration stage then
        solves them. None removes them."""
        self.system.check_not_frozen("set soft constraints")
        if constraints is not None and not isinstance(constraints, SoftConstraints):
            raise TypeError(f"set_soft_constraints: expected a simbodyx.soft_constraints.SoftConstraints, "
                            f"got {type(constraints).__name__}")
        self._soft_constraints = constraints

    # -- conditional constraints -------------------------------------------------------
    def adopt_unilateral_contact(self, contact) -> int:
        """Make ``contact`` (an ``sx.HardStopUpper``, ``sx.PointPlaneContact``, ...)
        one of the unilateral contacts the rigid-contact time stepper enforces;
        returns its UnilateralContactIndex."""
        return self._adopt("adopt_unilateral_contact", self._unilateral_contacts, contact, UnilateralContact,
                           "a unilateral contact (sx.HardStopUpper, sx.PointPlaneContact, ...)")

    def adopt_unilateral_speed_constraint(self, constraint) -> int:
        """Adopt an ``sx.UnilateralSpeedConstraint`` (a ratchet) for the time stepper; returns its index."""
        return self._adopt("adopt_unilateral_speed_constraint", self._unilateral_speeds, constraint,
                           UnilateralSpeedConstraint, "an sx.UnilateralSpeedConstraint")

    def adopt_bounded_speed_constraint(self, constraint) -> int:
        """Adopt an ``sx.BoundedSpeedConstraint`` (a motor of limited strength) for the
        time stepper; returns its index."""
        return self._adopt("adopt_bounded_speed_constraint", self._bounded_speeds, constraint,
                           BoundedSpeedConstraint, "an sx.BoundedSpeedConstraint")

    def adopt_state_limited_friction(self, friction) -> int:
        """Adopt an ``sx.StateLimitedFriction`` (friction whose normal force the
        State gives) for the time stepper; returns its StateLimitedFrictionIndex."""
        return self._adopt("adopt_state_limited_friction", self._state_limited_frictions, friction,
                           StateLimitedFriction, "an sx.StateLimitedFriction")

    def _adopt(self, what: str, registry: list, element, cls, expected: str) -> int:
        if not isinstance(element, cls):
            raise TypeError(f"{what}: expected {expected}, got {type(element).__name__}")
        self.system.check_not_frozen(f"adopt {element.label}")
        if element.matter is not self:
            raise ValueError(f"{what}: {element.label} belongs to a different matter subsystem")
        if element.index is not None:
            raise ValueError(f"{what}: {element.label} was already adopted (index {element.index})")
        self._check_stops(element)
        object.__setattr__(element, "index", len(registry))
        registry.append(element)
        return element.index

    def _check_stops(self, stop) -> None:
        """A hard stop's limit against the opposite stops on the same coordinate."""
        if not isinstance(stop, (HardStopLower, HardStopUpper)):
            return
        c = self._constraints[stop.constraint]
        for other in self._unilateral_contacts:
            o = self._constraints[other.constraint]
            if type(other) in (HardStopLower, HardStopUpper) and type(other) is not type(stop) \
                    and (o.mobilizers, o.which_q) == (c.mobilizers, c.which_q):
                lower, upper = (o, c) if isinstance(other, HardStopLower) else (c, o)
                if lower.position > upper.position:
                    raise ValueError(f"{stop.label}: the lower limit {float(lower.position)} exceeds the upper "
                                     f"limit {float(upper.position)} of {other.label} on the same coordinate")

    def get_num_unilateral_contacts(self) -> int:
        return len(self._unilateral_contacts)

    def get_unilateral_contact(self, index: int):
        """The unilateral contact with this UnilateralContactIndex."""
        if not 0 <= int(index) < len(self._unilateral_contacts):
            raise IndexError(f"no unilateral contact {index}; this subsystem has {len(self._unilateral_contacts)}")
        return self._unilateral_contacts[int(index)]

    upd_unilateral_contact = get_unilateral_contact

    def get_num_unilateral_speed_constraints(self) -> int:
        return len(self._unilateral_speeds)

    def get_num_bounded_speed_constraints(self) -> int:
        return len(self._bounded_speeds)

    def get_num_state_limited_frictions(self) -> int:
        return len(self._state_limited_frictions)

    def get_state_limited_friction(self, index: int):
        """The state-limited friction with this StateLimitedFrictionIndex."""
        if not 0 <= int(index) < len(self._state_limited_frictions):
            raise IndexError(f"no state-limited friction {index}; this subsystem has "
                             f"{len(self._state_limited_frictions)}")
        return self._state_limited_frictions[int(index)]

    upd_state_limited_friction = get_state_limited_friction

    def _add_motion(self, motion) -> int:
        """Record a Motion (one per mobilized body) and return its index."""
        self.system.check_not_frozen(f"add {motion.label}")
        other = self._motion_of(motion.body)
        if other is not None:
            raise ValueError(f"{motion.label}: this mobilized body already has a Motion ({other.label})")
        self._motions.append(motion)
        self._motion_disabled_by_default.append(False)
        return len(self._motions) - 1

    def _motion_of(self, body: int):
        """The Motion of a mobilized body, or None."""
        return next((m for m in self._motions if m.body == body), None)

    def get_num_motions(self) -> int:
        return len(self._motions)

    def _set_motion_disabled_by_default(self, index: int, disabled: bool) -> None:
        self.system.check_not_frozen(f"change {self._motions[index].label}")
        self._motion_disabled_by_default[index] = bool(disabled)

    def _invalidate(self) -> None:
        self._topology_cache = None

    # -- freezing --------------------------------------------------------------------
    def topology(self) -> Topology:
        """The static tree as currently built (cached until the next change)."""
        if self.system.is_frozen:
            return self.system._realized[0].topology
        if self._topology_cache is None:
            specs = tuple(b._spec() for b in self._bodies)
            self._topology_cache = Topology(specs, self._use_euler_angles)
        return self._topology_cache

    def parameters(self) -> Parameters:
        """Every body's numbers stacked into the Model's array leaves."""
        dtype = jnp.result_type(float)
        bodies = self._bodies
        mp = [b._mass_properties for b in bodies]

        def stack(values, shape=None):
            values = np.stack([np.asarray(v, dtype=np.float64) for v in values])
            return device_array(values if shape is None else values.reshape(shape), dtype)

        def frames(xs):
            return Transform(stack([x.R for x in xs]), stack([x.p for x in xs]))

        def elements(handles):
            """The Model's copies of element handles, their numbers in the Model's dtype."""
            return jax.tree.map(lambda a: device_array(a, dtype), tuple(_element(h) for h in handles))

        joint_params = tuple(
            stack([bodies[b]._joint_params for b in group.bodies], (len(group.bodies), group.kind.num_params))
            for group in self.topology().groups
        )
        armature = [a for b in bodies for a in b._armature]
        if self._soft_constraints is not None and (self._constraints or self._motions):
            raise ValueError(f"this matter subsystem has soft constraints (MuJoCo's constraint model) and "
                             f"{len(self._constraints)} constraints and {len(self._motions)} Motions: a Model "
                             f"solves one or the other")
        return Parameters(
            mass=stack([m.mass for m in mp]),
            com=stack([m.com for m in mp]),
            central_inertia=stack([m.calc_central_inertia().matrix for m in mp]),
            X_PF=frames([b._X_PF for b in bodies]),
            X_BM=frames([b._X_BM for b in bodies]),
            joint_params=joint_params,
            armature=stack(armature) if any(armature) else None,
            constraints=jax.tree.map(
                lambda a: device_array(a, dtype) if jnp.issubdtype(jnp.result_type(a), jnp.inexact) else a,
                tuple(_element(c) for c in self._constraints)),
            motions=elements(self._motions),
            unilateral_contacts=elements(self._unilateral_contacts),
            unilateral_speeds=elements(self._unilateral_speeds),
            bounded_speeds=elements(self._bounded_speeds),
            state_limited_frictions=elements(self._state_limited_frictions),
            soft_constraints=None if self._soft_constraints is None else jax.tree.map(
                lambda a: device_array(a, dtype) if jnp.issubdtype(jnp.result_type(a), jnp.inexact) else a,
                self._soft_constraints),
        )
