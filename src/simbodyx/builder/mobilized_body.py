"""MobilizedBody handles: Simbody's construction API and per-body queries.

A handle is created while building (``MobilizedBody.Pin(parent, X_PF, body,
X_BM)`` or ``MobilizedBody.Pin(parent, body)``) and afterwards answers
queries on States of the frozen model: each query reads the State's caches
(the stage it needs is named in its docstring) and returns arrays; each
setter returns a new State. Results are measured and expressed in Ground
unless the name says otherwise (``V_FM`` is expressed in F).
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx import mobilizers
from simbodyx.algorithms.reactions import reactions_articulated
from simbodyx.motion import Level, Locks, Method, level_methods, prescribed_udot
from simbodyx.builder.body import Body
from simbodyx.constraints.equations import net_applied_forces
from simbodyx.matter import motion_forces
from simbodyx.spatial.inertia import Inertia, MassProperties, SpatialInertia, UnitInertia, spatial_inertia_matrix
from simbodyx.spatial.rotation import Rotation, matrix_to_body_fixed_xyz, matrix_to_quaternion
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm, shift_force, spatial_vec
from simbodyx.stage import Stage
from simbodyx.state import State
from simbodyx.topology import BodySpec
from simbodyx.trace_context import per_context_jit

_FRAME_TOL = 1e-6


def _concrete(x, what: str, label: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except Exception as e:  # a tracer or a non-numeric value
        raise TypeError(f"{label}: {what} must be concrete numbers while building ({e})") from None
    if a.shape != shape:
        raise ValueError(f"{label}: {what} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{label}: {what} contains NaN or infinity")
    return a


def _check_frame(X, what: str, label: str) -> Transform:
    if not isinstance(X, Transform):
        raise TypeError(f"{label}: {what} must be a Transform, got {type(X).__name__}")
    R = _concrete(X.R, f"{what}.R", label, (3, 3))
    p = _concrete(X.p, f"{what}.p", label, (3,))
    if np.max(np.abs(R.T @ R - np.eye(3))) > _FRAME_TOL or np.linalg.det(R) < 0:
        raise ValueError(f"{label}: {what}.R is not a proper rotation matrix")
    return Transform(R, p)


class Direction(enum.Enum):
    """Forward: q and u defined from parent to child (the default). Reverse: as
    if the joint were built from child to parent (the tree keeps its direction)."""

    Forward = 0
    Reverse = 1


class MobilizedBody:
    """Base of every mobilized-body handle; ``MobilizedBody.Pin`` etc. are subclasses.
    Every type but Weld takes a trailing ``MobilizedBody.Direction.Reverse``
    (or ``direction=``)."""

    Direction = Direction

    family: type = mobilizers.Weld

    def __init__(self, parent, *args, name: str | None = None, direction: Direction = None):
        if not isinstance(parent, MobilizedBody):
            raise TypeError(
                f"{type(self).__name__}: the parent must be a MobilizedBody, got {type(parent).__name__}"
            )
        matter = parent._matter
        if len(args) >= 1 and isinstance(args[0], Body):
            body, X_PF, X_BM, rest = args[0], Transform(), Transform(), args[1:]
        elif len(args) >= 3:
            X_PF, body, X_BM, rest = args[0], args[1], args[2], args[3:]
        else:
            raise TypeError(
                f"{type(self).__name__} takes (parent, X_PF, body, X_BM, ...) or (parent, body, ...)"
            )
        index = matter.get_num_bodies()
        self._label = f"{type(self).__name__} {name or f'body{index}'!r} (would be body {index})"
        if not isinstance(body, Body):
            raise TypeError(f"{self._label}: body must be a Body (e.g. Body.Rigid), got {type(body).__name__}")
        self._matter = matter
        self._parent = parent
        self._name = name or f"body{index}"
        self._X_PF = _check_frame(X_PF, "X_PF (inboard frame)", self._label)
        self._X_BM = _check_frame(X_BM, "X_BM (outboard frame)", self._label)
        self._mass_properties = self._checked_mass_properties(body.mass_properties)
        if rest and isinstance(rest[-1], Direction):
            if direction is not None:
                raise TypeError(f"{self._label}: direction given twice")
            rest, direction = rest[:-1], rest[-1]
        self._kind, self._joint_params = self._parse_kind(*rest)
        self._kind_arguments = rest  # for clone_for_new_parent
        self._direction = Direction.Forward if direction is None else Direction(direction)
        if self._direction is Direction.Reverse:
            if self._kind.nu == 0:
                raise ValueError(f"{self._label}: a Weld has no direction (Simbody has no reversed Weld)")
            self._kind = mobilizers.Reversed(self._kind)
        self._default_q = tuple(float(x) for x in self._kind.default_q())
        self._default_u = (0.0,) * self._kind.nu
        self._armature = (0.0,) * self._kind.nu
        self._lock_level = Level.NoLevel
        self._index = matter._add(self)
        self._label = f"{type(self).__name__} {self._name!r} (body {self._index})"

    def _parse_kind(self, *rest) -> tuple[mobilizers.Mobilizer, tuple[float, ...]]:
        """The joint kind and its numeric parameters from the constructor's
        arguments after the body (none for most types)."""
        if rest:
            raise TypeError(f"{self._label}: unexpected extra arguments {rest!r}")
        return self.family(), ()

    def _checked_mass_properties(self, mp) -> MassProperties:
        if not isinstance(mp, MassProperties):
            raise TypeError(f"{self._label}: mass properties must be a MassProperties")
        return mp.check(where=self._label)

    def _spec(self) -> BodySpec:
        return BodySpec(self._name, self._parent._index, self._kind, self._default_q, self._default_u,
                        int(self._lock_level))

    def _set(self, attr: str, value) -> MobilizedBody:
        self._matter.system.check_not_frozen(f"change {self._label}")
        setattr(self, attr, value)
        self._matter._invalidate()
        return self

    # -- identity and tree navigation -----------------------------------------------
    def get_direction(self) -> Direction:
        """Whether q and u are defined parent-to-child (Forward) or reversed."""
        return self._direction

    def is_reversed(self) -> bool:
        return self._direction is Direction.Reverse

    @property
    def index(self) -> int:
        """MobilizedBodyIndex (Ground is 0; a child's index exceeds its parent's)."""
        return self._index

    def __index__(self) -> int:
        return self._index

    get_mobilized_body_index = index.fget

    @property
    def name(self) -> str:
        return self._name

    @property
    def parent(self) -> MobilizedBody:
        if self.is_ground():
            raise ValueError("Ground has no parent")
        return self._parent

    def get_parent_mobilized_body(self) -> MobilizedBody:
        return self.parent

    def get_base_mobilized_body(self) -> MobilizedBody:
        """The oldest ancestor that is not Ground (Ground for Ground)."""
        b = self
        while not b.is_ground() and not b._parent.is_ground():
            b = b._parent
        return b

    def is_ground(self) -> bool:
        return self._index == 0

    def get_level_in_multibody_tree(self) -> int:
        level, b = 0, self
        while not b.is_ground():
            level, b = level + 1, b._parent
        return level

    def is_same_mobilized_body(self, other: MobilizedBody) -> bool:
        return self is other

    def get_matter_subsystem(self):
        return self._matter

    # -- layout (from the subsystem's current options, or from a State) -------------
    @property
    def num_q(self) -> int:
        return self._matter.topology().body_nq[self._index]

    @property
    def num_u(self) -> int:
        return self._matter.topology().body_nu[self._index]

    @property
    def first_q_index(self) -> int:
        return self._matter.topology().q_start[self._index]

    @property
    def first_u_index(self) -> int:
        return self._matter.topology().u_start[self._index]

    def get_num_q(self, state: State) -> int:
        return self._topology_of(state).body_nq[self._index]

    def get_num_u(self, state: State) -> int:
        return self._topology_of(state).body_nu[self._index]

    def get_first_q_index(self, state: State) -> int:
        return self._topology_of(state).q_start[self._index]

    def get_first_u_index(self, state: State) -> int:
        return self._topology_of(state).u_start[self._index]

    # -- defaults (topological: only before realize_topology) -----------------------
    def get_default_q(self) -> np.ndarray:
        """Default q in the quaternion layout (Euler-mode models convert it)."""
        return np.asarray(self._default_q)

    def get_default_u(self) -> np.ndarray:
        return np.asarray(self._default_u)

    def set_default_q(self, q) -> MobilizedBody:
        """Default q in the quaternion layout; a quaternion is normalized (as Simbody)."""
        q = _concrete(q, "default q", self._label, (len(self._default_q),))
        at = self._kind.quaternion_at
        if at is not None:
            norm = np.linalg.norm(q[at:at + 4])
            if norm == 0:
                raise ValueError(f"{self._label}: the default quaternion is zero")
            q[at:at + 4] /= norm
        return self._set("_default_q", tuple(float(x) for x in q))

    def set_default_u(self, u) -> MobilizedBody:
        u = _concrete(u, "default u", self._label, (len(self._default_u),))
        return self._set("_default_u", tuple(float(x) for x in u))

    def get_default_mass_properties(self) -> MassProperties:
        return self._mass_properties

    def set_armature(self, armature) -> MobilizedBody:
        """Rotor inertia reflected onto each of this mobilizer's u (kg m^2 for
        a rotational rate, kg for a translational one; >= 0), as MuJoCo's
        and Pinocchio's ``armature``: it adds ``diag(armature)`` to M, so
        forward and inverse dynamics, the mass-matrix operators and the
        kinetic energy carry it; body momenta and reaction forces do not (the
        rotor is not a body). A simbodyx extension; Simbody has none."""
        a = _concrete(armature, "armature", self._label, (len(self._default_u),))
        if np.any(a < 0):
            raise ValueError(f"{self._label}: armature must be >= 0, got {a.tolist()}")
        return self._set("_armature", tuple(float(x) for x in a))

    def get_armature(self) -> np.ndarray:
        """(nu,) the rotor inertia on each u (zeros unless set)."""
        return np.array(self._armature)

    def set_default_mass_properties(self, mass_properties: MassProperties) -> MobilizedBody:
        return self._set("_mass_properties", self._checked_mass_properties(mass_properties))

    def get_body(self):
        """The Body this mobilizer carries (its mass properties as last set)."""
        if self.is_ground():
            raise ValueError("Ground carries no Body")
        return Body.Rigid(self._mass_properties)

    def set_body(self, body) -> MobilizedBody:
        """Carry another Body (before freezing): its mass properties become the default."""
        if not isinstance(body, Body):
            raise TypeError(f"{self._label}: body must be a Body (e.g. Body.Rigid), got {type(body).__name__}")
        return self.set_default_mass_properties(body.mass_properties)

    def clone_for_new_parent(self, parent, name: str | None = None) -> MobilizedBody:
        """A new mobilized body of this type under ``parent`` (before freezing),
        with this one's frames, Body, joint parameters, direction and defaults."""
        if self.is_ground():
            raise ValueError("Ground cannot be cloned")
        clone = type(self)(parent, self._X_PF, Body.Rigid(self._mass_properties), self._X_BM, *self._kind_arguments,
                           name=name, direction=self._direction)
        clone._default_q, clone._default_u, clone._lock_level = self._default_q, self._default_u, self._lock_level
        clone._armature = self._armature
        clone._joint_params = self._joint_params
        return clone

    def get_default_inboard_frame(self) -> Transform:
        """X_PF: the mobilizer's F frame on the parent."""
        return self._X_PF

    def get_default_outboard_frame(self) -> Transform:
        """X_BM: the mobilizer's M frame on this body."""
        return self._X_BM

    def set_default_inboard_frame(self, X_PF: Transform) -> MobilizedBody:
        return self._set("_X_PF", _check_frame(X_PF, "X_PF (inboard frame)", self._label))

    def set_default_outboard_frame(self, X_BM: Transform) -> MobilizedBody:
        return self._set("_X_BM", _check_frame(X_BM, "X_BM (outboard frame)", self._label))

    def set_inboard_frame(self, model, X_PF: Transform):
        """The Model with this mobilizer's F frame on the parent set to X_PF.

        Simbody keeps this Instance-stage value in the State; simbodyx keeps it
        among the Model's leaves, so X_PF may be traced (``jax.grad`` reaches
        it) and changing it never recompiles. Realize States from the returned
        Model. X_PF.R must be a rotation matrix: it is not checked when traced.
        """
        return self._with_frame(model, "X_PF", X_PF)

    def set_outboard_frame(self, model, X_BM: Transform):
        """The Model with this mobilizer's M frame on the body set to X_BM; see
        :meth:`set_inboard_frame`."""
        return self._with_frame(model, "X_BM", X_BM)

    def set_mass_properties(self, model, mass_properties: MassProperties):
        """The Model with this body's mass properties replaced (mass in kg, mass
        center and inertia about Bo in B), e.g. to identify them from data:
        they are Model leaves, so they may be traced (``jax.grad`` reaches
        them) and changing them never recompiles. Checked as at build time
        when concrete; a traced value is not checked.
        """
        if self.is_ground():
            raise ValueError("Ground has no mass properties")
        self._check_model(model)
        if not isinstance(mass_properties, MassProperties):
            raise TypeError(f"{self._label}: mass properties must be a MassProperties, "
                            f"got {type(mass_properties).__name__}")
        mp = mass_properties
        if not any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(mp)):
            mp = self._checked_mass_properties(mp)
        i, dtype, params = self._index, model.dtype, model.params
        return eqx.tree_at(lambda m: (m.params.mass, m.params.com, m.params.inertia), model,
                           (params.mass.at[i].set(jnp.asarray(mp.mass, dtype)),
                            params.com.at[i].set(jnp.asarray(mp.com, dtype)),
                            params.inertia.at[i].set(jnp.asarray(mp.inertia.matrix, dtype))))

    def _check_model(self, model):
        if model.topology.system_uid != self._matter.system.uid:
            raise ValueError(f"{self._label} belongs to a different MultibodySystem than this Model")

    def _with_frame(self, model, which: str, X: Transform):
        if self.is_ground():
            raise ValueError(f"Ground has no {which} frame")
        self._check_model(model)
        if not isinstance(X, Transform):
            raise TypeError(f"{self._label}: {which} must be a Transform, got {type(X).__name__}")
        if jnp.shape(X.R) != (3, 3) or jnp.shape(X.p) != (3,):
            raise ValueError(f"{self._label}: {which} must have R (3, 3) and p (3,), "
                             f"got {jnp.shape(X.R)} and {jnp.shape(X.p)}")
        if not isinstance(X.R, jax.core.Tracer) and not isinstance(X.p, jax.core.Tracer):
            _check_frame(X, which, self._label)
        frames = getattr(model.params, which)
        i, dtype = self._index, model.dtype
        new = Transform(frames.R.at[i].set(jnp.asarray(X.R, dtype)), frames.p.at[i].set(jnp.asarray(X.p, dtype)))
        return eqx.tree_at(lambda m: getattr(m.params, which), model, new)

    # -- State plumbing --------------------------------------------------------------
    def _topology_of(self, state: State):
        top = state.topology
        if top.system_uid != self._matter.system.uid:
            raise ValueError(f"{self._label} belongs to a different MultibodySystem than this State")
        return top

    def _cache(self, state: State, stage: Stage, what: str):
        self._topology_of(state)
        state.require(stage, f"{type(self).__name__}.{what}")
        return {
            Stage.Instance: state.instance,
            Stage.Position: state.position,
            Stage.Velocity: state.velocity,
            Stage.Acceleration: state.acceleration,
        }[stage]

    def _q_slice(self, state: State) -> slice:
        top = self._topology_of(state)
        return slice(top.q_start[self._index], top.q_start[self._index] + top.body_nq[self._index])

    def _u_slice(self, state: State) -> slice:
        top = self._topology_of(state)
        return slice(top.u_start[self._index], top.u_start[self._index] + top.body_nu[self._index])

    def _which(self, which: int, n: int, what: str) -> int:
        if not isinstance(which, (int, np.integer)) or not 0 <= which < n:
            raise IndexError(f"{self._label}: {what} index {which!r} out of range; this mobilizer has {n}")
        return int(which)

    # -- q and u ---------------------------------------------------------------------
    def get_q_as_vector(self, state: State):
        return state.q[self._q_slice(state)]

    def get_u_as_vector(self, state: State):
        return state.u[self._u_slice(state)]

    def get_one_q(self, state: State, which: int):
        return state.q[self._q_slice(state).start + self._which(which, self.get_num_q(state), "q")]

    def get_one_u(self, state: State, which: int):
        return state.u[self._u_slice(state).start + self._which(which, self.get_num_u(state), "u")]

    def set_q_from_vector(self, state: State, q) -> State:
        """A new State with this mobilizer's q replaced (position caches dropped)."""
        s = self._q_slice(state)
        q = jnp.asarray(q, state.q.dtype)
        if q.shape != (s.stop - s.start,):
            raise ValueError(f"{self._label}: q has shape {q.shape}, expected ({s.stop - s.start},)")
        return state.with_q(state.q.at[s].set(q))

    def set_u_from_vector(self, state: State, u) -> State:
        """A new State with this mobilizer's u replaced (velocity caches dropped)."""
        s = self._u_slice(state)
        u = jnp.asarray(u, state.u.dtype)
        if u.shape != (s.stop - s.start,):
            raise ValueError(f"{self._label}: u has shape {u.shape}, expected ({s.stop - s.start},)")
        return state.with_u(state.u.at[s].set(u))

    def set_one_q(self, state: State, which: int, value) -> State:
        i = self._q_slice(state).start + self._which(which, self.get_num_q(state), "q")
        return state.with_q(state.q.at[i].set(value))

    def set_one_u(self, state: State, which: int, value) -> State:
        i = self._u_slice(state).start + self._which(which, self.get_num_u(state), "u")
        return state.with_u(state.u.at[i].set(value))

    def get_qdot_as_vector(self, state: State):
        """qdot = N u for this mobilizer (Velocity)."""
        return self._cache(state, Stage.Velocity, "get_qdot_as_vector").qdot[self._q_slice(state)]

    def get_one_qdot(self, state: State, which: int):
        return self.get_qdot_as_vector(state)[self._which(which, self.get_num_q(state), "q")]

    def get_one_from_q_partition(self, state: State, which: int, q_like):
        """This mobilizer's ``which``-th entry of a full (nq,) q-like vector."""
        q_like = jnp.asarray(q_like)
        if q_like.shape != (state.topology.nq,):
            raise ValueError(f"{self._label}: a q-like vector has shape ({state.topology.nq},), got {q_like.shape}")
        return q_like[self._q_slice(state)][self._which(which, self.get_num_q(state), "q")]

    def get_one_from_u_partition(self, state: State, which: int, u_like):
        """This mobilizer's ``which``-th entry of a full (nu,) u-like vector."""
        u_like = jnp.asarray(u_like)
        if u_like.shape != (state.topology.nu,):
            raise ValueError(f"{self._label}: a u-like vector has shape ({state.topology.nu},), got {u_like.shape}")
        return u_like[self._u_slice(state)][self._which(which, self.get_num_u(state), "u")]

    # -- fitting q and u to a requested pose or velocity ---------------------------------
    # Each returns a new State and never fails: a request the joint cannot reach
    # is projected onto what it can (built-in kinds in closed form, Custom and
    # FunctionBased by least squares; see simbodyx.mobilizers.fitting). Only this
    # mobilizer's q or u change, starting from (and partly keeping) their values.

    def set_q_to_fit_transform(self, state: State, X_FM: Transform) -> State:
        """q best matching the pose X_FM of M in F."""
        R = self._target(X_FM.R, (3, 3), "R_FM", state)
        return self._fit_q(state, R=R, p=self._target(X_FM.p, (3,), "p_FM", state))

    def set_q_to_fit_rotation(self, state: State, R_FM) -> State:
        """q best matching the orientation R_FM (a Rotation or (3, 3)); translational q kept."""
        return self._fit_q(state, R=self._target(getattr(R_FM, "matrix", R_FM), (3, 3), "R_FM", state))

    def set_q_to_fit_translation(self, state: State, p_FM) -> State:
        """q best placing Mo at p_FM (in F); may turn the joint when that is how
        it reaches (BendStretch, SphericalCoords, Ellipsoid)."""
        return self._fit_q(state, p=self._target(p_FM, (3,), "p_FM", state))

    def set_u_to_fit_velocity(self, state: State, V_FM) -> State:
        """u best matching V_FM = [w_FM; v_FM] (in F) at the State's q (angular part first)."""
        V = self._target(V_FM, (6,), "V_FM", state)
        return self._fit_u(state, w=V[:3], v=V[3:])

    def set_u_to_fit_angular_velocity(self, state: State, w_FM) -> State:
        return self._fit_u(state, w=self._target(w_FM, (3,), "w_FM", state))

    def set_u_to_fit_linear_velocity(self, state: State, v_FM) -> State:
        """u best matching the velocity v_FM of Mo in F (in F)."""
        return self._fit_u(state, v=self._target(v_FM, (3,), "v_FM", state))

    def _target(self, x, shape, what, state):
        x = jnp.asarray(x, state.q.dtype)
        if x.shape != shape:
            raise ValueError(f"{self._label}: {what} has shape {x.shape}, expected {shape}")
        return x

    def _joint_params_of(self, state: State):
        """This joint's numeric parameters: the State's Instance values if realized, else the defaults."""
        if state.instance is None:
            return jnp.asarray(self._joint_params, state.q.dtype)
        group, row = self._topology_of(state).group_row(self._index)
        return state.instance.joint_params[group][row]

    def _fit_q(self, state: State, R=None, p=None) -> State:
        kind = self._topology_of(state).kinds[self._index]
        if kind.nq == 0:
            return state
        q = kind.fit_q(self.get_q_as_vector(state), self._joint_params_of(state), R, p)
        return self.set_q_from_vector(state, q)

    def _fit_u(self, state: State, w=None, v=None) -> State:
        kind = self._topology_of(state).kinds[self._index]
        if kind.nu == 0:
            return state
        q, u = self.get_q_as_vector(state), self.get_u_as_vector(state)
        return self.set_u_from_vector(state, kind.fit_u(q, u, self._joint_params_of(state), w, v))

    # -- locks (Simbody's lock, lockAt, unlock, lockByDefault) ---------------------------
    # Position: q held, u = udot = 0. Velocity: u held, udot = 0. Acceleration:
    # udot held (0 unless lock_at says otherwise). See simbodyx.motion.

    def lock_by_default(self, level: Level = Level.Position) -> MobilizedBody:
        """Lock this mobilizer in the default State (at its default q or u, or
        udot = 0); ``Motion.NoLevel`` removes the default lock."""
        level = Level(level)
        if level != Level.NoLevel and self._kind.nu == 0:
            raise ValueError(f"{self._label}: has no mobilities to lock")
        return self._set("_lock_level", level)

    def is_locked_by_default(self) -> bool:
        return self._lock_level != Level.NoLevel

    def get_lock_by_default_level(self) -> Level:
        return Level(self._lock_level)

    def lock(self, state: State, level: Level = Level.Position) -> State:
        """A new State with this mobilizer locked at its current q (Position;
        u set to 0), current u (Velocity) or udot = 0 (Acceleration)."""
        level = Level(level)
        value = {Level.Position: self.get_q_as_vector, Level.Velocity: self.get_u_as_vector}.get(
            level, lambda s: jnp.zeros(self.get_num_u(s), s.u.dtype))(state)
        return self.lock_at(state, value, level)

    def lock_at(self, state: State, value, level: Level = Level.Position) -> State:
        """A new State with this mobilizer locked at ``value``: q (nq; u set to 0)
        for Position, u (nu) for Velocity, udot (nu) for Acceleration; a scalar
        serves one-mobility joints. Caches are dropped (an Instance change)."""
        level = Level(level)
        if level == Level.NoLevel:
            return self.unlock(state)
        if self.get_num_u(state) == 0:
            raise ValueError(f"{self._label}: has no mobilities to lock")
        qs, us = self._q_slice(state), self._u_slice(state)
        rows = qs if level == Level.Position else us
        value = jnp.reshape(jnp.asarray(value, state.q.dtype), (-1,))
        if value.shape != (rows.stop - rows.start,):
            raise ValueError(f"{self._label}: a {level.name} lock value needs {rows.stop - rows.start} entries, "
                             f"got shape {value.shape}")
        top = self._topology_of(state)
        locks = state.locks if state.locks is not None else Locks.unlocked(top, state.q, state.u)
        q, u = state.q, state.u
        if level == Level.Position:
            locks = eqx.tree_at(lambda l: l.q, locks, locks.q.at[qs].set(value))
            q, u = q.at[qs].set(value), u.at[us].set(0.0)
        elif level == Level.Velocity:
            locks = eqx.tree_at(lambda l: l.u, locks, locks.u.at[us].set(value))
            u = u.at[us].set(value)
        else:
            locks = eqx.tree_at(lambda l: l.udot, locks, locks.udot.at[us].set(value))
        locks = eqx.tree_at(lambda l: l.level, locks, locks.level.at[self._index].set(int(level)))
        return state.replace(q=q, u=u, locks=locks, keep=Stage.Model)

    def unlock(self, state: State) -> State:
        """A new State with this mobilizer free (a no-op if it was not locked)."""
        if state.locks is None:
            return state
        locks = eqx.tree_at(lambda l: l.level, state.locks, state.locks.level.at[self._index].set(-1))
        return state.replace(locks=locks, keep=Stage.Model)

    def get_lock_level(self, state: State):
        """The Motion level this mobilizer is locked at (NoLevel if free); a JAX
        integer when ``state`` is traced."""
        self._topology_of(state)
        if state.locks is None:
            return Level.NoLevel
        level = state.locks.level[self._index]
        return level if isinstance(level, jax.core.Tracer) else Level(int(level))

    def is_locked(self, state: State):
        return self.get_lock_level(state) != Level.NoLevel

    def get_lock_value_as_vector(self, state: State):
        """The held q (Position), u (Velocity) or udot (Acceleration); empty if free."""
        level = self.get_lock_level(state)
        if level == Level.NoLevel:
            return jnp.zeros(0, state.q.dtype)
        locks = state.locks
        if level == Level.Position:
            return locks.q[self._q_slice(state)]
        return (locks.u if level == Level.Velocity else locks.udot)[self._u_slice(state)]

    def get_tau_as_vector(self, state: State):
        """The prescribed-motion multipliers tau (nu) of this mobilizer, on the
        left of M udot + tau + G^T lambda + f_inertial = f_applied: the motor
        (lock or Motion) applies -tau; zero when free (Acceleration)."""
        self._cache(state, Stage.Acceleration, "get_tau_as_vector")
        return motion_forces(state)[self._u_slice(state)]

    def get_one_tau(self, state: State, which: int):
        return self.get_tau_as_vector(state)[self._which(which, self.get_num_u(state), "u")]

    # -- Motions (Simbody's hasMotion, getMotion, get*MotionMethod) ---------------------
    def has_motion(self) -> bool:
        """Whether a Motion was made for this mobilized body (Motion.Sinusoid(self, ...), ...)."""
        return self._matter._motion_of(self._index) is not None

    def get_motion(self):
        """This mobilized body's Motion handle."""
        motion = self._matter._motion_of(self._index)
        if motion is None:
            raise ValueError(f"{self._label}: has no Motion")
        return motion

    def _motion_methods(self, state: State) -> tuple[Method, Method, Method]:
        """(q, u, udot) methods: a lock's (Discrete at its level), else an enabled
        Motion's (Prescribed), else Free (Instance; concrete States only)."""
        level = self.get_lock_level(state)
        if isinstance(level, jax.core.Tracer):
            raise TypeError(f"{self._label}: motion methods depend on the locks, which are traced here; "
                            "call them outside jit")
        if level != Level.NoLevel:
            return level_methods(level, Method.Discrete)
        motion = self._matter._motion_of(self._index)
        if motion is not None and not bool(motion.is_disabled(state)):
            return level_methods(motion.level, Method.Prescribed)
        return level_methods(Level.NoLevel, Method.Free)

    def get_q_motion_method(self, state: State) -> Method:
        return self._motion_methods(state)[0]

    def get_u_motion_method(self, state: State) -> Method:
        return self._motion_methods(state)[1]

    def get_udot_motion_method(self, state: State) -> Method:
        return self._motion_methods(state)[2]

    # -- Instance-stage data ---------------------------------------------------------
    def get_body_mass_properties(self, state: State) -> MassProperties:
        """Mass, mass center station (in B) and inertia about Bo (in B) (Instance)."""
        inst = self._cache(state, Stage.Instance, "get_body_mass_properties")
        i = self._index
        return MassProperties(inst.mass[i], inst.com[i], Inertia(inst.inertia[i]))

    def get_body_mass(self, state: State):
        return self._cache(state, Stage.Instance, "get_body_mass").mass[self._index]

    def get_body_mass_center_station(self, state: State):
        return self._cache(state, Stage.Instance, "get_body_mass_center_station").com[self._index]

    def get_inboard_frame(self, state: State) -> Transform:
        """X_PF (Instance)."""
        X = self._cache(state, Stage.Instance, "get_inboard_frame").X_PF
        return Transform(X.R[self._index], X.p[self._index])

    def get_outboard_frame(self, state: State) -> Transform:
        """X_BM (Instance)."""
        X = self._cache(state, Stage.Instance, "get_outboard_frame").X_BM
        return Transform(X.R[self._index], X.p[self._index])

    # -- Position --------------------------------------------------------------------
    def get_body_transform(self, state: State) -> Transform:
        """X_GB, the pose of B in Ground (Position)."""
        X = self._cache(state, Stage.Position, "get_body_transform").X_GB
        return Transform(X.R[self._index], X.p[self._index])

    def get_body_rotation(self, state: State) -> Rotation:
        """R_GB (Position)."""
        return self.get_body_transform(state).rotation

    def get_body_origin_location(self, state: State):
        """p_GB, location of Bo in Ground (Position)."""
        return self.get_body_transform(state).p

    def get_mobilizer_transform(self, state: State) -> Transform:
        """X_FM, the pose of M in F (Position)."""
        X = self._cache(state, Stage.Position, "get_mobilizer_transform").X_FM
        return Transform(X.R[self._index], X.p[self._index])

    def get_h_fm_col(self, state: State, which: int):
        """Column ``which`` of H_FM: d V_FM / d u, [w; v] in F (Position)."""
        i = self._u_slice(state).start + self._which(which, self.get_num_u(state), "u")
        return self._cache(state, Stage.Position, "get_h_fm_col").H_FM[i]

    def get_h_col(self, state: State, which: int):
        """Column ``which`` of H_PB_G: d V_PB / d u, B relative to P at Bo, in G (Position)."""
        i = self._u_slice(state).start + self._which(which, self.get_num_u(state), "u")
        return self._cache(state, Stage.Position, "get_h_col").H_PB_G[i]

    def find_station_location_in_ground(self, state: State, station_on_B):
        """p_GS = X_GB p_BS (Position)."""
        return self.get_body_transform(state).apply(station_on_B)

    def find_station_location_in_another_body(self, state: State, station_on_B, to_body_A):
        """p_AS: the station of A coincident with station S of B, in A (Position)."""
        return to_body_A.find_station_at_ground_point(state, self.find_station_location_in_ground(state, station_on_B))

    def find_station_at_ground_point(self, state: State, location_in_G):
        """p_BS = X_BG p_GS: the station of B at a Ground point (Position)."""
        return self.get_body_transform(state).inverse().apply(location_in_G)

    def find_mass_center_location_in_ground(self, state: State):
        """Location of B's mass center in Ground (Position)."""
        return self.find_station_location_in_ground(state, self.get_body_mass_center_station(state))

    def find_body_transform_in_another_body(self, state: State, in_body_A) -> Transform:
        """X_AB = X_GA^-1 X_GB (Position)."""
        return in_body_A.get_body_transform(state).inverse().compose(self.get_body_transform(state))

    def find_frame_transform_in_ground(self, state: State, frame_on_B: Transform) -> Transform:
        """X_GF = X_GB X_BF for a frame F fixed on B (Position)."""
        return self.get_body_transform(state).compose(frame_on_B)

    def express_vector_in_ground_frame(self, state: State, vector_in_B):
        """R_GB v (Position)."""
        return self.get_body_transform(state).rotate(vector_in_B)

    def express_ground_vector_in_body_frame(self, state: State, vector_in_G):
        """R_BG v (Position)."""
        return self.get_body_transform(state).inverse().rotate(vector_in_G)

    def express_vector_in_another_body_frame(self, state: State, vector_in_B, in_body_A):
        """R_AB v (Position)."""
        return in_body_A.express_ground_vector_in_body_frame(state, self.express_vector_in_ground_frame(state, vector_in_B))

    def calc_body_spatial_inertia_matrix_in_ground(self, state: State):
        """6x6 [[I_Bo, skew(m c)], [-skew(m c), m 1]] about Bo, in G (Position);
        Ground's is diag(inf)."""
        X = self.get_body_transform(state)
        if self.is_ground():
            return jnp.diag(jnp.full(6, jnp.inf, X.R.dtype))
        mp = self.get_body_mass_properties(state)
        R = X.R
        return spatial_inertia_matrix(mp.mass, R @ mp.com, R @ mp.inertia.matrix @ R.T)

    def find_body_rotation_in_another_body(self, state: State, in_body_A) -> Rotation:
        """R_AB (Position)."""
        return self.find_body_transform_in_another_body(state, in_body_A).rotation

    def find_body_origin_location_in_another_body(self, state: State, in_body_A):
        """p_AoBo, in A (Position)."""
        return self.find_body_transform_in_another_body(state, in_body_A).p

    def find_mass_center_location_in_another_body(self, state: State, in_body_A):
        """B's mass center measured from Ao, in A (Position)."""
        return self.find_station_location_in_another_body(state, self.get_body_mass_center_station(state), in_body_A)

    def find_station_at_another_body_station(self, state: State, from_body_A, station_on_A):
        """The station of B coincident with a station of A, in B (Position)."""
        p_GS = from_body_A.find_station_location_in_ground(state, station_on_A)
        return self.find_station_at_ground_point(state, p_GS)

    def find_station_at_another_body_origin(self, state: State, from_body_A):
        """The station of B at A's origin, in B (Position)."""
        return self.find_station_at_ground_point(state, from_body_A.get_body_origin_location(state))

    def find_station_at_another_body_mass_center(self, state: State, from_body_A):
        """The station of B at A's mass center, in B (Position)."""
        return self.find_station_at_ground_point(state, from_body_A.find_mass_center_location_in_ground(state))

    def get_body_unit_inertia_about_body_origin(self, state: State) -> UnitInertia:
        """B's inertia about Bo per unit mass, in B (Instance)."""
        mp = self.get_body_mass_properties(state)
        return UnitInertia(mp.inertia.matrix / mp.mass)

    def calc_body_central_inertia(self, state: State) -> Inertia:
        """B's inertia about its mass center, in B (Instance)."""
        return self.get_body_mass_properties(state).calc_central_inertia()

    def express_mass_properties_in_ground_frame(self, state: State) -> MassProperties:
        """B's mass properties about Bo, expressed in G (Position)."""
        return self.get_body_mass_properties(state).re_express(self.get_body_transform(state).R)

    def express_mass_properties_in_another_body_frame(self, state: State, in_body_A) -> MassProperties:
        """B's mass properties about Bo, expressed in A (Position)."""
        return self.get_body_mass_properties(state).re_express(
            self.find_body_transform_in_another_body(state, in_body_A).R)

    def get_body_spatial_inertia_in_ground(self, state: State) -> SpatialInertia:
        """B's spatial inertia about Bo, expressed in G (Position)."""
        return SpatialInertia.from_mass_properties(self.express_mass_properties_in_ground_frame(state))

    def calc_body_inertia_about_another_body_station(self, state: State, in_body_A, about_location_on_A) -> Inertia:
        """B's inertia about a station of A, expressed in A (Position)."""
        p_BS = self.find_station_at_another_body_station(state, in_body_A, about_location_on_A)
        R_AB = self.find_body_transform_in_another_body(state, in_body_A).R
        return self.get_body_mass_properties(state).calc_shifted_inertia(p_BS).re_express(R_AB)

    # -- Velocity --------------------------------------------------------------------
    def get_body_velocity(self, state: State):
        """V_GB = [w_GB; v_GB] (6,), in G (Velocity)."""
        return self._cache(state, Stage.Velocity, "get_body_velocity").V_GB[self._index]

    def get_body_angular_velocity(self, state: State):
        """w_GB (Velocity)."""
        return self.get_body_velocity(state)[:3]

    def get_body_origin_velocity(self, state: State):
        """v_GB, velocity of Bo in G (Velocity)."""
        return self.get_body_velocity(state)[3:]

    def get_mobilizer_velocity(self, state: State):
        """V_FM = [w_FM; v_FM] (6,), measured and expressed in F (Velocity)."""
        return self._cache(state, Stage.Velocity, "get_mobilizer_velocity").V_FM[self._index]

    def find_station_velocity_in_ground(self, state: State, station_on_B):
        """v_GS = v_GB + w_GB x (R_GB p_BS) (Velocity)."""
        V = self.get_body_velocity(state)
        r = self.express_vector_in_ground_frame(state, station_on_B)
        return V[3:] + cross(V[:3], r)

    def find_station_location_and_velocity_in_ground(self, state: State, station_on_B):
        """(p_GS, v_GS) (Velocity)."""
        return (self.find_station_location_in_ground(state, station_on_B),
                self.find_station_velocity_in_ground(state, station_on_B))

    def find_body_velocity_in_another_body(self, state: State, in_body_A):
        """[w_AB; v_ABo]: B's velocity measured and expressed in A (Velocity):
        w_AB = R_AG (w_GB - w_GA), and Bo's velocity as a point of B's."""
        zero = jnp.zeros(3, state.u.dtype)
        w = self.get_body_angular_velocity(state) - in_body_A.get_body_angular_velocity(state)
        R_AG = in_body_A.get_body_transform(state).R.T
        return spatial_vec(R_AG @ w, self._moving_point(state, zero, zero, None, in_body_A)[0])

    def find_body_angular_velocity_in_another_body(self, state: State, in_body_A):
        """w_AB, in A (Velocity)."""
        return self.find_body_velocity_in_another_body(state, in_body_A)[:3]

    def find_body_origin_velocity_in_another_body(self, state: State, in_body_A):
        """Velocity of Bo measured and expressed in A (Velocity)."""
        return self.find_body_velocity_in_another_body(state, in_body_A)[3:]

    def find_station_velocity_in_another_body(self, state: State, station_on_B, in_body_A):
        """Velocity of a station of B measured and expressed in A (Velocity)."""
        return self.calc_body_moving_point_velocity_in_body(state, station_on_B, jnp.zeros(3, state.u.dtype),
                                                            in_body_A)

    def calc_body_moving_point_velocity_in_body(self, state: State, location_on_B, velocity_on_B, in_body_A):
        """Velocity, measured and expressed in A, of a point at ``location_on_B``
        moving with ``velocity_on_B`` relative to B (both in B) (Velocity)."""
        return self._moving_point(state, location_on_B, velocity_on_B, None, in_body_A)[0]

    def _moving_point(self, state: State, location_on_B, velocity_on_B, acceleration_on_B, in_body_A):
        """(velocity, acceleration or None) of a point moving on B, measured and
        expressed in A: the point's Ground motion less that of A's point under it."""
        p = self.find_station_location_in_ground(state, location_on_B)
        r_rel = self.express_vector_in_ground_frame(state, velocity_on_B)
        v = self.find_station_velocity_in_ground(state, location_on_B) + r_rel
        V_A = in_body_A.get_body_velocity(state)
        r = p - in_body_A.get_body_origin_location(state)
        v_rel = v - (V_A[3:] + cross(V_A[:3], r))
        R_AG = in_body_A.get_body_transform(state).R.T
        if acceleration_on_B is None:
            return R_AG @ v_rel, None
        w_B = self.get_body_angular_velocity(state)
        a = (self.find_station_acceleration_in_ground(state, location_on_B) + 2 * cross(w_B, r_rel)
             + self.express_vector_in_ground_frame(state, acceleration_on_B))
        A_A, w = in_body_A.get_body_acceleration(state), V_A[:3]
        a_rel = a - (A_A[3:] + cross(A_A[:3], r) + cross(w, cross(w, r))) - 2 * cross(w, v_rel)
        return R_AG @ v_rel, R_AG @ a_rel

    def find_frame_velocity_in_ground(self, state: State, frame_on_B: Transform):
        """V_GF = [w_GB; velocity of F's origin] for a frame F fixed on B (Velocity)."""
        V = self.get_body_velocity(state)
        return spatial_vec(V[:3], self.find_station_velocity_in_ground(state, frame_on_B.p))

    def calc_body_momentum_about_body_origin_in_ground(self, state: State):
        """[angular; linear] momentum of B about Bo, in G: M_B V_GB (Velocity)."""
        return self.calc_body_spatial_inertia_matrix_in_ground(state) @ self.get_body_velocity(state)

    def calc_body_momentum_about_body_mass_center_in_ground(self, state: State):
        """[angular; linear] momentum of B about its mass center, in G (Velocity)."""
        h = self.calc_body_momentum_about_body_origin_in_ground(state)
        c = self.express_vector_in_ground_frame(state, self.get_body_mass_center_station(state))
        return spatial_vec(h[:3] - cross(c, h[3:]), h[3:])

    def calc_station_to_station_distance(self, state: State, location_on_B, body_A, location_on_A):
        """|p_GS_A - p_GS_B| (Position)."""
        d = body_A.find_station_location_in_ground(state, location_on_A) - self.find_station_location_in_ground(state, location_on_B)
        return safe_norm(d)

    def _point_pair(self, state: State, location_on_B, velocity_on_B, acceleration_on_B, body_A, location_on_A,
                    velocity_on_A, acceleration_on_A):
        """(unit vector from B's point to A's, their relative velocity, relative
        acceleration or None, distance), in G, for points moving on their bodies
        (velocities and accelerations relative to the body, in the body)."""
        ground = self._matter.Ground()
        d = (body_A.find_station_location_in_ground(state, location_on_A)
             - self.find_station_location_in_ground(state, location_on_B))
        v_B, a_B = self._moving_point(state, location_on_B, velocity_on_B, acceleration_on_B, ground)
        v_A, a_A = body_A._moving_point(state, location_on_A, velocity_on_A, acceleration_on_A, ground)
        length = safe_norm(d)
        return d / jnp.where(length > 0, length, 1.0), v_A - v_B, None if a_A is None else a_A - a_B, length

    def calc_station_to_station_distance_time_derivative(self, state: State, location_on_B, body_A, location_on_A):
        """d/dt of the distance, stations fixed on their bodies (Velocity)."""
        zero = jnp.zeros(3, state.u.dtype)
        return self.calc_moving_point_to_point_distance_time_derivative(state, location_on_B, zero, body_A,
                                                                         location_on_A, zero)

    def calc_station_to_station_distance_2nd_time_derivative(self, state: State, location_on_B, body_A, location_on_A):
        """d2/dt2 of the distance, stations fixed on their bodies (Acceleration)."""
        zero = jnp.zeros(3, state.u.dtype)
        return self.calc_moving_point_to_point_distance_2nd_time_derivative(state, location_on_B, zero, zero, body_A,
                                                                            location_on_A, zero, zero)

    def calc_moving_point_to_point_distance_time_derivative(self, state: State, location_on_B, velocity_on_B, body_A,
                                                            location_on_A, velocity_on_A):
        """d/dt of the distance between points moving on B and on A: e . (v_A - v_B) (Velocity)."""
        e, v, _, _ = self._point_pair(state, location_on_B, velocity_on_B, None, body_A, location_on_A,
                                      velocity_on_A, None)
        return e @ v

    def calc_moving_point_to_point_distance_2nd_time_derivative(self, state: State, location_on_B, velocity_on_B,
                                                                acceleration_on_B, body_A, location_on_A,
                                                                velocity_on_A, acceleration_on_A):
        """d2/dt2 of that distance: e . a + (|v|^2 - (e . v)^2) / d (Acceleration)."""
        e, v, a, length = self._point_pair(state, location_on_B, velocity_on_B, acceleration_on_B, body_A,
                                           location_on_A, velocity_on_A, acceleration_on_A)
        return e @ a + (v @ v - (e @ v) ** 2) / jnp.where(length > 0, length, 1.0)

    # -- Acceleration ----------------------------------------------------------------
    def get_body_acceleration(self, state: State):
        """A_GB = [alpha_GB; a_GB] (6,) in G (Acceleration)."""
        return self._cache(state, Stage.Acceleration, "get_body_acceleration").A_GB[self._index]

    def get_body_angular_acceleration(self, state: State):
        return self.get_body_acceleration(state)[:3]

    def get_body_origin_acceleration(self, state: State):
        return self.get_body_acceleration(state)[3:]

    def get_udot_as_vector(self, state: State):
        return self._cache(state, Stage.Acceleration, "get_udot_as_vector").udot[self._u_slice(state)]

    def get_qdotdot_as_vector(self, state: State):
        return self._cache(state, Stage.Acceleration, "get_qdotdot_as_vector").qdotdot[self._q_slice(state)]

    def get_one_qdotdot(self, state: State, which: int):
        return self.get_qdotdot_as_vector(state)[self._which(which, self.get_num_q(state), "q")]

    def get_one_udot(self, state: State, which: int):
        return self.get_udot_as_vector(state)[self._which(which, self.get_num_u(state), "u")]

    def find_station_acceleration_in_ground(self, state: State, station_on_B):
        """a_GS = a_GB + alpha x r + w x (w x r), r = R_GB p_BS (Acceleration)."""
        A = self.get_body_acceleration(state)
        w = self.get_body_angular_velocity(state)
        r = self.express_vector_in_ground_frame(state, station_on_B)
        return A[3:] + cross(A[:3], r) + cross(w, cross(w, r))

    def find_station_location_velocity_and_acceleration_in_ground(self, state: State, station_on_B):
        """(p_GS, v_GS, a_GS) (Acceleration)."""
        p, v = self.find_station_location_and_velocity_in_ground(state, station_on_B)
        return p, v, self.find_station_acceleration_in_ground(state, station_on_B)

    def find_frame_acceleration_in_ground(self, state: State, frame_on_B: Transform):
        """[alpha_GB; acceleration of F's origin] for a frame F fixed on B (Acceleration)."""
        return spatial_vec(self.get_body_angular_acceleration(state),
                           self.find_station_acceleration_in_ground(state, frame_on_B.p))

    def find_body_acceleration_in_another_body(self, state: State, in_body_A):
        """[alpha_AB; a_ABo]: B's acceleration measured and expressed in A (Acceleration):
        alpha = R_AG (alpha_B - alpha_A - w_A x (w_B - w_A)), and Bo's
        acceleration as a point of B's."""
        zero = jnp.zeros(3, state.u.dtype)
        w_A = in_body_A.get_body_angular_velocity(state)
        alpha = (self.get_body_angular_acceleration(state) - in_body_A.get_body_angular_acceleration(state)
                 - cross(w_A, self.get_body_angular_velocity(state) - w_A))
        R_AG = in_body_A.get_body_transform(state).R.T
        return spatial_vec(R_AG @ alpha, self._moving_point(state, zero, zero, zero, in_body_A)[1])

    def find_body_angular_acceleration_in_another_body(self, state: State, in_body_A):
        """alpha_AB, in A (Acceleration)."""
        return self.find_body_acceleration_in_another_body(state, in_body_A)[:3]

    def find_body_origin_acceleration_in_another_body(self, state: State, in_body_A):
        """Acceleration of Bo measured and expressed in A (Acceleration)."""
        return self.find_body_acceleration_in_another_body(state, in_body_A)[3:]

    def find_station_acceleration_in_another_body(self, state: State, station_on_B, in_body_A):
        """Acceleration of a station of B measured and expressed in A (Acceleration)."""
        zero = jnp.zeros(3, state.u.dtype)
        return self.calc_body_moving_point_acceleration_in_body(state, station_on_B, zero, zero, in_body_A)

    def calc_body_moving_point_acceleration_in_body(self, state: State, location_on_B, velocity_on_B,
                                                    acceleration_on_B, in_body_A):
        """Acceleration, measured and expressed in A, of a point moving on B with
        the given velocity and acceleration relative to B (all in B) (Acceleration)."""
        return self._moving_point(state, location_on_B, velocity_on_B, acceleration_on_B, in_body_A)[1]

    def get_mobilizer_acceleration(self, state: State):
        """A_FM = [alpha_FM; a_FM] (6,), M's acceleration measured and expressed in F
        (Acceleration)."""
        R_FP = self.get_inboard_frame(state).R.T  # F is fixed on P: measured in F = measured in P
        alpha = self.find_body_angular_acceleration_in_another_body(state, self.parent)
        a = self.find_station_acceleration_in_another_body(state, self.get_outboard_frame(state).p, self.parent)
        return spatial_vec(R_FP @ alpha, R_FP @ a)

    def _reaction_at_M(self, state: State):
        self._cache(state, Stage.Acceleration, "find_mobilizer_reaction_*")
        return _all_reactions(state)[self._index]

    def find_mobilizer_reaction_on_body_at_m_in_ground(self, state: State):
        """Reaction the mobilizer applies to B at Mo, in G, mobility forces included (Acceleration)."""
        return self._reaction_at_M(state)

    def find_mobilizer_reaction_on_body_at_origin_in_ground(self, state: State):
        """The same reaction moved to Bo (Acceleration)."""
        F = self._reaction_at_M(state)
        p_MB = -self.express_vector_in_ground_frame(state, self.get_outboard_frame(state).p)
        return shift_force(F, p_MB)

    def find_mobilizer_reaction_on_parent_at_f_in_ground(self, state: State):
        """Reaction on the parent at Fo, in G: minus the body's, moved from Mo to Fo (Acceleration)."""
        F = self._reaction_at_M(state)
        if self.is_ground():
            return -F
        X_GF = self._parent.get_body_transform(state).compose(self.get_inboard_frame(state))
        p_MF = -X_GF.rotate(self.get_mobilizer_transform(state).p)
        return -shift_force(F, p_MF)

    def find_mobilizer_reaction_on_parent_at_origin_in_ground(self, state: State):
        """The parent's reaction moved from Fo to Po (Acceleration)."""
        F = self.find_mobilizer_reaction_on_parent_at_f_in_ground(state)
        if self.is_ground():
            return F
        p_FP = -self._parent.express_vector_in_ground_frame(state, self.get_inboard_frame(state).p)
        return shift_force(F, p_FP)

    # -- force helpers (return new arrays) -------------------------------------------
    def apply_body_force(self, state: State, spatial_force_in_G, body_forces):
        """body_forces + [torque; force] at Bo on this body."""
        return jnp.asarray(body_forces).at[self._index].add(jnp.asarray(spatial_force_in_G))

    def apply_body_torque(self, state: State, torque_in_G, body_forces):
        return jnp.asarray(body_forces).at[self._index, :3].add(jnp.asarray(torque_in_G))

    def apply_force_to_body_point(self, state: State, point_in_B, force_in_G, body_forces):
        """body_forces + [(R_GB p) x f; f] on this body (Position)."""
        f = jnp.asarray(force_in_G)
        r = self.express_vector_in_ground_frame(state, point_in_B)
        return jnp.asarray(body_forces).at[self._index].add(spatial_vec(cross(r, f), f))

    def apply_one_mobility_force(self, state: State, which: int, f, mobility_forces):
        i = self._u_slice(state).start + self._which(which, self.get_num_u(state), "u")
        return jnp.asarray(mobility_forces).at[i].add(f)

    def convert_q_force_to_u_force(self, state: State, fq):
        """f_u = N^T f_q for this mobilizer (power-invariant), from the State's q."""
        kind = state.topology.kinds[self._index]
        fq = jnp.asarray(fq, state.q.dtype)
        if fq.shape != (kind.nq,):
            raise ValueError(f"{self._label}: fq has shape {fq.shape}, expected ({kind.nq},)")
        return kind.N(self.get_q_as_vector(state)).T @ fq


