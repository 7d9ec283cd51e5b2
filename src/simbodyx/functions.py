"""Scalar functions of one or more arguments for FunctionBased mobilizers.

A function maps an (num_args,) array to a scalar and is pure JAX, so every
derivative FunctionBased needs comes from automatic differentiation. The
family mirrors Simbody's ``Function``: Constant, Linear, Polynomial,
Sinusoid, Step and a natural cubic Spline. Each is a frozen dataclass
holding Python numbers, so it is hashable and can be part of the static
model (as in FunctionBased mobilizers). Each is also a pytree whose leaves
are its numbers, so a Function held in a Model's array fields (a
CoordinateCoupler's, a PrescribedMotion's) has coefficients that
``jax.grad`` reaches. Any other pure JAX callable ``f(x) -> scalar`` may be
used in its place (wrapped by :func:`as_function`; it has no leaves).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Function:
    """Base: ``f(x)`` with x of shape (num_args,); None means any length."""

    @property
    def num_args(self) -> int | None:
        return 1

    def __call__(self, x):
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Constant(Function):
    """f(x) = value for any x of ``arity`` arguments."""

    value: float = 0.0
    arity: int = 1

    @property
    def num_args(self):
        return self.arity

    def __call__(self, x):
        return jnp.asarray(self.value, jnp.result_type(x)) + 0 * jnp.sum(x)


@dataclasses.dataclass(frozen=True)
class Linear(Function):
    """f(x) = c0 x0 + ... + c(n-1) x(n-1) + c(n): n = len(coefficients) - 1 arguments."""

    coefficients: tuple[float, ...]

    def __post_init__(self):
        if len(self.coefficients) < 2:
            raise ValueError("Linear needs at least two coefficients (slopes, then the constant)")
        object.__setattr__(self, "coefficients", _floats(self.coefficients, "Linear coefficients"))

    @property
    def num_args(self):
        return len(self.coefficients) - 1

    def __call__(self, x):
        *slopes, offset = self.coefficients
        return sum(c * x[i] for i, c in enumerate(slopes)) + offset


@dataclasses.dataclass(frozen=True)
class Polynomial(Function):
    """f(x) = c0 x^n + c1 x^(n-1) + ... + cn of one argument (highest power first, as Simbody)."""

    coefficients: tuple[float, ...]

    def __post_init__(self):
        if not self.coefficients:
            raise ValueError("Polynomial needs at least one coefficient")
        object.__setattr__(self, "coefficients", _floats(self.coefficients, "Polynomial coefficients"))

    def __call__(self, x):
        value = jnp.zeros_like(x[0])
        for c in self.coefficients:  # Horner
            value = value * x[0] + c
        return value


@dataclasses.dataclass(frozen=True)
class Sinusoid(Function):
    """f(x) = amplitude sin(frequency x + phase) of one argument (frequency in rad per unit x)."""

    amplitude: float
    frequency: float
    phase: float = 0.0

    def __call__(self, x):
        return self.amplitude * jnp.sin(self.frequency * x[0] + self.phase)


@dataclasses.dataclass(frozen=True)
class Step(Function):
    """Smooth step of one argument from y0 (x <= x0) to y1 (x >= x1) along
    Simbody's quintic 10 s^3 - 15 s^4 + 6 s^5 (continuous second derivative)."""

    y0: float
    y1: float
    x0: float
    x1: float

    def __post_init__(self):
        if not self.x1 > self.x0:
            raise ValueError(f"Step needs x1 > x0, got x0={self.x0}, x1={self.x1}")

    def __call__(self, x):
        s = jnp.clip((x[0] - self.x0) / (self.x1 - self.x0), 0.0, 1.0)
        return self.y0 + (self.y1 - self.y0) * s**3 * (10 + s * (6 * s - 15))


