"""Contact shapes (Simbody's ``ContactGeometry``) and ``ContactSurface``, a
shape fixed to a body at a frame S. Sizes (m) are Model leaves, so
gradients with respect to them work; each shape is described in its own
frame S."""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.spatial.transform import Transform


def _positive(x, shape, what, label):
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{label}: {what} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"{label}: {what} must be positive and finite, got {a}")
    return a


class Shape(Module):
    """A contact shape; ``kind`` names it in pair tables and messages."""

    kind: ClassVar[str] = "Shape"


class HalfSpace(Shape):
    """The half-space x > 0 of S (Simbody's): its surface is the plane x = 0
    and its outward normal is -x. Usually on Ground."""

    kind: ClassVar[str] = "HalfSpace"


class Sphere(Shape):
    """A sphere of ``radius`` (m) centred at S's origin."""

    kind: ClassVar[str] = "Sphere"
    radius: jnp.ndarray

    def __init__(self, radius):
        self.radius = _positive(radius, (), "radius", "ContactGeometry.Sphere")


class Ellipsoid(Shape):
    """An ellipsoid with semi-axes ``radii`` (m) along S's x, y, z."""

    kind: ClassVar[str] = "Ellipsoid"
    radii: jnp.ndarray

    def __init__(self, radii):
        self.radii = _positive(radii, (3,), "radii", "ContactGeometry.Ellipsoid")


class Brick(Shape):
    """A rectangular box with ``half_lengths`` (m) along S's x, y, z, centred
    at S's origin (Simbody's ContactGeometry::Brick)."""

    kind: ClassVar[str] = "Brick"
    half_lengths: jnp.ndarray

    def __init__(self, half_lengths):
        self.half_lengths = _positive(half_lengths, (3,), "half_lengths", "ContactGeometry.Brick")


class Cylinder(Shape):
    """A solid cylinder of ``radius`` (m) around S's z axis, from
    -``half_length`` to +``half_length`` along it (MJCF's; Simbody's
    ContactGeometry::Cylinder is infinite and has no contact)."""

    kind: ClassVar[str] = "Cylinder"
    radius: jnp.ndarray
    half_length: jnp.ndarray

    def __init__(self, radius, half_length):
        self.radius = _positive(radius, (), "radius", "ContactGeometry.Cylinder")
        self.half_length = _positive(half_length, (), "half_length", "ContactGeometry.Cylinder")


class Capsule(Shape):
    """MJCF's capsule: the points within ``radius`` (m) of the segment from
    -``half_length`` to +``half_length`` along S's z."""

    kind: ClassVar[str] = "Capsule"
    radius: jnp.ndarray
    half_length: jnp.ndarray

    def __init__(self, radius, half_length):
        self.radius = _positive(radius, (), "radius", "ContactGeometry.Capsule")
        self.half_length = _positive(half_length, (), "half_length", "ContactGeometry.Capsule")


class HeightField(Shape):
    """A terrain (MJCF's height field): the solid below the surface z =
    ``heights`` (nrow, ncol; m) over the rectangle |x| <= ``half_lengths[0]``,
    |y| <= ``half_lengths[1]`` of S (m), the height of row r and column c at
    x = -hx + 2 hx c / (ncol - 1), y = -hy + 2 hy r / (nrow - 1); each grid
    cell is two triangles split by its diagonal from its lowest (row,
    column) corner to its highest, as MuJoCo's are. Nothing beyond the
    rectangle touches it."""

    kind: ClassVar[str] = "HeightField"
    heights: jnp.ndarray
    half_lengths: jnp.ndarray

    def __init__(self, heights, half_lengths):
        label = "ContactGeometry.HeightField"
        heights = np.asarray(heights, dtype=np.float64)
        if heights.ndim != 2 or min(heights.shape) < 2:
            raise ValueError(f"{label}: heights must be a (nrow, ncol) grid with at least 2 of each, "
                             f"got shape {heights.shape}")
        if not np.all(np.isfinite(heights)):
            raise ValueError(f"{label}: heights must be finite")
        self.heights = heights
        self.half_lengths = _positive(half_lengths, (2,), "half_lengths", label)


def grid_triangles(heights, half_lengths):
    """A height grid's surface as triangles, split as :class:`HeightField`'s
    are: (vertices (nrow * ncol, 3) in S, m; faces (2 (nrow - 1) (ncol - 1),
    3) counter-clockwise seen from above, vertex indices). numpy, for
    drawing."""
    heights = np.asarray(heights, dtype=np.float64)
    rows, columns = heights.shape
    x = np.linspace(-half_lengths[0], half_lengths[0], columns)
    y = np.linspace(-half_lengths[1], half_lengths[1], rows)
    vertices = np.stack([*np.meshgrid(x, y), heights], axis=-1).reshape(-1, 3)
    corner = (np.arange(rows - 1)[:, None] * columns + np.arange(columns - 1)[None, :]).ravel()
    low, right, up, high = corner, corner + 1, corner + columns, corner + columns + 1
    faces = np.concatenate([np.stack([low, right, high], 1), np.stack([low, high, up], 1)])
    return vertices, faces