@per_context_jit(eqx.filter_jit)
def _all_reactions(s: State):
    """Every mobilizer's reaction at Mo in G, from an Acceleration-stage State
    (constraint forces act on the bodies like applied ones)."""
    T, F = net_applied_forces(s)
    return reactions_articulated(s.topology, s.instance, s.position, s.velocity, T, F, s.acceleration.A_GB,
                                 prescribed_udot(s))


class Ground(MobilizedBody):
    """Body 0; made by the SimbodyMatterSubsystem, never by users."""

    family = mobilizers.Ground

    def __init__(self, *args, **kwargs):
        raise ValueError(
            "a SimbodyMatterSubsystem has exactly one Ground, made with it: use matter.Ground() "
            "(to fix a body to Ground use MobilizedBody.Weld)"
        )

    @classmethod
    def _create(cls, matter) -> Ground:
        g = object.__new__(cls)
        g._matter, g._parent, g._name, g._label = matter, None, "Ground", "Ground (body 0)"
        g._X_PF = g._X_BM = Transform(np.eye(3), np.zeros(3))
        g._mass_properties = MassProperties(0.0)
        g._kind, g._default_q, g._default_u, g._joint_params = mobilizers.Ground(), (), (), ()
        g._armature = ()
        g._direction, g._lock_level = Direction.Forward, Level.NoLevel
        g._index = matter._add(g)
        return g

    def _spec(self) -> BodySpec:
        return BodySpec(self._name, 0, self._kind, (), ())


