"""The scalar path for small models: a function's program re-emitted one
array entry at a time, with the constants folded.

``scalarize(fn)`` traces ``fn`` to a jaxpr, evaluates that jaxpr with every
array held as a NumPy object array of its entries (each a Python number
when it is known at trace time, else a JAX scalar), and emits only the
scalar operations whose result is not known: ``x * 0``, ``x * 1``, ``x + 0``
and every operation on known numbers fold away, and reshapes, slices,
transposes, concatenations, broadcasts and gathers with known indices are
bookkeeping on the entries that emit nothing. What remains is the model's
equations of motion written out as a hand derivation would write them,
which XLA fuses (figures in benchmarks/README.md, "Batch 1").

The Model's numbers are folded when the function closes over a Model whose
leaves are concrete (the usual case: a rollout or loss that closes over its
model); a Model passed in as a traced argument gives symbolic entries, so
gradients with respect to its parameters still work, with less folding.
Under ``jax.vmap`` each scalar becomes a vector over the batch (the
structure-of-arrays form).

Semantics: the same arithmetic in the same order except where an operand is
known (folding ``0 * x`` to 0 drops the NaN or infinity an infinite ``x``
would give). Reductions add their terms left to right. A custom JVP rule
is replaced by its function's own computation, differentiated as written:
simbodyx's rules in the dynamics (the articulated-body method's analytic
derivative, the tree's gather rule) are implementation choices with the
same derivative, cheaper for the array program only; a rule of the user's
(in a custom force, say) that exists to avoid a NaN would lose that (the
constrained dynamics' implicit rule is one: the scalar program
differentiates its arithmetic, the articulation and the factorizations
included). A custom VJP or linear solve, a loop with a traced trip
count, a LAPACK factorization or a gather with traced indices raises
:class:`NotScalarizable`, and callers fall back to the array program.

The scalar program grows with the model (in arithmetic results, the
count :data:`MAX_OPERATIONS` bounds: unused ones included, and a sum that
passes on its one term not folded to zero counted as one),
and XLA's CPU backend runs a large one worse than the array program
(benchmarks/README.md, "Batch 1", has the measurements behind the two
limits). Where it is used: a Model's entry points (``model.realize``, the
``model.matter`` operators, ``model.forces`` and
``sx.integrate.derivatives``, each wrapped by :func:`entry_point`) called
inside a transformation (``jit``, ``vmap``, ``grad``, a loop body) take
it or not all together, as :data:`CHOICE` decides once per Model structure
(up to :data:`MAX_MOBILITIES` mobilities, a vector field of at most
:data:`MAX_OPERATIONS` operations; logged on the ``simbodyx`` logger), and
``Model.with_scalar_path`` forces either path. An output of one entry
point passed to the next keeps its known entries and hands over its traced
ones as the scalars they are (``model.realize`` then
``model.matter.calc_acceleration_ignoring_constraints`` fold as one
function would), so a loop of one's own runs the program
``sx.integrate.rollout`` runs.

Each scalar program is traced once per combination of its arguments'
known numbers and static values and runs as a nested ``jax.jit``
(:class:`_Program`): an RK4 step's four stages, and each stage's three
entry points in a loop of one's own, call programs traced, differentiated
and lowered once, which XLA inlines into one function.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import logging
import math
import warnings
import weakref
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jex_core
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from simbodyx._xla import concatenation
from simbodyx._xla.trace_context import per_context_jit, tracing

#: ``Model.scalar_path = None`` (automatic) considers the scalar path up to this many mobilities (beyond
#: them no model of the benchmarks has a vector field within MAX_OPERATIONS, and sizing it would cost a
#: trace for nothing) ...
MAX_MOBILITIES = 4
#: ... and takes it when its vector field's program has at most this many arithmetic results (counted as
#: the module notes say).
MAX_OPERATIONS = 1900
#: A scalar program of a Model on the automatic scalar path that passes this many times MAX_OPERATIONS (its
#: numbers traced, so fewer fold) fails, and its Model turns to the array program.
GUARD = 4
#: Where the automatic choice logs its decisions (INFO).
LOGGER = logging.getLogger("simbodyx")
#: True while :func:`scalarize` or an entry point's compiled program traces: entry
#: points inside it run as they are (the outer program's path holds for all of it).
_INSIDE = contextvars.ContextVar("simbodyx_inside_entry_point", default=False)


class NotScalarizable(Exception):
    """A function's program holds an operation the scalar path does not evaluate."""


