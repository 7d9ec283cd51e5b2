"""Fixed-step time integration of qdot = N(q) u, M udot = f.

Each step takes a State (any stage) and returns the next State at stage
Time (caches dropped) with its quaternions normalized. ``rollout`` runs
steps under ``lax.scan``; everything is pure, so ``jax.vmap`` over initial
States and ``jax.grad`` through a rollout work. Simbody's error-controlled
integrators, with projection onto the constraint manifold, are
``simbodyx.simulation`` (``sx.simulate``).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.faults import at_step, check_errors
from simbodyx._xla.module import Module
from simbodyx._xla.scalarize import entry_point
from simbodyx._xla.trace_context import tracing
from simbodyx._xla.xla_setup import jit_with_options, loop_compiler_options
from simbodyx.algorithms.coordinates import (advance_q, angular_velocities_in_m, multiply_by_n,
                                             normalize_quaternions)
from simbodyx.algorithms.crba import mass_matrix
from simbodyx.forces.custom import with_controller
from simbodyx.forces.discrete import MobilityActuator, with_controls
from simbodyx.model import FoldedModel
from simbodyx.progress import Progress, progress_of, report
from simbodyx.rigid_contact.impulse import ITERATED
from simbodyx.stage import Stage
from simbodyx.state import State


class Trajectory(Module):
    """Saved samples: the initial State and every ``save_every`` steps after it."""

    t: jnp.ndarray  #: (n,) s
    q: jnp.ndarray  #: (n, nq)
    u: jnp.ndarray  #: (n, nu)
    energy: jnp.ndarray | None  #: (n,) kinetic + potential (J); None when not asked for
    z: jnp.ndarray | None = None  #: (n, nz) the auxiliary states; None when the Model has none


@entry_point(eqx.filter_jit, probe=True)
def derivatives(model, state: State):
    """The vector field every integrator steps, as one program with only these outputs.

    ``model.realize(state, Stage.Acceleration)``'s qdot and udot: the
    function to call in a loop of your own. Traced (under ``jit``,
    ``vmap``, ``grad`` or in a loop), small models evaluate it on the
    scalar path (``simbodyx.scalarize``; ``model.uses_scalar_path()``). A
    Model with auxiliary states z (a ``Force.Thermostat``) steps them too:
    :func:`state_rates` gives all three rates.

    Args:
        model: The Model.
        state: The State (any stage).

    Returns:
        (qdot (nq,), udot (nu,)).
    """
    s = model.realize(state, Stage.Acceleration)
    return s.velocity.qdot, s.acceleration.udot


def state_rates(model, state: State):
    """(qdot, udot, zdot): :func:`derivatives` and the auxiliary states'
    rates (``state.acceleration.zdot``; empty when the Model has none)."""
    if not state.z.shape[-1]:
        return (*derivatives(model, state), state.z)
    s = model.realize(state, Stage.Acceleration)
    return s.velocity.qdot, s.acceleration.udot, s.acceleration.zdot


def total_energy(model, state: State):
    """Kinetic plus potential energy (J)."""
    s = model.realize(state, Stage.Velocity)
    return model.matter.calc_kinetic_energy(s) + model.forces.calc_potential_energy(s)


def total_energies(model, base: State, t, q, u, z=None):
    """(n,) total energies (J) of n samples, as one batched evaluation of
    :func:`total_energy`: times t (n,) s, q (n, nq), u (n, nu) and z (n, nz)
    (None: ``base``'s), with ``base``'s other variables (a Trajectory's
    fields and the State it started from)."""
    return jax.vmap(lambda t, q, u, z: total_energy(model, _with(base, t, q, u, z)),
                    in_axes=(0, 0, 0, None if z is None else 0))(t, q, u, z)


def _next(state: State, dt, q, u, z) -> State:
    return _with(state, state.t + dt, normalize_quaternions(state.topology, q), u, z)


def _with(state: State, t, q, u, z=None) -> State:
    return state.replace(t=t, q=q, u=u, z=state.z if z is None else z, keep=Stage.Time)


def euler_step(model, state: State, dt) -> State:
    """Explicit Euler: q += dt qdot, u += dt udot, z += dt zdot (first order)."""
    qdot, udot, zdot = state_rates(model, state)
    return _next(state, dt, state.q + dt * qdot, state.u + dt * udot, state.z + dt * zdot)


def semi_explicit_euler_step(model, state: State, dt) -> State:
    """Symplectic Euler: u1 = u + dt udot(q, u); q1 = q + dt N(q) u1; z
    explicit, z1 = z + dt zdot(q, u, z)."""
    _, udot, zdot = state_rates(model, state)
    u1 = state.u + dt * udot
    return _next(state, dt, state.q + dt * multiply_by_n(state.topology, state.q, u1), u1, state.z + dt * zdot)


def rk4_step(model, state: State, dt) -> State:
    """Classical fourth-order Runge-Kutta on (q, u, z). On the array program
    the four stages are one ``lax.scan``, so the dynamics is traced and
    compiled once per step, not four times; a Model on the scalar path
    (``model.uses_scalar_path()``) has them unrolled, where a loop's
    overhead would outweigh its small program."""
    t, y = state.t, (state.q, state.u, state.z)
    times = jnp.asarray([0.0, 0.5, 0.5, 1.0], state.q.dtype)  # of dt; also the scale of the previous rates
    weights = jnp.asarray([1.0, 2.0, 2.0, 1.0], state.q.dtype)

    def stage(carry, at):
        k, total = carry
        c, w = at
        h = c * dt
        k = state_rates(model, _with(state, t + h, *(a + h * b for a, b in zip(y, k))))
        return (k, tuple(acc + w * b for acc, b in zip(total, k))), None

    zeros = tuple(jnp.zeros_like(a) for a in y)
    (_, total), _ = jax.lax.scan(stage, (zeros, zeros), (times, weights), unroll=model.uses_scalar_path())
    return _next(state, dt, *(a + dt / 6 * b for a, b in zip(y, total)))


#: MuJoCoStepper's integrators
MUJOCO_INTEGRATORS = ("euler", "rk4")


class MuJoCoStepper(Module):
    """MuJoCo's integrators as a time stepper.

    Use it as ``rollout(model, state, dt, n, method=stepper)`` or
    ``stepper.step(model, state, dt)`` in a loop of your own;
    ``sx.io.load_mjcf`` gives the file's (``robot.stepper``). With the
    Model's soft constraints (``simbodyx.soft_constraints``) it steps an
    MJCF robot as MuJoCo C does, step for step. q is advanced as MuJoCo
    advances it (``advance_q``: quaternions turned exactly), and RK4
    combines a ball's or free joint's stages' angular velocities and
    accelerations in the body's own frame (M) at each stage, as MuJoCo's
    qvel has them. A spinning free body's velocities then agree with
    MuJoCo 4.0.1's to rounding; its orientation differs slightly (that
    release's RK4 turns it otherwise than its published algorithm, which
    this follows).

    Attributes:
        damping: (nu,) the joints' damping (N s/m or N m s per mobility),
            which "euler" takes implicitly; None: none.
        integrator: "euler": MuJoCo's semi-implicit Euler, (M + h B) a_h =
            M a, u1 = u + h a_h, q1 = q advanced by h u1 (MuJoCo's
            "implicit" and "implicitfast" step the same way here; MuJoCo
            also takes actuators' velocity derivatives implicitly there).
            "rk4": MuJoCo's fourth-order Runge-Kutta, the stages'
            velocities and accelerations combined linearly.

    Raises:
        ValueError: An unknown ``integrator``.
    """

    damping: jnp.ndarray | None = None
    integrator: str = eqx.field(static=True, default="euler")

    def __check_init__(self):
        if self.integrator not in MUJOCO_INTEGRATORS:
            raise ValueError(f"MuJoCoStepper: unknown integrator {self.integrator!r}; "
                             f"choose one of {MUJOCO_INTEGRATORS}")

    def step(self, model, state: State, dt) -> State:
        """One step of length ``dt`` (s) by the stepper's integrator."""
        if self.integrator == "rk4":
            return _mujoco_rk4(model, state, dt)
        s = model.realize(state, Stage.Acceleration)
        udot = s.acceleration.udot
        if self.damping is not None:
            M = mass_matrix(s.topology, s.instance, s.position)
            udot = jnp.linalg.solve(M + dt * jnp.diag(self.damping), M @ udot)
        u1 = state.u + dt * udot
        return _next(state, dt, advance_q(state.topology, state.q, u1, dt), u1, state.z + dt * s.acceleration.zdot)


def _mujoco_rk4(model, state: State, dt) -> State:
    """Classical fourth-order Runge-Kutta as MuJoCo's ``mj_RungeKutta``:
    the stages' velocities and accelerations combined linearly in MuJoCo's
    frames (``angular_velocities_in_m``), q advanced along the combined
    velocities (``advance_q``). The four stages are one ``lax.scan`` (the
    dynamics traced once)."""
    topology, q0, z0 = state.topology, state.q, state.z

    def in_m(q, u, back=False):
        return angular_velocities_in_m(topology, q, u, back)

    u0 = in_m(q0, state.u)
    times = jnp.asarray([0.0, 0.5, 0.5, 1.0], q0.dtype)
    weights = jnp.asarray([1.0, 2.0, 2.0, 1.0], q0.dtype)

    def stage(carry, at):
        k, total = carry  # k: the previous stage's (u, udot, zdot), u and udot in MuJoCo's frames
        h = at[0] * dt
        q = advance_q(topology, q0, in_m(q0, k[0], back=True), h)
        u = u0 + h * k[1]
        udot, zdot = state_rates(model, _with(state, state.t + h, q, in_m(q, u, back=True), z0 + h * k[2]))[1:]
        k = (u, in_m(q, udot), zdot)
        return (k, tuple(acc + at[1] * b for acc, b in zip(total, k))), None

    zeros = (jnp.zeros_like(state.u), jnp.zeros_like(state.u), jnp.zeros_like(z0))
    (_, (u_sum, udot_sum, zdot_sum)), _ = jax.lax.scan(stage, (zeros, zeros), (times, weights))
    q1 = normalize_quaternions(topology, advance_q(topology, q0, in_m(q0, u_sum, back=True), dt / 6))
    return _with(state, state.t + dt, q1, in_m(q1, u0 + dt / 6 * udot_sum, back=True), z0 + dt / 6 * zdot_sum)


STEPS = {"euler": euler_step, "semi_explicit_euler": semi_explicit_euler_step, "rk4": rk4_step}
#: The largest h |lambda| at which each method keeps a decaying linear mode
#: of rate lambda from growing (its stability region along the negative real
#: axis; RK4's reaches 2.83 along the imaginary one, the Euler methods' 2 for
#: an undamped oscillator in semi-explicit Euler and none in explicit Euler).
STABILITY_LIMITS = {"euler": 2.0, "semi_explicit_euler": 2.0, "rk4": 2.785}


class StepEstimate(NamedTuple):
    """:func:`stable_step`'s answer: ``max_step`` (s), the fastest mode's
    ``rate`` |lambda| (1/s) and the ``bodies`` whose mobilities it moves most."""

    max_step: float
    rate: float
    bodies: tuple


def stable_step(model, state: State, method: str = "rk4") -> StepEstimate:
    """The largest fixed step with which a method keeps the dynamics, linearized at a State, from growing.

    The step is STABILITY_LIMITS[method] / |lambda| for the eigenvalue
    lambda of d(qdot, udot)/d(q, u) of largest modulus. Stiff compliant
    contacts, stops and springs set it (their stiffness over the inertia
    they move, and their damping). A host computation, called eagerly.

    Args:
        model: The Model.
        state: The State the dynamics are linearized at.
        method: "euler", "semi_explicit_euler" or "rk4".

    Returns:
        A :class:`StepEstimate`: the step (s; inf when nothing grows), the
        fastest rate |lambda| (1/s), and the bodies whose speeds that mode
        moves most.

    Raises:
        ValueError: An unknown ``method``.
    """
    if method not in STABILITY_LIMITS:
        raise ValueError(f"stable_step: unknown method {method!r}; choose one of {sorted(STABILITY_LIMITS)}")
    nq = state.q.shape[0]

    def rates(y):
        qdot, udot = derivatives(model, _with(state, state.t, y[:nq], y[nq:]))
        return jnp.concatenate([qdot, udot])

    A = np.asarray(jax.jacfwd(rates)(jnp.concatenate([state.q, state.u])))
    eigenvalues, vectors = np.linalg.eig(A)
    fastest = int(np.argmax(np.abs(eigenvalues)))
    rate = float(np.abs(eigenvalues[fastest]))
    speeds = np.abs(vectors[nq:, fastest])
    topology = state.topology
    moved = [topology.u_body[i] for i in np.argsort(speeds)[::-1] if speeds[i] >= 0.3 * speeds.max()]
    bodies = tuple(topology.body_label(b) for b in dict.fromkeys(moved))
    return StepEstimate(STABILITY_LIMITS[method] / rate if rate > 0 else np.inf, rate, bodies)


def _report_divergence(model, start: State, trajectory, dt, method) -> None:
    """Warn, naming the step a stable run needs, when a trajectory left the
    finite numbers (an eager :func:`rollout`'s check): the bound of
    :func:`stable_step` at the start and at the last sample before the
    speeds grew a hundredfold, whichever is smaller."""
    finite = np.all(np.isfinite(np.asarray(trajectory.q)), axis=1) & np.all(np.isfinite(np.asarray(trajectory.u)),
                                                                           axis=1)
    if finite.all():
        return
    first_bad = int(np.argmin(finite))
    speeds = np.abs(np.asarray(trajectory.u[:first_bad])).max(axis=1)
    calm = np.flatnonzero(speeds <= 100 * (speeds[0] + 1))  # where a linearization still describes the motion
    times = np.asarray(trajectory.t)
    estimate, at = min(((stable_step(model, _with(start, times[i], trajectory.q[i], trajectory.u[i]), method), i)
                        for i in dict.fromkeys((0, int(calm[-1])))), key=lambda e: e[0].max_step)
    warnings.warn(
        f"rollout: the state left the finite numbers after t = {times[first_bad - 1]:.4g} s "
        f"(dt = {float(dt):.3g} s, {method}); at t = {times[at]:.4g} s the dynamics have a mode of rate "
        f"{estimate.rate:.3g} 1/s, mostly in {', '.join(estimate.bodies[:3])}, which {method} steps stably only "
        f"below dt = {estimate.max_step:.3g} s (a stiff contact, stop or spring there; sx.integrate.stable_step "
        f"gives this bound at any State). Take a smaller step, or load an MJCF robot with physics='mujoco' and "
        f"step it with robot.stepper at its file's step.", stacklevel=3)


def _held(force, t, state):
    return force


def _ramp(ends, t0, dt, t, state):
    """The generalized forces at time t of a step from t0: linear between ``ends``."""
    w = (t - t0) / dt
    return (1 - w) * ends[0] + w * ends[1]


def _actuation_ramp(actuators, ends, t0, dt, t, state):
    """What the actuators apply at time t of a step from t0, their controls
    linear between ``ends``, beyond what they apply with ``ends[0]`` held."""
    w = (t - t0) / dt
    return sum(a.mobility_forces(state, (1 - w) * c0 + w * c1) - a.mobility_forces(state, c0)
               for a, c0, c1 in zip(actuators, ends[0], ends[1]))


def actuators(model) -> tuple:
    """The Model's ``Force.MobilityActuator`` elements, in the order they were
    added: the columns of ``rollout``'s ``actuator_controls`` (for a loaded
    robot, ``robot.actuators``' order)."""
    return tuple(e for e in model.force_elements if isinstance(e, MobilityActuator))


def _schedule(values, columns: int, num_steps, hold: str, what: str, width: str, dtype):
    """``values`` as an array of one row per step ("zero") or per step end
    ("linear": num_steps + 1 rows) of ``columns`` (named ``width``),
    checked; and ``num_steps``, taken from its rows where None."""
    values = jnp.asarray(values, dtype)
    extra = hold == "linear"
    if values.ndim != 2 or values.shape[1] != columns:
        raise ValueError(f"{what} must have shape (num_steps{' + 1' if extra else ''}, {width} = {columns}), "
                         f"got {values.shape}")
    if num_steps is None:
        num_steps = values.shape[0] - extra
    if values.shape[0] != num_steps + extra:
        raise ValueError(f"{what} has {values.shape[0]} rows for num_steps = {num_steps} with hold={hold!r} "
                         f"({'one per step and one for the end' if extra else 'one per step'})")
    return values, num_steps


@check_errors()
def rollout(model, state: State, dt, num_steps: int | None = None, save_every: int = 1, method="rk4", *,
            controls=None, actuator_controls=None, hold: str = "zero", checkpoint: bool | int = True,
            energy: bool = True, progress=False):
    """Run fixed steps of one method from a State, saving a sample every few steps.

    ``jax.grad`` through it is exact for the discrete map. Called eagerly
    (outside ``jit``, ``vmap`` and ``grad``), the rollout is one compiled
    program, which later calls with the same settings and shapes reuse
    (``dt``, the State's and the controls' numbers may differ); a Model on
    the scalar path is compiled in as constants, as ``sx.simulate`` does
    (:class:`FoldedModel`), so other numbers compile their own. That
    program is compiled with ``sx.xla_setup.loop_compiler_options()``, so
    that on jaxlib 0.6 too its loop runs as one function; inside a
    ``jax.jit`` of your own, pass them to that ``jit`` on jaxlib 0.6.
    Called eagerly with a method named by a string, a trajectory that
    leaves the finite numbers is reported in a warning naming the step a
    stable run needs there (:func:`stable_step`).

    Args:
        model: The Model.
        state: The starting State (any stage).
        dt: The step (s).
        num_steps: How many steps; defaults to the number the controls give.
        save_every: Save every this many steps (a divisor of ``num_steps``).
        method: "euler", "semi_explicit_euler" or "rk4", or a time stepper
            whose ``step(model, state, dt)`` takes one step
            (``sx.SemiExplicitEulerTimeStepper()``,
            :class:`MuJoCoStepper`, a loaded robot's ``robot.stepper``).
        controls: (num_steps, nu) mobility forces (N or N m per mobility)
            added to the Model's forces.
        actuator_controls: (num_steps, n_actuators) controls of the Model's
            actuators (:func:`actuators`; a loaded robot's
            ``robot.actuators``, whose laws turn them into forces), in place
            of those the State holds.
        hold: How the controls act within a step: "zero" holds each row
            over its step (as MuJoCo's ctrl); "linear" takes num_steps + 1
            rows, the values at the steps' ends, and varies linearly between
            them, so RK4's stages see the value at their time.
        checkpoint: What reverse mode keeps (``jax.checkpoint``). True: one
            (q, u) per step, each step's internals recomputed (nq + nu
            numbers per step, for one extra forward pass), except what a
            time stepper's impulse solves found (so that reverse mode does
            not run their iterations again). An int k: segments of k steps
            (a multiple of ``save_every`` dividing ``num_steps``), each
            segment's start kept and its steps recomputed while it is
            differentiated: memory grows with the square root of the
            horizon for k near sqrt(num_steps), for a second extra forward
            pass. False: every intermediate of every step is kept.
        energy: Evaluate the total energy at each sample, batched after the
            loop (a time stepper, which may change the State's other
            variables as it steps, evaluates it inside the loop); False
            leaves ``Trajectory.energy`` None.
        progress: Show a progress bar of the steps taken (True, or an
            ``sx.Progress``), moved from inside the compiled loop by host
            callbacks about a hundred times a run; False adds nothing to
            the program. Under ``jax.vmap`` one bar counts the batch.

    Returns:
        (final, trajectory): the final State and a :class:`Trajectory` of
            num_steps // save_every + 1 samples (t, q, u, z, energy), the start
            first.

    Raises:
        ValueError: An unknown ``method`` or ``hold``, controls of the wrong
            shape, ``actuator_controls`` for a Model without actuators, or
            ``num_steps`` not a non-negative multiple of ``save_every``.
    """
    if isinstance(method, str) and method not in STEPS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(STEPS)} or a time stepper")
    if hold not in ("zero", "linear"):
        raise ValueError(f"rollout: hold must be 'zero' or 'linear', got {hold!r}")
    if controls is not None:
        controls, num_steps = _schedule(controls, state.topology.nu, num_steps, hold, "controls", "nu", state.q.dtype)
    if actuator_controls is not None:
        driven = actuators(model)
        if not driven:
            raise ValueError("rollout: actuator_controls given, but the Model has no Force.MobilityActuator (pass "
                             "mobility forces as controls)")
        actuator_controls, num_steps = _schedule(actuator_controls, len(driven), num_steps, hold,
                                                 "actuator_controls", "n_actuators", state.q.dtype)
    if num_steps is None or num_steps < 0 or save_every < 1 or num_steps % save_every:
        raise ValueError(f"num_steps ({num_steps}) must be a non-negative multiple of save_every ({save_every})")
    settings = _Settings(num_steps, save_every, _chunks_per_segment(checkpoint, num_steps // save_every, save_every),
                         method, checkpoint is not False, energy, hold, progress_of(progress, "rollout", "step"))
    if tracing() is False:  # eager: one cached program, not the scan compiled afresh at every call
        dt = np.asarray(dt, state.q.dtype)  # a host number: no computation dispatched of its own
        program = jit_with_options(_rollout, loop_compiler_options(), static_argnames=("settings",))
        final, trajectory = program(FoldedModel.of(model), state, dt, (controls, actuator_controls), settings)
        if isinstance(method, str):
            _report_divergence(model, state, trajectory, dt, method)
        return final, trajectory
    return _rollout(model, state, jnp.asarray(dt, state.q.dtype), (controls, actuator_controls), settings)


class _Settings(NamedTuple):
    """:func:`rollout`'s static settings, checked; ``chunks_per_segment``:
    saved rows per checkpointed segment."""

    num_steps: int
    save_every: int
    chunks_per_segment: int
    method: object
    checkpoint: bool
    energy: bool
    hold: str
    progress: Progress | None


def _rollout(model, state: State, dt, schedules, settings: _Settings):
    """The rollout; ``model`` a Model, or a :class:`FoldedModel` in the
    program an eager call compiles (with the loop compiler options: one
    trajectory's loop as one function on jaxlib 0.6 too); ``schedules`` its
    (controls, actuator_controls), each None or checked by ``rollout``."""
    model = FoldedModel.unfold(model)
    num_steps, save_every, chunks_per_segment, method, checkpoint, energy, hold, progress = settings
    num_chunks = num_steps // save_every
    method_step = STEPS[method] if isinstance(method, str) else method.step
    state = state.replace(keep=Stage.Model)  # each step's State carries no cache: a time stepper's realizes
    driven = actuators(model)

    def step(s, at):
        force, actuation, k = at
        m = model
        if force is not None:
            m = with_controller(m, jax.tree_util.Partial(_held, force) if hold == "zero" else
                                jax.tree_util.Partial(_ramp, force, s.t, dt))
        if actuation is not None:
            s = with_controls(driven, s, actuation if hold == "zero" else actuation[0])
            if hold == "linear":
                m = with_controller(m, jax.tree_util.Partial(_actuation_ramp, driven, actuation, s.t, dt))
        with at_step(k):  # where a failed run-time check says it happened
            return method_step(m, s, dt).replace(keep=Stage.Model), None

    in_loop = energy and not isinstance(method, str)  # a time stepper's State changes beyond (t, q, u, z)

    def sample(s):
        return s.t, s.q, s.u, total_energy(model, s) if in_loop else None, s.z if s.z.shape[-1] else None

    # a checkpointed segment is run again by reverse mode: its progress is reported outside it
    segmented = checkpoint and chunks_per_segment < num_chunks

    def chunk(s, at):
        s, _ = jax.lax.scan(step, s, at, length=save_every)
        if progress is not None and not segmented:
            report(progress, at[2][-1], num_steps)
        with at_step(None if at[2] is None else at[2][-1]):  # the sample is checked as the step's end
            return s, sample(s)

    def segment(s, at):
        return jax.lax.scan(chunk, s, at, length=chunks_per_segment)

    if checkpoint:
        step = jax.checkpoint(step, policy=jax.checkpoint_policies.save_only_these_names(ITERATED))
    if segmented:
        inner = jax.checkpoint(segment)

        def segment(s, at):
            s, rows = inner(s, at)
            if progress is not None:
                report(progress, at[2][-1, -1], num_steps)
            return s, rows
    num_segments = num_chunks // chunks_per_segment if num_chunks else 0

    def per_step(values, ends: bool):  # (segments, chunks, steps, ...) rows; ``ends``: each step's two ends
        if values is None:
            return None
        if ends:
            values = jnp.stack([values[:-1], values[1:]], axis=1)
        return values.reshape(num_segments, chunks_per_segment, save_every, *values.shape[1:])

    # where a failed run-time check happened, and the progress made
    steps = jnp.arange(1, num_steps + 1) if model.checks or progress is not None else None
    xs = (*(per_step(values, hold == "linear") for values in schedules), per_step(steps, False))
    final, rows = jax.lax.scan(segment, state, xs, length=num_segments)
    first = sample(state)
    t, q, u, e, z = (None if a is None else jnp.concatenate([a[None], b.reshape(-1, *b.shape[2:])])
                     for a, b in zip(first, rows))
    if energy and not in_loop:
        e = total_energies(model, state, t, q, u, z)
    return final, Trajectory(t=t, q=q, u=u, energy=e, z=z)


def _chunks_per_segment(checkpoint, num_chunks: int, save_every: int) -> int:
    """Saved rows per checkpointed segment of ``rollout`` (see its docstring)."""
    if checkpoint is True or checkpoint is False:
        return max(num_chunks, 1)
    steps = checkpoint
    if not isinstance(steps, int) or steps < 1 or steps % save_every or (num_chunks * save_every) % steps:
        raise ValueError(f"checkpoint = {checkpoint!r} steps per segment must be a positive multiple of "
                         f"save_every ({save_every}) dividing num_steps ({num_chunks * save_every})")
    return steps // save_every
