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


class ContactGeometry:
    """Namespace of contact shapes, Simbody's ``ContactGeometry::``."""

    HalfSpace = HalfSpace
    Sphere = Sphere
    Ellipsoid = Ellipsoid
    Brick = Brick
    Cylinder = Cylinder
    Capsule = Capsule


class ContactSurface(Module):
    """A shape on body ``body`` with its frame S at ``X_BS`` (in B); ``name``
    labels it in messages."""

    body: int = eqx.field(static=True)
    shape: Shape
    X_BS: Transform
    name: str = eqx.field(static=True)
