"""What a constraint sees of the State: kinematics in its Ancestor frame."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import skew_times


class Kinematics(NamedTuple):
    """A constraint's lower-level data (a pytree): time, the constrained bodies'
    X_AB (batched Transform), V_AB (ncb, 6), and the constrained mobilizers'
    q, qdot, u (tuples, one array per mobilizer). Fields a stage does not
    have yet are None."""

    t: jnp.ndarray
    X_AB: Transform
    q: tuple
    V_AB: jnp.ndarray | None = None
    qdot: tuple | None = None
    u: tuple | None = None


def transform_rate(X_AB: Transform, V_AB) -> Transform:
    """d/dt X_AB in A for spatial velocities V_AB: (dR = [w] R, dp = v)."""
    return Transform(skew_times(V_AB[..., :3], X_AB.R), V_AB[..., 3:])
