"""Force elements and their evaluation (``model.forces``).

``Force.UniformGravity(forces, matter, g)`` and friends, as in Simbody; each
element's numbers are differentiable leaves of the Model.
"""

from simbodyx.forces.base import ForceElement as ForceElement
from simbodyx.forces.bushing import LinearBushing
from simbodyx.forces.custom import Controller, Custom
from simbodyx.forces.discrete import DiscreteForces, MobilityActuator, MobilityDiscreteForce
from simbodyx.forces.gravity import Gravity, UniformGravity
from simbodyx.forces.mobility import (
    GlobalDamper,
    MobilityConstantForce,
    MobilityCoulombFriction,
    MobilityLinearDamper,
    MobilityLinearSpring,
    MobilityLinearStop,
)
from simbodyx.forces.point import (
    ConstantForce,
    ConstantTorque,
    TwoPointConstantForce,
    TwoPointLinearDamper,
    TwoPointLinearSpring,
)
from simbodyx.forces.subsystem import Forces as Forces
from simbodyx.forces.thermostat import Thermostat


class Force:
    """Namespace of force elements, Simbody's ``Force::`` classes."""

    UniformGravity = UniformGravity
    Gravity = Gravity
    MobilityLinearSpring = MobilityLinearSpring
    MobilityLinearDamper = MobilityLinearDamper
    MobilityLinearStop = MobilityLinearStop
    MobilityCoulombFriction = MobilityCoulombFriction
    Thermostat = Thermostat
    MobilityConstantForce = MobilityConstantForce
    GlobalDamper = GlobalDamper
    TwoPointLinearSpring = TwoPointLinearSpring
    TwoPointLinearDamper = TwoPointLinearDamper
    TwoPointConstantForce = TwoPointConstantForce
    LinearBushing = LinearBushing
    ConstantForce = ConstantForce
    ConstantTorque = ConstantTorque
    Custom = Custom
    Controller = Controller
    DiscreteForces = DiscreteForces
    MobilityDiscreteForce = MobilityDiscreteForce
    MobilityActuator = MobilityActuator
