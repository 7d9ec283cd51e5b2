"""Mobilizers about or along one common axis of F and M: Pin (rotation about
z), Slider (translation along x), Screw (rotation about z coupled to
translation pitch*q along z) and Cylinder (rotation and translation along z)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit
from simbodyx.spatial.rotation import rot_z


@dataclasses.dataclass(frozen=True)
class Pin(Mobilizer):
    """q = angle about the common z axis; X_FM = (Rz(q), 0); H = [z; 0]."""

    nq = 1
    nu = 1

    def X_FM(self, q, params):
        return rot_z(q[0]), jnp.zeros(3, q.dtype)

    def H_FM(self, q, params):
        return rows(unit(2, q.dtype))


@dataclasses.dataclass(frozen=True)
class Slider(Mobilizer):
    """q = translation of Mo along the common x axis; H = [0; x]."""

    nq = 1
    nu = 1

    def X_FM(self, q, params):
        return jnp.eye(3, dtype=q.dtype), jnp.stack([q[0], 0 * q[0], 0 * q[0]])

    def H_FM(self, q, params):
        return rows(unit(0, q.dtype, linear=True))


@dataclasses.dataclass(frozen=True)
class Screw(Mobilizer):
    """q = angle about z; Mo moves pitch*q along z (params = [pitch], m/rad).
    H = [z; pitch z]."""

    nq = 1
    nu = 1
    num_params = 1

    def X_FM(self, q, params):
        return rot_z(q[0]), jnp.stack([0 * q[0], 0 * q[0], params[0] * q[0]])

    def H_FM(self, q, params):
        return rows(unit(2, q.dtype) + params[0] * unit(2, q.dtype, linear=True))


@dataclasses.dataclass(frozen=True)
class Cylinder(Mobilizer):
    """q = [angle about z, translation along z]; H = [z; 0], [0; z]."""

    nq = 2
    nu = 2

    def X_FM(self, q, params):
        return rot_z(q[0]), jnp.stack([0 * q[1], 0 * q[1], q[1]])

    def H_FM(self, q, params):
        return rows(unit(2, q.dtype), unit(2, q.dtype, linear=True))