def _known(x) -> bool:
    return not isinstance(x, (jax.Array, jax.core.Tracer))


# -- entry arithmetic, folding known operands ----------------------------------------------


def _add(a, b):
    if _known(a) and a == 0:
        return b
    if _known(b) and b == 0:
        return a
    return a + b


def _sub(a, b):
    if _known(b) and b == 0:
        return a
    if _known(a) and a == 0:
        return -b
    return a - b


def _mul(a, b):
    if _known(a) and not _known(b):
        a, b = b, a
    if _known(b) and not _known(a):
        if b == 0:
            return type(b)(0)
        if b == 1:
            return a
        if b == -1:
            return -a
    return a * b


def _div(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return int(a / b)  # lax.div on integers rounds toward zero
    if _known(a) and not _known(b) and a == 0:
        return type(a)(0)
    if _known(b) and not _known(a) and b == 1:
        return a
    return a / b


def _either(known_fn, traced_fn):
    """One function of entries: ``known_fn`` on Python numbers, ``traced_fn`` otherwise."""
    return lambda *xs: known_fn(*xs) if all(_known(x) for x in xs) else traced_fn(*xs)


def _integer_pow(y):
    def power(a):
        if _known(a):
            return a**y
        if y == 0:
            return 1.0
        result = a
        for _ in range(abs(y) - 1):
            result = result * a
        return 1 / result if y < 0 else result
    return power


def _select(dtype, predicate, *cases):
    """select_n on entries, ``dtype`` the result's."""
    if _known(predicate):
        return cases[int(predicate)]
    if all(_known(c) for c in cases) and len(set(cases)) == 1:
        return cases[0]
    return lax.select_n(predicate, *[jnp.asarray(c, dtype) for c in cases])


_UNARY_NAMES = {"sin": "sin", "cos": "cos", "tan": "tan", "sqrt": "sqrt", "exp": "exp", "log": "log",
                "tanh": "tanh", "abs": "abs", "atan": "arctan", "asin": "arcsin", "acos": "arccos",
                "sign": "sign", "floor": "floor", "ceil": "ceil"}

#: Elementwise primitives: their function of entries.
ELEMENTWISE = {
    "add": _add, "add_any": _add, "sub": _sub, "mul": _mul, "div": _div,
    "neg": lambda a: -a,
    "max": _either(max, jnp.maximum), "min": _either(min, jnp.minimum),
    "atan2": _either(math.atan2, jnp.arctan2), "pow": lambda a, b: a**b,
    # jnp's forms promote a known Python number to the traced operand's type (lax's would not)
    "eq": _either(lambda a, b: a == b, jnp.equal), "ne": _either(lambda a, b: a != b, jnp.not_equal),
    "lt": _either(lambda a, b: a < b, jnp.less), "le": _either(lambda a, b: a <= b, jnp.less_equal),
    "gt": _either(lambda a, b: a > b, jnp.greater), "ge": _either(lambda a, b: a >= b, jnp.greater_equal),
    "and": _either(lambda a, b: a & b, jnp.bitwise_and), "or": _either(lambda a, b: a | b, jnp.bitwise_or),
    "not": _either(lambda a: not a if isinstance(a, bool) else ~a, jnp.invert),
    "square": lambda a: _mul(a, a),
    "rsqrt": _either(lambda a: 1 / math.sqrt(a), lax.rsqrt),
    "stop_gradient": _either(lambda a: a, lax.stop_gradient),
    "rem": _either(lambda a, b: type(a)(math.fmod(a, b)), jnp.fmod),
    **{name: _either(lambda a, f=getattr(np, fn): f(a).item(), getattr(jnp, fn)) for name, fn in _UNARY_NAMES.items()},
}


def _apply(fn, *arrays):
    arrays = np.broadcast_arrays(*arrays)
    out = np.empty(arrays[0].shape, dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = fn(*(a[index] for a in arrays))
    return out


def _sum(terms):
    total = 0
    for term in terms:
        total = _add(total, term)
    return total


def _entries(value) -> np.ndarray:
    """A concrete array as an object array of Python numbers."""
    a = np.asarray(value)
    out = np.empty(a.shape, dtype=object)
    for index in np.ndindex(a.shape):
        out[index] = a[index].item()
    return out


def _traced_entries(x) -> np.ndarray:
    """A traced array as an object array of its scalar slices (one equation,
    :data:`entries_p`)."""
    out = np.empty(x.shape, dtype=object)
    if x.size:
        for entry, index in zip(entries_p.bind(jnp.reshape(x, -1)), np.ndindex(x.shape)):
            out[index] = entry
    return out


def _last_axis_entries(x):
    """``x[..., i]`` for every ``i``: :data:`entries_p`'s program, one split."""
    axis = x.ndim - 1
    return [lax.squeeze(piece, (axis,)) for piece in lax.split(x, [1] * x.shape[axis], axis=axis)]


def _entries_transpose(cts, x):
    """The entries' cotangents stacked back along the last axis, in groups
    XLA fuses with the computations of their pieces."""
    return [concatenation.concatenate([lax.expand_dims(ct, (ct.ndim,)) for ct in map(ad.instantiate_zeros, cts)],
                                      axis=-1)]


def _entries_batch(args, dims):
    x = jnp.moveaxis(args[0], dims[0], 0)
    return entries_p.bind(x), [0] * x.shape[-1]


#: The entries of a scalar program's traced input (along its last axis, the
#: batch in front under ``vmap``), lowered to one split. Its transpose stacks
#: their cotangents in groups of at most eight (:mod:`simbodyx._xla.concatenation`):
#: one concatenation of more pieces fuses with none of them, so each
#: entry's cotangent became a kernel of its own, recomputing what it shares
#: with the others (an MLP controller's weights: 13x the instructions after
#: XLA's fusion, and 2.5-3x the compile time of the gradient).
entries_p = Primitive("entries")
entries_p.multiple_results = True
entries_p.def_impl(_last_axis_entries)
entries_p.def_abstract_eval(lambda x: [x.update(shape=x.shape[:-1])] * x.shape[-1])
mlir.register_lowering(entries_p, mlir.lower_fun(_last_axis_entries, multiple_results=True))
ad.deflinear2(entries_p, _entries_transpose)
batching.primitive_batchers[entries_p] = _entries_batch


def _const_entries(c) -> np.ndarray:
    """A closed jaxpr's constant: its numbers, or its scalar slices when it is traced."""
    return _traced_entries(c) if isinstance(c, jax.core.Tracer) else _entries(c)


# -- primitives ----------------------------------------------------------------------------


def _broadcast_in_dim(x, shape, broadcast_dimensions, **_):
    expanded = [1] * len(shape)
    for axis, dim in enumerate(broadcast_dimensions):
        expanded[dim] = x.shape[axis]
    return np.broadcast_to(x.reshape(expanded), shape).copy()


def _slice(x, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return x[tuple(slice(*s) for s in zip(start_indices, limit_indices, strides))]


def _pad(x, padding_value, padding_config):
    """lax.pad: low and high padding (negative: cropping) and interior padding per axis."""
    value = padding_value.reshape(()).item()
    for axis, (low, high, interior) in enumerate(padding_config):
        n = x.shape[axis]
        shape = list(x.shape)
        shape[axis] = max(low, 0) + n + max(n - 1, 0) * interior + max(high, 0)
        out = np.full(shape, value, dtype=object)
        index = [slice(None)] * x.ndim
        index[axis] = slice(max(low, 0), max(low, 0) + n + max(n - 1, 0) * interior, interior + 1)
        out[tuple(index)] = x
        index[axis] = slice(-min(low, 0), shape[axis] + min(high, 0))
        x = out[tuple(index)]
    return x


def _iota(dtype, shape, dimension, **_):
    column = np.arange(shape[dimension]).reshape([-1 if i == dimension else 1 for i in range(len(shape))])
    return _entries(np.broadcast_to(column, shape).astype(dtype))


def _reducer(combine):
    """A reduction over ``axes``, its terms combined left to right."""
    def reduce(x, axes, **_):
        kept = [i for i in range(x.ndim) if i not in axes]
        rows = np.transpose(x, kept + list(axes)).reshape(  # explicit sizes: either side may be empty
            [x.shape[i] for i in kept] + [math.prod(x.shape[i] for i in axes)])
        out = np.empty(rows.shape[:-1], dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = combine(rows[index])
        return out
    return reduce


def _dot_general(x, y, dimension_numbers, preferred_element_type=None, **_):
    if preferred_element_type is not None:  # products formed in the result's type, as XLA forms them
        x, y = _convert(x, preferred_element_type), _convert(y, preferred_element_type)
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_free = [i for i in range(x.ndim) if i not in x_contract and i not in x_batch]
    y_free = [i for i in range(y.ndim) if i not in y_contract and i not in y_batch]
    xt = np.transpose(x, list(x_batch) + x_free + list(x_contract))
    yt = np.transpose(y, list(y_batch) + y_free + list(y_contract))
    nb = len(x_batch)
    batch, xf, yf = xt.shape[:nb], xt.shape[nb:nb + len(x_free)], yt.shape[nb:nb + len(y_free)]
    k = math.prod(x.shape[i] for i in x_contract)
    xs, ys = xt.reshape(batch + xf + (k,)), yt.reshape(batch + yf + (k,))
    out = np.empty(batch + xf + yf, dtype=object)
    for index in np.ndindex(out.shape):
        b, i, j = index[:nb], index[nb:nb + len(xf)], index[nb + len(xf):]
        out[index] = _sum(_mul(p, r) for p, r in zip(xs[b + i], ys[b + j]))
    return out


def _convert(x, new_dtype, **_):
    dtype = np.dtype(new_dtype)
    return _apply(lambda a: dtype.type(a).item() if _known(a) else lax.convert_element_type(a, dtype), x)


def _known_indices(eqn, indices):
    """Index operands of ``eqn`` as NumPy arrays, when every entry is known."""
    if not all(_known(v) for a in indices for v in a.flat):
        raise NotScalarizable(f"{eqn.primitive.name} with traced indices")
    return [np.asarray(a.tolist()) for a in indices]


def _moved(eqn, data, indices):
    """A data-movement primitive (gather, dynamic_slice, dynamic_update_slice)
    with known indices: applied to the numbering of its data operands' entries."""
    where = _known_indices(eqn, indices)
    ends = np.cumsum([0] + [d.size for d in data])
    with jax.ensure_compile_time_eval():
        numbering = [jnp.arange(lo, hi).reshape(d.shape) for lo, hi, d in zip(ends[:-1], ends[1:], data)]
        moved = eqn.primitive.bind(*numbering, *map(jnp.asarray, where), **eqn.params)
    return np.concatenate([d.reshape(-1) for d in data])[np.asarray(moved)]


def _scatter(eqn, x, indices, updates):
    """scatter-add (or scatter) with known indices: which update entries land
    on each entry, found by scattering one-hot updates."""
    (where,) = _known_indices(eqn, [indices])
    with jax.ensure_compile_time_eval():
        dtype = eqn.invars[0].aval.dtype  # the primitive's update rule is typed (jax >= 0.11 checks)
        one_hot = jnp.eye(updates.size, dtype=dtype).reshape((updates.size,) + updates.shape)
        zeros, where = jnp.zeros(x.shape, dtype), jnp.asarray(where, eqn.invars[1].aval.dtype)  # typed if empty
        landed = jax.vmap(lambda u: eqn.primitive.bind(zeros, where, u, **eqn.params))(one_hot)
    landed = np.asarray(landed).reshape(updates.size, x.size) != 0
    flat, terms, out = x.reshape(-1), updates.reshape(-1), np.empty(x.size, dtype=object)
    for i in range(x.size):
        hits = [terms[k] for k in np.flatnonzero(landed[:, i])]
        out[i] = _sum([flat[i]] + hits) if eqn.primitive.name == "scatter-add" else (hits[-1] if hits else flat[i])
    return out.reshape(x.shape)


STRUCTURAL = {
    "broadcast_in_dim": _broadcast_in_dim,
    "reshape": lambda x, new_sizes, **_: x.reshape(new_sizes),
    "squeeze": lambda x, dimensions: np.squeeze(x, axis=tuple(dimensions)),
    "expand_dims": lambda x, dimensions: np.expand_dims(x, dimensions),
    "transpose": lambda x, permutation: np.transpose(x, permutation),
    "rev": lambda x, dimensions: np.flip(x, axis=dimensions),
    "slice": _slice,
    "concatenate": lambda *xs, dimension: np.concatenate(xs, axis=dimension),
    "split": lambda x, sizes, axis: np.split(x, np.cumsum(sizes)[:-1], axis=axis),
    "stack": lambda *xs, axis: np.stack(xs, axis=axis),  # a primitive from JAX 0.10
    "pad": _pad,
    "iota": _iota,
    "reduce_sum": _reducer(_sum),
    "small_sum": lambda x, axis, **_: _reducer(_sum)(x, (axis % x.ndim,)),  # simbodyx.spatial.vectors
    "reduce_max": _reducer(lambda terms: functools.reduce(ELEMENTWISE["max"], terms)),
    "reduce_min": _reducer(lambda terms: functools.reduce(ELEMENTWISE["min"], terms)),
    "dot_general": _dot_general,
    "convert_element_type": _convert,
}
#: Call-like primitives and the parameter holding the program they call ("pjit" is
#: named "jit" from JAX 0.11).
CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr", "remat": "jaxpr",
         "checkpoint": "jaxpr", "custom_jvp_call": "call_jaxpr"}
#: Primitives of simbodyx's own that stand for a function of jax.numpy in a
#: traced program (their ``impl``, also their lowering): that function's
#: program is evaluated in their place.
INLINED = ("cross", "rows_of", "stacked", "matrix3")
#: Primitives that only move or annotate their operands: placement and sharding
#: annotations mean nothing to single entries (a sharded batch's program
#: holds "reshard"; XLA places the scalar program from its inputs).
IDENTITY = ("device_put", "copy", "copy_p", "optimization_barrier", "reshard", "sharding_constraint", "mesh_cast",
            "pvary")


class _Budget:
    """Counts the scalar results emitted; raises past ``limit`` (None: no limit)."""

    def __init__(self, limit):
        self.limit, self.used = limit, 0

    def charge(self, outs):
        self.add(sum(sum(not _known(v) for v in out.flat) for out in outs))

    def add(self, count: int):
        self.used += count
        if self.limit is not None and self.used > self.limit:
            raise NotScalarizable(f"the scalar program passed {self.limit} operations")


#: The primitives whose results are emitted arithmetic (the rest move entries around).
_ARITHMETIC = set(ELEMENTWISE) | {"select_n", "integer_pow", "reduce_sum", "small_sum", "dot_general",
                                  "convert_element_type"}


def _eval(jaxpr, consts, args, budget):
    env = {}

    def read(v):
        return _entries(v.val) if isinstance(v, jex_core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        outs = _eval_eqn(eqn, [read(v) for v in eqn.invars], budget)
        outs = outs if eqn.primitive.multiple_results else [outs]
        if eqn.primitive.name in _ARITHMETIC:
            budget.charge(outs)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _eval_closed(closed, args, budget):
    return _eval(closed.jaxpr, [_const_entries(c) for c in closed.consts], args, budget)


def _eval_eqn(eqn, ins, budget):
    name, params = eqn.primitive.name, eqn.params
    if name in ELEMENTWISE:
        return _apply(ELEMENTWISE[name], *ins)
    if name == "select_n":
        return _apply(functools.partial(_select, eqn.outvars[0].aval.dtype), *ins)
    if name == "integer_pow":
        return _apply(_integer_pow(params["y"]), ins[0])
    if name in STRUCTURAL:
        return STRUCTURAL[name](*ins, **params)
    if name in CALLS:
        inner = params[CALLS[name]]
        return _eval_closed(inner, ins, budget) if hasattr(inner, "consts") else _eval(inner, [], ins, budget)
    if name in IDENTITY:
        return ins if eqn.primitive.multiple_results else ins[0]
    if name in INLINED:
        program = _program(eqn.primitive, tuple(v.aval for v in eqn.invars), tuple(sorted(params.items())))
        outs = _eval_closed(program, ins, budget)
        return outs if eqn.primitive.multiple_results else outs[0]
    if name in ("gather", "dynamic_slice"):
        return _moved(eqn, ins[:1], ins[1:])
    if name == "dynamic_update_slice":
        return _moved(eqn, ins[:2], ins[2:])
    if name in ("scatter-add", "scatter"):
        return _scatter(eqn, *ins)
    if name == "scan":
        return _scan(ins, budget, **params)
    raise NotScalarizable(f"the scalar path does not evaluate {name!r}")


@functools.lru_cache(maxsize=None)
def _program(primitive, avals, params):
    """The program of an :data:`INLINED` primitive's function on operands of
    these types, with these parameters ((name, value) pairs)."""
    return jax.make_jaxpr(functools.partial(primitive.impl, **dict(params)))(*avals)


def _scan(ins, budget, jaxpr, length, reverse, num_consts, num_carry, **_):
    """A scan unrolled: its body evaluated ``length`` times."""
    consts, carry, xs = ins[:num_consts], ins[num_consts:num_consts + num_carry], ins[num_consts + num_carry:]
    ys = [None] * length
    for i in (reversed(range(length)) if reverse else range(length)):
        out = _eval_closed(jaxpr, consts + carry + [x[i, ...] for x in xs], budget)  # each slice an array
        carry, ys[i] = out[:num_carry], out[num_carry:]
    num_ys = len(jaxpr.jaxpr.outvars) - num_carry
    return carry + [np.stack([y[k] for y in ys]) for k in range(num_ys)]


def _assemble(obj, aval):
    """An output array from its entries, some traced: one concatenation of
    each known run (one constant) and each emitted scalar."""
    pieces, run = [], []
    for v in obj.reshape(-1):
        if _known(v):
            run.append(v)
            continue
        if run:
            pieces.append(np.asarray(run, aval.dtype))
            run = []
        pieces.append(lax.broadcast_in_dim(lax.convert_element_type(v, aval.dtype), (1,), ()))
    if run:
        pieces.append(np.asarray(run, aval.dtype))
    return (pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, 0)).reshape(aval.shape)


#: An entry not known at trace time, in a :func:`scalarize` output's known entries.
_UNKNOWN = None

#: id(array) -> (a weak reference to it, its known entries with :data:`_UNKNOWN`
#: where traced, the traced ones as scalars): the outputs of :func:`scalarize`
#: while they live, so a scalarized function fed another's output folds its
#: known entries and takes its traced ones as the scalars they are
#: (``model.realize`` followed by a ``model.matter`` operator).
_KNOWN: dict = {}


def _registered(x) -> tuple:
    """A traced argument's (known entries, traced scalars) if a scalarized output, else (None, None)."""
    ref, known, scalars = _KNOWN.get(id(x), (None, None, None))
    return (known, scalars) if ref is not None and ref() is x else (None, None)


def _leaf_key(x):
    """What a program depends on of an argument leaf: a traced array's type and
    known entries, a concrete array's numbers, any other value itself."""
    if isinstance(x, jax.core.Tracer):
        known, _ = _registered(x)
        return ("traced", x.aval.shape, x.aval.dtype, x.aval.weak_type,
                None if known is None else tuple((type(v), v) for v in known))
    if isinstance(x, (jax.Array, np.ndarray)):
        a = np.asarray(x)
        return ("array", a.shape, a.dtype, getattr(x, "weak_type", False), a.tobytes())
    try:
        hash(x)
    except TypeError:  # held by the program (its id is not reused while it lives)
        return ("static", type(x), id(x))
    return ("static", type(x), x)


class _Program:
    """One scalar program: ``fn`` on arguments whose traced leaves are its
    inputs (a scalarized output's traced entries as its scalars, any other
    traced array whole) and whose other leaves (concrete arrays, static
    values) are folded. It runs as a nested ``jax.jit`` returning its outputs
    with an entry not known, each also as its traced scalars, and the others
    as constants outside it; JAX prunes what no one uses. Every call with the
    same known numbers (an RK4 step's four stages, a loop's iterations)
    shares its trace, its derivative and its lowering."""

    def __init__(self, fn, tree, leaves, max_operations):
        self.fn, self.tree, self.max_operations = fn, tree, max_operations
        self.leaves = [None if isinstance(x, jax.core.Tracer) else x for x in leaves]
        self.avals = [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=x.aval.weak_type)
                      if isinstance(x, jax.core.Tracer) else None for x in leaves]
        self.known_inputs = [_registered(x)[0] if isinstance(x, jax.core.Tracer) else None for x in leaves]
        self.out_tree = self.out_known = self.constants = None
        self.operations = 0
        self.jitted = jax.jit(self._emit)

    def _inputs(self, leaves) -> list:
        """The program's arguments: per traced leaf, its traced scalars or the array."""
        inputs = []
        for x, known in zip(leaves, self.known_inputs):
            if isinstance(x, jax.core.Tracer):
                inputs.append(x if known is None else list(_registered(x)[1]))
        return inputs

    def _emit(self, inputs):
        inputs = iter(inputs)
        positions, entries, avals = [], [], []  # of the array leaves, traced or concrete
        for i, (x, aval, known) in enumerate(zip(self.leaves, self.avals, self.known_inputs)):
            if aval is None and not isinstance(x, (jax.Array, np.ndarray)):
                continue  # a static value, passed as it is
            positions.append(i)
            entries.append(_entries(x) if aval is None else _input_entries(next(inputs), aval, known))
            avals.append(x if aval is None else aval)

        def fn(*arrays):
            full = list(self.leaves)
            for i, array in zip(positions, arrays):
                full[i] = array
            return self.fn(*jax.tree.unflatten(self.tree, full))

        with _inside():
            closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*avals)
        budget = _Budget(self.max_operations)
        outs = _eval_closed(closed, entries, budget)
        self.operations = budget.used
        self.out_tree = jax.tree.structure(out_shape)
        self.out_known = [tuple(v if _known(v) else _UNKNOWN for v in o.flat) for o in outs]
        self.constants, emitted = {}, []
        for k, (o, v) in enumerate(zip(outs, closed.jaxpr.outvars)):
            if _UNKNOWN in self.out_known[k]:
                scalars = [lax.convert_element_type(e, v.aval.dtype) for e in o.flat if not _known(e)]
                emitted.append((_assemble(o, v.aval), scalars))
            else:  # every entry known: a constant outside the program, folded by the next one
                with jax.ensure_compile_time_eval():
                    self.constants[k] = jnp.asarray(np.asarray(o.tolist(), v.aval.dtype).reshape(v.aval.shape))
        return emitted

    def __call__(self, leaves):
        emitted = iter(self.jitted(self._inputs(leaves)))
        outs = []
        for k, known in enumerate(self.out_known):
            if k in self.constants:
                outs.append(self.constants[k])
                continue
            out, scalars = next(emitted)
            _KNOWN[id(out)] = (weakref.ref(out, lambda _, key=id(out): _KNOWN.pop(key, None)), known, scalars)
            outs.append(out)
        return jax.tree.unflatten(self.out_tree, outs)


def _input_entries(x, aval, known) -> np.ndarray:
    """A traced input's entries: its known ones and its scalars where a
    scalarized output's, else the scalar slices of the array (:data:`entries_p`)."""
    if known is None:
        return _traced_entries(x)
    scalars, entries = iter(x), np.empty(len(known), dtype=object)
    for k, v in enumerate(known):
        entries[k] = next(scalars) if v is _UNKNOWN else v
    return entries.reshape(aval.shape)


#: The scalar programs made so far, by (function, argument structure, leaf keys, limit); the oldest
#: dropped past :data:`MAX_PROGRAMS`.
_PROGRAMS: collections.OrderedDict = collections.OrderedDict()
MAX_PROGRAMS = 256


def scalarize(fn, max_operations: int | None = None):
    """``fn`` (a function of pytrees of arrays and static values) re-emitted
    entry by entry with its known numbers folded (see the module notes);
    raises :class:`NotScalarizable` when its program holds an operation the
    scalar path does not evaluate, or when it would emit more than
    ``max_operations`` arithmetic operations. Same outputs as ``fn``; works
    under ``jit``, ``vmap`` and ``grad``. Leaves that are neither arrays nor
    traced are held static (hashable), concrete arrays are folded, and each
    distinct combination is traced once (:class:`_Program`)."""

    @functools.wraps(fn)
    def scalarized(*args):
        leaves, tree = jax.tree.flatten(args)
        key = (fn, tree, tuple(_leaf_key(x) for x in leaves))
        program = _PROGRAMS.get(key)
        if program is None:
            program = _Program(fn, tree, leaves, max_operations)
            outs = program(leaves)  # traced now: a NotScalarizable leaves nothing behind
            _PROGRAMS[key] = program
            if len(_PROGRAMS) > MAX_PROGRAMS:
                _PROGRAMS.popitem(last=False)
            return outs
        _Budget(max_operations).add(program.operations)  # traced under a looser limit, or none
        _PROGRAMS.move_to_end(key)
        return program(leaves)

    return scalarized


# -- the automatic choice ------------------------------------------------------------------


class Decision(NamedTuple):
    """Which path a Model's entry points take, and why (the log line)."""

    scalar: bool
    reason: str


class Choice:
    """Which path a Model's entry points (``model.realize``, the
    ``model.matter`` operators, ``model.forces``, ``sx.integrate.derivatives``)
    take when they are called inside a transformation (``jit``, ``vmap``,
    ``grad``, a loop body). One decision per Model structure (its topology
    and pytree structure, the static settings and force elements included),
    made once per process before any of its entry points is scalarized, and
    holding for every entry point, every transformation and whatever
    numbers are traced, so one program never mixes the two paths and a
    model is never tried twice:

    - as forced (``Model.with_scalar_path``); the array program in the
      checks mode, whose checks the scalar path does not evaluate;
    - the array program beyond :data:`MAX_MOBILITIES` mobilities;
    - else the scalar path when the vector field's scalar program
      (``sx.integrate.derivatives``, the largest entry point, with the
      numbers the Model has at its first use folded: a Model first met
      as a traced argument folds none) emits at most :data:`MAX_OPERATIONS`
      operations, found by tracing it once (no compile; a fraction of a
      second).

    Each decision is logged on the ``simbodyx`` logger at INFO level with its
    reason, and ``decisions`` keeps them. A scalar program that later fails
    (an operation the scalar path does not evaluate, or a Model with traced
    numbers whose program passes :data:`GUARD` times the limit) turns its
    Model's decision to the array program for the programs traced after,
    with a warning. One per process: :data:`CHOICE`."""

    def __init__(self):
        self.decisions: dict = {}
        self._probe = None

    def probe(self, fn):
        """Register ``fn(model, state)``, the vector field whose scalar program's size decides."""
        self._probe = fn
        return fn

    @staticmethod
    def key(model) -> tuple:
        return model.topology, jax.tree.structure(model)

    def takes_scalar_path(self, model) -> bool:
        """Whether ``model``'s entry points take the scalar path when traced
        (deciding now if its structure has no decision yet)."""
        if model.checks:
            return False
        if model.scalar_path is not None:
            return model.scalar_path
        key = self.key(model)
        if key not in self.decisions:
            self.decisions[key] = decision = self._decide(model)
            LOGGER.info("simbodyx: %s takes the %s path: %s", model.topology,
                        "scalar" if decision.scalar else "array", decision.reason)
        return self.decisions[key].scalar

    def _decide(self, model) -> Decision:
        nu = model.topology.nu
        if nu > MAX_MOBILITIES:
            return Decision(False, f"{nu} mobilities, more than MAX_MOBILITIES = {MAX_MOBILITIES}")
        traced, concrete = eqx.partition(model, lambda leaf: isinstance(leaf, jax.core.Tracer))
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)),
                                (traced, model.default_state()))
        probe = scalarize(self._probe, MAX_OPERATIONS)
        try:
            jax.make_jaxpr(lambda t, s: probe(eqx.combine(t, concrete), s))(*abstract)
        except NotScalarizable as e:
            return Decision(False, f"sizing its vector field (sx.integrate.derivatives): {e}")
        return Decision(True, f"its vector field's scalar program has at most MAX_OPERATIONS = {MAX_OPERATIONS} "
                              "operations")

    def call(self, model, fn, *args):
        """``fn(model, *args)``, on the scalar path where ``model`` takes it
        (non-array arguments held static); a Model that forces the scalar
        path gets :class:`NotScalarizable` where it fails."""
        if self.takes_scalar_path(model):
            forced = model.scalar_path is True
            try:
                return scalarize(fn, None if forced else GUARD * MAX_OPERATIONS)(model, *args)
            except NotScalarizable as e:
                if forced:
                    raise
                self.decisions[self.key(model)] = Decision(False, f"a scalar program failed: {e}")
                warnings.warn(f"simbodyx: {model.topology} leaves the scalar path for the programs traced after "
                              f"this one: {e}", stacklevel=3)
        return fn(model, *args)


