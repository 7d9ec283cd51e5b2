"""The checks mode, ``model.with_checks(True)``: run-time faults as errors.

Inside compiled code a NaN in q, a zero quaternion or a singular solve
gives NaN results silently. With checks on, ``model.realize`` (and so
every integrator, rollout and operator that realizes) checks what goes in
and what comes out, also inside ``jit`` and ``vmap``, and a fault raises
``sx.RuntimeCheckError`` naming the first body or constraint at fault, the
State's time and, inside ``rollout`` or ``simulate``, the step:

- t, q and u finite (a body's q or u);
- the physical parameters, which an ``eqx.tree_at`` edit or a gradient
  step may have moved (``model.check()`` checks them once, on the host):
  each body's mass finite and >= 0, its mass center finite, its central
  inertia a physical one (finite, no negative principal moment, the
  triangle inequality), and each force element's non-negative numbers
  (stiffness, damping, ...) finite and >= 0;
- each quaternion in use nonzero (a body's; ``set_q_to_fit_rotation`` is
  the way to set an orientation);
- udot finite after the forward dynamics (the first body whose udot is
  not: a singular mass matrix, or a force that is not finite);
- the constraint multipliers finite (a constraint's: a failed constraint
  solve).

Off by default, and then nothing is added to any program. On, each check
is a reduction and a host check per ``realize``, and the entry points
leave the scalar path (``simbodyx.scalarize``) for the array program
(benchmarks/README.md has the cost).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx._xla.faults import fault_if
from simbodyx.constraints.equations import Layout
from simbodyx.spatial.inertia import inertia_tolerance
from simbodyx.stage import Stage


def _first_fault(x, bad, owner, messages, t):
    """``x`` carrying a check: raises ``messages[owner[k]]`` for the first
    entry k where ``bad`` (same length as ``owner``) holds, at time ``t``."""
    if not len(owner):
        return x
    return fault_if(x, bad, jnp.asarray(owner)[jnp.argmax(bad)], messages, t)


def checked_state(model, state):
    """The State with its t, q and u carrying the input checks."""
    top = model.topology
    q_messages = [f"{top.body_label(b)}: q contains NaN or infinity (checks mode)" for b in range(top.num_bodies)]
    u_messages = [f"{top.body_label(b)}: u contains NaN or infinity (checks mode)" for b in range(top.num_bodies)]
    quaternion_messages = [f"{top.body_label(b)}: zero quaternion (checks mode); set an orientation with "
                           f"set_q_to_fit_rotation" for b in range(top.num_bodies)]
    t = fault_if(state.t, ~jnp.isfinite(state.t), 0, ["t is NaN or infinite (checks mode)"])
    q = _first_fault(state.q, ~jnp.isfinite(state.q), top.q_body, q_messages, t)
    u = _first_fault(state.u, ~jnp.isfinite(state.u), top.u_body, u_messages, t)
    bodies = top.quaternion_bodies
    if bodies:
        starts = np.array([top.q_start[b] + top.kinds[b].quaternion_at for b in bodies])
        norms = jnp.sum(q[starts[:, None] + np.arange(4)] ** 2, axis=-1)
        q = _first_fault(q, norms == 0, bodies, quaternion_messages, t)
    q = _checked_parameters(model, q, t)
    return state.replace(t=t, q=q, u=u, keep=Stage.Time)


def _checked_parameters(model, x, t):
    """``x`` carrying the checks of the Model's physical parameters, which
    name the first body (mass, mass center, central inertia, in that order)
    or force element number at fault."""
    top, params = model.topology, model.params
    bodies = range(1, top.num_bodies)
    messages = [f"{top.body_label(b)}: model.params.{name} {problem} (checks mode)" for name, problem in (
        ("mass", "is negative or not finite"), ("com", "is not finite"),
        ("central_inertia", "is not a physical inertia: not finite, a negative principal moment, or moments that "
                            "violate the triangle inequality")) for b in bodies]
    I = params.central_inertia[1:]
    scale = jnp.max(jnp.abs(I), axis=(-1, -2))
    rtol = inertia_tolerance(I.dtype)  # model.check()'s (spatial.inertia.inertia_problem)
    moments = jnp.linalg.eigvalsh(0.5 * (I + jnp.swapaxes(I, -1, -2)))
    mass = params.mass[1:]
    bad = [~jnp.isfinite(mass) | (mass < 0), ~jnp.all(jnp.isfinite(params.com[1:]), axis=-1),
           ~jnp.all(jnp.isfinite(I), axis=(-1, -2)) | (moments[:, 0] < -rtol * scale)
           | (moments[:, 0] + moments[:, 1] < moments[:, 2] - rtol * scale)]
    for k, element in enumerate(model.force_elements):
        for name in element.NONNEGATIVE:
            value = jnp.asarray(getattr(element, name))
            messages.append(f"Force.{type(element).__name__} (model.force_elements[{k}]): {name} is negative or not "
                            f"finite (checks mode)")
            bad.append(jnp.any(~jnp.isfinite(value) | (value < 0))[None])
    if not messages:
        return x
    bad = jnp.concatenate(bad)
    return fault_if(x, bad, jnp.argmax(bad), messages, t)


def checked_solution(model, t, udot, multipliers):
    """(udot, multipliers) at time ``t`` carrying one output check, which names a
    constraint whose multipliers are not finite before a body whose udot is
    not (a failed solve makes udot NaN too)."""
    top, constraints = model.topology, model.params.constraints
    if not top.nu:
        return udot, multipliers
    messages = [f"{c.label}: the constraint solve gave NaN or infinite multipliers (checks mode): a "
                f"constraint whose numbers are not finite, or a singular mass matrix" for c in constraints]
    messages += [f"udot is NaN or infinite, first at {top.body_label(b)} (checks mode): a singular mass "
                 f"matrix (a massless body at the end of a chain), or a force that is not finite"
                 for b in range(top.num_bodies)]
    bad_udot = ~jnp.isfinite(udot)
    index = len(constraints) + jnp.asarray(top.u_body, jnp.int32)[jnp.argmax(bad_udot)]
    pred = jnp.any(bad_udot)
    if constraints and multipliers.size:
        bad_multipliers = ~jnp.isfinite(multipliers)
        index = jnp.where(jnp.any(bad_multipliers), jnp.asarray(Layout(constraints).owner)[jnp.argmax(bad_multipliers)],
                          index)
        pred = pred | jnp.any(bad_multipliers)
    return fault_if((udot, multipliers), pred, index, messages, t)
