"""Environments for learning: gymnasium's MuJoCo tasks on simbodyx, in
Brax's ``Env`` interface (pure ``reset(rng)`` and ``step(state, action)``,
for ``jax.jit`` and ``jax.vmap``)."""

from simbodyx.envs.base import Env as Env, Randomized as Randomized, State as State
from simbodyx.envs.locomotion import (
    HalfCheetah as HalfCheetah,
    Hopper as Hopper,
    Locomotion as Locomotion,
    Walker2d as Walker2d,
)
from simbodyx.envs.runners import Ant as Ant, Humanoid as Humanoid, Runner as Runner
from simbodyx.envs.task import GymnasiumTask as GymnasiumTask, MuJoCoView as MuJoCoView

#: The environments by gymnasium's lower-case names.
ENVIRONMENTS = {"hopper": Hopper, "walker2d": Walker2d, "half_cheetah": HalfCheetah, "ant": Ant,
                "humanoid": Humanoid}


def make(name: str, **overrides) -> Env:
    """An environment by its name.

    Args:
        name: A key of :data:`ENVIRONMENTS` ("hopper", "walker2d",
            "half_cheetah", "ant", "humanoid").
        **overrides: The task's parameters to change (``ctrl_cost_weight=0.01``, ...).

    Returns:
        The environment (:class:`Env`).

    Raises:
        ValueError: An unknown name.
    """
    if name not in ENVIRONMENTS:
        raise ValueError(f"simbodyx.envs.make: unknown environment {name!r}; choose one of {sorted(ENVIRONMENTS)}")
    return ENVIRONMENTS[name](**overrides)
