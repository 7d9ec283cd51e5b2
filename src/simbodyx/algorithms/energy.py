"""Whole-system mass properties, momentum and kinetic energy (all in G)."""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx.algorithms.per_body import spatial_inertias_in_ground
from simbodyx.spatial.inertia import point_inertia
from simbodyx.spatial.vectors import cross, spatial_vec


def kinetic_energy(instance, position, velocity, u):
    """1/2 u^T M u (J): over bodies 1/2 V^T M V, plus the rotors' 1/2 u^T diag(armature) u."""
    M = spatial_inertias_in_ground(instance, position.X_GB)
    V = velocity.V_GB
    bodies = 0.5 * jnp.einsum("bi,bij,bj->", V, M, V)
    return bodies if instance.armature is None else bodies + 0.5 * jnp.sum(instance.armature * u * u)


def mass_centers_in_ground(instance, position):
    """(nb, 3) location of each body's mass center in G."""
    return position.X_GB.apply(instance.com)


def system_mass(instance):
    return jnp.sum(instance.mass[1:])


def system_mass_center(instance, position):
    """p_GC: the system mass center measured from the Ground origin."""
    m = instance.mass[1:]
    return jnp.einsum("b,bi->i", m, mass_centers_in_ground(instance, position)[1:]) / jnp.sum(m)


def _station_motion(instance, position, V):
    """Velocities (or accelerations' rigid part) of each mass center: v + w x c."""
    c = position.X_GB.rotate(instance.com)
    return V[:, 3:] + cross(V[:, :3], c), c


def system_mass_center_velocity(instance, position, velocity):
    m = instance.mass[1:]
    v_c, _ = _station_motion(instance, position, velocity.V_GB)
    return jnp.einsum("b,bi->i", m, v_c[1:]) / jnp.sum(m)


def system_mass_center_acceleration(instance, position, velocity, A_GB):
    """a_GC = sum m (a + alpha x c + w x (w x c)) / M."""
    m = instance.mass[1:]
    a_c, c = _station_motion(instance, position, A_GB)
    w = velocity.V_GB[:, :3]
    a_c = a_c + cross(w, cross(w, c))
    return jnp.einsum("b,bi->i", m, a_c[1:]) / jnp.sum(m)


def system_inertia_about_ground_origin(instance, position):
    """(3, 3) inertia of the whole system about the Ground origin, in G."""
    R = position.X_GB.R
    I_c_G = R @ instance.central_inertia @ jnp.swapaxes(R, -1, -2)
    p = mass_centers_in_ground(instance, position)
    return jnp.sum((I_c_G + point_inertia(instance.mass, p))[1:], axis=0)


def momentum_about_ground_origin(instance, position, velocity):
    """[angular; linear] momentum of the system about the Ground origin, in G."""
    M = spatial_inertias_in_ground(instance, position.X_GB)
    h = jnp.einsum("bij,bj->bi", M, velocity.V_GB)  # about each Bo
    p = position.X_GB.p
    return jnp.sum(spatial_vec(h[:, :3] + cross(p, h[:, 3:]), h[:, 3:])[1:], axis=0)


def central_momentum(instance, position, velocity):
    """[angular; linear] momentum about the system mass center, in G."""
    h = momentum_about_ground_origin(instance, position, velocity)
    c = system_mass_center(instance, position)
    return spatial_vec(h[:3] - cross(c, h[3:]), h[3:])
