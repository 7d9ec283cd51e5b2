"""Concatenations that XLA's CPU compiler fuses with their pieces.

XLA's CPU compiler fuses no producer into a concatenation of more than
:data:`MAX_FUSED_PIECES` pieces: each computed piece of a longer one
becomes a kernel of its own, which a call pays for in XLA's runtime
(docs/explanation/performance.md). :func:`concatenate`
builds a longer one from groups of that many instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

#: The most pieces of a concatenation XLA's CPU compiler fuses with their producers.
MAX_FUSED_PIECES = 8


def concatenate(pieces, axis=0):
    """``jnp.concatenate(pieces, axis)``: up to :data:`MAX_FUSED_PIECES`
    pieces one concatenation, more as groups of that many, each zero-padded
    to the whole and the groups added (XLA would merge nested concatenations
    back into one). Adding zeros changes no number (a -0.0 beside a group
    becomes +0.0); boolean groups are or-ed."""
    pieces = list(pieces)
    if len(pieces) <= MAX_FUSED_PIECES:
        return pieces[0] if len(pieces) == 1 else _joined(pieces, axis)
    groups = [_joined(pieces[i:i + MAX_FUSED_PIECES], axis) for i in range(0, len(pieces), MAX_FUSED_PIECES)]
    total, at, out = sum(g.shape[axis] for g in groups), 0, None
    for g in groups:
        widths = [(0, 0)] * g.ndim
        widths[axis] = (at, total - at - g.shape[axis])
        padded = jnp.pad(g, widths)
        out = padded if out is None else (out | padded if g.dtype == bool else out + padded)
        at += g.shape[axis]
    return out


def _joined(pieces, axis):
    """One concatenation: with ``lax`` directly where the pieces are traced
    arrays of one dtype and rank (the common case: ``jax.numpy``'s
    promotion and checks cost more to trace than the concatenation)."""
    if all(isinstance(p, jax.core.Tracer) for p in pieces):
        types = {(t.dtype, t.weak_type, t.ndim) for t in map(jax.typeof, pieces)}
        if len(types) == 1:
            return lax.concatenate(pieces, axis % pieces[0].ndim)
    return jnp.concatenate(pieces, axis)