class Weld(MobilizedBody):
    """No mobility: M is fixed to F."""

    family = mobilizers.Weld


class Pin(MobilizedBody):
    """Rotation q (rad) about the common z axis of F and M."""

    family = mobilizers.Pin

    def set_default_angle(self, angle) -> Pin:
        return self.set_default_q([angle])

    def get_default_angle(self) -> float:
        return self._default_q[0]


class Slider(MobilizedBody):
    """Translation q (m) along the common x axis of F and M."""

    family = mobilizers.Slider

    def set_default_length(self, length) -> Slider:
        return self.set_default_q([length])

    def get_default_length(self) -> float:
        return self._default_q[0]


class Screw(MobilizedBody):
    """Rotation q about z with translation pitch*q along z: ``Screw(parent, X_PF,
    body, X_BM, pitch)`` or ``Screw(parent, body, pitch)``; pitch in m/rad."""

    family = mobilizers.Screw

    def _parse_kind(self, *rest):
        if len(rest) != 1:
            raise TypeError(f"{self._label}: Screw needs exactly one pitch argument")
        return self.family(), (float(_concrete(rest[0], "pitch", self._label, ())),)

    def set_default_pitch(self, pitch) -> Screw:
        return self._set("_joint_params", (float(_concrete(pitch, "pitch", self._label, ())),))

    def get_default_pitch(self) -> float:
        return self._joint_params[0]


