"""Mobilizers in polar and spherical coordinates, u = qdot: BendStretch
(PolarCoords) and SphericalCoords."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit
from simbodyx.mobilizers.fitting import closest_z_angle
from simbodyx.spatial.rotation import rot_y, rot_z
from simbodyx.spatial.vectors import cross, mat_mul, spatial_vec


@dataclasses.dataclass(frozen=True)
class BendStretch(Mobilizer):
    """q = [angle about the common z, radius along the rotated Mx]:
    X_FM = (Rz(q0), q1 Mx); H = [z; z x p_FM], [0; Mx]. The angular rate
    moves Mo sideways only when the radius is nonzero."""

    nq = 2
    nu = 2

    def X_FM(self, q, params):
        R = rot_z(q[0])
        return R, q[1] * R[:, 0]

    def H_FM(self, q, params):
        R, p = self.X_FM(q, params)
        z = unit(2, q.dtype)[:3]
        return rows(spatial_vec(z, cross(z, p)), spatial_vec(jnp.zeros(3, q.dtype), R[:, 0]))

    def fit_q(self, q, params, R=None, p=None):
        """With R: its closest z angle, then the radius that best places Mo (p
        projected on Mx). From p alone: the polar coordinates of p's x-y part."""
        if R is not None:
            angle = closest_z_angle(R)
            radius = q[1] if p is None else p[0] * jnp.cos(angle) + p[1] * jnp.sin(angle)
            return jnp.stack([angle, radius])
        if p is None:
            return q
        radius = jnp.sqrt(p[0] ** 2 + p[1] ** 2)
        angle = jnp.where(radius > 0, jnp.arctan2(p[1], jnp.where(radius > 0, p[0], 1.0)), q[0])
        return jnp.stack([angle, radius])


@dataclasses.dataclass(frozen=True)
class SphericalCoords(Mobilizer):
    """q = [azimuth, zenith, radius]: R_FM = Rz(a) Ry(z) (azimuth about Fz = Mz,
    then zenith about the new My), then Mo moves d along Mz (or Mx) with
    a = +-q0 + azimuth_offset, z = +-q1 + zenith_offset, d = +-q2 (rad, m).
    H = [s0 z; s0 z x p], [s1 My; s1 My x p], [0; s2 Mr]. Singular at radius 0
    and at zenith = n pi (with the default Mz radial axis)."""

    nq = 3
    nu = 3
    azimuth_offset: float = 0.0
    negate_azimuth: bool = False
    zenith_offset: float = 0.0
    negate_zenith: bool = False
    radial_axis: str = "z"
    negate_radial: bool = False

    @property
    def radial_column(self) -> int:
        """Column of R_FM along which the radius moves Mo (0: Mx, 2: Mz)."""
        return 0 if self.radial_axis == "x" else 2

    @property
    def signs(self):
        negated = (self.negate_azimuth, self.negate_zenith, self.negate_radial)
        return tuple(-1.0 if n else 1.0 for n in negated)

    def X_FM(self, q, params):
        s0, s1, s2 = self.signs
        R = mat_mul(rot_z(s0 * q[0] + self.azimuth_offset), rot_y(s1 * q[1] + self.zenith_offset))
        return R, s2 * q[2] * R[:, self.radial_column]

    def H_FM(self, q, params):
        s0, s1, s2 = self.signs
        R, p = self.X_FM(q, params)
        z, My = unit(2, q.dtype)[:3], R[:, 1]
        return rows(
            s0 * spatial_vec(z, cross(z, p)),
            s1 * spatial_vec(My, cross(My, p)),
            s2 * spatial_vec(jnp.zeros(3, q.dtype), R[:, self.radial_column]),
        )

    def _q_from(self, azimuth, zenith, radius):
        s0, s1, s2 = self.signs
        return jnp.stack([s0 * (azimuth - self.azimuth_offset), s1 * (zenith - self.zenith_offset), s2 * radius])

    def fit_q(self, q, params, R=None, p=None):
        """With R: the closest Rz(a) Ry(z) (a from My's direction in the x-y
        plane, z from what remains), then the radius that best places Mo (p
        projected on the radial axis). From p alone: p's spherical
        coordinates about the radial axis."""
        s0, s1, s2 = self.signs
        if R is not None:
            azimuth = jnp.arctan2(-R[0, 1], R[1, 1])
            rest = mat_mul(rot_z(-azimuth), R)  # = Ry(zenith) when reachable
            zenith = jnp.arctan2(rest[0, 2], rest[0, 0])
            axis = mat_mul(rot_z(azimuth), rot_y(zenith))[:, self.radial_column]
            radius = s2 * q[2] if p is None else p @ axis
            return self._q_from(azimuth, zenith, radius)
        if p is None:
            return q
        radius = jnp.sqrt(p @ p)
        planar = jnp.sqrt(p[0] ** 2 + p[1] ** 2)
        current = s0 * q[0] + self.azimuth_offset
        azimuth = jnp.where(planar > 0, jnp.arctan2(p[1], jnp.where(planar > 0, p[0], 1.0)), current)
        # Mz = (cos a sin z, sin a sin z, cos z); Mx = (cos a cos z, sin a cos z, -sin z).
        zenith = jnp.arctan2(planar, p[2]) if self.radial_column == 2 else jnp.arctan2(-p[2], planar)
        return self._q_from(azimuth, zenith, radius)
