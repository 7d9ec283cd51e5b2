"""The environment interface: Brax's ``Env``, as pure functions of a State.

An environment's ``reset(rng)`` and ``step(state, action)`` are pure, so
``jax.jit`` compiles them and ``jax.vmap`` runs thousands at once. The
fields and methods are those of ``brax.envs.Env`` and ``brax.envs.State``,
so Brax's wrappers (episode length, automatic reset, vmap) and trainers
take a simbodyx environment as it is.
"""

from __future__ import annotations

import abc
import dataclasses

import jax
import jax.numpy as jnp

from simbodyx._xla.module import Module
from simbodyx.state import State as PhysicsState


class State(Module):
    """One environment's state (``brax.envs.State``'s fields).

    Attributes:
        pipeline_state: The simbodyx State of the physics.
        obs: The observation, (observation_size,).
        reward: The reward of the step that led here (0 after a reset).
        done: 1.0 where the episode ended (a termination), else 0.0.
        metrics: The reward's terms and other per-step figures, by name.
        info: What wrappers and the environment carry between steps.
    """

    pipeline_state: PhysicsState
    obs: jnp.ndarray
    reward: jnp.ndarray
    done: jnp.ndarray
    metrics: dict = dataclasses.field(default_factory=dict)
    info: dict = dataclasses.field(default_factory=dict)

    def replace(self, **changes) -> State:
        """A copy with the named fields changed (as flax's ``struct.dataclass``)."""
        return dataclasses.replace(self, **changes)


class Env(abc.ABC):
    """An environment: ``reset`` and ``step`` as pure functions (Brax's ``Env``)."""

    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """The state after a reset, from a PRNG key."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """The state after one step of the environment taking ``action``."""

    @property
    def observation_size(self) -> int:
        """The length of the observation vector."""
        return jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs.shape[-1]

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """The length of the action vector."""

    @property
    def backend(self) -> str:
        return "simbodyx"

    @property
    def unwrapped(self) -> Env:
        return self


class Randomized(Env):
    """A batch of environments, one Model each: domain randomization.

    ``models`` is a batch of Models of ``env``'s structure (their leaves
    with a leading axis, as ``jax.vmap`` of a function returning an edited
    Model makes them); ``reset`` takes one key per environment and
    ``step`` a batch of states and actions, each environment stepped on
    its own Model, all in one ``vmap``.

    Args:
        env: The environment (one with ``with_model(model)``, as
            :class:`simbodyx.envs.Locomotion` has).
        models: The batch of Models.

    Raises:
        TypeError: ``env`` has no ``with_model``.
    """

    def __init__(self, env: Env, models):
        if not callable(getattr(env, "with_model", None)):
            raise TypeError(f"Randomized: {type(env).__name__} has no with_model(model), so it cannot step on "
                            "other Models")
        self.env, self.models = env, models

    def reset(self, rng: jax.Array) -> State:
        return jax.vmap(lambda model, key: self.env.with_model(model).reset(key))(self.models, rng)

    def step(self, state: State, action: jax.Array) -> State:
        return jax.vmap(lambda model, s, a: self.env.with_model(model).step(s, a))(self.models, state, action)

    @property
    def observation_size(self) -> int:
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        return self.env.action_size
