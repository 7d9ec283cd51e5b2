"""Force.UniformGravity: a uniform field g (m/s^2, in G) on every body."""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx.forces.base import ForceElement, as_param, zeros
from simbodyx.spatial.vectors import cross, safe_norm, spatial_vec


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
        inst, X = state.instance, state.position.X_GB
        g = self.gravity.astype(state.q.dtype)
        c = X.rotate(inst.com)
        f = inst.mass[:, None] * g
        mobility, _ = zeros(state)
        return mobility, spatial_vec(cross(c, f), f)

    def potential_energy(self, model, state):
        inst = state.instance
        p = state.position.X_GB.apply(inst.com)
        g = self.gravity.astype(state.q.dtype)
        m = inst.mass[1:]
        return -jnp.sum(m * (p[1:] @ g)) - jnp.sum(m) * safe_norm(g) * self.zero_height
