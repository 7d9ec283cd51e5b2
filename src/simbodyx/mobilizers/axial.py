"""Mobilizers about or along one common axis of F and M: Pin (rotation about
z), Slider (translation along x), Screw (rotation about z coupled to
translation pitch*q along z) and Cylinder (rotation and translation along z)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from simbodyx.mobilizers.base import Mobilizer, rows, unit
from simbodyx.mobilizers.fitting import closest_z_angle, pick
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

    def fit_q(self, q, params, R=None, p=None):
        """The angle of the z rotation closest to R; p is ignored."""
        return jnp.stack([pick(R, closest_z_angle, q[0])])


@dataclasses.dataclass(frozen=True)
class Slider(Mobilizer):
    """q = translation of Mo along the common x axis; H = [0; x]."""

    nq = 1
    nu = 1

    def X_FM(self, q, params):
        return jnp.eye(3, dtype=q.dtype), jnp.stack([q[0], 0 * q[0], 0 * q[0]])

    def H_FM(self, q, params):
        return rows(unit(0, q.dtype, linear=True))

    def fit_q(self, q, params, R=None, p=None):
        """p's x component; R is ignored."""
        return jnp.stack([pick(p, lambda p: p[0], q[0])])


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

    def fit_q(self, q, params, R=None, p=None):
        """From p alone q = p_z / pitch; with R, the closest z angle on the turn
        nearest p_z / pitch (or nearest the current q)."""
        pitch = params[0]
        along = pick(p, lambda p: jnp.where(pitch != 0, p[2] / jnp.where(pitch != 0, pitch, 1.0), q[0]), q[0])
        if R is None:
            return jnp.stack([along])
        angle = closest_z_angle(R)
        return jnp.stack([angle + 2 * jnp.pi * jnp.round((along - angle) / (2 * jnp.pi))])


@dataclasses.dataclass(frozen=True)
class Cylinder(Mobilizer):
    """q = [angle about z, translation along z]; H = [z; 0], [0; z]."""

    nq = 2
    nu = 2

    def X_FM(self, q, params):
        return rot_z(q[0]), jnp.stack([0 * q[1], 0 * q[1], q[1]])

    def H_FM(self, q, params):
        return rows(unit(2, q.dtype), unit(2, q.dtype, linear=True))

    def fit_q(self, q, params, R=None, p=None):
        return jnp.stack([pick(R, closest_z_angle, q[0]), pick(p, lambda p: p[2], q[1])])
