"""Cart-pole swing-up, the cart's force at each of 150 steps of 20 ms
(zero-order hold, RK4) as the decision variables, solved two ways with
optax, each as one compiled program:

- direct single shooting: one differentiable rollout, a terminal cost, by
  Adam and by L-BFGS;
- direct multiple shooting: 10 segments of 15 steps run side by side, their
  joins (defects) and the upright terminal state as equality constraints,
  |force| <= 8 N as inequalities, by the augmented Lagrangian.

Single shooting takes few iterations, each a 150-step sequential chain;
multiple shooting takes many more, each a 15-step chain over a batch of 10
segments, far cheaper on a CPU. The script prints both. Both loops compile
with ``sx.xla_setup.loop_compiler_options()`` (XLA's earlier CPU runtime on
jaxlib 0.6, nothing elsewhere).

    python examples/cartpole_swingup.py
"""

import time

import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

CART_MASS, POLE_MASS, POLE_LENGTH = 1.0, 0.1, 1.0  # kg, kg, m
NUM_STEPS, DT = 150, 0.02  # a 3 s horizon
SEGMENTS, MAX_FORCE = 10, 8.0  # multiple shooting: segments of NUM_STEPS // SEGMENTS steps; N
UPRIGHT = jnp.array([0.0, jnp.pi, 0.0, 0.0])  # (x, angle, x speed, angle speed) at the goal
LBFGS_ITERATIONS = 60


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


def controls_of(cart_forces):
    """Mobility forces (..., 2) from cart forces (...): the pole is not actuated."""
    return jnp.stack([cart_forces, jnp.zeros_like(cart_forces)], axis=-1)


def simulate(model, state, cart_forces):
    """The final State of one rollout of the cart forces (NUM_STEPS,)."""
    final, _ = sx.integrate.rollout(model, state, DT, controls=controls_of(cart_forces), energy=False)
    return final


def make_loss(model):
    """loss(cart_forces, state): the terminal state's squared distance from
    the upright at rest over the cart's origin, plus a small force penalty."""

    def loss(cart_forces, state):
        final = simulate(model, state, cart_forces)
        terminal = jnp.sum((jnp.concatenate([final.q, final.u]) - UPRIGHT) ** 2)
        return 10.0 * terminal + 1e-4 * DT * jnp.sum(cart_forces**2)

    return loss


def make_problem(model):
    """problem((cart_forces (SEGMENTS, K), knots (SEGMENTS - 1, 4)), state) ->
    (force effort, equalities: defects and terminal state - upright,
    inequalities: |force| - MAX_FORCE)."""

    def problem(x, state):
        cart_forces, knots = x
        ends, defects = sx.optimize.multiple_shooting(model, state, DT, controls_of(cart_forces), knots)
        equalities = jnp.concatenate([defects.ravel(), ends[-1] - UPRIGHT])
        return 1e-3 * DT * jnp.sum(cart_forces**2), equalities, jnp.abs(cart_forces).ravel() - MAX_FORCE

    return problem


def swing_up(iterations=400, method="adam"):
    """Single shooting: (cart forces (NUM_STEPS,), losses (iterations,), final
    State). ``method``: "adam" (a step decaying from 1 N by a cosine) or
    "lbfgs" (optax's L-BFGS with its zoom line search: fewer iterations,
    each several rollouts)."""
    optimizers = {"adam": lambda: optax.adam(optax.cosine_decay_schedule(1.0, iterations, alpha=0.01)),
                  "lbfgs": optax.lbfgs}
    if method not in optimizers:
        raise ValueError(f"swing_up: method must be one of {sorted(optimizers)}, got {method!r}")
    model, state = cartpole()
    optimizer = optimizers[method]()
    forces, losses = sx.optimize.minimize(make_loss(model), jnp.full(NUM_STEPS, 0.1), optimizer, iterations, state,
                                          compiler_options=sx.xla_setup.loop_compiler_options())
    return forces, losses, simulate(model, state, forces)


def swing_up_multiple_shooting(rounds=6, iterations=1000):
    """Multiple shooting: (cart forces (NUM_STEPS,), ConstrainedSolution,
    final State of one rollout of the forces). The knots start on the
    straight line from the hanging rest state to the upright; each round's
    Adam step decays from 0.05 by a cosine."""
    model, state = cartpole()
    along = jnp.linspace(0.0, 1.0, SEGMENTS + 1)[1:-1, None]
    x0 = (jnp.full((SEGMENTS, NUM_STEPS // SEGMENTS), 0.1), along * UPRIGHT)
    optimizer = optax.adam(optax.cosine_decay_schedule(0.05, iterations, alpha=0.001))
    (forces, _), solution = sx.optimize.augmented_lagrangian(
        make_problem(model), x0, optimizer, iterations, rounds, state, penalty=10.0, penalty_growth=4.0,
        compiler_options=sx.xla_setup.loop_compiler_options())
    return forces.ravel(), solution, simulate(model, state, forces.ravel())


def report(name, seconds, iterations, forces, final):
    print(f"{name}: {iterations} iterations, {seconds:.1f} s with compiling; peak cart force "
          f"{float(jnp.abs(forces).max()):.1f} N; final pole angle - pi = {float(final.q[1] - jnp.pi):.1e} rad, "
          f"cart x = {float(final.q[0]):.1e} m, |u| = {float(jnp.linalg.norm(final.u)):.1e}")


if __name__ == "__main__":
    for method, iterations in (("adam", 400), ("lbfgs", LBFGS_ITERATIONS)):
        start = time.perf_counter()
        forces, losses, final = swing_up(iterations, method)
        report(f"single shooting, {method}", time.perf_counter() - start, len(losses), forces, final)
    start = time.perf_counter()
    forces, solution, final = swing_up_multiple_shooting()
    report("multiple shooting, adam", time.perf_counter() - start, solution.losses.size, forces, final)
    print(f"  largest defect or terminal error after each round: {solution.violation}")
