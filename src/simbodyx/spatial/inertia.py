"""Inertias, mass properties and spatial inertias.

Simbody's rules: an :class:`Inertia` is a symmetric 3x3 tensor about a stated
point in a stated frame; :class:`MassProperties` holds the mass, the mass
center station p_BoBc (in B) and the inertia about the *body origin* Bo (in B).
The 6x6 spatial inertia about Bo is [[I_Bo, skew(m c)], [-skew(m c), m 1]].
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.spatial.rotation import _float_array, skew
from simbodyx.spatial.vectors import array_module


def point_inertia(mass, p):
    """Inertia about the origin of a point mass at p: m (|p|^2 1 - p p^T)."""
    xp = array_module(mass, p)
    p = xp.asarray(p)
    eye = xp.eye(3, dtype=p.dtype)
    pp = xp.sum(p * p, axis=-1)[..., None, None]
    return xp.asarray(mass)[..., None, None] * (pp * eye - p[..., :, None] * p[..., None, :])


def inertia_tolerance(dtype, rtol=1e-10) -> float:
    """The relative tolerance of the inertia checks for numbers of ``dtype``:
    ``rtol`` or, for a lower precision, 64 of its epsilons (float32: 8e-6),
    within which its rounding makes a symmetric tensor."""
    return max(rtol, 64 * float(np.finfo(dtype).eps)) if np.issubdtype(dtype, np.floating) else rtol


def inertia_problem(matrix, rtol=1e-10) -> str | None:
    """Why a concrete 3x3 matrix is not a physical inertia, or None if it is.

    Checks: finite, symmetric, non-negative principal moments and the
    triangle inequality I_a + I_b >= I_c, with a relative tolerance of
    ``rtol`` or, for a matrix of lower precision, more
    (:func:`inertia_tolerance`).
    """
    m = np.asarray(matrix)
    rtol = inertia_tolerance(m.dtype, rtol)
    m = m.astype(float)
    if m.shape != (3, 3):
        return f"inertia must be 3x3, got shape {m.shape}"
    if not np.all(np.isfinite(m)):
        return "inertia contains NaN or infinity"
    scale = max(np.max(np.abs(m)), 1e-300)
    if np.max(np.abs(m - m.T)) > rtol * scale:
        return "inertia is not symmetric"
    moments = np.linalg.eigvalsh(0.5 * (m + m.T))
    if moments[0] < -rtol * scale:
        return f"inertia has a negative principal moment {moments[0]:.6g}"
    a, b, c = moments
    if a + b < c - rtol * scale:
        return (
            f"principal moments {a:.6g}, {b:.6g}, {c:.6g} violate the triangle "
            "inequality (no mass distribution has them)"
        )
    return None


class Inertia(Module):
    """A symmetric inertia tensor (..., 3, 3), in kg m^2.

    ``Inertia(moment)`` (sphere-like), ``Inertia(ixx, iyy, izz)`` or its
    vector ``Inertia([ixx, iyy, izz])`` (Simbody's ``Inertia(Vec3)``),
    ``Inertia(ixx, iyy, izz, ixy, ixz, iyz)`` or ``Inertia(matrix3x3)``.
    The frame and the point it is taken about are the caller's to state.
    """

    matrix: jnp.ndarray

    def __init__(self, *args):
        xp = array_module(*args)
        if len(args) == 1 and np.ndim(args[0]) >= 2:
            m = args[0]
        elif len(args) == 1 and np.ndim(args[0]) == 1:  # Simbody's Inertia(Vec3): principal moments
            if np.shape(args[0]) != (3,):
                raise ValueError("Inertia: a vector of moments has shape (3,) (ixx, iyy, izz), "
                                 f"got {np.shape(args[0])}")
            m = xp.diag(xp.asarray(args[0]))
        elif len(args) in (1, 3, 6):
            vals = xp.stack([xp.asarray(a) for a in args])
            if len(args) == 1:
                vals = xp.stack([vals[0]] * 3)
            xx, yy, zz = vals[0], vals[1], vals[2]
            xy, xz, yz = (vals[3], vals[4], vals[5]) if len(args) == 6 else (0 * xx,) * 3
            m = xp.stack([xx, xy, xz, xy, yy, yz, xz, yz, zz]).reshape(3, 3)
        else:
            raise TypeError(
                "Inertia takes a moment, (ixx, iyy, izz), (ixx, iyy, izz, ixy, ixz, iyz) "
                f"or a 3x3 matrix; got {len(args)} arguments"
            )
        self.matrix = _float_array(m)

    @classmethod
    def point_mass(cls, mass, p):
        """Inertia about the origin of a point mass at p."""
        return cls(point_inertia(_float_array(mass), _float_array(p)))

    def shift_from_mass_center(self, p, mass) -> Inertia:
        """Treat self as the central inertia I_C; return the inertia about a
        point Q offset by p from the mass center (either sign), same frame:
        I_Q = I_C + m (|p|^2 1 - p p^T) (parallel-axis theorem)."""
        xp = array_module(self.matrix, mass, p)
        return Inertia(xp.asarray(self.matrix) + point_inertia(mass, p))

    def shift_to_mass_center(self, p, mass) -> Inertia:
        """Inverse of :meth:`shift_from_mass_center`: I_C = I_Q - m(|p|^2 1 - p p^T)."""
        xp = array_module(self.matrix, mass, p)
        return Inertia(xp.asarray(self.matrix) - point_inertia(mass, p))

    def re_express(self, R_AB) -> Inertia:
        """Same tensor expressed in A given it is expressed in B: R I R^T."""
        R = getattr(R_AB, "matrix", R_AB)
        xp = array_module(R, self.matrix)
        R = xp.asarray(R)
        return Inertia(R @ xp.asarray(self.matrix) @ xp.swapaxes(R, -1, -2))

    def moments(self):
        return jnp.stack([self.matrix[..., 0, 0], self.matrix[..., 1, 1], self.matrix[..., 2, 2]], -1)

    def products(self):
        m = self.matrix
        return jnp.stack([m[..., 0, 1], m[..., 0, 2], m[..., 1, 2]], -1)

    def check(self) -> Inertia:
        """Raise ValueError if this (concrete) inertia is not physical; return self."""
        problem = inertia_problem(self.matrix)
        if problem:
            raise ValueError(problem)
        return self


class UnitInertia(Inertia):
    """An inertia per unit mass (gyration tensor), in m^2, with the usual shapes."""

    @classmethod
    def sphere(cls, radius):
        return cls(0.4 * array_module(radius).square(radius))

    @classmethod
    def brick(cls, hx, hy, hz):
        """Solid box with half-lengths hx, hy, hz about its center."""
        x2, y2, z2 = (array_module(h).square(h) for h in (hx, hy, hz))
        return cls((y2 + z2) / 3, (x2 + z2) / 3, (x2 + y2) / 3)

    @classmethod
    def cylinder_along_z(cls, radius, half_length):
        xp = array_module(radius, half_length)
        r2, h2 = xp.square(radius), xp.square(half_length)
        t = r2 / 4 + h2 / 3
        return cls(t, t, r2 / 2)


class MassProperties(Module):
    """Mass (kg), mass center station p_BoBc (m, in B) and inertia about the
    body origin Bo (in B), as Simbody's ``MassProperties(m, com, inertia)``."""

    mass: jnp.ndarray
    com: jnp.ndarray
    inertia: Inertia

    def __init__(self, mass, com=(0.0, 0.0, 0.0), inertia=None):
        self.mass = _float_array(mass)
        self.com = _float_array(array_module(com).asarray(com, self.mass.dtype))
        if inertia is None:
            inertia = Inertia(np.zeros((3, 3), self.mass.dtype))
        elif not isinstance(inertia, Inertia):
            inertia = Inertia(inertia)
        self.inertia = inertia

    @classmethod
    def from_central(cls, mass, com, central_inertia):
        """Mass properties from the inertia about the mass center (in B)."""
        I_c = central_inertia if isinstance(central_inertia, Inertia) else Inertia(central_inertia)
        return cls(mass, com, I_c.shift_from_mass_center(_float_array(com), _float_array(mass)))

    def calc_central_inertia(self) -> Inertia:
        """Inertia about the mass center, in B."""
        return self.inertia.shift_to_mass_center(self.com, self.mass)

    def calc_shifted_inertia(self, p_BQ) -> Inertia:
        """Inertia about the station Q (p_BQ in B), in B."""
        xp = array_module(self.com, p_BQ)
        return self.calc_central_inertia().shift_from_mass_center(xp.asarray(self.com) - xp.asarray(p_BQ), self.mass)

    def re_express(self, R_CB) -> MassProperties:
        """The same mass properties expressed in frame C (about the same point)."""
        R = getattr(R_CB, "matrix", R_CB)
        xp = array_module(R, self.com)
        return MassProperties(self.mass, xp.einsum("...ij,...j->...i", xp.asarray(R), xp.asarray(self.com)),
                              self.inertia.re_express(R))

    def calc_transformed_mass_props(self, X_BC) -> MassProperties:
        """Mass properties about C's origin, expressed in C, given X_BC."""
        xp = array_module(self.com, X_BC.p, X_BC.R)
        com = xp.asarray(self.com) - xp.asarray(X_BC.p)
        about_c = MassProperties(self.mass, com, self.calc_shifted_inertia(X_BC.p))
        return about_c.re_express(xp.swapaxes(xp.asarray(X_BC.R), -1, -2))

    def to_spatial_mat(self):
        """6x6 spatial inertia about Bo in B: [[I, skew(m c)], [-skew(m c), m 1]]."""
        return spatial_inertia_matrix(self.mass, self.com, self.inertia.matrix)

    def check(self, where: str = "MassProperties") -> MassProperties:
        """Raise ValueError (prefixed by ``where``) unless the concrete values
        are physical: finite non-negative mass, finite com of shape (3,),
        physical central inertia. Returns self."""
        mass, com = np.asarray(self.mass, float), np.asarray(self.com, float)
        if mass.shape != ():
            raise ValueError(f"{where}: mass must be a scalar, got shape {mass.shape}")
        if not np.isfinite(mass) or mass < 0:
            raise ValueError(f"{where}: mass must be finite and >= 0, got {float(mass)}")
        if com.shape != (3,) or not np.all(np.isfinite(com)):
            raise ValueError(f"{where}: mass center must be 3 finite numbers, got {com!r}")
        problem = inertia_problem(self.calc_central_inertia().matrix)
        if problem:
            raise ValueError(f"{where}: {problem} (central inertia)")
        return self


def spatial_inertia_matrix(mass, com, inertia):
    """[[I_Bo, skew(m c)], [-skew(m c), m 1]] from mass (...), com (..., 3) and
    inertia about Bo (..., 3, 3), all in one frame."""
    mc = skew(jnp.asarray(mass)[..., None] * com)
    eye = jnp.eye(3, dtype=mc.dtype) * jnp.asarray(mass)[..., None, None]
    top = jnp.concatenate([inertia, mc], axis=-1)
    bottom = jnp.concatenate([-mc, eye], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


class SpatialInertia(Module):
    """Rigid-body spatial inertia about a frame origin: mass, mass center
    station and inertia about that origin (all in that frame). Adds, shifts
    and re-expresses; ``to_spatial_mat`` gives the 6x6 form."""

    mass: jnp.ndarray
    com: jnp.ndarray
    inertia: jnp.ndarray

    @classmethod
    def from_mass_properties(cls, mp: MassProperties) -> SpatialInertia:
        return cls(mp.mass, mp.com, mp.inertia.matrix)

    def __add__(self, other: SpatialInertia) -> SpatialInertia:
        m = self.mass + other.mass
        mc = self.mass[..., None] * self.com + other.mass[..., None] * other.com
        safe_m = jnp.where(m > 0, m, 1.0)
        return SpatialInertia(m, jnp.where(m[..., None] > 0, mc / safe_m[..., None], 0.0),
                              self.inertia + other.inertia)

    def shift(self, p):
        """The same body about the point p (measured from the current origin)."""
        m = self.mass
        I_c = self.inertia - point_inertia(m, self.com)
        return SpatialInertia(m, self.com - p, I_c + point_inertia(m, self.com - p))

    def re_express(self, R):
        """Expressed in A given R = R_AB and the current frame B."""
        return SpatialInertia(self.mass, jnp.einsum("...ij,...j->...i", R, self.com),
                              R @ self.inertia @ jnp.swapaxes(R, -1, -2))

    def to_spatial_mat(self):
        return spatial_inertia_matrix(self.mass, self.com, self.inertia)
