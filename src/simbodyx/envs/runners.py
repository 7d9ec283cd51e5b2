"""gymnasium's three-dimensional runners, version 5, on simbodyx: the Ant
(four legs) and the Humanoid, each on a free joint and rewarded for
running along x, their observations made of MuJoCo's quantities of the
State (``sx.envs.MuJoCoView``).

Where gymnasium differs: its MuJoCo quantities but qpos and qvel (cfrc_ext,
cinert, cvel, qfrc_actuator, xpos and xipos) are those of the start of the
last of the file's steps in an environment step (``mj_step`` computes them
before it advances the state; ``mj_rnePostConstraint`` reads the forces
that step solved), here of the State at the step's end, so an observation
is a function of the State; after a reset its cfrc_ext is zero (not yet
computed), here it is the reset State's; its reset leaves the root's
quaternion as the noise made it, here it is normalized.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.envs.base import State
from simbodyx.envs.task import GymnasiumTask
from simbodyx.stage import Stage


class Runner(GymnasiumTask):
    """A robot on a free joint rewarded for moving along x:
    forward_reward_weight * the x velocity of ``tracked`` (over the
    environment's step) + healthy_reward (while healthy)
    - ctrl_cost_weight * |action|^2 - a contact cost; the episode ends when
    unhealthy if ``terminate_when_unhealthy``. Subclasses define the
    observation, the contact cost, health and what is tracked."""

    def __init__(self, file, frame_skip, *, forward_reward_weight, ctrl_cost_weight, contact_cost_weight,
                 healthy_reward, terminate_when_unhealthy, healthy_z_range, reset_noise_scale, velocity_noise,
                 merge_fixed=True):
        super().__init__(file, frame_skip, reset_noise_scale, velocity_noise, merge_fixed)
        self.forward_reward_weight, self.ctrl_cost_weight = forward_reward_weight, ctrl_cost_weight
        self.contact_cost_weight, self.healthy_reward = contact_cost_weight, healthy_reward
        self.terminate_when_unhealthy, self.healthy_z_range = terminate_when_unhealthy, healthy_z_range

    def tracked(self, physics) -> jnp.ndarray:
        """(2,) the x and y (m) whose rate is the forward velocity."""
        return self.mujoco.qpos(physics)[:2]

    def contact_forces(self, physics) -> jnp.ndarray:
        """(nbody, 6) MuJoCo's cfrc_ext at a State, as the task uses it."""
        return self.mujoco.cfrc_ext(self.model, physics)

    def contact_cost(self, forces) -> jnp.ndarray:
        return self.contact_cost_weight * jnp.sum(jnp.square(forces))

    def reward_terms(self, x_velocity, physics, action, forces) -> dict:
        """gymnasium's reward terms, by its names: reward_forward,
        reward_ctrl and reward_contact (minus the costs), reward_survive."""
        return {"reward_forward": self.forward_reward_weight * x_velocity,
                "reward_ctrl": -self.ctrl_cost_weight * jnp.sum(jnp.square(action)),
                "reward_contact": -self.contact_cost(forces),
                "reward_survive": self.healthy_reward * self.is_healthy(physics).astype(x_velocity.dtype)}

    def _positions(self, physics, xy_velocity) -> dict:
        qpos = self.mujoco.qpos(physics)
        return {"x_position": qpos[0], "y_position": qpos[1], "distance_from_origin": jnp.linalg.norm(qpos[:2]),
                "x_velocity": xy_velocity[0], "y_velocity": xy_velocity[1]}

    def reset(self, rng: jax.Array) -> State:
        physics = self.reset_physics(rng)
        moving = self.model.realize(physics, Stage.Velocity)  # one realization for every MuJoCo quantity
        forces, zero = self.contact_forces(moving), jnp.zeros((), physics.q.dtype)
        terms = self.reward_terms(zero, moving, jnp.zeros(self.action_size, zero.dtype), forces)
        metrics = dict({name: zero for name in terms}, **self._positions(moving, jnp.zeros(2, zero.dtype)))
        return State(physics, self.observation(moving, forces), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        physics = self.advance(before, action)
        moving = self.model.realize(physics, Stage.Velocity)  # one realization for every MuJoCo quantity
        xy_velocity = (self.tracked(moving) - self.tracked(before)) / self.dt
        forces = self.contact_forces(moving)
        terms = self.reward_terms(xy_velocity[0], moving, action, forces)
        done = ~self.is_healthy(moving) if self.terminate_when_unhealthy else jnp.zeros((), bool)
        metrics = dict(state.metrics, **terms, **self._positions(moving, xy_velocity))
        return state.replace(pipeline_state=physics, obs=self.observation(moving, forces),
                             reward=sum(terms.values()), done=done.astype(xy_velocity.dtype), metrics=metrics)


class Ant(Runner):
    """gymnasium's Ant-v5 (105 observations, 8 actions; 27 without the contact forces).

    The forward velocity is the torso's. The contact cost is
    contact_cost_weight * |F|^2, F MuJoCo's cfrc_ext of every body clipped
    to ``contact_force_range``. The observation is qpos without x and y,
    qvel, then F but the world's row, flattened. Healthy: qpos and qvel
    finite and the torso's height within ``healthy_z_range`` (bounds
    included). The module's docstring says where it differs from
    gymnasium's.

    Args:
        frame_skip: The file's steps per environment step.
        forward_reward_weight: Reward per m/s of the torso's x velocity.
        ctrl_cost_weight: Cost per unit of squared action.
        contact_cost_weight: Cost per N^2 (and (N m)^2) of the clipped contact forces.
        healthy_reward: Reward per step while healthy.
        terminate_when_unhealthy: End the episode when unhealthy.
        healthy_z_range: (low, high) m, the torso's height while healthy.
        contact_force_range: (low, high), the clip of each entry of F.
        reset_noise_scale: The half-width of the uniform noise a reset adds
            to the file's qpos, and the standard deviation of the normal
            noise it gives qvel.
        include_cfrc_ext_in_observation: Whether the observation ends with F.
    """

    def __init__(self, *, frame_skip=5, forward_reward_weight=1.0, ctrl_cost_weight=0.5, contact_cost_weight=5e-4,
                 healthy_reward=1.0, terminate_when_unhealthy=True, healthy_z_range=(0.2, 1.0),
                 contact_force_range=(-1.0, 1.0), reset_noise_scale=0.1, include_cfrc_ext_in_observation=True):
        super().__init__("ant.xml", frame_skip, forward_reward_weight=forward_reward_weight,
                         ctrl_cost_weight=ctrl_cost_weight, contact_cost_weight=contact_cost_weight,
                         healthy_reward=healthy_reward, terminate_when_unhealthy=terminate_when_unhealthy,
                         healthy_z_range=healthy_z_range, reset_noise_scale=reset_noise_scale,
                         velocity_noise="normal")
        self.contact_force_range = contact_force_range
        self.include_cfrc_ext_in_observation = include_cfrc_ext_in_observation

    def contact_forces(self, physics) -> jnp.ndarray:
        """(14, 6) F: MuJoCo's cfrc_ext at a State, clipped to ``contact_force_range``."""
        return jnp.clip(super().contact_forces(physics), *self.contact_force_range)

    def observation(self, physics, forces) -> jnp.ndarray:
        """qpos without x and y, qvel, then ``forces`` but the world's row."""
        parts = [self.mujoco.qpos(physics)[2:], self.mujoco.qvel(physics)]
        return jnp.concatenate(parts + [forces[1:].ravel()] * self.include_cfrc_ext_in_observation)

    def is_healthy(self, physics) -> jnp.ndarray:
        """Whether qpos and qvel are finite and the torso's height is within ``healthy_z_range``."""
        qpos = self.mujoco.qpos(physics)
        finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(self.mujoco.qvel(physics)))
        return finite & (self.healthy_z_range[0] <= qpos[2]) & (qpos[2] <= self.healthy_z_range[1])


class Humanoid(Runner):
    """gymnasium's Humanoid-v5 (348 observations, 17 actions).

    The forward velocity is the system's mass center's. The contact cost is
    contact_cost_weight * |F|^2 clipped to ``contact_cost_range``, F
    MuJoCo's cfrc_ext of every body. The observation is qpos without x and
    y, qvel, then but the world's rows MuJoCo's cinert, cvel, the
    actuators' qfrc_actuator but the free joint's six, and F (each part
    where asked). Healthy: the torso's height strictly within
    ``healthy_z_range``. The file is loaded with its welded bodies apart
    (``merge_fixed=False``: MuJoCo's cinert is per body). The module's
    docstring says where it differs from gymnasium's.

    Args:
        frame_skip: The file's steps per environment step.
        forward_reward_weight: Reward per m/s of the mass center's x velocity.
        ctrl_cost_weight: Cost per unit of squared action.
        contact_cost_weight: Cost per N^2 (and (N m)^2) of the contact forces.
        contact_cost_range: (low, high), the clip of the contact cost.
        healthy_reward: Reward per step while healthy.
        terminate_when_unhealthy: End the episode when unhealthy.
        healthy_z_range: (low, high) m, the torso's height while healthy.
        reset_noise_scale: The half-width of the uniform noise a reset adds
            to the file's qpos and qvel.
        include_cinert_in_observation: Whether the observation has cinert.
        include_cvel_in_observation: Whether it has cvel.
        include_qfrc_actuator_in_observation: Whether it has qfrc_actuator.
        include_cfrc_ext_in_observation: Whether it has F.
    """

    def __init__(self, *, frame_skip=5, forward_reward_weight=1.25, ctrl_cost_weight=0.1, contact_cost_weight=5e-7,
                 contact_cost_range=(-np.inf, 10.0), healthy_reward=5.0, terminate_when_unhealthy=True,
                 healthy_z_range=(1.0, 2.0), reset_noise_scale=1e-2, include_cinert_in_observation=True,
                 include_cvel_in_observation=True, include_qfrc_actuator_in_observation=True,
                 include_cfrc_ext_in_observation=True):
        super().__init__("humanoid.xml", frame_skip, forward_reward_weight=forward_reward_weight,
                         ctrl_cost_weight=ctrl_cost_weight, contact_cost_weight=contact_cost_weight,
                         healthy_reward=healthy_reward, terminate_when_unhealthy=terminate_when_unhealthy,
                         healthy_z_range=healthy_z_range, reset_noise_scale=reset_noise_scale,
                         velocity_noise="uniform", merge_fixed=False)
        self.contact_cost_range = contact_cost_range
        self.included = (include_cinert_in_observation, include_cvel_in_observation,
                         include_qfrc_actuator_in_observation, include_cfrc_ext_in_observation)

    def tracked(self, physics) -> jnp.ndarray:
        """(2,) the x and y of the system's mass center (m)."""
        return self.mujoco.mass_center(self.model, physics)[:2]

    def contact_cost(self, forces) -> jnp.ndarray:
        return jnp.clip(super().contact_cost(forces), *self.contact_cost_range)

    def observation(self, physics, forces) -> jnp.ndarray:
        """qpos without x and y, qvel, then cinert, cvel, qfrc_actuator
        without the free joint's and ``forces``, each without the world's
        row and where asked."""
        view, model = self.mujoco, self.model
        parts = [lambda: view.cinert(model, physics)[1:].ravel(), lambda: view.cvel(model, physics)[1:].ravel(),
                 lambda: view.qfrc_actuator(model, physics)[6:], lambda: forces[1:].ravel()]
        return jnp.concatenate([view.qpos(physics)[2:], view.qvel(physics)]
                               + [part() for part, included in zip(parts, self.included) if included])

    def is_healthy(self, physics) -> jnp.ndarray:
        """Whether the torso's height is strictly within ``healthy_z_range``."""
        z = self.mujoco.qpos(physics)[2]
        return (self.healthy_z_range[0] < z) & (z < self.healthy_z_range[1])
