"""Cart-pole swing-up by direct single shooting: the cart's force at each of
150 steps of 20 ms (zero-order hold, RK4), optimized with optax's Adam (a
cosine-decayed step) through a differentiable rollout, as one compiled
program (about 30 s to compile and 27 ms per iteration on 2 CPU cores).

    python examples/cartpole_swingup.py
"""

import time

import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

CART_MASS, POLE_MASS, POLE_LENGTH = 1.0, 0.1, 1.0  # kg, kg, m
NUM_STEPS, DT = 150, 0.02  # a 3 s horizon


def cartpole():
    """(model, state): a cart on a Slider along Ground's x and a uniform pole on
    a Pin about z, hanging along -y at q = 0 (upright at pole angle pi)."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    cart = sx.MobilizedBody.Slider(matter.Ground(), sx.Body.Rigid(sx.MassProperties(CART_MASS, [0, 0, 0],
                                                                                     sx.Inertia(0.01))))
    rod = POLE_MASS * POLE_LENGTH**2 / 12
    sx.MobilizedBody.Pin(cart, sx.Body.Rigid(sx.MassProperties.from_central(
        POLE_MASS, [0, -POLE_LENGTH / 2, 0], sx.Inertia(rod, 0.0, rod))))
    return system.realize_topology()


def make_loss(model):
    """loss(cart_forces, state): the terminal state's squared distance from
    the upright at rest over the cart's origin, plus a small force penalty."""
    upright = jnp.array([0.0, jnp.pi])

    def loss(cart_forces, state):
        controls = jnp.stack([cart_forces, jnp.zeros_like(cart_forces)], axis=1)  # the pole is not actuated
        final, _ = sx.integrate.rollout(model, state, DT, controls=controls, energy=False)
        terminal = jnp.sum((final.q - upright) ** 2) + jnp.sum(final.u**2)
        return 10.0 * terminal + 1e-4 * DT * jnp.sum(cart_forces**2)

    return loss


def swing_up(iterations=400):
    """(cart forces (NUM_STEPS,), losses (iterations,), final State)."""
    model, state = cartpole()
    optimizer = optax.adam(optax.cosine_decay_schedule(1.0, iterations, alpha=0.01))
    forces, losses = sx.optimize.minimize(make_loss(model), jnp.full(NUM_STEPS, 0.1), optimizer, iterations, state)
    controls = jnp.stack([forces, jnp.zeros_like(forces)], axis=1)
    final, _ = sx.integrate.rollout(model, state, DT, controls=controls, energy=False)
    return forces, losses, final


if __name__ == "__main__":
    start = time.perf_counter()
    forces, losses, final = swing_up()
    print(f"compile + {len(losses)} Adam iterations: {time.perf_counter() - start:.1f} s")
    print(f"loss {float(losses[0]):.3g} -> {float(losses[-1]):.3g}; peak cart force {float(jnp.abs(forces).max()):.1f} N")
    print(f"final pole angle - pi = {float(final.q[1] - jnp.pi):.2e} rad, cart x = {float(final.q[0]):.2e} m, "
          f"|u| = {float(jnp.linalg.norm(final.u)):.2e}")
