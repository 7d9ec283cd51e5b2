"""Constraints: Simbody's built-ins and Constraint.Custom on one protocol
(``base``), their system-level equations (``equations``) and forward
dynamics with them (``dynamics``).

``sx.Constraint.Rod(body1, station1, body2, station2, length)`` and the
others are handles created while building, like MobilizedBody handles; the
frozen Model holds copies without the builder reference. Both answer
queries on States of the frozen model.
"""

from simbodyx.constraints.base import Constraint as Constraint
from simbodyx.constraints.checks import check_derivatives as check_derivatives
from simbodyx.constraints.contact import (
    LineOnLineContact,
    NoSlip1D,
    PointOnPlaneContact,
    SphereOnPlaneContact,
    SphereOnSphereContact,
)
from simbodyx.constraints.coordinate import (
    ConstantAcceleration,
    ConstantCoordinate,
    ConstantSpeed,
    CoordinateCoupler,
    PrescribedMotion,
    SpeedCoupler,
)
from simbodyx.constraints.custom import Custom
from simbodyx.constraints.geometric import (
    Ball,
    ConstantAngle,
    ConstantOrientation,
    PointInPlane,
    PointOnLine,
    Rod,
    Weld,
)
from simbodyx.constraints.kinematics import Kinematics as Kinematics

for _cls in (Rod, Ball, Weld, PointInPlane, PointOnLine, ConstantAngle, ConstantOrientation, NoSlip1D,
             PointOnPlaneContact, SphereOnPlaneContact, SphereOnSphereContact, LineOnLineContact,
             ConstantCoordinate, ConstantSpeed, ConstantAcceleration, CoordinateCoupler, SpeedCoupler,
             PrescribedMotion, Custom):
    setattr(Constraint, _cls.__name__, _cls)
Constraint.ConstantDistance = Rod
Constraint.CoincidentPoints = Ball
Constraint.CoincidentFrames = Weld
