"""Force.Custom: forces from a user's pure JAX function."""

from __future__ import annotations

import dataclasses

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from simbodyx.forces.base import ForceElement


class Custom(ForceElement):
    """``calc(model, state) -> (mobility_forces (nu,), body_forces (nb, 6))`` for a
    State realized to Velocity; optional ``potential_energy(model, state)``.
    Both must be pure JAX functions (they are traced, jitted and differentiated)."""

    calc_fn: Callable = eqx.field(static=True)
    energy_fn: Callable | None = eqx.field(static=True)

    def __init__(self, forces, calc, potential_energy=None):
        if not callable(calc):
            raise TypeError("Force.Custom: calc must be a callable (model, state) -> (mobility, body)")
        self.calc_fn, self.energy_fn = calc, potential_energy
        forces._add(self)

    def calc(self, model, state):
        top = state.topology
        mobility, body = self.calc_fn(model, state)
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
        return jnp.asarray(self.energy_fn(model, state), state.q.dtype)


class Controller(ForceElement):
    """Mobility forces ``controller(t, state) -> (nu,)`` from a State realized to
    Velocity: what ``simulate(..., controller=...)`` adds to the Model's forces.
    A controller that is a pytree (an equinox Module, a ``jax.tree_util.Partial``)
    has its arrays traced, so new gains or schedules never recompile and
    ``jax.grad`` reaches them; any other callable is held fixed."""

    controller: Callable

    def __init__(self, controller):
        if not callable(controller):
            raise TypeError(f"controller must be callable: controller(t, state) -> mobility forces, got "
                            f"{type(controller).__name__}")
        if not isinstance(controller, (eqx.Module, jax.tree_util.Partial)):
            controller = jax.tree_util.Partial(controller)
        self.controller = controller

    def calc(self, model, state):
        top = state.topology
        mobility = jnp.asarray(self.controller(state.t, state), state.u.dtype)
        if mobility.shape != (top.nu,):
            raise ValueError(f"controller(t, state) returned shape {mobility.shape}; expected ({top.nu},)")
        return mobility, jnp.zeros((top.num_bodies, 6), state.u.dtype)


def with_controller(model, controller):
    """The Model with ``Force.Controller(controller)`` added to its forces."""
    return dataclasses.replace(model, force_elements=model.force_elements + (Controller(controller),))
