"""Rigid contact in a batch: 1,024 bricks dropped onto a 20 degree incline
from random poses and velocities, advanced together for 5 s by Simbody's
semi-explicit Euler time stepper (one compiled program; each brick has
its own contacts in play at each step).

The brick touches the incline through a PointPlaneContact at each of its
bottom corners (restitution 0.3, mu_s 0.6 > tan(20 deg) = 0.36, mu_d 0.5),
so every brick that lands flat comes to rest; one that tumbles onto
another face keeps sliding and rolling down the slope. The run reports the
deepest penetration of any corner in samples 20 ms apart (bounded by the
stepper's constraint tolerance), how many bricks are at rest at the end
and the stepping rate.

    python examples/rigid_contact.py
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

import simbodyx as sx

sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

jax.config.update("jax_enable_x64", True)

G = 9.81
INCLINE = np.deg2rad(20.0)
NORMAL = np.array([-np.sin(INCLINE), np.cos(INCLINE), 0.0])  # the incline's upward normal, in Ground
HALF = np.array([0.2, 0.05, 0.1])  # the brick's half-lengths (m)
CORNERS = np.array([[x * HALF[0], -HALF[1], z * HALF[2]] for x in (-1, 1) for z in (-1, 1)])
MASS = 2.0


def brick_on_incline():
    """(model, state): a free brick resting flat on the incline."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    inertia = MASS / 3 * np.array([HALF[1] ** 2 + HALF[2] ** 2, HALF[0] ** 2 + HALF[2] ** 2, HALF[0] ** 2 + HALF[1] ** 2])
    brick = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0],
                                                                                   sx.Inertia(*inertia))),
                                  name="brick")
    for corner in CORNERS:  # the whole box would need its top corners too; a drop lands on the bottom face
        matter.adopt_unilateral_contact(sx.PointPlaneContact(matter.Ground(), NORMAL, 0.0, brick, corner, 0.3, 0.6,
                                                             0.5, 0.0))
    model, state = system.realize_topology()
    flat = jnp.concatenate([jnp.array([np.cos(INCLINE / 2), 0, 0, np.sin(INCLINE / 2)]), HALF[1] * NORMAL])
    return model, state.with_q(flat)


def dropped(state, key):
    """A State dropped from 0.15-0.45 m above the incline, tilted up to 0.3 rad
    about a random axis, with random linear (up to ~2 m/s) and angular speeds."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    axis = jax.random.normal(k1, (3,))
    angle = 0.3 * jax.random.uniform(k2)
    tilt = jnp.concatenate([jnp.cos(angle / 2)[None], jnp.sin(angle / 2) * axis / jnp.linalg.norm(axis)])
    w, v = state.q[:4], tilt  # compose the tilt with the flat pose: q = tilt * flat
    quat = jnp.array([v[0] * w[0] - v[1:] @ w[1:], *(v[0] * w[1:] + w[0] * v[1:] + jnp.cross(v[1:], w[1:]))])
    height = 0.15 + 0.3 * jax.random.uniform(k3)
    u = jax.random.normal(k4, (6,)) * jnp.array([2.0, 2.0, 2.0, 1.0, 1.0, 1.0])
    return state.with_q(jnp.concatenate([quat, jnp.asarray(NORMAL) * height])).with_u(u)


def corner_heights(q):
    """(4,) heights of the bottom corners above the incline (m) for a Free q."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    R = jnp.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                   [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                   [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return (q[4:] + jnp.asarray(CORNERS) @ R.T) @ jnp.asarray(NORMAL)


def drop(num: int = 1024, seconds: float = 5.0, dt: float = 2e-3, seed: int = 0):
    """Drop ``num`` bricks for ``seconds``: (deepest penetration (m), the
    fraction at rest at the end, brick-steps per second, samples every 20 ms
    of (t, q, u) per brick)."""
    model, state = brick_on_incline()
    stepper = sx.SemiExplicitEulerTimeStepper()
    starts = jax.vmap(functools.partial(dropped, state))(jax.random.split(jax.random.PRNGKey(seed), num))
    steps = int(round(seconds / dt))
    every = max(1, int(round(0.02 / dt)))
    steps -= steps % every

    @jax.jit
    def simulate(starts):
        def one(start):
            return sx.integrate.rollout(model, start, dt, steps, every, method=stepper, energy=False)
        return jax.vmap(one)(starts)

    compiled = simulate.lower(starts).compile()
    begin = time.perf_counter()
    final, samples = jax.block_until_ready(compiled(starts))
    rate = num * steps / (time.perf_counter() - begin)
    deepest = -float(jnp.min(jax.vmap(jax.vmap(corner_heights))(samples.q)))
    at_rest = float(jnp.mean(jnp.linalg.norm(final.u, axis=1) < 1e-3))
    return max(deepest, 0.0), at_rest, rate, samples


def main():
    tol = sx.SemiExplicitEulerTimeStepper().get_constraint_tolerance_in_use()
    deepest, at_rest, rate, _ = drop()
    print(f"deepest penetration {deepest * 1e3:.3f} mm (tolerance {tol * 1e3:.1f} mm); "
          f"{at_rest:.1%} of the bricks at rest after 5 s; {rate:,.0f} brick-steps per second")


if __name__ == "__main__":
    main()
