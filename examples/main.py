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

G = np.array([0.0, -9.81, 0.0])  # gravity (m/s^2), for the potential energy


def link_body(length=1.0, mass=1.0):
    """A uniform rod hanging along -y from its pivot at the body origin."""
    central = sx.UnitInertia.cylinder_along_z(0.02, length / 2).matrix * mass
    # The rod lies along y: rotate the z-cylinder's inertia onto y.
    central = sx.Inertia(central).re_express(sx.Rotation.about_x(np.pi / 2))
    return sx.Body.Rigid(sx.MassProperties.from_central(mass, [0, -length / 2, 0], central))


def energy(model, state, bodies):
    """Kinetic energy sum(1/2 V^T M V) and gravitational potential sum(-m g . p_com)."""
    ke = sum(0.5 * b.get_body_velocity(state) @ b.calc_body_spatial_inertia_matrix_in_ground(state)
             @ b.get_body_velocity(state) for b in bodies)
    pe = sum(-b.get_body_mass(state) * G @ b.find_mass_center_location_in_ground(state) for b in bodies)
    return ke, pe


def double_pendulum():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    upper = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), link_body(), sx.Transform(), name="upper")
    lower = sx.MobilizedBody.Pin(upper, sx.Transform([0, -1.0, 0]), link_body(), sx.Transform(), name="lower")
    upper.set_default_angle(0.5)
    model, state = system.realize_topology()
    return model, state, upper, lower


def chain(n):
    """An n-link chain of alternating Pin and Ball joints hanging from Ground."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
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
    ke, pe = energy(model, state, (upper, lower))
    print(f"  kinetic {float(ke):.6f} J, potential {float(pe):.6f} J")

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
    ke, pe = energy(model10, realized, bodies)
    print(f"  kinetic {float(ke):.6f} J, potential {float(pe):.6f} J")
    euler_model = model10.with_euler_angles(True)
    euler_state = euler_model.realize(model10.matter.convert_to_euler_angles(state10), sx.Stage.Velocity)
    diff = np.max(np.abs(euler_state.velocity.V_GB - realized.velocity.V_GB))
    print(f"  Euler-angle model: nq {euler_model.topology.nq} (quaternions: {model10.topology.nq}), max |V_GB difference| = {diff:.1e}")

    # 3. A batch of 1,024 double-pendulum states, realized at once with vmap.
    n = 1024
    qs = jnp.asarray(rng.uniform(-np.pi, np.pi, size=(n, 2)))
    us = jnp.asarray(rng.normal(size=(n, 2)))

    @jax.jit
    @jax.vmap
    def tip_speed(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        return jnp.linalg.norm(lower.find_station_velocity_in_ground(s, tip))

    speeds = jax.block_until_ready(tip_speed(qs, us))
    t = time.perf_counter()
    for _ in range(20):
        speeds = tip_speed(qs, us)
    jax.block_until_ready(speeds)
    dt = (time.perf_counter() - t) / 20
    print(f"\nBatch of {n} double pendulums: mean tip speed {float(speeds.mean()):.4f} m/s, "
          f"{n / dt:,.0f} states realized per second")


if __name__ == "__main__":
    main()
