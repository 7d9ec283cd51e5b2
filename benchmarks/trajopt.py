"""Batch 1, the trajectory optimizer's everyday case, side by side.

    python benchmarks/trajopt.py [--iterations 200] [--rollout-steps 1000] [--repeats 5]

Two rows (``run.py`` prints them too):

* **Cart-pole swing-up iteration**: the cart-pole of
  ``examples/cartpole_swingup.py`` (Slider cart 1 kg, Pin pole 0.1 kg and
  1 m), 250 RK4 steps of 10 ms, a cart force per step, the terminal cost of
  the example, one jitted Adam iteration (``jax.value_and_grad`` through the
  rollout, then ``optax.adam``'s update). Through
  ``sx.integrate.rollout(..., controls=)`` (which takes the scalar path,
  ``simbodyx.scalarize``, for this model), through the same with the array
  program forced (``simbodyx_array``), and through the cart-pole's
  closed-form equations of motion in plain JAX with the same ``lax.scan``,
  the same per-step ``jax.checkpoint`` and the same loss; the losses are
  checked to agree to 1e-9 first; and through the same RK4 written as a
  user writes a loop of their own (``simbodyx_own_loop``: ``lax.scan`` with
  ``model.realize``, ``model.forces.calc_forces`` and
  ``model.matter.calc_acceleration_ignoring_constraints`` in each stage).
  Reported: compile plus first iteration (cold, s) and the best time per
  iteration after it.
* **chain7 rollout**: one trajectory of ``--rollout-steps`` RK4 steps of
  1 ms from a random State, ``sx.integrate.rollout`` called as it is
  (``simbodyx``, default options: its own compiled program) and inside a
  ``jax.jit`` of one's own (``simbodyx_in_jit``, default options: on jaxlib
  0.6 that program needs ``sx.xla_setup.loop_compiler_options()`` to run
  as fast), against MuJoCo C's ``mj_step`` with ``mjINT_RK4`` at the same
  step on the same model (built by ``simbodyx.interop.to_mjcf``; contacts
  off), one Python call per step; the final states are checked to agree to
  1e-8 first. Reported: time per RK4 step.

Targets (issue "trajectory optimization at the speed of hand-written JAX"):
iteration within 2x and compile within 3x of the closed form, a chain7 RK4
step within 2x of MuJoCo C. Times are minima over runs (see run.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from run import MODELS, best_time, random_states

#: The swing-up's horizon: 250 RK4 steps of 10 ms.
SWING_UP_STEPS, SWING_UP_DT = 250, 0.01
#: The chain7 rollout's step (s).
ROLLOUT_DT = 1e-3


def _example():
    """examples/cartpole_swingup.py as a module (it is a script, not a package)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    try:
        import cartpole_swingup
    finally:
        sys.path.pop(0)
    return cartpole_swingup


def closed_form_cartpole(mc, mp, length, g=9.81):
    """x' = f(x, force) for x = (cart x, pole angle, their speeds): the cart-pole
    of the example by Lagrange's equations (uniform pole, pivot on the cart,
    hanging at angle 0)."""
    c_len, inertia = length / 2, mp * length**2 / 12

    def f(x, force):
        theta, x_dot, theta_dot = x[1], x[2], x[3]
        m11, m12, m22 = mc + mp, mp * c_len * jnp.cos(theta), inertia + mp * c_len**2
        b1 = force + mp * c_len * jnp.sin(theta) * theta_dot**2
        b2 = -mp * g * c_len * jnp.sin(theta)
        det = m11 * m22 - m12 * m12
        return jnp.stack([x_dot, theta_dot, (m22 * b1 - m12 * b2) / det, (m11 * b2 - m12 * b1) / det])

    return f


def closed_form_rollout(f, x, forces, dt):
    """The final x of RK4 steps of ``f`` under ``forces`` (steps,), each step checkpointed."""

    @jax.checkpoint
    def step(x, force):
        k1 = f(x, force)
        k2 = f(x + dt / 2 * k1, force)
        k3 = f(x + dt / 2 * k2, force)
        k4 = f(x + dt * k3, force)
        return x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    return jax.lax.scan(lambda x, force: (step(x, force), None), x, forces)[0]


