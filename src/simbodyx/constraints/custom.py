"""Constraint.Custom: a constraint from a user's pure JAX functions
(Simbody's ``Constraint::Custom::Implementation``).

    impl = sx.Constraint.Custom.Implementation(
        bodies=[body1, body2], num_position=1, params={"L": 1.0},
        position_errors=lambda X_AB, q, params: jnp.array(
            [0.5 * (jnp.sum((X_AB[1].p - X_AB[0].p) ** 2) - params["L"] ** 2)]))
    rod = sx.Constraint.Custom(matter, impl)

Each function takes the current-level values positionally and, by name,
whichever lower-level values it lists among ``t``, ``X_AB``, ``q``,
``V_AB``, ``qdot``, ``u`` and ``params`` (see ``constraints.base`` for which
level offers which):

    position_errors(X_AB, q)              velocity_errors(V_AB, u)
    position_dot_errors(V_AB, qdot)       velocity_dot_errors(A_AB, udot)
    position_dotdot_errors(A_AB, qdotdot) acceleration_errors(A_AB, udot)
    constraint_forces(multipliers) -> (F_A (ncb, 6), f_q tuple, f_u tuple)

Only the error function of each equation class in use is required; the
others are derived by automatic differentiation unless given. ``params`` is
any pytree of numbers: they become Model leaves, so ``jax.grad`` reaches
them. An Implementation may also be subclassed, with these as methods.
"""

from __future__ import annotations

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.constraints.base import Constraint

class Implementation:
    """What a custom constraint constrains and computes: constrained bodies
    and mobilizers (MobilizedBody handles), equation counts, ``params`` and
    the functions (keyword arguments, or methods of a subclass)."""

    #: the functions an Implementation may define
    FUNCTIONS = ("position_errors", "position_dot_errors", "position_dotdot_errors", "velocity_errors",
                 "velocity_dot_errors", "acceleration_errors", "constraint_forces")

    def __init__(self, bodies=(), mobilizers=(), num_position: int = 0, num_velocity: int = 0,
                 num_acceleration: int = 0, params=None, **functions):
        unknown = set(functions) - set(self.FUNCTIONS)
        if unknown:
            raise TypeError(f"Constraint.Custom.Implementation: unknown functions {sorted(unknown)}; "
                            f"expected some of {list(self.FUNCTIONS)}")
        self.bodies, self.mobilizers = tuple(bodies), tuple(mobilizers)
        self.counts = (int(num_position), int(num_velocity), int(num_acceleration))
        self.params = {} if params is None else params
        for name, f in functions.items():
            if f is not None and not callable(f):
                raise TypeError(f"Constraint.Custom.Implementation: {name} must be callable")
            setattr(self, name, f)

    def function(self, name: str):
        return getattr(self, name, None)


def _call(f, positional, available: dict):
    """f(*positional, **the available values its signature names)."""
    params = inspect.signature(f).parameters
    taken = set(list(params)[:len(positional)])  # names that receive the positional values
    available = {k: v for k, v in available.items() if k not in taken}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return f(*positional, **available)
    return f(*positional, **{k: v for k, v in available.items() if k in params})


class Custom(Constraint):
    """A constraint defined by an :class:`Implementation`."""

    Implementation = Implementation
    ALIKE = False

    impl: Implementation = eqx.field(static=True)
    params: object

    def __init__(self, matter, impl: Implementation, *, name=None):
        if not isinstance(impl, Implementation):
            raise TypeError(f"Constraint.Custom needs a Constraint.Custom.Implementation, got {type(impl).__name__}")
        mp, mv, ma = impl.counts
        for needed, method in ((mp, "position_errors"), (mv, "velocity_errors"), (ma, "acceleration_errors")):
            if needed and impl.function(method) is None:
                raise ValueError(f"Constraint.Custom: {method} is required with {needed} such equations")
        self.impl = impl
        self.params = jax.tree.map(lambda x: np.asarray(x, np.float64), impl.params)
        self._register("Custom", bodies=impl.bodies, mobilizers=impl.mobilizers, counts=impl.counts, name=name,
                       matter=matter)

    def _lower(self, k):
        return {"t": k.t, "X_AB": k.X_AB, "q": k.q, "V_AB": k.V_AB, "qdot": k.qdot, "u": k.u, "params": self.params}

    def _evaluate(self, name: str, positional, available: dict, n: int):
        """The Implementation's ``name`` on these values, checked to give n values."""
        value = jnp.reshape(jnp.asarray(_call(self.impl.function(name), positional, available)), (-1,))
        if value.shape != (n,):
            raise ValueError(f"{self.label}: {name} returned {value.shape[0]} values, expected {n}")
        return value

    def _given(self, name: str) -> bool:
        return self.impl.function(name) is not None

    def position_errors(self, t, X_AB, q):
        return self._evaluate("position_errors", (X_AB, q), {"t": t, "params": self.params}, self.mp)

    def position_dot_errors(self, k, V_AB, qdot):
        if not self._given("position_dot_errors"):
            return super().position_dot_errors(k, V_AB, qdot)
        return self._evaluate("position_dot_errors", (V_AB, qdot), self._lower(k), self.mp)

    def position_dotdot_errors(self, k, A_AB, qdotdot):
        if not self._given("position_dotdot_errors"):
            return super().position_dotdot_errors(k, A_AB, qdotdot)
        return self._evaluate("position_dotdot_errors", (A_AB, qdotdot), self._lower(k), self.mp)

    def velocity_errors(self, k, V_AB, u):
        return self._evaluate("velocity_errors", (V_AB, u), self._lower(k), self.mv)

    def velocity_dot_errors(self, k, A_AB, udot):
        if not self._given("velocity_dot_errors"):
            return super().velocity_dot_errors(k, A_AB, udot)
        return self._evaluate("velocity_dot_errors", (A_AB, udot), self._lower(k), self.mv)

    def acceleration_errors(self, k, A_AB, udot):
        return self._evaluate("acceleration_errors", (A_AB, udot), self._lower(k), self.ma)

    @property
    def constraint_forces(self):
        f = self.impl.function("constraint_forces")
        if f is None:
            return None
        return lambda k, multipliers: _call(f, (multipliers,), self._lower(k))
