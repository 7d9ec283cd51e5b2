"""The base class of simbodyx's pytrees: ``eqx.Module`` with a faster
attribute lookup.

Every jitted call flattens its Model and State arguments in Python, and
equinox's flatten reads each node's ``__dict__`` through
``eqx.Module.__getattribute__``, which checks every attribute for a bound
method to wrap (so that ``eqx.filter_jit(model.realize)`` sees the model's
arrays). Here plain attributes skip that check, and a Model passes into a
jitted call about a quarter faster (docs/explanation/performance.md).
Methods are bound as equinox binds them, as its pytree ``BoundMethod``,
built without the checks of equinox's constructor, which flatten every
argument, the whole Model included, at every method looked up.

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


class _Probe(eqx.Module):
    def method(self):
        pass


#: equinox's class of bound methods, and the attributes of the function it
#: copies onto each (its name, docstring, ...), as equinox makes them.
_PROBED = _Probe().method
_BOUND_METHOD = type(_PROBED)
_COPIED = tuple(name for name in vars(_PROBED) if name not in ("__func__", "__self__"))
_ABSENT = object()


def _bound_method(function, instance):
    """equinox's bound method of ``function`` to ``instance``, built directly."""
    bound = object.__new__(_BOUND_METHOD)
    object.__setattr__(bound, "__func__", function)
    object.__setattr__(bound, "__self__", instance)
    for name in _COPIED:
        value = getattr(function, name, _ABSENT)
        if value is not _ABSENT:
            object.__setattr__(bound, name, value)
    return bound


class Module(eqx.Module):
    def __getattribute__(self, name: str, /):
        value = object.__getattribute__(self, name)
        if type(value) is types.MethodType and value.__self__ is self and not (
                name.startswith("__") and name.endswith("__")):  # equinox makes bound methods pytrees
            return _bound_method(value.__func__, self)
        return value

    def __hash__(self) -> int:
        return hash(content_key(self))


def content_key(tree):
    """A pytree's structure and numbers (each leaf's dtype, shape and bytes),
    hashable; TypeError for a traced leaf, whose numbers are not known (as
    equinox's hash gives for any array)."""
    leaves, treedef = jax.tree.flatten(tree)
    try:
        return treedef, tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, leaves))
    except jax.errors.TracerArrayConversionError:
        raise TypeError("a pytree holding traced values does not hash (its numbers are not known)") from None
