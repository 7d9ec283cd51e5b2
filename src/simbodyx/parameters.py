"""The Model's array leaves: every number of the multibody tree.

These are what ``jax.grad`` can differentiate with respect to. The Instance
stage copies them into the State, as Simbody keeps instance data there.
Body-indexed arrays have Ground at row 0 (zero mass, identity frames).
"""

from __future__ import annotations

import jax.numpy as jnp

from simbodyx._xla.module import Module
from simbodyx.spatial.inertia import point_inertia
from simbodyx.spatial.transform import Transform


class Parameters(Module):
    mass: jnp.ndarray  #: (nb,) kg
    com: jnp.ndarray  #: (nb, 3) mass center station p_BoBc, in B (m)
    #: (nb, 3, 3) inertia about the mass center, in B (kg m^2): stored
    #: central so that editing a mass or mass center alone keeps it physical
    central_inertia: jnp.ndarray
    X_PF: Transform  #: (nb) inboard frames F on the parent
    X_BM: Transform  #: (nb) outboard frames M on the body
    joint_params: tuple  #: per kind group, (n_in_group, num_params)
    #: (nu,) rotor inertia on each u, added to M's diagonal (None: none anywhere)
    armature: jnp.ndarray | None = None
    #: the constraints (simbodyx.constraints), their numbers as leaves
    constraints: tuple = ()
    #: the Motions (simbodyx.motion), their numbers as leaves
    motions: tuple = ()
    #: the unilateral contacts (simbodyx.rigid_contact.unilateral), in
    #: UnilateralContactIndex order
    unilateral_contacts: tuple = ()
    #: the ratchets and the motors of limited strength, in adoption order
    unilateral_speeds: tuple = ()
    bounded_speeds: tuple = ()
    #: the frictions whose normal force the State gives, in StateLimitedFrictionIndex order
    state_limited_frictions: tuple = ()
    #: MuJoCo's constraint model (simbodyx.soft_constraints.SoftConstraints),
    #: solved in the Acceleration stage; None: none
    soft_constraints: object = None

    @property
    def inertia(self) -> jnp.ndarray:
        """(nb, 3, 3) inertia about the body origin Bo, in B (kg m^2), derived
        from the stored numbers (a gradient's is in ``central_inertia``)."""
        return self.central_inertia + point_inertia(self.mass, self.com)