class Universal(MobilizedBody):
    """Body-fixed X then Y rotation (q0, q1)."""

    family = mobilizers.Universal


class Cylinder(MobilizedBody):
    """q = [rotation about z, translation along z]."""

    family = mobilizers.Cylinder


class Planar(MobilizedBody):
    """q = [rotation about z, translation along Fx, translation along Fy]."""

    family = mobilizers.Planar

    def set_default_angle(self, angle) -> Planar:
        return self.set_default_q([angle, *self._default_q[1:]])

    def set_default_translation(self, xy) -> Planar:
        xy = _concrete(xy, "translation", self._label, (2,))
        return self.set_default_q([self._default_q[0], *xy])


class Gimbal(MobilizedBody):
    """Body-fixed X-Y-Z angles; u = qdot (Euler rates)."""

    family = mobilizers.Gimbal

    def set_default_rotation(self, R_FM) -> Gimbal:
        R = _concrete(getattr(R_FM, "matrix", R_FM), "R_FM", self._label, (3, 3))
        return self.set_default_q(np.asarray(matrix_to_body_fixed_xyz(jnp.asarray(R))))


class Translation(MobilizedBody):
    """q = p_FM (in F), u = v_FM."""

    family = mobilizers.Translation

    def set_default_translation(self, p_FM) -> Translation:
        return self.set_default_q(p_FM)