@contextlib.contextmanager
def _inside():
    token = _INSIDE.set(True)
    try:
        yield
    finally:
        _INSIDE.reset(token)


def num_traced(tree) -> int:
    """How many of a pytree's leaves are traced (a Model's: 0 when all its
    numbers are concrete, so the scalar path can fold them)."""
    return sum(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


#: The process's automatic choice (``CHOICE.decisions``: each Model structure's).
CHOICE = Choice()


def _traced(model, args) -> bool:
    """Whether an entry point is called inside a transformation: JAX's trace
    says (O(1), the eager hot path), else whether any argument is traced."""
    inside = tracing()
    if inside is not None:
        return inside
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((model, args)))


def entry_point(jit, probe=False):
    """Decorator for a Model's compiled entry point ``fn(model, *args)``:
    eagerly, ``fn`` compiled by ``jit`` through :func:`per_context_jit` (one
    dispatch); inside a transformation, the same program on the scalar path
    where :data:`CHOICE` takes it. ``probe``: this entry point, called as
    ``fn(model, state)``, is the one whose scalar program's size decides
    (``sx.integrate.derivatives``)."""

    def decorate(fn):
        compiled = per_context_jit(jit)(fn)

        def plain(*args):
            with _inside():
                return compiled(*args)

        if probe:
            CHOICE.probe(plain)

        @functools.wraps(fn)
        def call(model, *args):
            if _INSIDE.get() or not _traced(model, args):
                return plain(model, *args)
            return CHOICE.call(model, plain, *args)

        return call

    return decorate
