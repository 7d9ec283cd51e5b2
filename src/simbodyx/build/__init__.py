"""The mutable, Simbody-shaped construction API."""

from simbodyx.build.body import Body as Body
from simbodyx.build.mobilized_body import MobilizedBody as MobilizedBody, Mobod as Mobod
from simbodyx.build.system import (
    MultibodySystem as MultibodySystem,
    SimbodyMatterSubsystem as SimbodyMatterSubsystem,
)
