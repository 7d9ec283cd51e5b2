"""gymnasium's planar locomotion tasks on simbodyx: the observation, the
reward terms and the termination are gymnasium v5's formulas (checked on
gymnasium's own environment, set to the same state), a step follows
gymnasium's MuJoCo step, and reset and step run under jit and vmap."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx

GYMNASIUM = {"hopper": "Hopper-v5", "walker2d": "Walker2d-v5", "half_cheetah": "HalfCheetah-v5"}


def _gymnasium(name):
    return gymnasium.make(GYMNASIUM[name]).unwrapped


@pytest.mark.parametrize("name", sorted(GYMNASIUM))
def test_observation_reward_terms_and_termination_are_gymnasiums(name):
    """At states healthy and not (speeds beyond the observation's clip
    included), q and u set into gymnasium's environment: the observation,
    whether it is healthy and each reward term equal gymnasium's to 1e-12
    (the same formulas on the same numbers)."""
    env, gym = sx.envs.make(name), _gymnasium(name)
    sizes = (gym.observation_space.shape[0], gym.action_space.shape[0], gym.dt)
    assert (env.observation_size, env.action_size, env.dt) == sizes
    rng = np.random.default_rng(0)
    healthy = []
    for k in range(8):
        qpos = gym.init_qpos + rng.uniform(-0.4, 0.4, gym.model.nq) * (1 + 2 * (k % 2))
        qvel = rng.normal(0.0, 8.0, gym.model.nv)
        gym.set_state(qpos, qvel)
        physics = env.initial.with_q(jnp.asarray(qpos)).with_u(jnp.asarray(qvel))
        np.testing.assert_allclose(env.observation(physics), gym._get_obs(), rtol=0, atol=1e-12)
        action, x_velocity = rng.uniform(-1.0, 1.0, env.action_size), rng.normal()
        reward, terms = gym._get_rew(x_velocity, action)
        ours = env.reward_terms(jnp.asarray(x_velocity), physics, jnp.asarray(action))
        assert sorted(ours) == sorted(terms)
        for term, value in terms.items():
            np.testing.assert_allclose(ours[term], value, rtol=0, atol=1e-12, err_msg=term)
        np.testing.assert_allclose(sum(ours.values()), reward, rtol=0, atol=1e-12)
        if name != "half_cheetah":
            assert bool(env.is_healthy(physics)) == gym.is_healthy
            healthy.append(gym.is_healthy)
    assert name == "half_cheetah" or 0 < sum(healthy) < len(healthy)  # both kinds of state were checked


def test_the_hoppers_steps_follow_gymnasiums_under_jit_and_vmap():
    """64 Hoppers reset and stepped in one jitted vmap over 25 random
    actions stay finite; the first, started where gymnasium's is set,
    follows gymnasium's steps (MuJoCo C at the file's 2 ms, 4 frames per
    step): observations within 1e-6, rewards within 1e-6, the same
    terminations; the reset noise is within its scale."""
    env, gym = sx.envs.Hopper(), _gymnasium("hopper")
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), 64))
    noise = np.abs(np.asarray(states.pipeline_state.q) - np.asarray(env.initial.q))
    assert noise.max() <= env.reset_noise_scale and noise.min() >= 0 and np.abs(states.pipeline_state.u).max() <= 5e-3
    assert states.obs.shape == (64, 11) and not np.any(states.done)

    gym.set_state(np.asarray(states.pipeline_state.q[0]), np.asarray(states.pipeline_state.u[0]))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(2)
    for _ in range(25):
        actions = rng.uniform(-1.0, 1.0, (64, env.action_size))
        states = step(states, jnp.asarray(actions))
        obs, reward, terminated, _, info = gym.step(actions[0])
        np.testing.assert_allclose(states.obs[0], obs, rtol=0, atol=1e-6)
        np.testing.assert_allclose(states.reward[0], reward, rtol=0, atol=1e-6)
        np.testing.assert_allclose(states.metrics["x_velocity"][0], info["x_velocity"], rtol=0, atol=1e-6)
        assert bool(states.done[0]) == terminated
    assert np.all(np.isfinite(np.asarray(states.obs)))


def test_make_names_the_environments_and_refuses_others():
    assert set(sx.envs.ENVIRONMENTS) == set(GYMNASIUM) | {"ant", "humanoid"}
    with pytest.raises(ValueError, match="unknown environment 'swimmer'"):
        sx.envs.make("swimmer")


def _scaled(model, what, factor):
    """``model`` with its masses and inertias, its contacts' sliding
    friction or its motors' gains times ``factor``."""
    import equinox as eqx

    params = model.params
    if what == "mass":
        return eqx.tree_at(lambda m: (m.params.mass, m.params.central_inertia), model,
                           (params.mass * factor, params.central_inertia * factor))
    if what == "friction":
        return eqx.tree_at(lambda m: m.params.soft_constraints.friction, model,
                           params.soft_constraints.friction.at[:, :2].multiply(factor))
    motors = sx.integrate.actuators(model)
    return eqx.tree_at(lambda m: [a.gain for a in sx.integrate.actuators(m)], model,
                       [a.gain * factor for a in motors])


