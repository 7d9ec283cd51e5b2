"""Force.Custom: forces from a user's pure JAX function."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.forces.base import ForceElement


class Custom(ForceElement):
    """``calc(model, state) -> (mobility_forces (nu,), body_forces (nb, 6))`` for a
    State realized to Velocity; optional ``potential_energy(model, state)``.
    With ``params`` (a pytree of numbers) both take it as a third argument,
    ``calc(model, state, params)``, and its numbers are Model leaves.

    Both functions must be pure JAX. Each is traced once per process for
    each structure and shapes of its arguments, at its first use, and every
    path evaluates that one trace: ``model.realize`` and ``model.forces``,
    eager or under ``jit``, a new ``jax.jit`` of your own, ``rollout``,
    ``simulate`` and the time steppers. So a number the function reads from
    elsewhere (a Python global) is frozen at that first trace, everywhere;
    a number that changes belongs in ``params``, changed with
    ``eqx.tree_at`` (no recompile; ``jax.grad`` reaches it)."""

    calc_fn: Callable = eqx.field(static=True)
    energy_fn: Callable | None = eqx.field(static=True)
    params: object = None

    def __init__(self, forces, calc, potential_energy=None, params=None):
        if not callable(calc):
            raise TypeError("Force.Custom: calc must be a callable (model, state) -> (mobility, body)")
        if potential_energy is not None and not callable(potential_energy):
            raise TypeError("Force.Custom: potential_energy must be a callable (model, state) -> energy")
        self.calc_fn, self.energy_fn = calc, potential_energy
        self.params = None if params is None else jax.tree.map(_number, params)
        forces._add(self)

    def _call(self, fn, model, state):
        return traced_once(fn, (model, state) if self.params is None else (model, state, self.params))

    def calc(self, model, state):
        top = state.topology
        mobility, body = self._call(self.calc_fn, model, state)
        mobility = jnp.asarray(mobility, state.u.dtype)
        body = jnp.asarray(body, state.u.dtype)
        if mobility.shape not in ((top.nu,), (0,)) or body.shape not in ((top.num_bodies, 6), (0,)):
            raise ValueError(
                f"Force.Custom: calc returned shapes {mobility.shape} and {body.shape}; expected "
                f"({top.nu},) and ({top.num_bodies}, 6) (or zero-length for none)"
            )
        if mobility.shape == (0,):
            mobility = jnp.zeros(top.nu, state.u.dtype)
        if body.shape == (0,):
            body = jnp.zeros((top.num_bodies, 6), state.u.dtype)
        return mobility, body

    def potential_energy(self, model, state):
        if self.energy_fn is None:
            return super().potential_energy(model, state)
        return jnp.asarray(self._call(self.energy_fn, model, state), state.q.dtype)


#: function -> {(argument structure, argument shapes and dtypes): its one trace (ClosedJaxpr, out tree)}, held
#: while the function lives (the Force.Custom that holds it, and the Models that hold that): weakly keyed, so a
#: dropped Model's traces go with it. A function that takes no weak reference keeps its traces in _KEPT.
_TRACES = weakref.WeakKeyDictionary()
_KEPT: dict = {}


def traced_once(fn, args):
    """``fn(*args)`` evaluated from its one trace for these arguments'
    structure, shapes and dtypes (traced at the first call with them), so
    every program that calls it computes the same function, whatever
    ``fn`` reads from outside its arguments."""
    leaves, tree = jax.tree.flatten(args)
    key = (tree, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves))
    try:
        traces = _TRACES.setdefault(fn, {})
    except TypeError:  # not weakly referable (a builtin)
        traces = _KEPT.setdefault(fn, {})
    if key not in traces:
        closed, shape = jax.make_jaxpr(lambda *xs: fn(*jax.tree.unflatten(tree, xs)), return_shape=True)(
            *(jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in leaves))
        traces[key] = closed, jax.tree.structure(shape)
    closed, out_tree = traces[key]
    return jax.tree.unflatten(out_tree, jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves))


def _number(x):
    """A ``params`` leaf as a float array (a Model leaf the Model's dtype reaches)."""
    array = np.asarray(x) if not isinstance(x, jax.Array) else x
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"Force.Custom: params must hold real numbers, got {x!r}")
    array = jnp.asarray(array)
    return array.astype(jnp.result_type(float)) if jnp.issubdtype(array.dtype, jnp.integer) else array


class Controller(ForceElement):
    """Mobility forces ``controller(t, state) -> (nu,)`` from a State realized to
    Velocity: what ``simulate(..., controller=...)`` adds to the Model's forces.
    A controller that is a pytree (an equinox Module such as a policy holding
    an ``eqx.nn.MLP``, a ``jax.tree_util.Partial``) has its arrays traced, so
    new gains, weights or schedules never recompile and ``jax.grad`` reaches
    them; its other leaves (an MLP's activation function, Python numbers)
    and any other callable are held fixed, part of the Model's structure."""

    arrays: object  #: the controller with its arrays only (None elsewhere)
    #: (treedef, leaves) of the rest, None where the arrays are: flattened, so that one function
    #: wrapped twice compares equal (a ``jax.tree_util.Partial`` compares by identity)
    fixed: tuple = eqx.field(static=True)

    def __init__(self, controller):
        if not callable(controller):
            raise TypeError(f"controller must be callable: controller(t, state) -> mobility forces, got "
                            f"{type(controller).__name__}")
        if not isinstance(controller, (eqx.Module, jax.tree_util.Partial)):
            controller = jax.tree_util.Partial(controller)
        self.arrays, rest = eqx.partition(controller, eqx.is_array)
        leaves, treedef = jax.tree.flatten(rest, is_leaf=lambda x: x is None)
        self.fixed = (treedef, tuple(leaves))

    @property
    def controller(self) -> Callable:
        """The controller, its arrays and fixed leaves together."""
        treedef, leaves = self.fixed
        return eqx.combine(self.arrays, jax.tree.unflatten(treedef, leaves))

    def calc(self, model, state):
        top = state.topology
        mobility = jnp.asarray(self.controller(state.t, state), state.u.dtype)
        if mobility.shape != (top.nu,):
            raise ValueError(f"controller(t, state) returned shape {mobility.shape}; expected ({top.nu},)")
        return mobility, jnp.zeros((top.num_bodies, 6), state.u.dtype)


def with_controller(model, controller):
    """The Model with ``Force.Controller(controller)`` added to its forces."""
    return dataclasses.replace(model, force_elements=model.force_elements + (Controller(controller),))
