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
"""

from __future__ import annotations

import types

import equinox as eqx

_equinox_getattribute = eqx.Module.__getattribute__


class Module(eqx.Module):
    def __getattribute__(self, name: str, /):
        value = object.__getattribute__(self, name)
        if type(value) is types.MethodType:  # equinox makes bound methods pytrees
            return _equinox_getattribute(self, name)
        return value