def own_loop_field(sx, model, state):
    """``field(q, u, control) -> (qdot, udot)`` written as a user writes it:
    ``model.realize``, ``model.forces`` and ``model.matter``, ``control``
    (nu,) added to the mobility forces."""

    def field(q, u, control):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        mobility_forces, body_forces = model.forces.calc_forces(s)
        udot, _ = model.matter.calc_acceleration_ignoring_constraints(s, mobility_forces + control, body_forces)
        return s.velocity.qdot, udot

    return field


def own_loop(sx, model, state, controls, dt):
    """(q (steps, nq), u (steps, nu)) after each RK4 step under ``controls``
    (steps, nu), written as a user writes a loop of their own: a
    ``lax.scan`` of :func:`own_loop_field`, each step checkpointed."""
    field = own_loop_field(sx, model, state)

    @jax.checkpoint
    def step(x, control):
        q, u = x
        k1 = field(q, u, control)
        k2 = field(q + dt / 2 * k1[0], u + dt / 2 * k1[1], control)
        k3 = field(q + dt / 2 * k2[0], u + dt / 2 * k2[1], control)
        k4 = field(q + dt * k3[0], u + dt * k3[1], control)
        x = (q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0]), u + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1]))
        return x, x

    return jax.lax.scan(step, (state.q, state.u), controls)[1]


