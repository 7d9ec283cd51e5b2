"""The Stage ladder: ``realize`` computes a State's caches from a Model.

``realize`` is pure and always recomputes every stage from Instance up to
the one asked for, from the Model's parameters and the State's t, q, u. So
``jax.grad`` of any function of ``model.realize(state, ...)`` with respect
to the Model's parameters is correct whatever caches ``state`` carried.

The computation is wrapped in ``jax.jit`` (the stage is static): called
eagerly (in a notebook) it is one compiled call instead of op-by-op
dispatch, which costs about a thousand times more, compiled with XLA's
quick settings (``simbodyx._xla.xla_setup.QUICK_COMPILE``).
Inside a user's transformation it is inlined, on the scalar path for
small models (``simbodyx.scalarize.entry_point``), so a loop of one's own
around ``model.realize`` runs the program ``sx.integrate.rollout`` runs.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from simbodyx import runtime_checks
from simbodyx._xla.scalarize import entry_point
from simbodyx.algorithms.aba import ForwardInputs, forward_dynamics
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.coordinates import calc_qdotdot
from simbodyx.algorithms.kinematics import realize_position, realize_velocity
from simbodyx.constraints.dynamics import constrained_forward_dynamics
from simbodyx.forces.subsystem import applied_forces, potential_energy, z_derivatives
from simbodyx.motion import prescription
from simbodyx.stage import Stage
from simbodyx.state import AccelerationCache, DynamicsCache, ReportCache, State


def realize(model, state: State, stage: Stage = Stage.Position) -> State:
    """Realize a State through a stage: the caches of every stage up to it.

    Position computes the body poses; Velocity their velocities; Dynamics
    evaluates the force elements; Acceleration solves the forward dynamics
    for udot, qdotdot, A_GB and, with constraints, their multipliers
    (``constraints.dynamics``; without constraints the articulated-body
    method alone; with soft constraints, ``model.soft_constraints``' convex
    problem after it); Report adds the report-only quantities
    (``state.report``: kinetic, potential and total energy).

    Args:
        model: The Model.
        state: The State (its q, u, z, t and discrete variables are read).
        stage: The last stage realized (``sx.Stage``, Instance to Report).

    Returns:
        A new State holding the caches through ``stage``.

    Raises:
        ValueError: The State is not of this Model's structure.
    """
    return _realize(model, state.check_model(model), Stage(stage))


@entry_point(functools.partial(jax.jit, static_argnames="stage"))
def _realize(model, state: State, stage: Stage) -> State:
    model.check_leaves()  # on shapes, while tracing: a leaf edited to another shape or dtype is named here
    topology, params = model.topology, model.params
    if model.checks:
        state = runtime_checks.checked_state(model, state)
    prescribed = prescription(params.motions, state)
    q, u = (state.q, state.u) if prescribed is None else prescribed.apply(topology, state.q, state.u)
    instance = params if stage >= Stage.Instance else None
    position = realize_position(topology, params, q) if stage >= Stage.Position else None
    velocity = realize_velocity(topology, params, position, q, u) if stage >= Stage.Velocity else None
    disabled = state.constraint_disabled
    realized = State(state.t, q, u, state.z, topology, instance, position, velocity,
                     instance_data=state.instance_data, discrete=state.discrete)
    if stage < Stage.Dynamics:
        return realized
    with jax.named_scope("realize_dynamics"):
        dynamics = DynamicsCache(*applied_forces(model, realized))
    acceleration = None
    if stage >= Stage.Acceleration:
        with jax.named_scope("realize_acceleration"):
            known = None if prescribed is None else prescribed.known_udot(topology)
            T, F = dynamics.mobility_forces, dynamics.body_forces
            x = ForwardInputs.at(realized, T, F, known)
            if params.constraints:
                udot, A_GB, multipliers = constrained_forward_dynamics(topology, x, state.t, disabled)
            else:
                udot, A_GB = forward_dynamics(topology, x)
                multipliers = jnp.zeros(0, u.dtype)
            if params.soft_constraints is not None:
                udot = params.soft_constraints.accelerations(realized, udot)
                A_GB = body_accelerations(topology, position, udot, velocity.mobilizer_coriolis)
            if model.checks:
                udot, multipliers = runtime_checks.checked_solution(model, state.t, udot, multipliers)
            qdotdot = calc_qdotdot(topology, q, u, udot)
            acceleration = AccelerationCache(udot=udot, qdotdot=qdotdot, A_GB=A_GB, multipliers=multipliers,
                                             zdot=z_derivatives(model, realized))
    realized = State(state.t, q, u, state.z, topology, instance, position, velocity, dynamics, acceleration,
                     state.instance_data, state.discrete)
    if stage < Stage.Report:
        return realized
    kinetic = model.matter.calc_kinetic_energy(realized)
    return dataclasses.replace(realized, _report=ReportCache(kinetic, potential_energy(model, realized)))