@pytest.mark.parametrize("what", ["mass", "friction", "gain"])
def test_randomized_models_step_each_environment_on_its_own_model(what):
    """Two Hoppers in one Randomized batch, their masses and inertias, their
    contacts' sliding friction or their motors' gains scaled by 1 and by
    1.5 or 0.2 (a vmap of an edited Model), 25 steps: the first steps
    exactly as the plain environment, the second differently, both finite."""
    env = sx.envs.Hopper(reset_noise_scale=0.0)
    other = 0.2 if what == "friction" else 1.5
    batch = sx.envs.Randomized(env, jax.vmap(lambda f: _scaled(env.model, what, f))(jnp.asarray([1.0, other])))
    assert (batch.observation_size, batch.action_size) == (11, 3)
    states = batch.reset(jax.random.split(jax.random.PRNGKey(0), 2))
    actions = jnp.asarray([[0.5, -0.5, 0.2]] * 2)
    step, plain_step, plain = jax.jit(batch.step), jax.jit(env.step), env.reset(jax.random.PRNGKey(0))
    for _ in range(25):  # 0.2 s: the foot lands, so friction acts
        states, plain = step(states, actions), plain_step(plain, actions[0])
    np.testing.assert_allclose(states.obs[0], plain.obs, rtol=0, atol=1e-12)
    assert np.abs(np.asarray(states.obs[1] - states.obs[0])).max() > 1e-6
    assert np.all(np.isfinite(np.asarray(states.obs)))


def test_a_steps_reward_is_differentiable_in_the_action():
    """d(the Hopper's reward)/d(action) by reverse mode through ``step``
    (four 2 ms steps of the file's) equals central differences (step 1e-6)
    within 1e-6 of its size: the environment's gradient is the rollout's."""
    env = sx.envs.Hopper()
    start = env.reset(jax.random.PRNGKey(3))
    value_and_grad = jax.jit(jax.value_and_grad(lambda action: env.step(start, action).reward))
    action = jnp.asarray(np.random.default_rng(4).uniform(-1.0, 1.0, env.action_size))
    grad, h = np.asarray(value_and_grad(action)[1]), 1e-6
    central = np.array([(value_and_grad(action.at[i].add(h))[0] - value_and_grad(action.at[i].add(-h))[0]) / (2 * h)
                        for i in range(env.action_size)])
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 1e-3
    np.testing.assert_allclose(grad, central, rtol=0, atol=1e-6 * np.abs(central).max())


def test_a_float32_task_steps_as_the_float64_one():
    """env.astype(jnp.float32): observations, rewards and States in float32,
    finite over 100 random steps of 16 Hoppers, and after one step within
    float32's reach (1e-4) of the float64 task's."""
    env = sx.envs.make("hopper")
    narrow = env.astype(jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(0), 16)
    assert jax.jit(jax.vmap(narrow.reset))(keys).pipeline_state.q.dtype == jnp.float32
    wide_states = jax.vmap(env.reset)(keys)
    states = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x,
                          wide_states)  # the same starts (the noise's draws differ between precisions)
    step = jax.jit(jax.vmap(narrow.step))
    actions = jax.random.uniform(jax.random.PRNGKey(1), (100, 16, narrow.action_size), jnp.float32, -1, 1)
    first = step(states, actions[0])
    np.testing.assert_allclose(first.obs, jax.vmap(env.step)(wide_states, actions[0].astype(jnp.float64)).obs,
                               rtol=1e-4, atol=1e-4)
    assert first.obs.dtype == first.reward.dtype == first.pipeline_state.q.dtype == jnp.float32
    for action in actions[1:]:
        first = step(first, action)
    assert bool(jnp.all(jnp.isfinite(first.obs)))