def time_iteration(loss, x0, iterations, repeats):
    """(compile + first iteration s, best s per iteration) of one jitted Adam
    iteration on ``loss``, and the loss at x0."""
    import optax

    optimizer = optax.adam(0.1)

    @jax.jit
    def iterate(x, opt_state):
        value, grad = jax.value_and_grad(loss)(x)
        updates, opt_state = optimizer.update(grad, opt_state, x)
        return optax.apply_updates(x, updates), opt_state, value

    carry = (x0, optimizer.init(x0))
    t = time.perf_counter()
    *carry, value = jax.block_until_ready(iterate(*carry))
    compile_s = time.perf_counter() - t
    per_run = max(1, iterations // repeats)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(per_run):
            *carry, _ = iterate(*carry)
        jax.block_until_ready(carry)
        best = min(best, (time.perf_counter() - t) / per_run)
    return compile_s, best, float(value)


def swing_up_rows(sx, iterations, repeats, array_path=True):
    """The swing-up iteration through the closed form and simbodyx (its
    automatic choice: the scalar path), and, when ``array_path``, through
    simbodyx's array program (``model.with_scalar_path(False)``)."""
    example = _example()
    model, state = example.cartpole()
    target = example.UPRIGHT

    def terminal(final_x, forces):
        return 10.0 * jnp.sum((final_x - target) ** 2) + 1e-4 * SWING_UP_DT * jnp.sum(forces**2)

    def simbodyx_loss(forces, model=model):
        final, _ = sx.integrate.rollout(model, state, SWING_UP_DT, controls=example.controls_of(forces),
                                        energy=False)
        return terminal(jnp.concatenate([final.q, final.u]), forces)

    def own_loop_loss(forces):
        q, u = own_loop(sx, model, state, example.controls_of(forces), SWING_UP_DT)
        return terminal(jnp.concatenate([q[-1], u[-1]]), forces)

    f = closed_form_cartpole(example.CART_MASS, example.POLE_MASS, example.POLE_LENGTH)

    def closed_form_loss(forces):
        return terminal(closed_form_rollout(f, jnp.zeros(4), forces, SWING_UP_DT), forces)

    forces = jnp.asarray(np.random.default_rng(3).normal(size=SWING_UP_STEPS))
    theirs = float(jax.jit(closed_form_loss)(forces))
    for name, loss in (("simbodyx", simbodyx_loss), ("simbodyx's own loop", own_loop_loss)):
        ours = float(jax.jit(loss)(forces))
        if abs(ours - theirs) > 1e-9 * max(1.0, abs(theirs)):
            raise AssertionError(f"cart-pole: {name} loss {ours} != closed form {theirs}")
    rows = []
    engines = [("closed_form", closed_form_loss), ("simbodyx", simbodyx_loss), ("simbodyx_own_loop", own_loop_loss)]
    if array_path:
        engines.append(("simbodyx_array", lambda forces: simbodyx_loss(forces, model.with_scalar_path(False))))
    for engine, loss in engines:
        compile_s, per_iteration, _ = time_iteration(loss, jnp.full(SWING_UP_STEPS, 0.1), iterations, repeats)
        rows.append({"engine": engine, "model": "cartpole", "op": "swing_up_iteration", "batch": 1,
                     "steps": SWING_UP_STEPS, "compile_s": compile_s, "latency_us": 1e6 * per_iteration,
                     "step_us": 1e6 * per_iteration / SWING_UP_STEPS})
    return rows


def rollout_rows(sx, steps, repeats, mujoco=True):
    """chain7: one RK4 trajectory through simbodyx, called as it is and
    inside a jit of one's own, and (when ``mujoco``) through MuJoCo C."""
    system, matter = MODELS["chain7"](sx)
    model, _ = system.realize_topology()
    start = jax.tree.map(lambda x: x[0], random_states(model, 1))
    rows = []

    def rollout(s):
        return sx.integrate.rollout(model, s, ROLLOUT_DT, steps, save_every=steps, energy=False)[0]

    for engine, run in (("simbodyx", rollout), ("simbodyx_in_jit", jax.jit(rollout))):
        t = time.perf_counter()
        final = jax.block_until_ready(run(start))
        compile_s = time.perf_counter() - t
        rows.append({"engine": engine, "model": "chain7", "op": "rk4_rollout", "batch": 1, "steps": steps,
                     "compile_s": compile_s, "step_us": 1e6 * best_time(run, start, repeats=repeats, inner=1) / steps})
    if not mujoco:
        return rows, None
    try:
        import mujoco

        from simbodyx.interop.mujoco import configuration, to_mjcf
    except ImportError as e:
        return rows, f"chain7 rollout: MuJoCo not timed ({e})"
    xml, order = to_mjcf(matter)
    m = mujoco.MjModel.from_xml_string(xml)
    m.opt.timestep, m.opt.integrator = ROLLOUT_DT, mujoco.mjtIntegrator.mjINT_RK4
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    d = mujoco.MjData(m)
    qpos, qvel = configuration(matter, model.realize(start, sx.Stage.Position), order)

    def mujoco_rollout():
        mujoco.mj_resetData(m, d)
        d.qpos[:], d.qvel[:] = qpos, qvel
        for _ in range(steps):
            mujoco.mj_step(m, d)

    mujoco_rollout()
    q_final, _ = configuration(matter, model.realize(final, sx.Stage.Position), order)
    if not np.allclose(d.qpos, q_final, rtol=0, atol=1e-8):
        raise AssertionError(f"chain7 rollout: MuJoCo's final qpos is {np.abs(d.qpos - q_final).max():.3g} "
                             f"from simbodyx's")
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        mujoco_rollout()
        best = min(best, time.perf_counter() - t)
    rows.append({"engine": "mujoco", "model": "chain7", "op": "rk4_rollout", "batch": 1, "steps": steps,
                 "step_us": 1e6 * best / steps})
    return rows, None


def trajopt_rows(sx, iterations, rollout_steps, repeats, mujoco=True, array_path=True):
    """Both rows (a list of dicts) and a note, or None."""
    rows = swing_up_rows(sx, iterations, repeats, array_path)
    more, note = rollout_rows(sx, rollout_steps, repeats, mujoco)
    return rows + more, note


def print_table(rows):
    print(f"{'engine':17} {'model':9} {'op':20} {'steps':>6} {'compile s':>10} {'per call ms':>12} "
          f"{'per step us':>12}")
    for r in rows:
        per_call = r.get("latency_us")
        print(f"{r['engine']:17} {r['model']:9} {r['op']:20} {r['steps']:>6} {r.get('compile_s', float('nan')):>10.2f} "
              f"{'' if per_call is None else f'{per_call / 1e3:.2f}':>12} {r['step_us']:>12.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200, help="timed Adam iterations of the swing-up")
    parser.add_argument("--rollout-steps", type=int, default=1000, help="RK4 steps of the chain7 rollout")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-mujoco", action="store_true", help="skip MuJoCo C's rollout")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    print(f"jax {jax.__version__}, float64, batch 1, one device")
    rows, note = trajopt_rows(sx, args.iterations, args.rollout_steps, args.repeats, not args.no_mujoco)
    print_table(rows)
    if note:
        print(note)


if __name__ == "__main__":
    main()
