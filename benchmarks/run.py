"""The side-by-side benchmark suite.

    python benchmarks/run.py [--dtype float64|float32] [--models chain7,humanoid,...|all]
                             [--ops forward_dynamics,...] [--batches 1024,4096] [--repeats N]
                             [--cpu-devices N] [--chunk-size N]

The defaults (chain7, the humanoid and every_joint, every operation; the
closed chains four_bar and humanoid_welded, constrained and unconstrained
forward dynamics; batch 1 and 1,024, with the Pinocchio, MuJoCo and MJX
peers, and the batch-1 rows of trajopt.py) take about 16 minutes on a
2-core machine; ``--models all`` adds chain30, the published robots and
Simbody's 256-body set.

For each model and operation: cold compile time of one jitted call, its
latency, and batched throughput per batch size, computed the way
``simbodyx.parallel`` recommends for MJX and simbodyx alike: the batch
sharded over one CPU device per core, each share run in chunks of 128 states
(``--cpu-devices 1 --chunk-size 0`` is a plain ``jit(vmap)``). Pinocchio (``pin``), when
installed, is timed in the same run on the models it can represent (Pin,
Slider, Ball, Free joints), after checking that it computes the same
accelerations. Prints a table per model and one JSON line. Each figure is
the best (minimum) of several timed runs after warm-up: on a shared 2-core
machine the median moves by 2-5x between runs, the minimum much less.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.parallel import CHUNK_SIZE, batched, shard_batch, use_cpu_cores, usable_cores

# -- models (identical for every engine) --------------------------------------------------


def _system(sx):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    return system, matter


def _link(sx):
    return sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02, 0.01, 0.02)))


def chain(kind, n):
    """n links of one joint kind hanging from Ground, 1 m apart."""

    def build(sx):
        system, matter = _system(sx)
        parent = matter.Ground()
        for i in range(n):
            X_PF = sx.Transform(sx.Rotation.about_x(0.3 * (i % 2)), [0, -1.0 if i else 0.0, 0])
            parent = getattr(sx.MobilizedBody, kind)(parent, X_PF, _link(sx), sx.Transform())
        return system, matter

    return build


def binary_tree(kind, n):
    """n bodies, body i's parent is (i - 1) // 2 (Ground for the root)."""

    def build(sx):
        system, matter = _system(sx)
        bodies = []
        for i in range(n):
            parent = matter.Ground() if i == 0 else bodies[(i - 1) // 2]
            X_PF = sx.Transform([0.3 * (1 if i % 2 else -1), -1.0 if i else 0.0, 0])
            bodies.append(getattr(sx.MobilizedBody, kind)(parent, X_PF, _link(sx), sx.Transform()))
        return system, matter

    return build


def free_bodies(n):
    def build(sx):
        system, matter = _system(sx)
        for i in range(n):
            sx.MobilizedBody.Free(matter.Ground(), sx.Transform([i * 0.1, 0, 0]), _link(sx), sx.Transform())
        return system, matter

    return build


def humanoid(sx, weld_feet=False):
    """Free pelvis, Ball waist, Pin head, two legs (Ball hip, Pin knee,
    Universal ankle, Pin toe), two Ball shoulders: 13 bodies, 30 u. With
    ``weld_feet`` both toes are welded to Ground where they are at q = 0: two
    closed loops, 12 constraint equations."""
    system, matter = _system(sx)
    T, MB = sx.Transform, sx.MobilizedBody
    body = sx.Body.Rigid(sx.MassProperties.from_central(2.0, [0, -0.2, 0], sx.Inertia(0.05, 0.03, 0.05)))
    pelvis = MB.Free(matter.Ground(), body)
    torso = MB.Ball(pelvis, T([0, 0.2, 0]), body, T())
    MB.Pin(torso, T([0, 0.5, 0]), body, T())
    for side in (-1, 1):
        hip = MB.Ball(pelvis, T([0.1 * side, -0.1, 0]), body, T())
        knee = MB.Pin(hip, T([0, -0.45, 0]), body, T())
        ankle = MB.Universal(knee, T([0, -0.45, 0]), body, T())
        toe = MB.Pin(ankle, T([0, -0.05, 0.1]), body, T())
        if weld_feet:  # the hip, knee, ankle and toe offsets from the pelvis at the origin
            sx.Constraint.Weld(matter.Ground(), T([0.1 * side, -1.05, 0.1]), toe, T())
        MB.Ball(torso, T([0.2 * side, 0.4, 0]), body, T())
    return system, matter


def every_joint(sx):
    """One body on each of Simbody's 19 joint types (Ground is the 20th), as a
    tree of two branches: 19 bodies, 58 u. Custom is a quaternion-plus-
    translation joint written as X_FM(q) alone; FunctionBased couples two
    coordinates through a sinusoid and a spline (both differentiated by AD)."""
    from simbodyx import functions as fn

    system, matter = _system(sx)
    T, MB = sx.Transform, sx.MobilizedBody
    custom = MB.Custom.Implementation(
        7, 6, lambda q: (sx.spatial.quaternion_to_matrix(q[:4]), q[4:]), num_angles=4
    )
    coupled = (2, (None, None, fn.Linear((1.0, 0.0)), fn.Sinusoid(0.1, 1.0),
                   fn.Spline((-3.0, -1.0, 0.0, 1.0, 3.0), (0.2, -0.1, 0.0, 0.3, 0.1)), None),
               ((), (), (0,), (0,), (1,), ()))
    joints = [("Pin", ()), ("Slider", ()), ("Screw", (0.1,)), ("Universal", ()), ("Cylinder", ()),
              ("BendStretch", ()), ("Planar", ()), ("Gimbal", ()), ("Ball", ()), ("Ellipsoid", ((0.3, 0.2, 0.1),)),
              ("Translation", ()), ("SphericalCoords", ()), ("LineOrientation", ()), ("FreeLine", ()),
              ("Free", ()), ("Bushing", ()), ("Weld", ()), ("Custom", (custom,)), ("FunctionBased", coupled)]
    branch = [matter.Ground(), matter.Ground()]
    for i, (kind, extra) in enumerate(joints):
        X_PF = T(sx.Rotation.about_x(0.3), [0.1, -0.5, 0.05])
        branch[i % 2] = getattr(MB, kind)(branch[i % 2], X_PF, _link(sx), T(), *extra)
    return system, matter


def four_bar(sx):
    """Crank, coupler and rocker on Pins, the loop closed by a Ball
    constraint (assembled at q = 0; one of its three rows is redundant)."""
    system, matter = _system(sx)
    T, MB = sx.Transform, sx.MobilizedBody
    crank = MB.Pin(matter.Ground(), T(), _link(sx), T())
    coupler = MB.Pin(crank, T([0, -1.0, 0]), _link(sx), T())
    rocker = MB.Pin(matter.Ground(), T([1.0, 0, 0]), _link(sx), T())
    sx.Constraint.Ball(coupler, [1.0, -0.5, 0], rocker, [0, -1.5, 0])
    return system, matter


def robot(path, floating_base=False):
    """A published robot from example-robot-data through sx.io.load_urdf,
    gravity along -y like the models above (the peers are built from the
    loaded tree by simbodyx.interop with that gravity; the timings do not
    depend on its direction), mimic joints independent (a tree)."""
    def build(sx):
        system, matter, _, _ = sx.io.load_urdf(sx.io.example_robot_data(path), floating_base=floating_base,
                                              gravity=(0.0, -9.81, 0.0), mimic=False)
        return system, matter
    return build


MODELS = {
    "chain7": chain("Pin", 7),
    "chain30": chain("Pin", 30),
    "humanoid": humanoid,
    "four_bar": four_bar,
    "humanoid_welded": lambda sx: humanoid(sx, weld_feet=True),
    "every_joint": every_joint,
    # Published robots (URDF, example-robot-data): an arm, a quadruped, a humanoid.
    "panda": robot("panda_description/urdf/panda.urdf"),
    "go2": robot("go2_description/urdf/go2.urdf", floating_base=True),
    "talos": robot("talos_data/robots/talos_reduced.urdf", floating_base=True),
    # Simbody's performance set, 256 bodies each.
    "pin_chain256": chain("Pin", 256),
    "slider_chain256": chain("Slider", 256),
    "ball_chain256": chain("Ball", 256),
    "gimbal_chain256": chain("Gimbal", 256),
    "pin_tree256": binary_tree("Pin", 256),
    "ball_tree256": binary_tree("Ball", 256),
    "free256": free_bodies(256),
}

# -- operations ---------------------------------------------------------------------------


def _inputs(model, state, seed=1):
    rng = np.random.default_rng(seed)
    top = model.topology
    return (jnp.asarray(rng.normal(size=top.nu), model.dtype),
            jnp.asarray(rng.normal(size=(top.num_bodies, 6)), model.dtype))


def make_ops(sx):
    S = sx.Stage

    def fd(m, s, tau, F):
        return m.matter.calc_acceleration_ignoring_constraints(m.realize(s, S.Velocity), tau, F)[0]

    return {
        "realize_position": lambda m, s, tau, F: m.realize(s, S.Position).position.X_GB.p,
        "realize_velocity": lambda m, s, tau, F: m.realize(s, S.Velocity).velocity.V_GB,
        "multiply_by_m": lambda m, s, tau, F: m.matter.multiply_by_m(m.realize(s, S.Position), tau),
        "multiply_by_m_inv": lambda m, s, tau, F: m.matter.multiply_by_m_inv(m.realize(s, S.Position), tau),
        "inverse_dynamics": lambda m, s, tau, F: m.matter.calc_residual_force_ignoring_constraints(
            m.realize(s, S.Velocity), None, F, tau),
        "forward_dynamics": fd,
        "calc_m": lambda m, s, tau, F: m.matter.calc_m(m.realize(s, S.Position)),
        "jacobian_transpose": lambda m, s, tau, F: m.matter.multiply_by_system_jacobian_transpose(
            m.realize(s, S.Position), F),
        "reactions": lambda m, s, tau, F: m.matter.calc_mobilizer_reaction_forces(m.realize(s, S.Acceleration)),
        "rk4_step": lambda m, s, tau, F: sx.integrate.rk4_step(m, s, 1e-3).q,
        # M udot + G^T lambda = f, G udot = b (models with constraints only)
        "constrained_forward_dynamics": lambda m, s, tau, F: m.realize(s, S.Acceleration).acceleration.udot,
        "grad_forward_dynamics": lambda m, s, tau, F: jax.grad(
            lambda q, u, t: jnp.sum(fd(m, s.with_q(q).with_u(u), t, F) ** 2), argnums=(0, 1, 2))(s.q, s.u, tau),
    }


#: The operations timed on models with constraints.
CONSTRAINED_OPS = ("forward_dynamics", "constrained_forward_dynamics")

# -- timing -------------------------------------------------------------------------------


def best_time(fn, *args, repeats=7, inner=10, min_run_s=0.02):
    """Best (minimum) seconds per call over ``repeats`` runs of at least
    ``inner`` calls each, after a warm-up call; a run has enough calls to last
    ``min_run_s`` (fast single calls: hundreds), so timer and queue effects
    at its ends do not count."""
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    inner = max(inner, math.ceil(min_run_s / max(time.perf_counter() - t, 1e-7)))
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t) / inner)
    return best