class Ball(MobilizedBody):
    """Free orientation, Fo = Mo; q a quaternion (or X-Y-Z angles in Euler mode),
    u = w_FM in F."""

    family = mobilizers.Ball

    def _rotation_q(self, R_FM):
        R = _concrete(getattr(R_FM, "matrix", R_FM), "R_FM", self._label, (3, 3))
        return np.asarray(matrix_to_quaternion(jnp.asarray(R)))

    def set_default_rotation(self, R_FM):
        return self.set_default_q([*self._rotation_q(R_FM), *self._default_q[4:]])

    def get_default_rotation(self) -> Rotation:
        return Rotation.from_quaternion(jnp.asarray(self._default_q[:4]))


class Free(Ball):
    """Six dof: q = [quaternion, p_FM], u = [w_FM; v_FM], both in F."""

    family = mobilizers.Free

    def set_default_translation(self, p_FM) -> Free:
        p = _concrete(p_FM, "p_FM", self._label, (3,))
        return self.set_default_q([*self._default_q[:4], *p])

    def set_default_quaternion(self, quaternion) -> Free:
        """Stored exactly as given (not normalized), as Simbody does."""
        quat = _concrete(quaternion, "quaternion", self._label, (4,))
        if not np.any(quat):
            raise ValueError(f"{self._label}: the default quaternion is zero")
        return self._set("_default_q", (*map(float, quat), *self._default_q[4:]))

    def set_default_transform(self, X_FM: Transform) -> Free:
        self.set_default_rotation(X_FM.R)
        return self.set_default_translation(X_FM.p)

    def get_default_transform(self) -> Transform:
        return Transform(self.get_default_rotation(), jnp.asarray(self._default_q[4:]))


