"""Gradient-based optimization over simbodyx functions with optax.

``minimize`` runs a whole optimization as one compiled program: the
optimizer's updates under ``lax.scan``, so a problem compiles once, each
iteration costs no Python dispatch, and ``jax.vmap`` over its extra
arguments solves a batch of problems (initial states, targets) at once.

    def loss(forces, state):
        controls = jnp.stack([forces, jnp.zeros_like(forces)], axis=1)
        final, _ = sx.integrate.rollout(model, state, 0.02, controls=controls, energy=False)
        return jnp.sum((final.q - target) ** 2)

    forces, losses = sx.optimize.minimize(loss, jnp.zeros(150), optax.adam(0.1), 400, state)

The rollout's controls are mobility forces held over each step
(``sx.integrate.rollout(..., controls=)``); its reverse mode keeps one
(q, u) per step (``checkpoint=True``, the default), or per segment of k
steps (``checkpoint=k``: memory growing with sqrt(horizon) for k near
sqrt(num_steps)). ``multiple_shooting``
splits a horizon into segments run side by side whose mismatches
(defects) become equality constraints, and ``augmented_lagrangian`` solves
such constrained problems (equalities h(x) = 0, inequalities g(x) <= 0,
e.g. torque limits) with the same inner optax loop.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from simbodyx._xla.faults import check_errors
from simbodyx._xla.trace_context import tracing
from simbodyx._xla.xla_setup import jit_with_options
from simbodyx.integrate import rollout
from simbodyx.model import FoldedModel
from simbodyx.progress import progress_of, report


@check_errors()
def minimize(loss, x0, optimizer, num_steps: int, *args, compiler_options=None, progress=False):
    """Minimize a loss with an optax optimizer, all iterations in one compiled program.

    The value, gradient and ``value_fn`` are passed to the optimizer's
    update, as ``optax.lbfgs``'s line search needs (other optimizers ignore
    them). L-BFGS converges in far fewer iterations; its line search
    evaluates the loss and its gradient again, from the one trace of
    ``loss`` every call shares (examples/cartpole_swingup.py runs both).

    ``loss`` and ``optimizer`` are part of the compiled program's identity:
    build them once and reuse them. A Model that ``loss`` closes over is
    compiled in as constants, which a small model's scalar path folds;
    pass one in ``args`` only to differentiate with respect to it or to
    vmap over it (its numbers then stay symbolic: the array program).

    Args:
        loss: ``loss(x, *args) -> scalar``.
        x0: The starting point, any pytree of arrays.
        optimizer: An ``optax.GradientTransformation``
            (``optax.adam(1e-2)``, ``optax.lbfgs()``).
        num_steps: How many updates.
        *args: Further arguments of ``loss``, traced.
        compiler_options: XLA's options for the compiled program, such as
            ``sx.xla_setup.loop_compiler_options()`` (jaxlib 0.6:
            optimization loops at batch 1 run several times faster).
        progress: Show a progress bar of the iterations with the latest
            loss (True, or an ``sx.Progress``), moved from inside the
            compiled loop by host callbacks; False adds nothing to the
            program.

    Returns:
        (x, losses): the last iterate and the (num_steps,) losses, ``losses[k]``
            at the k-th iterate, before its update.

    Raises:
        ValueError: ``num_steps`` is not a positive int.
    """
    _check_count("minimize", "num_steps", num_steps)
    solve = jit_with_options(_minimize, compiler_options, static_argnums=(0, 1, 2, 5))
    return solve(loss, optimizer, num_steps, x0, args, progress_of(progress, "minimize", "iteration"))


def _check_count(caller, name, value):
    if not (isinstance(value, int) and value >= 1):
        raise ValueError(f"{caller}: {name} must be a positive int, got {value!r}")


def _descend(value_fn, optimizer, num_steps, x0, progress=None, first=0, total=None):
    """The optax loop shared by both solvers: (x, losses) after ``num_steps``
    updates of ``optimizer`` on the ``jax.tree_util.Partial`` ``value_fn``,
    reported to ``progress`` as iterations ``first + 1 ...`` of ``total``.
    The loss is traced once, as an inner ``jit`` that every call reuses (the
    iteration's gradient and L-BFGS's line search call it three times), on
    ``x0`` without a weak type (``jnp.full(n, 0.1)``'s), which the updated
    iterates do not have."""
    value_fn = jax.tree_util.Partial(jax.jit(value_fn.func), *value_fn.args, **value_fn.keywords)
    x0 = jax.tree.map(lambda a: jnp.asarray(a, a.dtype), x0)

    def iterate(carry, done):
        x, opt_state = carry
        value, grad = jax.value_and_grad(value_fn)(x)
        updates, opt_state = optimizer.update(grad, opt_state, x, value=value, grad=grad, value_fn=value_fn)
        if progress is not None:
            report(progress, first + done, total or num_steps, value)
        return (jax.tree.map(lambda a, b: a + b, x, updates), opt_state), value

    counts = None if progress is None else jnp.arange(1, num_steps + 1)  # off: the loop as without progress
    (x, _), losses = jax.lax.scan(iterate, (x0, optimizer.init(x0)), counts, length=num_steps)
    return x, losses


def _minimize(loss, optimizer, num_steps, x0, args, progress):
    return _descend(jax.tree_util.Partial(lambda x, args: loss(x, *args), args=args), optimizer, num_steps, x0,
                    progress)


@check_errors()
def multiple_shooting(model, state, dt, controls, knots, method: str = "rk4", *, checkpoint: bool | int = True):
    """Direct multiple shooting: each segment's end and its defect to the next segment's start.

    Segment 0 starts at ``state``; segment k >= 1 starts at time ``state.t
    + k K dt`` from ``knots[k - 1]``, a decision variable of the
    optimization. The defects must vanish for the segments to join into one
    trajectory (pass them as equalities to :func:`augmented_lagrangian`).
    The segments run side by side (``jax.vmap``), so a long horizon's
    derivative has S-fold shorter sequential chains than single shooting.
    Initial knots can come from one rollout of the initial controls (its
    trajectory rows K, 2K, ...) or an interpolation to the goal. Called
    eagerly, it is one compiled program, which later calls with the same
    settings and shapes reuse (as ``rollout``).

    Args:
        model: The Model.
        state: The first segment's start.
        dt: The step (s).
        controls: (S, K, nu) mobility forces (N or N m) held over each of
            the K steps of each of the S segments.
        knots: (S - 1, nq + nu): the (q, u) each later segment starts from.
        method: "euler", "semi_explicit_euler" or "rk4".
        checkpoint: Each segment's, as in ``sx.integrate.rollout``.

    Returns:
        (ends, defects): ends (S, nq + nu), each segment's final (q, u);
            defects (S - 1, nq + nu), ``ends[k] - knots[k]``.

    Raises:
        ValueError: ``controls`` or ``knots`` of the wrong shape.
    """
    nq, nu = state.topology.nq, state.topology.nu
    controls = jnp.asarray(controls, state.q.dtype)
    if controls.ndim != 3 or controls.shape[2] != nu:
        raise ValueError(f"multiple_shooting: controls must have shape (segments, steps, nu = {nu}), "
                         f"got {controls.shape}")
    num_segments = controls.shape[0]
    knots = jnp.asarray(knots, state.q.dtype)
    if knots.shape != (num_segments - 1, nq + nu):
        raise ValueError(f"multiple_shooting: knots must have shape (segments - 1, nq + nu) = "
                         f"{(num_segments - 1, nq + nu)}, got {knots.shape}")
    dt = jnp.asarray(dt, state.q.dtype)
    if tracing() is False:  # eager: one cached program, not the segments' scans compiled afresh at every call
        return _compiled_multiple_shooting(FoldedModel.of(model), state, dt, controls, knots, method, checkpoint)
    return _multiple_shooting(model, state, dt, controls, knots, method, checkpoint)


def _multiple_shooting(model, state, dt, controls, knots, method, checkpoint):
    nq, num_segments, num_steps = state.topology.nq, *controls.shape[:2]
    starts = jnp.concatenate([jnp.concatenate([state.q, state.u])[None], knots])
    times = state.t + jnp.arange(num_segments) * (num_steps * dt)

    def segment(t, start, segment_controls):
        first = state.with_time(t).with_q(start[:nq]).with_u(start[nq:])
        final, _ = rollout(model, first, dt, controls=segment_controls, method=method, checkpoint=checkpoint,
                           energy=False)
        return jnp.concatenate([final.q, final.u])

    ends = jax.vmap(segment)(times, starts, controls)
    return ends, ends[:-1] - knots


@eqx.filter_jit
def _compiled_multiple_shooting(model, state, dt, controls, knots, method, checkpoint):
    return _multiple_shooting(FoldedModel.unfold(model), state, dt, controls, knots, method, checkpoint)


class ConstrainedSolution(NamedTuple):
    """What :func:`augmented_lagrangian` returns besides x."""

    #: (rounds, num_steps) the augmented Lagrangian at each inner iterate
    losses: jnp.ndarray
    #: (rounds,) the largest violation, max(|h|, g+), after each round
    violation: jnp.ndarray
    #: multipliers of the equalities and inequalities (same shapes as h, g;
    #: None where there are none): at a solution grad f + J_h^T lam + J_g^T mu = 0
    equality_multipliers: jnp.ndarray | None
    inequality_multipliers: jnp.ndarray | None
    #: the final penalty weight
    penalty: jnp.ndarray


@check_errors()
def augmented_lagrangian(problem, x0, optimizer, num_steps: int, num_rounds: int, *args, penalty=10.0,
                         penalty_growth=10.0, max_penalty=1e8, compiler_options=None, progress=False):
    """Minimize f(x) subject to h(x) = 0 and g(x) <= 0 by the Powell-Hestenes-Rockafellar augmented Lagrangian.

    Each of ``num_rounds`` rounds runs ``num_steps`` updates of the optax
    ``optimizer`` (freshly initialized) on

        f + lam.h + rho/2 |h|^2 + 1/(2 rho) sum(max(0, mu + rho g)^2 - mu^2),

    then sets lam += rho h and mu = max(0, mu + rho g), and multiplies the
    penalty rho by ``penalty_growth`` (up to ``max_penalty``) when the
    violation did not fall below a quarter of the previous round's. The
    whole solve is one compiled program; ``problem`` and ``optimizer`` are
    part of its identity, and ``jax.vmap`` over ``args`` solves a batch of
    problems.

    Args:
        problem: ``problem(x, *args) -> (f, h, g)``: the scalar cost, the
            equalities h and the inequalities g (arrays, or None for none;
            one function, so a rollout that serves the cost and the
            constraints runs once).
        x0: The starting point, any pytree of arrays.
        optimizer: An ``optax.GradientTransformation``, initialized afresh
            each round.
        num_steps: Updates per round.
        num_rounds: Rounds of multiplier and penalty updates.
        *args: Further arguments of ``problem``, traced.
        penalty: The first penalty rho.
        penalty_growth: rho's factor when a round's violation did not fall
            below a quarter of the previous round's.
        max_penalty: rho's cap.
        compiler_options: XLA's options for the compiled program, as for
            :func:`minimize`.
        progress: A progress bar of all rounds' iterations with the latest
            loss, as for :func:`minimize`.

    Returns:
        (x, solution): the last iterate and its ``ConstrainedSolution``
            (each round's losses and violation, the multipliers and the
            final penalty).

    Raises:
        ValueError: ``num_steps`` or ``num_rounds`` is not a positive int,
            or ``problem`` returns neither equalities nor inequalities.
    """
    _check_count("augmented_lagrangian", "num_steps", num_steps)
    _check_count("augmented_lagrangian", "num_rounds", num_rounds)
    _, h, g = jax.eval_shape(problem, x0, *args)
    if h is None and g is None:
        raise ValueError("augmented_lagrangian: problem(x) returned neither equalities nor inequalities "
                         "(use minimize for an unconstrained problem)")
    solve = jit_with_options(_augmented_lagrangian, compiler_options, static_argnums=(0, 1, 2, 3, 9))
    return solve(problem, optimizer, num_steps, num_rounds, x0, args, penalty, penalty_growth, max_penalty,
                 progress_of(progress, "augmented_lagrangian", "iteration"))


def _violation(h, g):
    parts = ([] if h is None else [jnp.max(jnp.abs(h), initial=0.0)]) + \
            ([] if g is None else [jnp.max(g, initial=0.0)])
    return jnp.max(jnp.stack(parts))


def _augmented_lagrangian(problem, optimizer, num_steps, num_rounds, x0, args, penalty, growth, max_penalty,
                          progress):
    def augmented(x, lam, mu, rho, args):
        value, h, g = problem(x, *args)
        if h is not None:
            value = value + lam @ h + 0.5 * rho * (h @ h)
        if g is not None:
            value = value + jnp.sum(jnp.maximum(0.0, mu + rho * g) ** 2 - mu**2) / (2 * rho)
        return value

    def round_(carry, index):
        x, lam, mu, rho, previous = carry
        value_fn = jax.tree_util.Partial(augmented, lam=lam, mu=mu, rho=rho, args=args)
        x, losses = _descend(value_fn, optimizer, num_steps, x, progress,
                             None if index is None else index * num_steps, num_rounds * num_steps)
        _, h, g = problem(x, *args)
        lam = None if h is None else lam + rho * h
        mu = None if g is None else jnp.maximum(0.0, mu + rho * g)
        violation = _violation(h, g)
        rho = jnp.where(violation > 0.25 * previous, jnp.minimum(rho * growth, max_penalty), rho)
        return (x, lam, mu, rho, violation), (losses, violation)

    _, h, g = jax.eval_shape(problem, x0, *args)
    lam = None if h is None else jnp.zeros(h.shape, h.dtype)
    mu = None if g is None else jnp.zeros(g.shape, g.dtype)
    rho = jnp.asarray(penalty, jnp.result_type(*jax.tree.leaves(x0), float))  # x's precision
    carry = (x0, lam, mu, rho, jnp.asarray(jnp.inf, rho.dtype))
    rounds = None if progress is None else jnp.arange(num_rounds)
    (x, lam, mu, rho, _), (losses, violation) = jax.lax.scan(round_, carry, rounds, length=num_rounds)
    return x, ConstrainedSolution(losses, violation, lam, mu, rho)
