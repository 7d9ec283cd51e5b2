"""Differentiable inverse kinematics by damped least squares on the station
Jacobian: move a chain's tip station to a target point.

    python examples/inverse_kinematics.py
"""

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing


def solve_ik(model, state, body, station, target, iterations=50, damping=1e-3):
    """q that puts ``station`` (on ``body``, in B) at ``target`` (in G).

    Each iteration: e = target - p(q); du = J^T (J J^T + lambda^2 1)^-1 e;
    q += N du (so quaternions, if any, move correctly); a pure function, so it
    jits, vmaps over targets and differentiates with respect to them.
    """
    matter = model.matter

    def step(q, _):
        s = model.realize(state.with_q(q), sx.Stage.Position)
        error = target - body.find_station_location_in_ground(s, station)
        J = matter.calc_station_jacobian(s, body, station)
        du = J.T @ jnp.linalg.solve(J @ J.T + damping**2 * jnp.eye(3, dtype=J.dtype), error)
        return q + matter.multiply_by_n(s, False, du), jnp.linalg.norm(error)

    q, errors = jax.lax.scan(step, state.q, None, length=iterations)
    return q, errors


def arm():
    """A 4-link arm: Ball shoulder, Pin elbow, Universal wrist, Pin finger."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    link = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.25, 0], sx.Inertia(0.01)))
    T = sx.Transform
    shoulder = sx.MobilizedBody.Ball(matter.Ground(), T(), link, T())
    elbow = sx.MobilizedBody.Pin(shoulder, T([0, -0.5, 0]), link, T())
    wrist = sx.MobilizedBody.Universal(elbow, T([0, -0.5, 0]), link, T())
    finger = sx.MobilizedBody.Pin(wrist, T([0, -0.5, 0]), link, T())
    finger.set_default_angle(0.3)
    elbow.set_default_angle(0.4)
    model, state = system.realize_topology()
    return model, state, finger


def main():
    model, state, finger = arm()
    tip = jnp.array([0.0, -0.5, 0.0])
    target = jnp.array([0.6, -1.0, 0.7])
    q, errors = jax.jit(lambda t: solve_ik(model, state, finger, tip, t))(target)
    reached = finger.find_station_location_in_ground(model.realize(state.with_q(q)), tip)
    print("target", np.asarray(target), "reached", np.asarray(reached))
    print("error by iteration:", " ".join(f"{e:.1e}" for e in np.asarray(errors)[:12]), "...")
    # How the solution moves with the target: a Jacobian through the solver.
    dq = jax.jacfwd(lambda t: solve_ik(model, state, finger, tip, t)[0])(target)
    print("d q / d target has shape", dq.shape)


if __name__ == "__main__":
    main()