class Ellipsoid(Ball):
    """q and u as Ball; Mo rides on an ellipsoid centred at Fo with semi-axes
    ``radii`` (m, along Fx, Fy, Fz): ``Ellipsoid(parent, X_PF, body, X_BM[, radii])``
    or ``Ellipsoid(parent, body[, radii])``; radii default to (0.5, 1/3, 0.25)
    as in Simbody. At q = identity Mo sits at (0, 0, rz)."""

    family = mobilizers.Ellipsoid
    DEFAULT_RADII = (0.5, 1 / 3, 0.25)

    def _checked_radii(self, radii) -> tuple[float, ...]:
        r = _concrete(radii, "radii", self._label, (3,))
        if np.any(r < 0):
            raise ValueError(f"{self._label}: radii must be non-negative, got {r.tolist()}")
        return tuple(float(x) for x in r)

    def _parse_kind(self, *rest):
        if len(rest) > 1:
            raise TypeError(f"{self._label}: Ellipsoid takes at most one radii argument")
        return self.family(), self._checked_radii(rest[0] if rest else self.DEFAULT_RADII)

    def set_default_radii(self, radii) -> Ellipsoid:
        return self._set("_joint_params", self._checked_radii(radii))

    def get_default_radii(self) -> np.ndarray:
        return np.asarray(self._joint_params)


