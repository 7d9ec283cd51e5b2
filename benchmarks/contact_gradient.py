"""The gradient of a contact rollout, side by side with MJX: a 1 kg box
(0.2 m cube) on a floor, launched sliding at 0.5 m/s, and the Jacobian of
its position after ``--steps`` steps of 1 ms with respect to its initial
linear velocity, by reverse mode (what trajectory optimization and policy
training differentiate with), each engine against central differences of
its own rollout (step 1e-6).

    python benchmarks/contact_gradient.py [--steps 1000]

simbodyx: the box a ContactGeometry.Brick on a half-space, Hunt-Crossley
contact (Simbody's vertex law, k = 1e5 N/m, c = 1 s/m, mu = 0.5,
transition velocity 0.05 m/s), RK4 (``sx.integrate.rollout``), starting
at its resting depth so that every corner is in contact (the vertex law
has a kink at zero depth, where a derivative is one-sided). MJX: a box
geom on a plane, both with friction 0.5 (MuJoCo takes the larger), MuJoCo's defaults otherwise (soft
contact, Newton solver, Euler), run by
``mjx.step`` in a ``lax.scan``; reverse mode through its solver's
``while_loop`` is an error, so MJX is also run with ``iterations=1``, the
setting that makes it reverse-differentiable, and by forward mode with the
defaults. The engines' contact laws differ, so their Jacobians are not
compared with each other, only each with its own central differences.

simbodyx's rigid contact too: the same box on four PointPlaneContacts at
its bottom corners (mu_s = mu_d = 0.5, no restitution), resting on the
floor, advanced by ``sx.SemiExplicitEulerTimeStepper`` with each impulse
solver (PGS, PLUS). It slides to a stop after v0 / (mu g) = 0.10 s, so
d x / d v0x = v0 / (mu g) in closed form.

Prints the table and saves the rows as JSON
(``benchmarks/results/contact_gradient.json``; ``render.py`` puts them on
the benchmark page).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

DT = 1e-3
HALF = 0.1  # m, the cube's half side
V0 = np.array([0.5, 0.0, 0.0])  # m/s, sliding along x
STIFFNESS, FRICTION = 1e5, 0.5  # N/m at each corner; both engines' friction coefficient
RESTING_DEPTH = 9.81 / (4 * STIFFNESS)  # m, each corner's share of the weight
FD_STEP = 1e-6


def _box(sx):
    """(system, matter, forces, box): the 1 kg box, free, under gravity along -z."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, 0, -9.81])
    box = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(
        sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(2 * HALF ** 2 / 3))))
    return system, matter, forces, box


def _final(sx, model, state, steps, method):
    """position(v0): the box's centre (3,) after ``steps`` steps of ``method``."""

    def final(v0):
        start = state.with_u(jnp.concatenate([jnp.zeros(3), v0]))
        end, _ = sx.integrate.rollout(model, start, DT, steps, save_every=steps, method=method, energy=False)
        return end.q[4:]

    return final


def simbodyx_final_position(sx, steps):
    """position(v0) on Hunt-Crossley contact, RK4."""
    system, matter, forces, box = _box(sx)
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    material = sx.ContactMaterial(STIFFNESS, 1.0, FRICTION, FRICTION)
    contacts.add_body(surfaces, box, sx.ContactGeometry.Brick([HALF] * 3), material=material)
    floor = sx.Transform(sx.Rotation.about_y(np.pi / 2), [0, 0, 0])  # the half-space's x onto -z: z < 0
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace(), floor, material=material)
    sx.HuntCrossleyForce(forces, contacts, surfaces).set_transition_velocity(0.05)
    model, state = system.realize_topology()
    return _final(sx, model, state.with_q(jnp.array([1.0, 0, 0, 0, 0, 0, HALF - RESTING_DEPTH])), steps, "rk4")


def simbodyx_rigid_final_position(sx, steps, solver):
    """position(v0) on rigid contacts at the bottom corners, semi-explicit
    Euler with the impulse solver ``solver`` ("PGS" or "PLUS")."""
    system, matter, _, box = _box(sx)
    for x in (-HALF, HALF):
        for y in (-HALF, HALF):
            matter.adopt_unilateral_contact(sx.PointPlaneContact(matter.Ground(), [0, 0, 1], 0.0, box,
                                                                 [x, y, -HALF], 0.0, FRICTION, FRICTION, 0.0))
    model, state = system.realize_topology()
    stepper = sx.SemiExplicitEulerTimeStepper(impulse_solver_type=solver)
    return _final(sx, model, state.with_q(jnp.array([1.0, 0, 0, 0, 0, 0, HALF])), steps, stepper)


