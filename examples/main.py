"""simbodyx's main example: build Simbody-style models, freeze them, and use
the pure kinematics under jit, vmap and grad.

    python examples/main.py
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # float64, as Simbody; before building

import simbodyx as sx  # noqa: E402

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing with JAX

G = np.array([0.0, -9.81, 0.0])  # gravity (m/s^2), for the potential energy


def link_body(length=1.0, mass=1.0):
    """A uniform rod hanging along -y from its pivot at the body origin."""
    central = sx.UnitInertia.cylinder_along_z(0.02, length / 2).matrix * mass
    # The rod lies along y: rotate the z-cylinder's inertia onto y.
    central = sx.Inertia(central).re_express(sx.Rotation.about_x(np.pi / 2))
    return sx.Body.Rigid(sx.MassProperties.from_central(mass, [0, -length / 2, 0], central))


def energy(model, state):
    """(kinetic, potential) energy in J."""
    return model.matter.calc_kinetic_energy(state), model.forces.calc_potential_energy(state)


def double_pendulum():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, G)
    upper = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), link_body(), sx.Transform(), name="upper")
    lower = sx.MobilizedBody.Pin(upper, sx.Transform([0, -1.0, 0]), link_body(), sx.Transform(), name="lower")
    upper.set_default_angle(0.5)
    model, state = system.realize_topology()
    return model, state, upper, lower


def chain(n):
    """An n-link chain of alternating Pin and Ball joints hanging from Ground."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, G)
    sx.Force.GlobalDamper(forces, matter, 0.05)
    bodies, parent = [], matter.Ground()
    for i in range(n):
        kind = sx.MobilizedBody.Pin if i % 2 == 0 else sx.MobilizedBody.Ball
        X_PF = sx.Transform([0, -1.0 if i else 0.0, 0])
        parent = kind(parent, X_PF, link_body(), sx.Transform(), name=f"link{i}")
        bodies.append(parent)
    model, state = system.realize_topology()
    return model, state, bodies


def main():
    np.set_printoptions(precision=4, suppress=True)
    print(f"simbodyx {sx.__version__} on jax {jax.__version__} ({jax.devices()[0].platform}), float64\n")

    # 1. Double pendulum: poses, velocities and energy at one state.
    model, state, upper, lower = double_pendulum()
    print("Double pendulum:", model)
    state = lower.set_one_q(state, 0, -0.3)
    state = state.with_u(jnp.array([1.0, -2.0]))
    state = model.realize(state, sx.Stage.Velocity)
    tip = jnp.array([0.0, -1.0, 0.0])
    X = lower.get_body_transform(state)
    print("  lower link X_GB.p =", np.asarray(X.p), " angle =", float(jnp.arctan2(X.R[1, 0], X.R[0, 0])))
    print("  tip location       =", np.asarray(lower.find_station_location_in_ground(state, tip)))
    print("  tip velocity       =", np.asarray(lower.find_station_velocity_in_ground(state, tip)))
    print("  V_GB(lower)        =", np.asarray(lower.get_body_velocity(state)))
    ke, pe = energy(model, state)
    print(f"  kinetic {float(ke):.6f} J, potential {float(pe):.6f} J")
    accel = model.realize(state, sx.Stage.Acceleration)
    print("  udot (gravity only) =", np.asarray(accel.acceleration.udot))
    print("  mass matrix M       =", np.asarray(model.matter.calc_m(state)).round(4).tolist())
    print("  reaction on lower at its pin (in G) =", np.asarray(lower.find_mobilizer_reaction_on_body_at_m_in_ground(accel)))

    # Gradient of the tip height with respect to q, checked by finite differences.
    def tip_height(q):
        return lower.find_station_location_in_ground(model.realize(state.with_q(q)), tip)[1]

    g = jax.grad(tip_height)(state.q)
    h = 1e-6
    fd = [(tip_height(state.q + h * e) - tip_height(state.q - h * e)) / (2 * h) for e in jnp.eye(2)]
    print("  d(tip height)/dq   =", np.asarray(g), " finite differences:", np.asarray(fd))

    # 2. A 10-body chain of Pins and Balls, with the Euler-angle option as well.
    model10, state10, bodies = chain(10)
    print("\n10-body chain:", model10)
    rng = np.random.default_rng(0)
    state10 = model10.matter.normalize_quaternions(
        state10.with_q(state10.q + 0.2 * rng.normal(size=state10.q.shape)).with_u(0.5 * rng.normal(size=state10.u.shape)))
    realized = model10.realize(state10, sx.Stage.Velocity)
    for b in bodies[::3]:
        print(f"  {b.name:7} p_GB = {np.asarray(b.get_body_origin_location(realized))}  w_GB = {np.asarray(b.get_body_angular_velocity(realized))}")
    ke, pe = energy(model10, realized)
    print(f"  kinetic {float(ke):.6f} J, potential {float(pe):.6f} J")
    T, F = model10.forces.calc_forces(realized)
    udot, _ = model10.matter.calc_acceleration_ignoring_constraints(realized, T, F)
    residual = model10.matter.calc_residual_force_ignoring_constraints(realized, T, F, udot)
    print(f"  forward dynamics (O(n) articulated body) then inverse dynamics: max |residual| = {float(jnp.abs(residual).max()):.1e} N m")
    euler_model = model10.with_euler_angles(True)
    euler_state = euler_model.realize(model10.matter.convert_to_euler_angles(state10), sx.Stage.Velocity)
    diff = np.max(np.abs(euler_state.velocity.V_GB - realized.velocity.V_GB))
    print(f"  Euler-angle model: nq {euler_model.topology.nq} (quaternions: {model10.topology.nq}), max |V_GB difference| = {diff:.1e}")

    # 3. A batch of 1,024 double pendulums simulated at once: RK4, dt = 1 ms, 1 s.
    n, dt, steps = 1024, 1e-3, 1000
    qs = jnp.asarray(rng.uniform(-2.0, 2.0, size=(n, 2)))
    base = model.default_state()

    @jax.jit
    @jax.vmap
    def rollout(q):
        return sx.integrate.rollout(model, base.with_q(q), dt, steps, save_every=100)[1]

    t0 = time.perf_counter()
    compiled = rollout.lower(qs).compile()
    t1 = time.perf_counter()
    traj = jax.block_until_ready(compiled(qs))
    t2 = time.perf_counter()
    drift = np.abs(np.asarray(traj.energy - traj.energy[:, :1])).max(axis=1)
    print(f"\nBatch of {n} double pendulums, RK4, dt = {dt} s, {steps * dt:.0f} s simulated each:")
    print(f"  energy drift |E(t) - E(0)|: median {np.median(drift):.2e} J, worst {drift.max():.2e} J")
    print(f"  {n * steps / (t2 - t1):,.0f} RK4 steps per second ({4 * n * steps / (t2 - t1):,.0f} forward dynamics/s); "
          f"compile {t1 - t0:.1f} s")


if __name__ == "__main__":
    main()
