"""Gravity: Force.UniformGravity, a uniform field g (m/s^2, in G) on every
body, and Force.Gravity, Simbody's newer element (a down direction and a
magnitude, some bodies excluded)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx.forces.base import ForceElement, as_param, zeros
from simbodyx.spatial.vectors import cross, safe_norm, spatial_vec


def _body_forces(state, g, felt):
    """[m c x g; m g] at each Bo (c = mass center offset in G) for the bodies
    where ``felt`` (nb,) is 1."""
    inst, X = state.instance, state.position.X_GB
    c = X.rotate(inst.com)
    f = (felt * inst.mass)[:, None] * g.astype(state.q.dtype)
    mobility, _ = zeros(state)
    return mobility, spatial_vec(cross(c, f), f)


def _energy(state, g, zero_height, felt):
    """sum m |g| (h - zero_height) over the bodies felt, h the mass center's
    height along -g: -sum m g . p_c - sum m |g| zero_height."""
    inst = state.instance
    p = state.position.X_GB.apply(inst.com)
    m = (felt * inst.mass)[1:]
    return -jnp.sum(m * (p[1:] @ g.astype(state.q.dtype))) - jnp.sum(m) * safe_norm(g) * zero_height


class UniformGravity(ForceElement):
    """Body force [m c x g; m g] at each Bo (c = mass center offset in G).

    Potential energy sum m |g| (h - zero_height) with h the mass center's
    height along -g, i.e. -sum m g . p_c - M |g| zero_height.
    """

    gravity: jnp.ndarray  #: (3,) in G
    zero_height: jnp.ndarray  #: () m

    def __init__(self, forces, matter, gravity, zero_height=0.0):
        label = "Force.UniformGravity"
        forces._check_matter(matter, label)
        self.gravity = as_param(gravity, (3,), "gravity", label)
        self.zero_height = as_param(zero_height, (), "zero height", label)
        forces._add(self)

    def calc(self, model, state):
        return _body_forces(state, self.gravity, 1.0)

    def potential_energy(self, model, state):
        return _energy(state, self.gravity, self.zero_height, 1.0)


class Gravity(ForceElement):
    """Simbody's Force::Gravity: magnitude g (m/s^2, >= 0) along the unit
    ``down`` direction d (in G) on every body but the ``excluded`` ones
    (MobilizedBody handles), m g d at each mass center; potential energy
    sum m g (p . (-d) - zero_height). ``Gravity(forces, matter, down, g,
    zero_height=0)`` or ``Gravity(forces, matter, gravity_vector)`` (a zero
    vector: magnitude 0, down -y)."""

    NONNEGATIVE = ("magnitude",)

    down: jnp.ndarray  #: (3,) unit, in G
    magnitude: jnp.ndarray  #: () m/s^2
    zero_height: jnp.ndarray  #: () m
    excluded: tuple = eqx.field(static=True)  #: body indices

    def __init__(self, forces, matter, down, g=None, zero_height=0.0, excluded=()):
        label = "Force.Gravity"
        forces._check_matter(matter, label)
        vector = as_param(down, (3,), "down" if g is not None else "gravity", label)
        size = float(np.linalg.norm(vector))
        if g is None:  # Gravity(forces, matter, gravity_vector)
            g, vector = size, vector / size if size > 0 else np.array([0.0, -1.0, 0.0])
        elif size == 0:
            raise ValueError(f"{label}: the down direction is zero; give a magnitude of 0 instead")
        else:
            vector = vector / size
        self.down = vector
        self.magnitude = as_param(g, (), "magnitude", label)
        self.zero_height = as_param(zero_height, (), "zero height", label)
        for body in excluded:
            forces._check_body(body, label)
        self.excluded = tuple(sorted({body.index for body in excluded}))
        forces._add(self)

    def _felt(self, state):
        return jnp.ones(state.topology.num_bodies, state.q.dtype).at[np.array(self.excluded, int)].set(0.0)

    def get_gravity_vector(self):
        return self.magnitude * self.down

    def get_body_is_excluded(self, mobilized_body) -> bool:
        return mobilized_body.index in self.excluded

    def calc(self, model, state):
        return _body_forces(state, self.get_gravity_vector(), self._felt(state))

    def potential_energy(self, model, state):
        return _energy(state, self.get_gravity_vector(), self.zero_height, self._felt(state))
