"""Joint kinds: X_FM(q), H_FM, N, NInv and NDot for each mobilizer family.

One module per family; every kind follows :class:`Mobilizer`'s protocol.
"""

from simbodyx.mobilizers.axial import Cylinder as Cylinder, Pin as Pin, Screw as Screw, Slider as Slider
from simbodyx.mobilizers.base import Mobilizer as Mobilizer
from simbodyx.mobilizers.custom import Custom as Custom, FunctionBased as FunctionBased
from simbodyx.mobilizers.euler import Bushing as Bushing, Gimbal as Gimbal, Universal as Universal
from simbodyx.mobilizers.fixed import Ground as Ground, Weld as Weld
from simbodyx.mobilizers.orientation import (
    Ball as Ball,
    Ellipsoid as Ellipsoid,
    Free as Free,
    FreeLine as FreeLine,
    LineOrientation as LineOrientation,
)
from simbodyx.mobilizers.planar import Planar as Planar
from simbodyx.mobilizers.polar import BendStretch as BendStretch, SphericalCoords as SphericalCoords
from simbodyx.mobilizers.reverse import Reversed as Reversed
from simbodyx.mobilizers.translation import Translation as Translation
