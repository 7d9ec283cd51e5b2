"""The base class of simbodyx's pytrees: ``eqx.Module`` with a faster
attribute lookup.

Every jitted call flattens its Model and State arguments in Python, and
equinox's flatten reads each node's ``__dict__`` through
``eqx.Module.__getattribute__``, which checks every attribute for a bound
method to wrap (so that ``eqx.filter_jit(model.realize)`` sees the model's
arrays). Here plain attributes skip that check and methods still go through
equinox, so the behaviour is equinox's, and a Model passes into a jitted
call about a quarter faster (benchmarks/README.md, "Why the code is as it
is").

A simbodyx pytree also hashes by its structure and numbers, consistently
with equinox's equality: equinox hashes a Module's fields, and arrays do
not hash. So ``jax.jit(model.realize)`` and ``jax.jit(rod.get_position_errors_as_vector)``
work as closures over the Model or handle would (its numbers the
program's constants), and a Model may be a static argument.
"""

from __future__ import annotations

import types

import equinox as eqx
import jax
import numpy as np

_equinox_getattribute = eqx.Module.__getattribute__


class Module(eqx.Module):
    def __getattribute__(self, name: str, /):
        value = object.__getattribute__(self, name)
        if type(value) is types.MethodType:  # equinox makes bound methods pytrees
            return _equinox_getattribute(self, name)
        return value

    def __hash__(self) -> int:
        leaves, treedef = jax.tree.flatten(self)
        return hash((treedef, tuple(map(_leaf_key, leaves))))


def _leaf_key(x):
    """A leaf's hashable content: an array's dtype, shape and bytes; a traced
    one has none (TypeError, as equinox's hash gives for any array)."""
    if isinstance(x, jax.core.Tracer):
        raise TypeError("a pytree holding traced values does not hash (its numbers are not known)")
    if isinstance(x, (jax.Array, np.ndarray)):
        a = np.asarray(x)
        return a.dtype.str, a.shape, a.tobytes()
    return x
