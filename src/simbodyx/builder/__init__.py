"""Building the multibody system: the mutable, Simbody-shaped construction
API (Body, MobilizedBody, MultibodySystem, SimbodyMatterSubsystem,
GeneralForceSubsystem, GeneralContactSubsystem and the contact force handles)."""

from simbodyx.builder.body import Body as Body
from simbodyx.builder.contact import (
    CompliantContactSubsystem as CompliantContactSubsystem,
    GeneralContactSubsystem as GeneralContactSubsystem,
    HuntCrossleyForce as HuntCrossleyForce,
    SmoothSphereHalfSpaceForce as SmoothSphereHalfSpaceForce,
)
from simbodyx.builder.forces import GeneralForceSubsystem as GeneralForceSubsystem
from simbodyx.builder.mobilized_body import MobilizedBody as MobilizedBody, Mobod as Mobod
from simbodyx.builder.system import (
    MultibodySystem as MultibodySystem,
    SimbodyMatterSubsystem as SimbodyMatterSubsystem,
)
