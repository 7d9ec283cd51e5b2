"""gymnasium's Ant on simbodyx: MuJoCo's qpos, qvel and cfrc_ext of a State
(``sx.envs.MuJoCoView``), the observation, reward terms and termination
of Ant-v5 against gymnasium's own environment set to the same state, and
the environment under jit and vmap."""

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import simbodyx as sx


@pytest.fixture(scope="module")
def ant():
    return sx.envs.make("ant"), gymnasium.make("Ant-v5").unwrapped


def _states(gym, rng):
    """(qpos, qvel) of torsos from in the air to on the floor, and outside
    the healthy heights: feet touching the floor at some, not at others."""
    for height in (0.3, 0.45, 0.55, 0.75, 0.15, 1.2):
        qpos = gym.init_qpos + rng.uniform(-0.3, 0.3, gym.model.nq)
        qpos[2] = height
        qpos[3:7] /= np.linalg.norm(qpos[3:7])
        yield qpos, rng.normal(0.0, 1.0, gym.model.nv)


def test_qpos_qvel_and_contact_forces_are_mujocos(ant):
    """At states from in the air to several feet down: MuJoCoView's qpos
    and qvel of the State made from MuJoCo's (qpos, qvel) give them back
    to 1e-12, and its cfrc_ext (from simbodyx's own solve of the contact
    constraints) equals MuJoCo's (``mj_rnePostConstraint``) within 1e-10
    of its size: the same forces at the same points, the same references."""
    env, gym = ant
    touching = 0
    for qpos, qvel in _states(gym, np.random.default_rng(0)):
        gym.set_state(qpos, qvel)
        mujoco.mj_rnePostConstraint(gym.model, gym.data)
        physics = env.mujoco.state(env.initial, qpos, qvel)
        np.testing.assert_allclose(env.mujoco.qpos(physics), qpos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(env.mujoco.qvel(physics), qvel, rtol=0, atol=1e-12)
        expected = gym.data.cfrc_ext
        np.testing.assert_allclose(env.mujoco.cfrc_ext(env.model, physics), expected, rtol=0,
                                   atol=1e-10 * max(1.0, np.abs(expected).max()))
        touching += gym.data.ncon > 0
    assert 2 <= touching < 6  # states on and off the floor were checked


def test_observation_reward_terms_and_termination_are_gymnasiums(ant):
    """At the same states: the observation (105: qpos less x and y, qvel,
    the clipped cfrc_ext less the world's), whether it is healthy and each
    reward term equal gymnasium's within 1e-10 (cfrc_ext, computed by each
    engine, within 1e-10 of its size)."""
    env, gym = ant
    assert (env.observation_size, env.action_size, env.dt) == (105, 8, gym.dt)
    rng, healthy = np.random.default_rng(1), []
    for qpos, qvel in _states(gym, rng):
        gym.set_state(qpos, qvel)
        mujoco.mj_rnePostConstraint(gym.model, gym.data)
        physics = env.mujoco.state(env.initial, qpos, qvel)
        forces = env.contact_forces(physics)
        np.testing.assert_allclose(env.observation(physics, forces), gym._get_obs(), rtol=0, atol=1e-10)
        action, x_velocity = rng.uniform(-1.0, 1.0, env.action_size), rng.normal()
        reward, terms = gym._get_rew(x_velocity, action)
        ours = env.reward_terms(jnp.asarray(x_velocity), physics, jnp.asarray(action), forces)
        assert sorted(ours) == sorted(terms)
        for term, value in terms.items():
            np.testing.assert_allclose(ours[term], value, rtol=0, atol=1e-10, err_msg=term)
        np.testing.assert_allclose(sum(ours.values()), reward, rtol=0, atol=1e-10)
        assert bool(env.is_healthy(physics)) == gym.is_healthy
        healthy.append(gym.is_healthy)
    assert 0 < sum(healthy) < len(healthy)
    without = sx.envs.Ant(include_cfrc_ext_in_observation=False)
    assert without.observation_size == 27


def test_the_ants_steps_under_jit_and_vmap_follow_gymnasiums(ant):
    """64 Ants reset and stepped in one jitted vmap over 20 random actions
    stay finite; the first, started where gymnasium's is set, follows its
    first step in the air (five RK4 steps of 10 ms) within 1e-5 in
    qpos and qvel; the reset noise is within its scale."""
    env, gym = ant
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), 64))
    physics = jax.vmap(env.mujoco.qpos)(states.pipeline_state)
    noise = np.abs(np.asarray(physics) - np.asarray(env.mujoco.qpos(env.initial)))
    assert noise[:, :3].max() <= env.reset_noise_scale and noise[:, 7:].max() <= env.reset_noise_scale
    assert states.obs.shape == (64, 105) and not np.any(states.done)

    first = jax.tree.map(lambda a: a[0], states.pipeline_state)
    gym.set_state(np.asarray(env.mujoco.qpos(first)), np.asarray(env.mujoco.qvel(first)))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(2)
    actions = rng.uniform(-1.0, 1.0, (64, env.action_size))
    states = step(states, jnp.asarray(actions))
    obs, *_ = gym.step(actions[0])
    np.testing.assert_allclose(states.obs[0, :27], obs[:27], rtol=0, atol=1e-5)
    for _ in range(19):
        states = step(states, jnp.asarray(rng.uniform(-1.0, 1.0, (64, env.action_size))))
    assert np.all(np.isfinite(np.asarray(states.obs))) and np.all(np.isfinite(np.asarray(states.reward)))
    assert set(states.metrics) == {"reward_forward", "reward_ctrl", "reward_contact", "reward_survive", "x_position",
                                   "y_position", "distance_from_origin", "x_velocity", "y_velocity"}