@dataclasses.dataclass(frozen=True)
class Spline(Function):
    """Natural cubic spline of one argument through the points (x, y), x strictly
    increasing (at least 2 points). Beyond the ends it continues along the end
    tangents, which keeps the second derivative continuous (it is zero there)."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    second_derivatives: tuple[float, ...] = dataclasses.field(init=False, repr=False)

    def __post_init__(self):
        x, y = _floats(self.x, "Spline x"), _floats(self.y, "Spline y")
        if len(x) < 2 or len(x) != len(y):
            raise ValueError(f"Spline needs at least 2 points and as many x as y, got {len(x)} x and {len(y)} y")
        if np.any(np.diff(x) <= 0):
            raise ValueError("Spline x must be strictly increasing")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        m = _natural_spline_second_derivatives(np.asarray(x), np.asarray(y))
        object.__setattr__(self, "second_derivatives", tuple(float(v) for v in m))

    def __call__(self, arg):
        t = arg[0]
        xs, ys = (jnp.asarray(v, jnp.result_type(t)) for v in (self.x, self.y))
        if isinstance(self.y, tuple):  # built here: the knots' second derivatives are known
            m = jnp.asarray(self.second_derivatives, xs.dtype)
        else:  # x, y are a Model's leaves: the second derivatives follow them
            m = _natural_spline_second_derivatives(xs, ys)
        k = jnp.clip(jnp.searchsorted(xs, t, method="compare_all") - 1, 0, len(self.x) - 2)
        x0, x1, y0, y1, m0, m1 = xs[k], xs[k + 1], ys[k], ys[k + 1], m[k], m[k + 1]
        h = x1 - x0
        a, b = (x1 - t) / h, (t - x0) / h
        inside = a * y0 + b * y1 + ((a**3 - a) * m0 + (b**3 - b) * m1) * h * h / 6
        left_slope = (ys[1] - ys[0]) / (xs[1] - xs[0]) - (xs[1] - xs[0]) * m[1] / 6
        right_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) + (xs[-1] - xs[-2]) * m[-2] / 6
        below = ys[0] + left_slope * (t - xs[0])
        above = ys[-1] + right_slope * (t - xs[-1])
        return jnp.where(t < xs[0], below, jnp.where(t > xs[-1], above, inside))


@dataclasses.dataclass(frozen=True)
class FromCallable(Function):
    """Any pure JAX callable f(x) -> scalar, compared and hashed by identity."""

    fn: Callable
    arity: int | None = None

    @property
    def num_args(self):
        return self.arity

    def __call__(self, x):
        return self.fn(x)


def as_function(f, num_args: int | None = None) -> Function:
    """``f`` itself if it is a :class:`Function`, else a wrapper around a callable."""
    if isinstance(f, Function):
        return f
    if not callable(f):
        raise TypeError(f"expected a simbodyx Function or a callable, got {type(f).__name__}")
    return FromCallable(f, num_args)


def _floats(values, what: str) -> tuple[float, ...]:
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what} contain NaN or infinity")
    return tuple(float(v) for v in a)


def _natural_spline_second_derivatives(x, y):
    """Second derivatives at the knots of the natural cubic spline (zero at
    both ends), for NumPy or JAX arrays x, y (n,)."""
    xp = np if isinstance(x, np.ndarray) and isinstance(y, np.ndarray) else jnp
    n = x.shape[0]
    if n <= 2:
        return xp.zeros(n)
    h = xp.diff(x)
    rhs = 6 * (xp.diff(y[1:]) / h[1:] - xp.diff(y[:-1]) / h[:-1])
    A = xp.diag(2 * (h[:-1] + h[1:])) + xp.diag(h[1:-1], 1) + xp.diag(h[1:-1], -1)
    inner = xp.linalg.solve(A, rhs)
    return xp.concatenate([xp.zeros(1), inner, xp.zeros(1)])


def _register_pytree(cls, leaves: tuple[str, ...]):
    """``cls`` as a pytree: ``leaves`` (its numbers, each one array) are
    children and the rest is static; rebuilt without re-validation, so
    traced or placeholder leaves pass through."""
    fields = [f.name for f in dataclasses.fields(cls)]
    static = tuple(f for f in fields if f not in leaves)

    def flatten(f):
        children = tuple(np.asarray(v) if isinstance(v, tuple) else v for v in (getattr(f, k) for k in leaves))
        return children, tuple(getattr(f, k) for k in static)

    def unflatten(aux, children):
        f = object.__new__(cls)
        for k, v in zip(leaves + static, tuple(children) + aux):
            object.__setattr__(f, k, v)
        return f

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)


for _cls, _leaves in ((Constant, ("value",)), (Linear, ("coefficients",)), (Polynomial, ("coefficients",)),
                      (Sinusoid, ("amplitude", "frequency", "phase")), (Step, ("y0", "y1", "x0", "x1")),
                      (Spline, ("x", "y")), (FromCallable, ())):
    _register_pytree(_cls, _leaves)
