"""Brax's trainers take a simbodyx environment as it is: PPO (its wrappers
for episode length, automatic reset and vmap included) trains the Hopper
for a few iterations, float64 physics under float32 networks."""

import jax
import numpy as np

import simbodyx as sx


def test_brax_ppo_trains_the_hopper_unchanged():
    """``ppo.train(environment=sx.envs.make("hopper"), ...)`` at a tiny size
    (4 environments, 5-step unrolls, three evaluations): every loss and
    episode reward it reports is finite, the losses move between
    evaluations, and the policy it returns acts within (-1, 1)."""
    from brax.training.agents.ppo import train as ppo  # imported here: Brax's import is slow and noisy

    env = sx.envs.make("hopper")
    reports = []
    make_policy, params, _ = ppo.train(
        environment=env, num_timesteps=160, episode_length=20, num_envs=4, batch_size=4, num_minibatches=1,
        unroll_length=5, num_updates_per_batch=1, num_evals=3, seed=0,
        progress_fn=lambda step, metrics: reports.append({k: float(v) for k, v in metrics.items()}))
    assert len(reports) == 3 and all(np.isfinite(list(r.values())).all() for r in reports)
    losses = [r["training/total_loss"] for r in reports[1:]]
    assert losses[0] != losses[1]
    state = env.reset(jax.random.PRNGKey(0))
    action, _ = make_policy(params, deterministic=True)(state.obs, jax.random.PRNGKey(1))
    assert action.shape == (env.action_size,) and np.all(np.abs(np.asarray(action)) < 1)