class BendStretch(MobilizedBody):
    """q = [angle about the common z, radius along the rotated Mx] (polar coordinates)."""

    family = mobilizers.BendStretch


class SphericalCoords(MobilizedBody):
    """q = [azimuth about Fz, zenith about the new My, radius along Mz (or Mx)].
    Long form: ``SphericalCoords(parent, X_PF, body, X_BM, azimuth_offset,
    negate_azimuth, zenith_offset, negate_zenith, radial_axis ('x' or 'z'),
    negate_radial)``; the short forms give pure spherical coordinates."""

    family = mobilizers.SphericalCoords

    def _parse_kind(self, *rest):
        if not rest:
            return self.family(), ()
        if len(rest) != 6:
            raise TypeError(
                f"{self._label}: SphericalCoords takes no options or all six (azimuth_offset, "
                "negate_azimuth, zenith_offset, negate_zenith, radial_axis, negate_radial)"
            )
        az, neg_az, ze, neg_ze, axis, neg_r = rest
        axis = {"x": "x", "X": "x", 0: "x", "z": "z", "Z": "z", 2: "z"}.get(axis)
        if axis is None:
            raise ValueError(f"{self._label}: radial_axis must be 'x' or 'z', got {rest[4]!r}")
        kind = self.family(
            azimuth_offset=float(_concrete(az, "azimuth_offset", self._label, ())),
            negate_azimuth=bool(neg_az),
            zenith_offset=float(_concrete(ze, "zenith_offset", self._label, ())),
            negate_zenith=bool(neg_ze),
            radial_axis=axis,
            negate_radial=bool(neg_r),
        )
        return kind, ()

    def set_default_angles(self, angles) -> SphericalCoords:
        """Default [azimuth, zenith] coordinates (rad)."""
        a = _concrete(angles, "angles", self._label, (2,))
        return self.set_default_q([*a, self._default_q[2]])

    def set_default_radius(self, radius) -> SphericalCoords:
        return self.set_default_q([*self._default_q[:2], float(_concrete(radius, "radius", self._label, ()))])

    def get_default_angles(self) -> np.ndarray:
        return np.asarray(self._default_q[:2])

    def get_default_radius(self) -> float:
        return self._default_q[2]


