"""The force-element protocol.

A force element is an equinox Module: body and mobility indices are static
fields, numbers (stiffness, gravity, ...) are array leaves of the Model and
so differentiable. ``calc(model, state)`` returns this element's
(mobility_forces (nu,), body_forces (nb, 6) [torque; force] at each Bo in G)
for a State realized to Velocity; ``potential_energy`` is 0 unless the
element is conservative.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx.module import Module


class ForceElement(Module):
    def calc(self, model, state):
        raise NotImplementedError

    def potential_energy(self, model, state):
        return jnp.zeros((), state.q.dtype)

    def default_discrete(self, topology, dtype):
        """This element's values in a default State's ``discrete`` (None: it has none)."""
        return None


def zeros(state):
    """(mobility (nu,), body (nb, 6)) zero forces in the State's dtype."""
    top = state.topology
    return jnp.zeros(top.nu, state.u.dtype), jnp.zeros((top.num_bodies, 6), state.u.dtype)


def as_param(x, shape, what, label):
    """A concrete float64 numpy array of ``shape`` (cast to the model's dtype
    when the system is frozen), or a clear error naming the element."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"{label}: {what} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{label}: {what} contains NaN or infinity")
    return a
