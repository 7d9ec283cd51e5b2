"""The frozen Model: static topology plus differentiable array parameters."""

from __future__ import annotations

import collections
import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx import motion, projection
from simbodyx._xla import scalarize
from simbodyx._xla.module import Module, content_key
from simbodyx.forces.subsystem import Forces, default_z
from simbodyx.matter import Matter
from simbodyx.parameters import Parameters
from simbodyx.realize import realize
from simbodyx.spatial.inertia import MassProperties
from simbodyx.spatial.rotation import rotation_problem
from simbodyx.spatial.vectors import device_array
from simbodyx.stage import Stage
from simbodyx.state import InstanceData, Level, Locks, State
from simbodyx.topology import Topology


def _dtype(leaf) -> np.dtype:
    return np.dtype(getattr(leaf, "dtype", None) or np.result_type(leaf))


def _named_leaves(prefix: str, tree) -> list:
    """(name, leaf) of each array leaf of ``tree``, named from ``prefix``."""
    return [(prefix + jax.tree_util.keystr(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


class LeafShapes:
    """The shape and dtype kind of each array leaf of a Model's parameters
    and of each of its force elements (in flattening order) as frozen:
    static data, hashed once."""

    def __init__(self, params, force_elements):
        def shapes(tree):
            return tuple((np.shape(leaf), _dtype(leaf).kind) for leaf in jax.tree.leaves(tree))

        self.params = shapes(params)
        self.force_elements = tuple(shapes(element) for element in force_elements)
        self._hash = hash((self.params, self.force_elements))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, LeafShapes) and (self.params, self.force_elements) ==
                                 (other.params, other.force_elements))


_KINDS = {"f": "floating-point", "i": "integer", "u": "unsigned integer", "b": "boolean", "c": "complex"}


class Model(Module):
    """What ``system.realize_topology()`` returns (with a default State).

    ``topology`` is static (part of jit's cache key, hashed once); ``params``
    and ``force_elements`` hold every number as an array leaf, so ``jax.grad``
    with respect to a Model gives gradients for masses, inertias, frames and
    force parameters. Models are immutable. Change a body's mass properties
    or joint frames with its handle (``mobod.set_mass_properties(model,
    mp)``, ``set_inboard_frame``, ``set_outboard_frame``). Other numbers
    change with ``eqx.tree_at``; ``model.check()`` then validates every
    physical parameter. A body's inertia is stored about its mass center
    (``params.central_inertia``; ``params.inertia``, about Bo, is derived),
    so editing ``params.mass`` or ``params.com`` alone keeps it physical.
    """

    topology: Topology = eqx.field(static=True)
    params: Parameters
    force_elements: tuple = ()
    #: per constraint, whether the default State has it disabled
    constraint_disabled_by_default: tuple = eqx.field(static=True, default=())
    #: per Motion, whether the default State has it disabled
    motion_disabled_by_default: tuple = eqx.field(static=True, default=())
    #: Simbody's characteristic time (default 0.1): weights velocity-level
    #: errors of holonomic constraints in projection, and sets integrators' first step
    default_time_scale: float = eqx.field(static=True, default=0.1)
    #: Simbody's unit length hint (default 1); computations do not use it
    default_length_scale: float = eqx.field(static=True, default=1.0)
    #: whether the entry points (``realize``, ``matter``, ``forces``) take the scalar
    #: path when traced (``simbodyx.scalarize``): True, False, or None to decide by size
    scalar_path: bool | None = eqx.field(static=True, default=None)
    #: whether ``realize`` checks its inputs and results at run time (``simbodyx.runtime_checks``)
    checks: bool = eqx.field(static=True, default=False)
    #: every array leaf's shape and dtype kind as frozen (:meth:`check_leaves`)
    leaf_shapes: LeafShapes | None = eqx.field(static=True, default=None, repr=False)

    def __check_init__(self):
        if self.leaf_shapes is None:
            object.__setattr__(self, "leaf_shapes", LeafShapes(self.params, self.force_elements))

    @property
    def forces(self) -> Forces:
        """The force subsystems' elements, evaluated by ``calc_forces(state)``."""
        return Forces(self)

    @property
    def matter(self):
        """The SimbodyMatterSubsystem operators, as pure methods."""
        return Matter(self)

    @property
    def constraints(self) -> tuple:
        """The constraints' elements, in index order (copies of the handles made
        while building, without their builder reference)."""
        return self.params.constraints

    @property
    def soft_constraints(self):
        """MuJoCo's constraint model of a robot loaded from MJCF
        (``simbodyx.soft_constraints.SoftConstraints``), solved in the
        Acceleration stage; None when the Model has none."""
        return self.params.soft_constraints

    @property
    def unilateral_contacts(self) -> tuple:
        """The adopted unilateral contacts' elements, in UnilateralContactIndex order."""
        return self.params.unilateral_contacts

    @property
    def dtype(self):
        return self.params.mass.dtype

    def realize(self, state: State, stage: Stage = Stage.Position) -> State:
        """A new State realized through ``stage``; see :func:`simbodyx.realize.realize`."""
        return realize(self, state, stage)

    def get_default_time_scale(self) -> float:
        return self.default_time_scale

    def get_default_length_scale(self) -> float:
        return self.default_length_scale

    def project(self, state: State, options=None, **weights):
        """(state, ProjectResults): Simbody's System::project; see :func:`simbodyx.projection.project`."""
        return projection.project(self, state, options, **weights)

    def project_q(self, state: State, options=None, **weights):
        """Simbody's projectQ; see :func:`simbodyx.projection.project_q`."""
        return projection.project_q(self, state, options, **weights)

    def project_u(self, state: State, options=None, **weights):
        """Simbody's projectU; see :func:`simbodyx.projection.project_u`."""
        return projection.project_u(self, state, options, **weights)

    def prescribe(self, state: State) -> State:
        """Simbody's System::prescribe: the prescribed q, then u, set in the State
        (the locks' and enabled Motions' values at its time), realized through Position."""
        return self.realize(motion.prescribe_u(self, motion.prescribe_q(self, state)), Stage.Position)

    def prescribe_q(self, state: State) -> State:
        """The State with the prescribed q set to their values at its time (caches dropped)."""
        return motion.prescribe_q(self, state)

    def prescribe_u(self, state: State) -> State:
        """The State with the prescribed u set (Position- and Velocity-level prescriptions)."""
        return motion.prescribe_u(self, state)

    def default_state(self) -> State:
        """t = 0, default q and u, realized to Stage.Model (no caches)."""
        dtype, top = self.dtype, self.topology
        return State(
            t=device_array(0.0, dtype),
            q=device_array(np.reshape(top.default_q, top.nq), dtype),
            u=device_array(np.reshape(top.default_u, top.nu), dtype),
            z=default_z(self, dtype),
            topology=top,
            discrete=tuple(v for v in (e.default_discrete(top, dtype) for e in self.force_elements) if v is not None),
            instance_data=InstanceData(
                locks=self._default_locks(),
                constraint_disabled=(device_array(self.constraint_disabled_by_default, bool)
                                     if self.params.constraints else None),
                motion_disabled=device_array(self.motion_disabled_by_default, bool) if self.params.motions else None),
        )

    def _default_locks(self) -> Locks | None:
        """The lock_by_default settings (None when no mobilizer is locked by default)."""
        top = self.topology
        if all(level == Level.NoLevel for level in top.default_lock_level):
            return None
        dtype = self.dtype
        q, u = jnp.asarray(top.default_q, dtype).reshape(top.nq), jnp.asarray(top.default_u, dtype).reshape(top.nu)
        return Locks(jnp.asarray(top.default_lock_level, jnp.int32), q, u, jnp.zeros_like(u))

    def with_euler_angles(self, use_euler_angles: bool = True) -> Model:
        """The same model with every quaternion replaced by body-fixed X-Y-Z
        angles (or back). States convert with ``matter.convert_to_*``."""
        return dataclasses.replace(self, topology=self.topology.with_euler_angles(use_euler_angles))

    def with_scalar_path(self, use: bool | None = True) -> Model:
        """The same model with the scalar path forced on (True), off (False) or
        chosen by size (None); see ``simbodyx.scalarize``."""
        return dataclasses.replace(self, scalar_path=use)

    def with_checks(self, on: bool = True) -> Model:
        """The same model with the checks mode on (or off): ``realize`` raises,
        inside jit and vmap too, on a NaN or infinite t, q or u, a zero
        quaternion, a non-finite udot or non-finite constraint multipliers,
        naming the body or constraint (``simbodyx.runtime_checks``)."""
        return dataclasses.replace(self, checks=bool(on))

    def uses_scalar_path(self) -> bool:
        """Whether this Model's entry points take the scalar path when traced:
        as forced, else ``scalarize.CHOICE``'s decision for its structure
        (made now if there is none: up to ``scalarize.MAX_MOBILITIES``
        mobilities, a vector field of at most ``scalarize.MAX_OPERATIONS``
        operations)."""
        return scalarize.CHOICE.takes_scalar_path(self)

    def check_leaves(self) -> Model:
        """This Model, after checking that each array leaf of its parameters
        and frozen force elements has the shape and dtype kind it was frozen
        with, and that its floating-point leaves share one dtype (an
        ``eqx.tree_at`` edit may change them; elements added later, such as
        a rollout's controller, are their own). Raises ValueError naming the
        leaf (``model.params.mass``). Runs on shapes alone: every
        ``realize`` traced makes it, at no run-time cost."""
        frozen = self.leaf_shapes
        parts = [(_named_leaves("model.params", self.params), frozen.params)]
        parts += [(_named_leaves(f"model.force_elements[{k}]", element), shapes)
                  for k, (element, shapes) in enumerate(zip(self.force_elements, frozen.force_elements))]
        for leaves, shapes in parts:
            if len(leaves) != len(shapes):
                raise ValueError(f"{leaves[0][0] if leaves else 'Model'}: {len(leaves)} array leaves where it was "
                                 f"frozen with {len(shapes)}: an edit replaced a number by a structure of another "
                                 f"size (eqx.tree_at keeps each leaf's shape)")
            for (name, leaf), (shape, kind) in zip(leaves, shapes):
                if np.shape(leaf) != shape:
                    raise ValueError(f"{name} has shape {np.shape(leaf)}, expected {shape} (as frozen from the "
                                     f"topology)")
                if _dtype(leaf).kind != kind:
                    raise ValueError(f"{name} has dtype {_dtype(leaf)}, expected a {_KINDS.get(kind, kind)} dtype")
        leaves = [leaf for part, _ in parts for leaf in part if _dtype(leaf[1]).kind == "f"]
        floats = collections.Counter(_dtype(leaf) for _, leaf in leaves)
        if len(floats) > 1:
            common = floats.most_common(1)[0][0]
            name, odd = next((name, _dtype(leaf)) for name, leaf in leaves if _dtype(leaf) != common)
            raise ValueError(f"{name} has dtype {odd} where the Model's other numbers are {common} "
                             f"(Model.astype converts them all)")
        return self

    def check(self) -> Model:
        """This Model, after :meth:`check_leaves` and checking every physical
        parameter of its concrete numbers (call it outside ``jit``): each
        body's mass finite and >= 0, its mass center finite, its central
        inertia positive semidefinite and satisfying the triangle inequality;
        joint frames finite with orthonormal rotations; each force element's
        numbers finite, and stiffness and damping >= 0. Raises ValueError
        naming the leaf, body or element. The checks mode
        (:meth:`with_checks`) checks the masses, central inertias and force
        elements' non-negative numbers at run time too."""
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(self)):
            raise TypeError("model.check() needs concrete numbers: call it outside jit, vmap and grad")
        self.check_leaves()
        top, params = self.topology, self.params
        for b in range(1, top.num_bodies):
            where = top.body_label(b)
            MassProperties.from_central(params.mass[b], params.com[b], params.central_inertia[b]).check(where)
            for name in ("X_PF", "X_BM"):
                X = getattr(params, name)
                problem = rotation_problem(X.R[b])
                if problem:
                    raise ValueError(f"{where}: {name}.R {problem}")
                if not np.all(np.isfinite(np.asarray(X.p[b]))):
                    raise ValueError(f"{where}: {name}.p contains NaN or infinity")
        for element in self.force_elements:
            element.check()
        return self

    def astype(self, dtype) -> Model:
        """This model with every floating-point parameter cast to ``dtype``
        (its States follow with ``state.astype(dtype)``)."""
        return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, self)

    def __repr__(self):
        return f"Model({self.topology!r}, dtype={jnp.dtype(self.dtype).name})"


