"""gymnasium's Ant and Humanoid on simbodyx: MuJoCo's quantities of a State
(``sx.envs.MuJoCoView``: qpos, qvel, cinert, cvel, qfrc_actuator,
cfrc_ext), the observation, reward terms and termination of Ant-v5 and
Humanoid-v5 against gymnasium's own environments set to the same state,
and the environments under jit and vmap.

gymnasium's Humanoid file asks for MuJoCo's PGS solver, 50 iterations,
whose contact forces stop short of the solution; simbodyx's solve is
Newton's to convergence. The comparisons set gymnasium's model to
Newton's, tolerance 1e-12, so both give the converged forces."""

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import simbodyx as sx

GYMNASIUM = {"ant": "Ant-v5", "humanoid": "Humanoid-v5"}
#: Root heights from in the air to lying down and beyond the healthy range.
HEIGHTS = {"ant": (0.3, 0.45, 0.55, 0.75, 0.15, 1.2), "humanoid": (1.4, 1.25, 1.0, 0.9, 0.5, 2.1)}
SIZES = {"ant": (105, 8), "humanoid": (348, 17)}


@pytest.fixture(scope="module", params=sorted(GYMNASIUM))
def runner(request):
    gym = gymnasium.make(GYMNASIUM[request.param]).unwrapped
    gym.model.opt.solver, gym.model.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 100
    gym.model.opt.tolerance = 1e-12
    return request.param, sx.envs.make(request.param), gym


def _states(name, env, gym, rng):
    """(State, action) at gymnasium's environment set to the same qpos, qvel
    and controls (forward dynamics and mj_rnePostConstraint run)."""
    for height in HEIGHTS[name]:
        qpos = gym.init_qpos + rng.uniform(-0.3, 0.3, gym.model.nq)
        qpos[2] = height
        qpos[3:7] /= np.linalg.norm(qpos[3:7])
        qvel = rng.normal(0.0, 1.0, gym.model.nv)
        low, high = gym.action_space.low, gym.action_space.high
        action = rng.uniform(low, high)
        gym.data.ctrl[:] = action
        gym.set_state(qpos, qvel)
        mujoco.mj_rnePostConstraint(gym.model, gym.data)
        physics = env.mujoco.state(env.initial, qpos, qvel)
        yield sx.forces.discrete.with_controls(sx.integrate.actuators(env.model), physics, jnp.asarray(action)), action


def test_mujocos_quantities_of_a_state_are_mujocos(runner):
    """At states from in the air to lying down: MuJoCoView's qpos and qvel
    of the State made from MuJoCo's give them back to 1e-12; its cfrc_ext
    (from simbodyx's own solve of the contact constraints) equals MuJoCo's
    within 1e-10 of its size, and (the Humanoid) cinert, cvel,
    qfrc_actuator and the mass center equal MuJoCo's within 1e-12 of
    theirs. The Ant's merged bodies have no cinert, which says so."""
    name, env, gym = runner
    view, touching = env.mujoco, 0
    for physics, _ in _states(name, env, gym, np.random.default_rng(0)):
        np.testing.assert_allclose(view.qpos(physics), gym.data.qpos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(view.qvel(physics), gym.data.qvel, rtol=0, atol=1e-12)
        quantities = {"cfrc_ext": (view.cfrc_ext, gym.data.cfrc_ext, 1e-10)}
        if name == "humanoid":
            quantities.update(cinert=(view.cinert, gym.data.cinert, 1e-12), cvel=(view.cvel, gym.data.cvel, 1e-12),
                              qfrc_actuator=(view.qfrc_actuator, gym.data.qfrc_actuator, 1e-12),
                              mass_center=(view.mass_center, gym.data.subtree_com[1], 1e-12))
        for what, (ours, theirs, tolerance) in quantities.items():
            np.testing.assert_allclose(ours(env.model, physics), theirs, rtol=0,
                                       atol=tolerance * max(1.0, np.abs(theirs).max()), err_msg=what)
        touching += bool(np.any(gym.data.contact.geom[:gym.data.ncon] == 0))  # the floor is geom 0
    assert 2 <= touching < len(HEIGHTS[name])  # states on the floor and off it were checked
    if name == "ant":
        with pytest.raises(NotImplementedError, match="merge_fixed=False"):
            view.cinert(env.model, physics)


def test_observation_reward_terms_and_termination_are_gymnasiums(runner):
    """At the same states: the observation, whether it is healthy and each
    reward term equal gymnasium's within 1e-10 of their size (the
    contact forces computed by each engine)."""
    name, env, gym = runner
    assert (env.observation_size, env.action_size, env.dt) == (*SIZES[name], gym.dt)
    rng, healthy = np.random.default_rng(1), []
    for physics, action in _states(name, env, gym, rng):
        forces = env.contact_forces(physics)
        expected = gym._get_obs()
        np.testing.assert_allclose(env.observation(physics, forces), expected, rtol=0,
                                   atol=1e-10 * np.abs(expected).max())
        x_velocity = rng.normal()
        reward, terms = gym._get_rew(x_velocity, action)
        ours = env.reward_terms(jnp.asarray(x_velocity), physics, jnp.asarray(action), forces)
        assert sorted(ours) == sorted(terms)
        for term, value in terms.items():
            np.testing.assert_allclose(ours[term], value, rtol=1e-10, atol=1e-12, err_msg=term)
        np.testing.assert_allclose(sum(ours.values()), reward, rtol=1e-10, atol=1e-12)
        assert bool(env.is_healthy(physics)) == gym.is_healthy
        healthy.append(gym.is_healthy)
    assert 0 < sum(healthy) < len(healthy)


def test_the_runners_step_under_jit_and_vmap_as_gymnasiums(runner):
    """16 robots reset and stepped in one jitted vmap over 10 random
    actions stay finite; the first, started where gymnasium's is set,
    follows its first step (five of the file's RK4 steps) within 1e-4 in
    qpos and qvel; the reset noise is within its scale; the metrics are
    gymnasium's."""
    name, env, gym = runner
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), 16))
    qpos = np.asarray(jax.vmap(env.mujoco.qpos)(states.pipeline_state))
    noise = np.abs(qpos - np.asarray(env.mujoco.qpos(env.initial)))
    assert noise[:, :3].max() <= env.reset_noise_scale and noise[:, 7:].max() <= env.reset_noise_scale
    assert states.obs.shape == (16, SIZES[name][0])

    first = jax.tree.map(lambda a: a[0], states.pipeline_state)
    gym.set_state(np.asarray(env.mujoco.qpos(first)), np.asarray(env.mujoco.qvel(first)))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(2)
    low, high = gym.action_space.low, gym.action_space.high
    actions = rng.uniform(low, high, (16, env.action_size))
    states = step(states, jnp.asarray(actions))
    gym.step(actions[0])
    moved = jax.tree.map(lambda a: a[0], states.pipeline_state)
    np.testing.assert_allclose(env.mujoco.qpos(moved), gym.data.qpos, rtol=0, atol=1e-4)
    np.testing.assert_allclose(env.mujoco.qvel(moved), gym.data.qvel, rtol=0, atol=1e-4)
    for _ in range(9):
        states = step(states, jnp.asarray(rng.uniform(low, high, (16, env.action_size))))
    assert np.all(np.isfinite(np.asarray(states.obs))) and np.all(np.isfinite(np.asarray(states.reward)))
    assert set(states.metrics) == {"reward_forward", "reward_ctrl", "reward_contact", "reward_survive", "x_position",
                                   "y_position", "distance_from_origin", "x_velocity", "y_velocity"}