class ContactGeometry:
    """Namespace of contact shapes, Simbody's ``ContactGeometry::``."""

    HalfSpace = HalfSpace
    Sphere = Sphere
    Ellipsoid = Ellipsoid
    Brick = Brick
    Cylinder = Cylinder
    Capsule = Capsule
    HeightField = HeightField


class ContactMaterial:
    """Simbody's ContactMaterial: a surface's ``stiffness`` k (Pa, the
    plain-strain modulus Hertz contact uses; at a brick's vertices, N/m),
    ``dissipation`` c (s/m), and its ``static_friction``,
    ``dynamic_friction`` (<= static) and ``viscous_friction`` (s/m)
    coefficients. Given to a surface with
    ``GeneralContactSubsystem.add_body(..., material=)``."""

    def __init__(self, stiffness, dissipation, static_friction, dynamic_friction, viscous_friction=0.0):
        names = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction")
        values = [float(np.asarray(x, np.float64)) for x in (stiffness, dissipation, static_friction,
                                                             dynamic_friction, viscous_friction)]
        for name, value in zip(names, values):
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"ContactMaterial: {name} must be finite and >= 0, got {value}")
        if values[3] > values[2]:
            raise ValueError(f"ContactMaterial: dynamic_friction {values[3]} is above static_friction {values[2]}")
        (self.stiffness, self.dissipation, self.static_friction, self.dynamic_friction,
         self.viscous_friction) = values

    def values(self) -> tuple:
        """(stiffness, dissipation, static, dynamic, viscous friction)."""
        return (self.stiffness, self.dissipation, self.static_friction, self.dynamic_friction,
                self.viscous_friction)

    def __repr__(self) -> str:
        return "ContactMaterial({}, {}, {}, {}, {})".format(*self.values())

    def get_stiffness(self) -> float:
        return self.stiffness

    def get_stiffness23(self) -> float:
        """k^(2/3), the form in which Hertz contact combines two stiffnesses."""
        return self.stiffness ** (2.0 / 3.0)

    def get_dissipation(self) -> float:
        return self.dissipation

    def get_static_friction(self) -> float:
        return self.static_friction

    def get_dynamic_friction(self) -> float:
        return self.dynamic_friction

    def get_viscous_friction(self) -> float:
        return self.viscous_friction

    @staticmethod
    def calc_plane_strain_stiffness(youngs_modulus, poissons_ratio) -> float:
        """E / (1 - nu^2), for a material free to bulge (Pa)."""
        E, nu = _elastic_constants(youngs_modulus, poissons_ratio, "calc_plane_strain_stiffness", nu_below_half=False)
        return E / (1 - nu * nu)

    @staticmethod
    def calc_confined_compression_stiffness(youngs_modulus, poissons_ratio) -> float:
        """E (1 - nu) / ((1 + nu) (1 - 2 nu)), for a material whose volume must
        shrink under pressure (Pa; infinite as nu reaches 1/2)."""
        E, nu = _elastic_constants(youngs_modulus, poissons_ratio, "calc_confined_compression_stiffness",
                                   nu_below_half=True)
        return E * (1 - nu) / ((1 + nu) * (1 - 2 * nu))

    @staticmethod
    def calc_dissipation_from_observed_restitution(restitution, speed) -> float:
        """c = (1 - e) / v (s/m) from a coefficient of restitution e observed at
        a small impact speed v (0 for e = 1, whatever v)."""
        e, v = float(restitution), float(speed)
        if e == 1:
            return 0.0
        if not (0 <= e <= 1 and v > 0):
            raise ValueError(f"ContactMaterial.calc_dissipation_from_observed_restitution: needs 0 <= restitution "
                             f"<= 1 and speed > 0, got {e}, {v}")
        return (1 - e) / v


def _elastic_constants(E, nu, method, *, nu_below_half):
    E, nu = float(E), float(nu)
    if not (E >= 0 and -1 < nu and (nu < 0.5 if nu_below_half else nu <= 0.5)):
        raise ValueError(f"ContactMaterial.{method}: needs Young's modulus >= 0 and -1 < Poisson's ratio "
                         f"{'<' if nu_below_half else '<='} 0.5, got {E}, {nu}")
    return E, nu


class ContactSurface(Module):
    """A shape on body ``body`` with its frame S at ``X_BS`` (in B); ``name``
    labels it in messages; ``margin`` (m, >= 0) is MuJoCo's geom margin:
    a pair of surfaces touches from the sum of their margins apart, its
    depth the overlap plus that sum."""

    body: int = eqx.field(static=True)
    shape: Shape
    X_BS: Transform
    name: str = eqx.field(static=True)
    margin: float = eqx.field(static=True, default=0.0)