class LineOrientation(Ball):
    """Orientation of a body with no inertia about Mz: q as Ball, u = (w_x, w_y)
    of w_FM expressed in M."""

    family = mobilizers.LineOrientation


class FreeLine(Free):
    """LineOrientation plus translation: q = [quaternion, p_FM], u = [w_x, w_y
    (in M), v_FM (in F)]."""

    family = mobilizers.FreeLine


class Bushing(MobilizedBody):
    """q = [X-Y-Z angles, p_FM]: translate by p_FM (in F), then rotate body-fixed
    X-Y-Z about the new origin; u = qdot."""

    family = mobilizers.Bushing

    def set_default_transform(self, X_FM: Transform) -> Bushing:
        R = _concrete(X_FM.R, "X_FM.R", self._label, (3, 3))
        p = _concrete(X_FM.p, "X_FM.p", self._label, (3,))
        return self.set_default_q([*np.asarray(matrix_to_body_fixed_xyz(jnp.asarray(R))), *p])

    def get_default_transform(self) -> Transform:
        q = jnp.asarray(self._default_q)
        return Transform(Rotation.from_body_fixed_xyz(q[:3]), q[3:])


class Custom(MobilizedBody):
    """A user-defined mobilizer: ``Custom(parent, X_PF, body, X_BM, implementation)``
    or ``Custom(parent, body, implementation)`` with ``implementation`` a
    :class:`Custom.Implementation` (``simbodyx.mobilizers.Custom``): num_q,
    num_u, num_angles and a pure JAX ``transform(q) -> (R_FM, p_FM)``; H and
    HDot come from automatic differentiation unless supplied."""

    family = mobilizers.Custom
    Implementation = mobilizers.Custom

    def _parse_kind(self, *rest):
        if len(rest) != 1 or not isinstance(rest[0], mobilizers.Custom):
            raise TypeError(f"{self._label}: Custom needs one MobilizedBody.Custom.Implementation argument")
        kind = rest[0]
        self._check_kind(kind)
        return kind, ()

    def _check_kind(self, kind):
        """Evaluate the user's functions once at the default q: shapes, finiteness
        and a proper rotation, with this body's name in any error."""
        q = jnp.asarray(kind.default_q(), jnp.result_type(float))
        try:
            R, p = kind.X_FM(q, None)
            H = kind.H_FM(q, None)
            N, N_inv = kind.N(q), kind.N_inv(q)
        except Exception as e:
            raise ValueError(f"{self._label}: evaluating the mobilizer at its default q failed: {e}") from e
        checks = ((R, (3, 3), "R_FM"), (p, (3,), "p_FM"), (H, (kind.nu, 6), "H_FM"),
                  (N, (kind.nq, kind.nu), "N"), (N_inv, (kind.nu, kind.nq), "NInv"))
        for value, shape, what in checks:
            value = np.asarray(value)
            if value.shape != shape:
                raise ValueError(f"{self._label}: {what} has shape {value.shape} at the default q, expected {shape}")
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{self._label}: {what} is not finite at the default q")
        R = np.asarray(R)
        if np.max(np.abs(R.T @ R - np.eye(3))) > _FRAME_TOL or np.linalg.det(R) < 0:
            raise ValueError(f"{self._label}: transform(q) does not return a proper rotation at the default q")


class FunctionBased(Custom):
    """Simbody's FunctionBased mobilizer: ``FunctionBased(parent, X_PF, body, X_BM,
    num_mobilities, functions, coordinates[, axes])`` or ``FunctionBased(parent,
    body, num_mobilities, functions, coordinates[, axes])``: six functions (x, y, z
    rotation then x, y, z translation; None for 0) of the coordinates listed per
    function, about / along the given axes (default x, y, z). See
    :class:`simbodyx.mobilizers.FunctionBased` and :mod:`simbodyx.functions`."""

    family = mobilizers.FunctionBased

    def _parse_kind(self, *rest):
        if len(rest) not in (3, 4):
            raise TypeError(
                f"{self._label}: FunctionBased takes (num_mobilities, functions, coordinates[, axes])"
            )
        try:
            kind = mobilizers.FunctionBased(rest[0], tuple(rest[1]), tuple(rest[2]), *(
                (tuple(map(tuple, np.asarray(rest[3], dtype=float))),) if len(rest) == 4 else ()))
        except (TypeError, ValueError) as e:
            raise type(e)(f"{self._label}: {e}") from None
        self._check_kind(kind)
        return kind, ()


for _cls in (
    Ground, Weld, Pin, Slider, Screw, Universal, Cylinder, BendStretch, Planar, Gimbal, Ball, Ellipsoid,
    Translation, SphericalCoords, LineOrientation, FreeLine, Free, Bushing, Custom, FunctionBased,
):
    setattr(MobilizedBody, _cls.__name__, _cls)
MobilizedBody.Torsion = MobilizedBody.Revolute = Pin
MobilizedBody.PolarCoords = BendStretch
MobilizedBody.Prismatic = Slider
MobilizedBody.Orientation = MobilizedBody.Spherical = Ball
MobilizedBody.Cartesian = MobilizedBody.CartesianCoords = Translation
Mobod = MobilizedBody
