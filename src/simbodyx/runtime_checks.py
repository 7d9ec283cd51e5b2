"""The checks mode, ``model.with_checks(True)``: run-time faults as errors.

Inside compiled code a NaN in q, a zero quaternion or a singular solve
gives NaN results silently. With checks on, ``model.realize`` (and so
every integrator, rollout and operator that realizes) checks what goes in
and what comes out with ``equinox.branched_error_if``, which raises inside
``jit`` and ``vmap`` (an ``EquinoxRuntimeError``) and names the first body
or constraint at fault:

- t, q and u finite (a body's q or u);
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

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx.constraints.equations import Layout
from simbodyx.stage import Stage


def _first_fault(x, bad, owner, messages):
    """``x`` carrying a check: raises ``messages[owner[k]]`` for the first
    entry k where ``bad`` (same length as ``owner``) holds."""
    if not len(owner):
        return x
    return eqx.branched_error_if(x, jnp.any(bad), jnp.asarray(owner)[jnp.argmax(bad)], messages)


def checked_state(model, state):
    """The State with its t, q and u carrying the input checks."""
    top = model.topology
    q_messages = [f"{top.body_label(b)}: q contains NaN or infinity (checks mode)" for b in range(top.num_bodies)]
    u_messages = [f"{top.body_label(b)}: u contains NaN or infinity (checks mode)" for b in range(top.num_bodies)]
    quaternion_messages = [f"{top.body_label(b)}: zero quaternion (checks mode); set an orientation with "
                           f"set_q_to_fit_rotation" for b in range(top.num_bodies)]
    t = eqx.error_if(state.t, ~jnp.isfinite(state.t), "t is NaN or infinite (checks mode)")
    q = _first_fault(state.q, ~jnp.isfinite(state.q), top.q_body, q_messages)
    u = _first_fault(state.u, ~jnp.isfinite(state.u), top.u_body, u_messages)
    bodies = top.quaternion_bodies
    if bodies:
        starts = np.array([top.q_start[b] + top.kinds[b].quaternion_at for b in bodies])
        norms = jnp.sum(q[starts[:, None] + np.arange(4)] ** 2, axis=-1)
        q = _first_fault(q, norms == 0, bodies, quaternion_messages)
    return state.replace(t=t, q=q, u=u, keep=Stage.Time)


def checked_solution(model, udot, multipliers):
    """(udot, multipliers) carrying one output check, which names a
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
    return eqx.branched_error_if((udot, multipliers), pred, index, messages)