class _Constants:
    """A pytree whose leaves are all concrete, hashable by its structure and
    numbers: a FoldedModel's static part."""

    def __init__(self, tree):
        self.tree = tree
        self._key = content_key(tree)

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _Constants) and self._key == other._key


@jax.tree_util.register_pytree_node_class
class FoldedModel:
    """A Model as an argument of a compiled program, its concrete numbers
    compiled in as constants, which a small model's scalar path folds (a
    Model passed as an argument is traced whole, every number symbolic).
    A pytree whose leaves are the Model's traced leaves (none when called
    eagerly; under ``grad`` with respect to a few parameters set into the
    Model, those) and whose structure holds the concrete rest: equal
    structure and concrete numbers share one compiled program."""

    def __init__(self, traced, constants: _Constants):
        self.traced = traced
        self.constants = constants

    @classmethod
    def of(cls, model: Model):
        """How a compiled program takes ``model``: folded when it takes the
        scalar path, else as it is."""
        if not model.uses_scalar_path():
            return model
        if not scalarize.num_traced(model):  # called eagerly
            return cls(None, _Constants(model))
        traced, concrete = eqx.partition(model, lambda leaf: isinstance(leaf, jax.core.Tracer))
        return cls(traced, _Constants(concrete))

    @property
    def model(self) -> Model:
        """The Model: its traced leaves and its constants together."""
        return self.constants.tree if self.traced is None else eqx.combine(self.traced, self.constants.tree)

    @staticmethod
    def unfold(model) -> Model:
        """The Model inside a FoldedModel, or ``model`` itself."""
        return model.model if isinstance(model, FoldedModel) else model

    def tree_flatten(self):
        return (self.traced,), self.constants

    @classmethod
    def tree_unflatten(cls, constants, children):
        return cls(children[0], constants)
