"""Steering a closed chain: a four-bar linkage (crank, coupler and rocker on
Pins, the loop closed by a Ball constraint) moved by a torque on the crank
alone, so that the rocker reaches a target angle at rest after 1 s, with
little torque and, optionally, a small loop-closure force.

Every step's accelerations come from the constrained dynamics (M udot +
G^T lambda = f, G udot = b, least-squares multipliers), and the cost's
closure-force term is the constraint's multipliers along the trajectory,
so Adam's gradients pass through the multipliers. One compiled program
serves both weights of that term (it is an argument, not a constant).

    python examples/fourbar_control.py
"""

import time

import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

NUM_STEPS, DT = 100, 0.01  # a 1 s horizon
TARGET = 1.2  # rad, the rocker's final angle (it starts at 1.4066)


def fourbar():
    """(model, state on the constraint manifold (to 1e-12), closure constraint, crank
    torque element): links of 1 kg with their mass centers 0.5 m out, the
    crank and rocker pivots 1.5 m apart on Ground, the coupler's point 1.2 m
    out joined to the rocker's point 1.1 m out, under gravity along -y."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    link = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.5, 0, 0], sx.Inertia(0.01, 0.1, 0.1)))
    crank = sx.MobilizedBody.Pin(matter.Ground(), link)
    coupler = sx.MobilizedBody.Pin(crank, sx.Transform([1.0, 0, 0]), link, sx.Transform())
    rocker = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform([1.5, 0, 0]), link, sx.Transform())
    closure = sx.Constraint.Ball(coupler, [1.2, 0, 0], rocker, [1.1, 0, 0])
    crank_torque = sx.Force.MobilityDiscreteForce(forces, crank, 0)
    model, state = system.realize_topology()
    state, _ = model.project(state.with_q([1.0472, -0.8635, 1.4066]), sx.ProjectOptions(accuracy=1e-12))
    return model, state, closure, crank_torque


def make_cost(model, state, closure, crank_torque):
    """cost(torques (NUM_STEPS,), closure_weight) and the trajectory's
    closure forces (NUM_STEPS, 3) for given torques."""

    def simulate(torques):
        controls = jnp.zeros((NUM_STEPS, state.topology.nu), torques.dtype).at[:, 0].set(torques)
        return sx.integrate.rollout(model, state, DT, controls=controls, energy=False)

    def closure_forces(torques, trajectory):
        """The multipliers at the start of each step, under that step's torque."""

        def at(q, u, torque):
            s = crank_torque.set_mobility_force(state.with_q(q).with_u(u), torque)
            return closure.get_multipliers_as_vector(model.realize(s, sx.Stage.Acceleration))

        return jax.vmap(at)(trajectory.q[:-1], trajectory.u[:-1], torques)

    def cost(torques, closure_weight):
        final, trajectory = simulate(torques)
        terminal = 100.0 * (final.q[2] - TARGET) ** 2 + 10.0 * jnp.sum(final.u**2)
        loop = DT * jnp.sum(closure_forces(torques, trajectory) ** 2)
        return terminal + 1e-3 * DT * jnp.sum(torques**2) + closure_weight * loop

    def forces_along(torques):
        final, trajectory = simulate(torques)
        return final, closure_forces(torques, trajectory)

    return cost, forces_along


WEIGHTS = (0.0, 1e-2)  # of the closure-force term, s / N^2


def steer(closure_weights=WEIGHTS, iterations=500):
    """(model, closure, results): for each weight, (torques (NUM_STEPS,),
    costs (iterations,), final State, closure forces (NUM_STEPS, 3)); one
    compile serves every weight."""
    model, state, closure, crank_torque = fourbar()
    cost, forces_along = make_cost(model, state, closure, crank_torque)
    optimizer = optax.adam(optax.cosine_decay_schedule(1.0, iterations, alpha=0.01))
    results = []
    for weight in closure_weights:
        torques, costs = sx.optimize.minimize(cost, jnp.zeros(NUM_STEPS), optimizer, iterations, jnp.asarray(weight))
        results.append((torques, costs, *forces_along(torques)))
    return model, closure, results


if __name__ == "__main__":
    start = time.perf_counter()
    model, closure, results = steer()
    print(f"two solves of 500 Adam iterations, {time.perf_counter() - start:.1f} s with compiling")
    for weight, (torques, costs, final, forces) in zip(WEIGHTS, results):
        drift = jnp.abs(closure.get_position_errors_as_vector(model.realize(final, sx.Stage.Position))).max()
        print(f"closure weight {weight:g}: cost {float(costs[0]):.3g} -> {float(costs[-1]):.3g}; rocker - target "
              f"{float(final.q[2] - TARGET):.1e} rad, |u| {float(jnp.linalg.norm(final.u)):.1e}; peak crank torque "
              f"{float(jnp.abs(torques).max()):.1f} N m; closure force: peak {float(jnp.linalg.norm(forces, axis=1).max()):.1f} N, "
              f"integral of its square {float(DT * jnp.sum(forces**2)):.1f} N^2 s; loop error at the end {float(drift):.1e} m")
