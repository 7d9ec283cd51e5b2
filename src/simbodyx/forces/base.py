"""The force-element protocol.

A force element is an equinox Module: body and mobility indices are static
fields, numbers (stiffness, gravity, ...) are array leaves of the Model and
so differentiable. ``calc(model, state)`` returns this element's
(mobility_forces (nu,), body_forces (nb, 6) [torque; force] at each Bo in G)
for a State realized to Velocity; ``potential_energy`` is 0 unless the
element is conservative.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, spatial_vec


class ForceElement(Module):
    #: numbers that must be >= 0 (stiffness, damping), checked when the element
    #: is added to its force subsystem and by ``model.check()``
    NONNEGATIVE: ClassVar[tuple] = ()

    def calc(self, model, state):
        raise NotImplementedError

    def check(self) -> None:
        """Raise ValueError naming this element and the number if one of its
        concrete numbers is not finite, or one of ``NONNEGATIVE`` is below 0."""
        label = f"Force.{type(self).__name__}"
        for path, leaf in jax.tree_util.tree_leaves_with_path(self):
            if not np.all(np.isfinite(np.asarray(leaf))):
                raise ValueError(f"{label}: {jax.tree_util.keystr(path)} contains NaN or infinity")
        for name in self.NONNEGATIVE:
            value = np.asarray(getattr(self, name))
            if np.any(value < 0):
                raise ValueError(f"{label}: {name} must be >= 0, got {value}")

    def potential_energy(self, model, state):
        return jnp.zeros((), state.q.dtype)

    def default_discrete(self, topology, dtype):
        """This element's values in a default State's ``discrete`` (None: it has none)."""
        return None

    # Auxiliary continuous states (Simbody's z): ``num_z()`` of them at
    # ``state.z[z_start:z_start + num_z()]`` (a static ``z_start`` field that
    # realize_topology sets), integrated with q and u.
    def num_z(self) -> int:
        return 0

    def default_z(self, dtype):
        """This element's z in a default State."""
        return np.zeros(self.num_z(), dtype)

    def calc_zdot(self, model, state):
        """d/dt of this element's z, for a State realized to Velocity."""
        return jnp.zeros(self.num_z(), state.u.dtype)


def zeros(state):
    """(mobility (nu,), body (nb, 6)) zero forces in the State's dtype."""
    top = state.topology
    return jnp.zeros(top.nu, state.u.dtype), jnp.zeros((top.num_bodies, 6), state.u.dtype)


def forces_at(state, body, offset, force):
    """Body forces (nb, 6) of ``force`` (in G) on each ``body`` at the point
    ``offset`` (in G) from that body's origin Bo."""
    _, F = zeros(state)
    return F.at[body].add(spatial_vec(cross(offset, force), force))


def velocity_at(state, body, offset):
    """Velocity in G of the point of each ``body`` at ``offset`` (in G) from
    its origin Bo."""
    V = state.velocity.V_GB[body]
    return V[..., 3:] + cross(V[..., :3], offset)


def as_param(x, shape, what, label):
    """A concrete float64 numpy array of ``shape`` (cast to the model's dtype
    when the system is frozen), or a clear error naming the element."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{label}: {what} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{label}: {what} contains NaN or infinity")
    return a


def as_frame(X, what, label) -> Transform:
    """A Transform of concrete float64 numpy arrays, or a clear error naming
    the element and ``what``."""
    if not isinstance(X, Transform):
        raise TypeError(f"{label}: {what} must be a Transform, got {type(X).__name__}")
    return Transform(as_param(X.R, (3, 3), f"{what}.R", label), as_param(X.p, (3,), f"{what}.p", label))
