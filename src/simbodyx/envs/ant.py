"""gymnasium's Ant, version 5, on simbodyx: a four-legged robot on a free
joint, rewarded for running along x, its observation MuJoCo's qpos (less
x and y), qvel and the contact forces on its bodies (cfrc_ext)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from simbodyx.envs.base import State
from simbodyx.envs.task import GymnasiumTask


class Ant(GymnasiumTask):
    """gymnasium's Ant-v5 (105 observations, 8 actions; 27 without the contact forces).

    reward = forward_reward_weight * the torso's x velocity (over the
    environment's step) + healthy_reward (while healthy)
    - ctrl_cost_weight * |action|^2 - contact_cost_weight * |F|^2, where F
    is MuJoCo's cfrc_ext of every body at the step's end
    (:meth:`simbodyx.envs.task.MuJoCoView.cfrc_ext`) clipped to
    ``contact_force_range``. The observation is qpos without x and y, qvel,
    then F but the world's row, flattened. Healthy: qpos and qvel finite
    and the torso's height within ``healthy_z_range`` (bounds included);
    unhealthy ends the episode when ``terminate_when_unhealthy``.

    Where gymnasium differs: its F is taken at the start of the last of the
    file's steps (``mj_rnePostConstraint`` after ``mj_step`` reads the
    forces that step solved), here at the step's end, so the observation
    is a function of the State; after a reset its F is zero (not yet
    computed), here it is the reset State's; its reset leaves the torso's
    quaternion as the noise made it, here it is normalized.

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
        super().__init__("ant.xml", frame_skip, reset_noise_scale)
        self.forward_reward_weight, self.ctrl_cost_weight = forward_reward_weight, ctrl_cost_weight
        self.contact_cost_weight, self.healthy_reward = contact_cost_weight, healthy_reward
        self.terminate_when_unhealthy, self.healthy_z_range = terminate_when_unhealthy, healthy_z_range
        self.contact_force_range = contact_force_range
        self.include_cfrc_ext_in_observation = include_cfrc_ext_in_observation

    def contact_forces(self, physics) -> jnp.ndarray:
        """(14, 6) F: MuJoCo's cfrc_ext at a State, clipped to ``contact_force_range``."""
        return jnp.clip(self.mujoco.cfrc_ext(self.model, physics), *self.contact_force_range)

    def observation(self, physics, forces) -> jnp.ndarray:
        """qpos without x and y, qvel, then ``forces`` but the world's row."""
        parts = [self.mujoco.qpos(physics)[2:], self.mujoco.qvel(physics)]
        return jnp.concatenate(parts + [forces[1:].ravel()] * self.include_cfrc_ext_in_observation)

    def is_healthy(self, physics) -> jnp.ndarray:
        """Whether qpos and qvel are finite and the torso's height is within ``healthy_z_range``."""
        qpos = self.mujoco.qpos(physics)
        finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(self.mujoco.qvel(physics)))
        return finite & (self.healthy_z_range[0] <= qpos[2]) & (qpos[2] <= self.healthy_z_range[1])

    def reward_terms(self, x_velocity, physics, action, forces) -> dict:
        """gymnasium's reward terms, by its names: reward_forward,
        reward_ctrl and reward_contact (minus the costs), reward_survive."""
        return {"reward_forward": self.forward_reward_weight * x_velocity,
                "reward_ctrl": -self.ctrl_cost_weight * jnp.sum(jnp.square(action)),
                "reward_contact": -self.contact_cost_weight * jnp.sum(jnp.square(forces)),
                "reward_survive": self.healthy_reward * self.is_healthy(physics).astype(x_velocity.dtype)}

    def _positions(self, physics, xy_velocity) -> dict:
        qpos = self.mujoco.qpos(physics)
        return {"x_position": qpos[0], "y_position": qpos[1], "distance_from_origin": jnp.linalg.norm(qpos[:2]),
                "x_velocity": xy_velocity[0], "y_velocity": xy_velocity[1]}

    def reset(self, rng: jax.Array) -> State:
        view, scale = self.mujoco, self.reset_noise_scale
        qpos0 = view.qpos(self.initial)
        position_key, velocity_key = jax.random.split(rng)
        qpos = qpos0 + jax.random.uniform(position_key, qpos0.shape, qpos0.dtype, -scale, scale)
        qvel = scale * jax.random.normal(velocity_key, self.initial.u.shape, qpos0.dtype)
        physics = view.state(self.initial, qpos, qvel)
        forces, zero = self.contact_forces(physics), jnp.zeros((), qpos0.dtype)
        terms = self.reward_terms(zero, physics, jnp.zeros(self.action_size, qpos0.dtype), forces)
        metrics = dict({name: zero for name in terms}, **self._positions(physics, jnp.zeros(2, qpos0.dtype)))
        return State(physics, self.observation(physics, forces), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        physics = self.advance(before, action)
        xy_velocity = (self.mujoco.qpos(physics)[:2] - self.mujoco.qpos(before)[:2]) / self.dt
        forces = self.contact_forces(physics)
        terms = self.reward_terms(xy_velocity[0], physics, action, forces)
        done = ~self.is_healthy(physics) if self.terminate_when_unhealthy else jnp.zeros((), bool)
        metrics = dict(state.metrics, **terms, **self._positions(physics, xy_velocity))
        return state.replace(pipeline_state=physics, obs=self.observation(physics, forces),
                             reward=sum(terms.values()), done=done.astype(xy_velocity.dtype), metrics=metrics)
