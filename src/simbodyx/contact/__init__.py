"""Contact geometry and collision detection: the shapes a contact surface
can have (``sx.ContactGeometry``), a surface's material
(``sx.ContactMaterial``), a surface record (a shape on a body at a
frame) and the pair kernels that turn two posed surfaces into point
contacts. Which pairs are checked is fixed when the system is frozen, so
every program has a fixed shape; the force laws that act on the contacts
are force elements (``simbodyx.forces.compliant_contact``)."""

from simbodyx.contact.detection import PointContact as PointContact
from simbodyx.contact.geometry import ContactGeometry as ContactGeometry
from simbodyx.contact.geometry import ContactMaterial as ContactMaterial
from simbodyx.contact.geometry import ContactSurface as ContactSurface