def mjx_final_position(steps, iterations=None):
    """position(v0) for MJX's box on a plane; None where MuJoCo is absent."""
    try:
        import mujoco
        from mujoco import mjx
    except ImportError:
        return None
    option = f' iterations="{iterations}"' if iterations else ""
    m = mujoco.MjModel.from_xml_string(
        f'<mujoco><option timestep="{DT}"{option}/><worldbody><geom type="plane" size="5 5 .1" '
        f'friction="{FRICTION} 0.005 0.0001"/>'
        f'<body pos="0 0 {HALF}"><freejoint/><geom type="box" size="{HALF} {HALF} {HALF}" mass="1" '
        f'friction="{FRICTION} 0.005 0.0001"/></body>'
        '</worldbody></mujoco>')
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)

    def final(v0):
        d = d0.replace(qvel=jnp.zeros(6, v0.dtype).at[:3].set(v0))
        d, _ = jax.lax.scan(lambda d, _: (mjx.step(mx, d), None), d, None, length=steps)
        return d.qpos[:3]

    return final


def central_differences(final):
    f = jax.jit(final)
    v = jnp.asarray(V0)
    return np.stack([(f(v.at[i].add(FD_STEP)) - f(v.at[i].add(-FD_STEP))) / (2 * FD_STEP) for i in range(3)], 1)


def row(engine, mode, final, differentiate, reference):
    """One row: the Jacobian's largest error relative to the largest
    central-difference entry, whether it is finite, and the time per
    Jacobian after compiling (or the error that stopped it)."""
    jacobian = jax.jit(differentiate(final))
    v = jnp.asarray(V0)
    try:
        start = time.perf_counter()
        J = np.asarray(jax.block_until_ready(jacobian(v)))
        compile_s = time.perf_counter() - start
    except Exception as e:  # MJX's while_loop under reverse mode
        return {"engine": engine, "mode": mode, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"}
    start = time.perf_counter()
    jax.block_until_ready(jacobian(v))
    scale = np.abs(reference).max()
    return {"engine": engine, "mode": mode, "finite": bool(np.all(np.isfinite(J))), "compile_s": compile_s,
            "ms": 1e3 * (time.perf_counter() - start), "relative_error": float(np.abs(J - reference).max() / scale),
            "largest_fd": float(scale), "largest": float(np.abs(J).max())}


def gradient_rows(sx, steps=1000, mujoco=True):
    final = simbodyx_final_position(sx, steps)
    rows = [row("simbodyx (Hunt-Crossley, RK4)", "reverse", final, jax.jacrev, central_differences(final))]
    for solver in ("PGS", "PLUS"):
        rigid = simbodyx_rigid_final_position(sx, steps, solver)
        rows.append(row(f"simbodyx (rigid, {solver})", "reverse", rigid, jax.jacrev, central_differences(rigid)))
    if not mujoco or mjx_final_position(steps) is None:
        return rows
    default = mjx_final_position(steps)
    reference = central_differences(default)
    rows.append(row("MJX (defaults)", "reverse", default, jax.jacrev, reference))
    rows.append(row("MJX (defaults)", "forward", default, jax.jacfwd, reference))
    one = mjx_final_position(steps, iterations=1)
    rows.append(row("MJX (iterations=1)", "reverse", one, jax.jacrev, central_differences(one)))
    return rows


def render(rows) -> str:
    """The benchmark page's table (an engine that cannot differentiate shows its error)."""
    lines = ["| engine | mode | relative error | largest entry (central differences) | compile s | ms |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['engine']} | {r['mode']} | {r['error']} | | | |")
        else:
            finite = "" if r["finite"] else " (not finite)"
            lines.append(f"| {r['engine']} | {r['mode']} | {r['relative_error']:.1e}{finite} | {r['largest']:.3g} "
                         f"({r['largest_fd']:.3g}) | {r['compile_s']:.1f} | {r['ms']:,.0f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    print(f"jax {jax.__version__}, {args.steps} steps of {DT * 1e3:g} ms")
    rows = gradient_rows(sx, args.steps)
    print(render(rows))
    import record

    record.save("contact_gradient", rows)


if __name__ == "__main__":
    main()
