"""gymnasium's planar MuJoCo locomotion tasks, version 5, on simbodyx.

Each task loads its gymnasium MJCF file with ``sx.io.load_mjcf`` (MuJoCo's
constraint model, stepped by the file's integrator at the file's time
step) and defines gymnasium v5's observation, reward terms, termination,
frame skip and reset noise, with gymnasium's defaults as the constructor's
defaults. The robots are planar (a slider along x, a slider along z and a
hinge at the root, hinges below), so the State's q and u are MuJoCo's qpos
and qvel entry for entry.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.envs.base import State
from simbodyx.envs.task import GymnasiumTask


class Locomotion(GymnasiumTask):
    """A planar robot rewarded for running forward along x.

    reward = forward_reward_weight * x velocity + healthy_reward (while
    healthy) - ctrl_cost_weight * |action|^2, the x velocity taken over the
    environment's step (``frame_skip`` steps of the file's). The
    observation is q without the root's x, then u (clipped to
    +-``velocity_clip`` where one is given). Unhealthy (the root's height
    outside ``healthy_z_range``, its angle outside
    ``healthy_angle_range``, or q and u past ``healthy_state_range`` but
    for x and z) ends the episode when ``terminate_when_unhealthy``.

    Args:
        file: The gymnasium MJCF file.
        frame_skip: The file's steps per environment step.
        forward_reward_weight: Reward per m/s of forward velocity.
        ctrl_cost_weight: Cost per unit of squared action.
        healthy_reward: Reward per step while healthy (0: no such term).
        terminate_when_unhealthy: End the episode when unhealthy.
        healthy_z_range: (low, high) m, the root's height while healthy.
        healthy_angle_range: (low, high) rad, the root's angle while healthy.
        healthy_state_range: (low, high) of q and u but x and z; None: no bound.
        reset_noise_scale: The half-width of the uniform noise added to the
            file's q and to zero u at a reset.
        velocity_noise: "uniform", or "normal" for u's noise with this
            standard deviation.
        velocity_clip: Clip u's observation to +- this; None: no clip.

    Raises:
        NotImplementedError: The file has a joint other than a hinge or slide.
    """

    def __init__(self, file, frame_skip, *, forward_reward_weight=1.0, ctrl_cost_weight=1e-3, healthy_reward=1.0,
                 terminate_when_unhealthy=True, healthy_z_range=(-np.inf, np.inf),
                 healthy_angle_range=(-np.inf, np.inf), healthy_state_range=None, reset_noise_scale=5e-3,
                 velocity_noise="uniform", velocity_clip=None):
        super().__init__(file, frame_skip, reset_noise_scale, velocity_noise)
        others = [j.name for j in self.robot.joints.values() if j.type not in ("hinge", "slide")]
        if others:
            raise NotImplementedError(f"{type(self).__name__}: {file} has joints other than hinges and slides "
                                      f"({', '.join(others)}); the planar tasks map q to qpos one to one")
        self.forward_reward_weight, self.ctrl_cost_weight = forward_reward_weight, ctrl_cost_weight
        self.healthy_reward, self.terminate_when_unhealthy = healthy_reward, terminate_when_unhealthy
        self.healthy_z_range, self.healthy_angle_range = healthy_z_range, healthy_angle_range
        self.healthy_state_range, self.velocity_clip = healthy_state_range, velocity_clip

    def observation(self, physics) -> jnp.ndarray:
        """q without the root's x, then u (clipped where the task clips it)."""
        u = physics.u if self.velocity_clip is None else jnp.clip(physics.u, -self.velocity_clip, self.velocity_clip)
        return jnp.concatenate([physics.q[1:], u])

    def is_healthy(self, physics) -> jnp.ndarray:
        """Whether the root's height and angle, and q and u but x and z, are in their ranges."""
        z, angle = physics.q[1], physics.q[2]
        healthy = ((self.healthy_z_range[0] < z) & (z < self.healthy_z_range[1])
                   & (self.healthy_angle_range[0] < angle) & (angle < self.healthy_angle_range[1]))
        if self.healthy_state_range is not None:
            rest = jnp.concatenate([physics.q, physics.u])[2:]
            low, high = self.healthy_state_range
            healthy = healthy & jnp.all((low < rest) & (rest < high))
        return healthy

    def reward_terms(self, x_velocity, physics, action) -> dict:
        """gymnasium's reward terms, by its names: reward_forward,
        reward_ctrl (minus the control cost) and, with a healthy reward,
        reward_survive."""
        terms = {"reward_forward": self.forward_reward_weight * x_velocity,
                 "reward_ctrl": -self.ctrl_cost_weight * jnp.sum(jnp.square(action))}
        if self.healthy_reward:
            terms["reward_survive"] = self.healthy_reward * self.is_healthy(physics).astype(x_velocity.dtype)
        return terms

    def reset(self, rng: jax.Array) -> State:
        physics = self.reset_physics(rng)
        zero = jnp.zeros((), physics.q.dtype)
        metrics = {name: zero for name in self.reward_terms(zero, physics, jnp.zeros(self.action_size, zero.dtype))}
        metrics.update(x_position=physics.q[0], x_velocity=zero)
        return State(physics, self.observation(physics), zero, zero, metrics)

    def step(self, state: State, action: jax.Array) -> State:
        before = state.pipeline_state
        physics = self.advance(before, action)
        x_velocity = (physics.q[0] - before.q[0]) / self.dt
        terms = self.reward_terms(x_velocity, physics, action)
        done = (~self.is_healthy(physics) if self.terminate_when_unhealthy else jnp.zeros((), bool))
        metrics = dict(state.metrics, **terms, x_position=physics.q[0], x_velocity=x_velocity)
        return state.replace(pipeline_state=physics, obs=self.observation(physics), reward=sum(terms.values()),
                             done=done.astype(x_velocity.dtype), metrics=metrics)


class Hopper(Locomotion):
    """gymnasium's Hopper-v5: a one-legged hopper (11 observations, 3 actions)."""

    def __init__(self, **overrides):
        super().__init__("hopper.xml", 4, **{
            "healthy_z_range": (0.7, np.inf), "healthy_angle_range": (-0.2, 0.2),
            "healthy_state_range": (-100.0, 100.0), "velocity_clip": 10.0, **overrides})


class Walker2d(Locomotion):
    """gymnasium's Walker2d-v5: a planar biped (17 observations, 6 actions)."""

    def __init__(self, **overrides):
        super().__init__("walker2d_v5.xml", 4, **{
            "healthy_z_range": (0.8, 2.0), "healthy_angle_range": (-1.0, 1.0), "velocity_clip": 10.0, **overrides})


class HalfCheetah(Locomotion):
    """gymnasium's HalfCheetah-v5: a planar runner that never ends its
    episode (17 observations, 6 actions)."""

    def __init__(self, **overrides):
        super().__init__("half_cheetah.xml", 5, **{
            "ctrl_cost_weight": 0.1, "healthy_reward": 0.0, "terminate_when_unhealthy": False,
            "reset_noise_scale": 0.1, "velocity_noise": "normal", **overrides})
