"""A 7-link arm reaching a target at rest with little torque, two ways:

- by gradient: Adam on the joint torques of every step, differentiating
  through the RK4 rollout (one compiled program);
- by batched random shooting: the cross-entropy method, each iteration
  4,096 rollouts of torque profiles sampled around the current mean (each
  joint's torque interpolated between 6 knots), evaluated at once with
  sx.parallel.batched, the mean and spread refitted to the best 64.

    python examples/arm_reaching.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

NUM_LINKS, LINK_LENGTH, LINK_MASS, DAMPING = 7, 0.25, 1.0, 0.5  # -, m, kg, N m s per joint
NUM_STEPS, DT = 50, 0.02  # a 1 s horizon
TARGET = np.array([0.6, -1.2, 0.5])  # m, in Ground (the arm hangs along -y, 1.75 m long)
TIP = np.array([0.0, -LINK_LENGTH, 0.0])  # the last link's end, in its frame
NUM_KNOTS = 6  # random shooting: torque knots per joint


def arm():
    """(model, state, hand): a chain of Pins hanging from Ground along -y,
    the joint axes alternating between z and x, each joint damped; hand is
    the last link."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    rod = LINK_MASS * LINK_LENGTH**2 / 12
    body = sx.Body.Rigid(sx.MassProperties.from_central(LINK_MASS, [0, -LINK_LENGTH / 2, 0], sx.Inertia(rod, 0.0, rod)))
    link = matter.Ground()
    for k in range(NUM_LINKS):
        axis = sx.Rotation() if k % 2 == 0 else sx.Rotation.about_y(jnp.pi / 2)  # Pin turns about F's z
        origin = [0.0, 0.0 if k == 0 else -LINK_LENGTH, 0.0]
        link = sx.MobilizedBody.Pin(link, sx.Transform(axis, origin), body, sx.Transform(axis, [0.0, 0.0, 0.0]))
        sx.Force.MobilityLinearDamper(forces, link, 0, DAMPING)
    model, state = system.realize_topology()
    return model, state, link


def hand_position(model, state, hand, torques):
    """(the hand's end in Ground, final State) after one rollout of the torques.
    The gradient keeps every step's intermediates (``checkpoint=False``): at
    50 steps they are small, and the program compiles and runs faster than
    with each step recomputed."""
    final, _ = sx.integrate.rollout(model, state, DT, controls=torques, energy=False, checkpoint=False)
    return hand.find_station_location_in_ground(model.realize(final, sx.Stage.Position), TIP), final


def make_cost(model, state, hand):
    """cost(torques (NUM_STEPS, NUM_LINKS)): squared distance of the hand's
    end from TARGET and its speeds at the end, plus a torque penalty."""

    def cost(torques):
        tip, final = hand_position(model, state, hand, torques)
        return 1000.0 * jnp.sum((tip - TARGET) ** 2) + jnp.sum(final.u**2) + 1e-3 * DT * jnp.sum(torques**2)

    return cost


def reach_by_gradient(iterations=600):
    """(torques (NUM_STEPS, NUM_LINKS), costs (iterations,))."""
    model, state, hand = arm()
    optimizer = optax.adam(optax.cosine_decay_schedule(0.3, iterations, alpha=0.01))
    return sx.optimize.minimize(make_cost(model, state, hand), jnp.zeros((NUM_STEPS, NUM_LINKS)), optimizer,
                                iterations)


def interpolate(knots):
    """Torques (NUM_STEPS, NUM_LINKS) from knots (NUM_KNOTS, NUM_LINKS),
    piecewise linear over the horizon."""
    at = jnp.linspace(0.0, NUM_KNOTS - 1.0, NUM_STEPS)
    return jax.vmap(lambda column: jnp.interp(at, jnp.arange(NUM_KNOTS, dtype=at.dtype), column), 1, 1)(knots)


def reach_by_random_shooting(iterations=10, samples=4096, elites=64, seed=0):
    """The cross-entropy method: (torques, best cost per iteration,
    rollouts per second of the batched evaluation, after compiling)."""
    model, state, hand = arm()
    cost = make_cost(model, state, hand)
    evaluate = jax.jit(sx.parallel.batched(lambda knots: cost(interpolate(knots))))
    mean, spread = jnp.zeros((NUM_KNOTS, NUM_LINKS)), jnp.full((NUM_KNOTS, NUM_LINKS), 3.0)
    key, best, seconds = jax.random.key(seed), [], []
    for _ in range(iterations):
        key, draw = jax.random.split(key)
        candidates = mean + spread * jax.random.normal(draw, (samples, NUM_KNOTS, NUM_LINKS))
        start = time.perf_counter()
        # costs to the host: the refit and the torques returned stay on the default device (replicated over
        # the devices, as evaluate's outputs are, they would make hand_position compile its rollout again)
        costs = np.asarray(evaluate(candidates))
        seconds.append(time.perf_counter() - start)
        chosen = candidates[np.argsort(costs)[:elites]]
        mean, spread = chosen.mean(axis=0), chosen.std(axis=0) + 0.1
        best.append(float(costs.min()))
    rate = samples * (iterations - 1) / sum(seconds[1:]) if iterations > 1 else float("nan")
    return interpolate(mean), jnp.array(best), rate


if __name__ == "__main__":
    sx.parallel.use_cpu_cores()  # one JAX device per core, before any computation
    model, state, hand = arm()
    start = time.perf_counter()
    torques, costs = reach_by_gradient()
    tip, final = hand_position(model, state, hand, torques)
    print(f"gradient (Adam, {len(costs)} iterations, {time.perf_counter() - start:.1f} s with compiling): cost "
          f"{float(costs[0]):.3g} -> {float(costs[-1]):.3g}; hand {1e3 * float(jnp.linalg.norm(tip - TARGET)):.1f} mm "
          f"from the target, |u| = {float(jnp.linalg.norm(final.u)):.2e}, peak torque {float(jnp.abs(torques).max()):.1f} N m")
    start = time.perf_counter()
    torques, best, rate = reach_by_random_shooting()
    tip, final = hand_position(model, state, hand, torques)
    print(f"random shooting (cross-entropy, 10 x 4,096 rollouts, {time.perf_counter() - start:.1f} s with compiling, "
          f"{len(jax.devices())} CPU devices): {rate:,.0f} rollouts/s = {rate * NUM_STEPS:,.0f} RK4 steps/s; best cost "
          f"{best[0]:.3g} -> {best[-1]:.3g}; the mean's hand {1e3 * float(jnp.linalg.norm(tip - TARGET)):.1f} mm from the target")