def random_states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    base = model.default_state()
    q = np.asarray(base.q)[None] + 0.3 * rng.normal(size=(n, base.q.shape[0]))
    u = rng.normal(size=(n, base.u.shape[0]))
    states = jax.vmap(lambda q, u: base.with_q(q).with_u(u))(jnp.asarray(q, model.dtype), jnp.asarray(u, model.dtype))
    return jax.vmap(model.matter.normalize_quaternions)(states)


def program_memory_mib(jitted, *args):
    """Peak memory of ``jitted``'s compiled program for ``args`` as XLA plans
    it (arguments, outputs and temporaries, less buffers the outputs alias),
    summed over the devices the program runs on, in MiB; None where the
    backend gives no memory analysis. ``jitted`` has run on ``args`` before,
    so its compiled program comes from JAX's cache."""
    compiled = jitted.lower(*args).compile()
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    per_device = (stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
                  - stats.alias_size_in_bytes)
    devices = max(len(s.device_set) for s in jax.tree.leaves(compiled.input_shardings))
    return per_device * devices / 2**20


def time_jax(engine, name, op, fn, one, make_batch, in_axes, batches, repeats, chunk_size, check=None):
    """Rows for a JAX engine: cold compile and latency of ``jit(fn)`` on the
    arguments ``one``, then the throughput of ``jit(simbodyx.parallel.batched(fn,
    in_axes, chunk_size))`` (a vmap over the CPU devices' shares, in chunks)
    on ``make_batch(n)``, placed sharded, for each batch size; every row with
    its program's peak memory (``program_memory_mib``).
    ``check(jitted_fn)`` runs after the compile, before any timing.
    Returns the rows and (the batched function, the last batch's arguments)."""
    f = jax.jit(fn)
    t0 = time.perf_counter()
    jax.block_until_ready(f(*one))
    compile_s = time.perf_counter() - t0
    if check is not None:
        check(f)
    rows = [{"engine": engine, "model": name, "op": op, "batch": 1, "compile_s": compile_s,
             "latency_us": 1e6 * best_time(f, *one, repeats=repeats), "memory_mib": program_memory_mib(f, *one)}]
    fb = jax.jit(batched(fn, in_axes, chunk_size))
    args = None  # stays None without batch sizes
    for n in batches:
        args = make_batch(n)
        if n % len(jax.devices()) == 0:  # each device runs its share of the batch (simbodyx.parallel)
            args = tuple(a if axis is None else shard_batch(a) for a, axis in zip(args, in_axes))
        dt = best_time(fb, *args, repeats=repeats, inner=max(1, 2000 // n))
        rows.append({"engine": engine, "model": name, "op": op, "batch": n,
                     "latency_us": 1e6 * dt, "per_second": n / dt, "memory_mib": program_memory_mib(fb, *args)})
    return rows, (fb, args)


def time_ratio(name, numerator, denominator, batch, rounds):
    """Cost of one batched operation over another, timed in alternation:
    ``rounds`` rounds, each timing both back to back (best of 2 runs each);
    the ratio is the median over rounds of each round's ratio. The machine's
    speed drifts by up to 2x within minutes, so rows timed minutes apart give
    ratios off by as much, and even minima taken separately can come from
    different phases; a round's two timings share one. ``numerator`` and
    ``denominator`` are (op name, (batched function, its arguments)), both
    for ``batch`` states."""
    (top, (f_top, a_top)), (bottom, (f_bottom, a_bottom)) = numerator, denominator
    inner = max(1, 2000 // batch)
    per_round = []
    for _ in range(rounds):
        t_top = best_time(f_top, *a_top, repeats=2, inner=inner)
        per_round.append(t_top / best_time(f_bottom, *a_bottom, repeats=2, inner=inner))
    return {"engine": "simbodyx", "model": name, "op": f"{top}/{bottom}", "batch": batch,
            "ratio": float(np.median(per_round)), "ratio_per_round": per_round}


def time_simbodyx(sx, model, name, ops, batches, repeats, chunk_size):
    """Rows for every op; with forward dynamics and its gradient (or the
    constrained forward dynamics) timed in batches, also their cost ratio at
    the last batch size, timed in alternation (``time_ratio``, ``repeats``
    rounds)."""
    one = jax.tree.map(lambda x: x[0], random_states(model, 1))
    tau, F = _inputs(model, one)
    rows, last = [], {}
    for op in ops:
        fn = make_ops(sx)[op]
        op_rows, last[op] = time_jax(
            "simbodyx", name, op, lambda s, t, F, fn=fn: fn(model, s, t, F), (one, tau, F),
            lambda n: (random_states(model, n), tau, F), (0, None, None), batches, repeats, chunk_size)
        rows += op_rows
    for pair in (("grad_forward_dynamics", "forward_dynamics"), ("constrained_forward_dynamics", "forward_dynamics")):
        if batches and all(op in last for op in pair):
            rows.append(time_ratio(name, *((op, last[op]) for op in pair), batches[-1], repeats))
    return rows


def time_calls(engine, name, calls, repeats, n=2000):
    """Rows for C engines called one state at a time: best of ``repeats`` loops of ``n`` calls."""
    rows = []
    for op, call in calls.items():
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            for _ in range(n):
                call()
            best = min(best, (time.perf_counter() - t) / n)
        rows.append({"engine": engine, "model": name, "op": op, "batch": 1,
                     "latency_us": 1e6 * best, "per_second": 1 / best})
    return rows


def time_model_pass(model, name, repeats):
    """Dispatch cost of passing the Model into a jitted call: a trivial
    function of (model, state) against the same function closing over the
    model, at batch 1, timed back to back in ``repeats`` rounds; the median
    of the rounds' differences (minima taken minutes apart differed by more
    than the cost itself)."""
    state = jax.tree.map(lambda x: x[0], random_states(model, 1))
    closed = jax.jit(lambda s: s.q * 2.0 + model.params.mass[-1])
    passed = jax.jit(lambda m, s: s.q * 2.0 + m.params.mass[-1])
    rounds = [(best_time(closed, state, repeats=3, inner=200), best_time(passed, model, state, repeats=3, inner=200))
              for _ in range(repeats)]
    t_closed = float(np.median([c for c, _ in rounds]))
    overhead = float(np.median([p - c for c, p in rounds]))
    return [{"engine": "simbodyx", "model": name, "op": "model_pass_overhead", "batch": 1,
             "latency_us": 1e6 * max(overhead, 0.0), "dispatch_floor_us": 1e6 * t_closed}]


#: Larger Pinocchio models are skipped (see time_pinocchio).
PINOCCHIO_MAX_NV = 512


def on_manifold_state(sx, model, seed=0):
    """The default State (assembled) with random u projected onto G u = 0,
    realized to Acceleration: where exact constrained solvers must agree."""
    s = model.realize(model.default_state(), sx.Stage.Position)
    G = np.asarray(model.matter.calc_g(s))
    u = np.random.default_rng(seed).normal(size=s.u.shape)
    return model.realize(s.with_u(u - np.linalg.pinv(G) @ (G @ u)), sx.Stage.Acceleration)


def time_pinocchio(sx, system, matter, model, name, repeats):
    """Pinocchio's ABA, RNEA, CRBA and ABA derivatives, one call at a time,
    after checking its accelerations equal ours; with constraints (Ball and
    Weld) also ``constraintDynamics``, checked on an assembled State."""
    try:
        import pinocchio as pin

        from simbodyx.interop.pinocchio import configuration, to_pinocchio
        pmodel, _ = to_pinocchio(matter)
    except (ImportError, ValueError) as e:
        return [], f"{name}: Pinocchio not timed ({e})"
    if pmodel.nv > PINOCCHIO_MAX_NV:
        return [], (f"{name}: Pinocchio not timed (nv = {pmodel.nv} > {PINOCCHIO_MAX_NV}: pin 4.1's "
                    f"createData took over 23 GB here on the 768-dof Ball chain)")
    pdata = pmodel.createData()
    state = jax.tree.map(lambda x: x[0], random_states(model, 1))
    if state.constraint_disabled is not None:  # the tree's own dynamics for ABA's check
        state = state.with_constraint_disabled(jnp.ones_like(state.constraint_disabled))
    state = model.realize(state, sx.Stage.Position)
    q, v = configuration(matter, state)
    tau = np.zeros(pmodel.nv)
    a_pin = pin.aba(pmodel, pdata, q, v, tau)
    a_ours = np.asarray(model.realize(state, sx.Stage.Acceleration).acceleration.udot)
    if all(type(matter.get_mobilized_body(i)).__name__ in ("Pin", "Slider") for i in range(1, matter.get_num_bodies())):
        if not np.allclose(a_pin, a_ours, rtol=1e-8, atol=1e-8 * np.abs(a_pin).max()):
            raise AssertionError(f"{name}: Pinocchio and simbodyx accelerations differ")
    a = np.asarray(a_pin)
    calls = {
        "forward_dynamics": lambda: pin.aba(pmodel, pdata, q, v, tau),
        "inverse_dynamics": lambda: pin.rnea(pmodel, pdata, q, v, a),
        "calc_m": lambda: pin.crba(pmodel, pdata, q),
        "grad_forward_dynamics": lambda: pin.computeABADerivatives(pmodel, pdata, q, v, tau),
    }
    if matter.get_num_constraints():
        from simbodyx.interop.pinocchio import rigid_constraints, velocity_map

        models, datas = rigid_constraints(pmodel, matter)
        pin.initConstraintDynamics(pmodel, pdata, models, datas)
        prox = pin.ProximalSettings(1e-14, 1e-12, 200)
        s = on_manifold_state(sx, model)
        qc, vc = configuration(matter, s)
        a_c = pin.constraintDynamics(pmodel, pdata, qc, vc, tau, models, datas, prox)
        _check(name, "Pinocchio (constrained)", a_c, velocity_map(matter, s) @ np.asarray(s.acceleration.udot))
        calls["constrained_forward_dynamics"] = lambda: pin.constraintDynamics(pmodel, pdata, qc, vc, tau, models,
                                                                               datas, prox)
    return time_calls("pinocchio", name, calls, repeats), None


def _check(name, engine, theirs, ours, tol=1e-8):
    """``theirs`` equals simbodyx's accelerations ``ours`` to ``tol`` relative to the largest."""
    scale = max(float(np.abs(ours).max()), 1.0)
    if not np.allclose(theirs, ours, rtol=tol, atol=tol * scale):
        raise AssertionError(f"{name}: {engine} and simbodyx accelerations differ by "
                             f"{np.abs(np.asarray(theirs) - ours).max():.3g}")


#: MJX's batches repeat this many distinct states (each state's conversion to
#: MuJoCo's coordinates is eager, about 20 ms; without contacts, MJX's work
#: does not depend on the values).
MJX_DISTINCT_STATES = 64


def time_mujoco(sx, matter, model, name, ops, batches, repeats, chunk_size):
    """MuJoCo C (mj_forward, mj_inverse, one call at a time) and MJX (batched
    through the same ``time_jax`` as simbodyx; those of ``ops`` among
    forward, inverse and the reverse-mode gradient), after checking both compute the same
    accelerations as simbodyx; contacts and constraints disabled. A model
    with constraints is timed instead with its Ball and Weld constraints as
    MuJoCo equality constraints (``constrained_forward_dynamics``: mj_forward
    and mjx.forward); MuJoCo's soft constraints do not reproduce the exact
    accelerations, so the note gives their difference on an assembled State."""
    constrained = matter.get_num_constraints() > 0
    try:
        import mujoco

        from simbodyx.interop.mujoco import configuration, to_mjcf, velocity_map
        xml, order = to_mjcf(matter, constraints=constrained)
    except (ImportError, ValueError) as e:
        return [], f"{name}: MuJoCo not timed ({e})"
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    count = max(batches + [1])
    distinct = min(count, MJX_DISTINCT_STATES)
    states = jax.vmap(lambda s: model.realize(s, sx.Stage.Acceleration))(random_states(model, distinct))
    one = on_manifold_state(sx, model) if constrained else jax.tree.map(lambda x: x[0], states)
    qpos, qvel = configuration(matter, one, order)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, d)
    a_ours = velocity_map(matter, one, order) @ np.asarray(one.acceleration.udot)
    # float32: its rounding, grown by the mass matrix's condition
    tol = 1e-8 if model.dtype == jnp.float64 else 1e-3
    note = None
    if constrained:
        note = (f"{name}: MuJoCo's soft equality constraints (default solref, solimp) give qacc "
                f"{np.abs(d.qacc - a_ours).max():.3g} away from the exact accelerations (largest {np.abs(a_ours).max():.3g})")
        calls = {"constrained_forward_dynamics": lambda: mujoco.mj_forward(m, d)}
    else:
        _check(name, "MuJoCo", d.qacc, a_ours, tol)
        qacc = d.qacc.copy()

        def inverse():
            d.qacc[:] = qacc
            mujoco.mj_inverse(m, d)

        calls = {"forward_dynamics": lambda: mujoco.mj_forward(m, d), "inverse_dynamics": inverse}
    rows = time_calls("mujoco", name, calls, repeats)
    try:
        from mujoco import mjx
    except ImportError as e:
        return rows, f"{name}: MJX not timed ({e})"
    mx = mjx.put_model(m)
    d0 = mjx.make_data(mx)
    maps = [configuration(matter, jax.tree.map(lambda x, i=i: x[i], states), order) for i in range(distinct)]
    qpos_all, qvel_all = (jnp.asarray(np.resize(np.stack(a), (count, len(a[0]))), model.dtype) for a in zip(*maps))
    tau = jnp.asarray(np.random.default_rng(1).normal(size=m.nv), model.dtype)

    def fd(qpos, qvel, tau):
        return mjx.forward(mx, d0.replace(qpos=qpos, qvel=qvel, qfrc_applied=tau)).qacc

    def idyn(qpos, qvel, tau):
        out = mjx.inverse(mx, d0.replace(qpos=qpos, qvel=qvel, qacc=tau))
        return out.qfrc_inverse

    def grad_fd(qpos, qvel, tau):
        return jax.grad(lambda *a: jnp.sum(fd(*a) ** 2), argnums=(0, 1, 2))(qpos, qvel, tau)

    def check(f):
        _check(name, "MJX", np.asarray(f(qpos_all[0], qvel_all[0], jnp.zeros_like(tau))), a_ours, tol)

    mjx_ops = ({"constrained_forward_dynamics": fd} if constrained else
               {"forward_dynamics": fd, "inverse_dynamics": idyn, "grad_forward_dynamics": grad_fd})
    for op, fn in ((op, fn) for op, fn in mjx_ops.items() if op in ops):
        rows += time_jax("mjx", name, op, fn, (qpos_all[0], qvel_all[0], tau),
                         lambda n: (qpos_all[:n], qvel_all[:n], tau), (0, 0, None), batches, repeats,
                         chunk_size, check if op == "forward_dynamics" else None)[0]
    return rows, note


#: the models and accuracy of the adaptive-integration rows (benchmarks/integrators.py)
ADAPTIVE_MODELS = ("chain7", "humanoid")
ADAPTIVE_ACCURACY = 1e-6
#: the models of the gradient-of-a-rollout rows (benchmarks/rollout_grad.py has the full study)
ROLLOUT_GRAD_MODELS = ("chain7", "humanoid")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--models", default="chain7,humanoid,every_joint,four_bar,humanoid_welded", help=f"comma list, or 'all': {','.join(MODELS)}")
    parser.add_argument("--ops", default="all")
    parser.add_argument("--batches", default="1024", help="comma list, e.g. 64,1024,4096,16384")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-mujoco", action="store_true", help="skip the MuJoCo and MJX peers")
    parser.add_argument("--mjx-ops", default=None, help="comma list of the operations MJX is timed on "
                                                         "(default: those of --ops)")
    parser.add_argument("--cpu-devices", type=int, default=usable_cores(),
                        help="CPU devices the batches are sharded over (default: one per usable core; "
                             "1 for the single-device figures)")
    parser.add_argument("--chunk-size", type=int, default=CHUNK_SIZE,
                        help="states per chunk of each device's share (0: one vmap per share)")
    parser.add_argument("--adaptive-batch", type=int, default=64,
                        help="trajectories in the adaptive-integration batch (0: skip those rows)")
    parser.add_argument("--rollout-grad-steps", type=int, default=1000,
                        help="RK4 steps of the rollout whose gradient is timed (0: skip those rows)")
    parser.add_argument("--contact-steps", type=int, default=1000,
                        help="steps of the contact scenes' trajectories (contact.py; 0: skip those rows)")
    parser.add_argument("--trajopt-iterations", type=int, default=200,
                        help="timed Adam iterations of the batch-1 cart-pole swing-up (0: skip the trajopt rows)")
    args = parser.parse_args()
    use_cpu_cores(args.cpu_devices)
    chunk_size = args.chunk_size or None
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import simbodyx as sx
    sx.xla_setup.set_cpu_options()  # XLA's CPU options for single trajectories, before computing

    ops = list(make_ops(sx)) if args.ops == "all" else args.ops.split(",")
    batches = [int(b) for b in args.batches.split(",") if b]
    rows, notes = [], []
    print(f"jax {jax.__version__}, {args.dtype}, {platform.machine()}, {jax.devices()[0].platform}, "
          f"{len(jax.devices())} device(s), chunks of {chunk_size}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    for name in (MODELS if args.models == "all" else args.models.split(",")):
        system, matter = MODELS[name](sx)
        model, _ = system.realize_topology()
        if matter.get_num_constraints() == 0:
            model_ops = [op for op in ops if op != "constrained_forward_dynamics"]
        else:  # the constrained solve and, for scale, the same tree's unconstrained forward dynamics
            model_ops = [op for op in ops if op in CONSTRAINED_OPS]
        model_rows = time_simbodyx(sx, model, name, model_ops, batches, args.repeats, chunk_size)
        model_rows += time_model_pass(model, name, args.repeats)
        if args.dtype == "float64":
            peer_rows, note = time_pinocchio(sx, system, matter, model, name, args.repeats)
            model_rows += peer_rows
            notes += [note] if note else []
        if not args.no_mujoco:
            mjx_ops = model_ops if args.mjx_ops is None else args.mjx_ops.split(",")
            peer_rows, note = time_mujoco(sx, matter, model, name, mjx_ops, batches, args.repeats, chunk_size)
            model_rows += peer_rows
            notes += [note] if note else []
        rows += model_rows
        print(f"\n{name}: nb={model.topology.num_bodies - 1}, nq={model.topology.nq}, nu={model.topology.nu}")
        print(f"{'engine':10} {'op':22} {'batch':>6} {'latency us':>12} {'per second':>14} {'compile s':>10} "
              f"{'memory MiB':>10}")
        for r in model_rows:
            if "ratio" in r:
                rounds = ", ".join(f"{x:.2f}" for x in r["ratio_per_round"])
                print(f"{r['engine']:10} {r['op']:22} {r['batch']:>6} cost ratio {r['ratio']:.2f} "
                      f"(median of alternating rounds: {rounds})")
                continue
            per_s = r.get("per_second", r["batch"] / (r["latency_us"] * 1e-6))
            memory = r.get("memory_mib")
            print(f"{r['engine']:10} {r['op']:22} {r['batch']:>6} {r['latency_us']:>12.1f} {per_s:>14,.0f} "
                  f"{r.get('compile_s', float('nan')):>10.2f} {'' if memory is None else f'{memory:.3g}':>10}")
    for note in notes:
        print(note)
    names = MODELS if args.models == "all" else args.models.split(",")
    adaptive = [name for name in ADAPTIVE_MODELS if name in names]
    if args.dtype == "float64" and not args.no_mujoco and args.adaptive_batch and adaptive:
        import integrators  # beside this script; it imports this module's models

        print(f"\nAdaptive integration: sx.simulate with RungeKuttaMerson at accuracy {ADAPTIVE_ACCURACY}, 1 s of "
              f"motion, against MuJoCo C RK4 at the step that reaches the same error")
        for name in adaptive:
            system, matter = MODELS[name](sx)
            model, _ = system.realize_topology()
            model_rows = integrators.adaptive_rows(sx, system, matter, model, ADAPTIVE_ACCURACY, args.adaptive_batch,
                                                   args.repeats, with_diffrax=False, grad=False)
            integrators.print_table(name, model, model_rows, args.adaptive_batch)
            rows += [{**r, "op": "simulate_rk_merson", "model": name, "batch": args.adaptive_batch} for r in model_rows]
    grad_models = [name for name in ROLLOUT_GRAD_MODELS if name in names]
    if args.dtype == "float64" and args.rollout_grad_steps and grad_models:
        import rollout_grad  # beside this script

        print(f"\nGradient of |q(1 s)|^2 with respect to the controls of {args.rollout_grad_steps} RK4 steps "
              f"(checkpoint per step), against MJX's through as many Euler steps (rollout_grad.py: the full study)")
        for name in grad_models:
            rows += [{**r, "op": "rollout_grad"} for r in rollout_grad.compare(
                sx, name, args.rollout_grad_steps, 16, args.repeats, checkpoints=rollout_grad.CHECKPOINTS[:1],
                quarter=False, mjx=not args.no_mujoco)]
    if args.dtype == "float64" and args.trajopt_iterations:
        import trajopt  # beside this script

        print("\nBatch 1 (trajopt.py): a cart-pole swing-up's Adam iteration against the closed-form cart-pole "
              "in plain JAX, and one chain7 RK4 trajectory against MuJoCo C")
        trajopt_rows, note = trajopt.trajopt_rows(sx, args.trajopt_iterations, 1000, args.repeats,
                                                 not args.no_mujoco)
        trajopt.print_table(trajopt_rows)
        rows += [{**r, "op": f"trajopt_{r['op']}"} for r in trajopt_rows]
        if note:
            print(note)
    if args.dtype == "float64" and args.contact_steps:
        import contact  # beside this script

        print("\nContact scenes (contact.py): rigid contact (the time stepper), compliant contact (Hunt-Crossley, "
              "RK4) and MuJoCo C, at 1 ms steps")
        contact_rows, note = contact.contact_rows(sx, args.contact_steps, max(batches), args.repeats,
                                                  not args.no_mujoco)
        contact.print_table(contact_rows)
        rows += [{**r, "op": "contact_step", "model": r["scene"]} for r in contact_rows]
        if note:
            print(note)
    print(json.dumps({"jax": jax.__version__, "dtype": args.dtype, "devices": len(jax.devices()),
                      "chunk_size": chunk_size, "rows": rows}))


if __name__ == "__main__":
    main()
