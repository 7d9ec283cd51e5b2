"""MobilizedBody handles: Simbody's construction API and per-body queries.

A handle is created while building (``MobilizedBody.Pin(parent, X_PF, body,
X_BM)`` or ``MobilizedBody.Pin(parent, body)``) and afterwards answers
queries on States of the frozen model: each query reads the State's caches
(the stage it needs is named in its docstring) and returns arrays; each
setter returns a new State. Results are measured and expressed in Ground
unless the name says otherwise (``V_FM`` is expressed in F).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx import mobilizers
from simbodyx.algorithms.reactions import reactions_articulated
from simbodyx.build.body import Body
from simbodyx.spatial.inertia import MassProperties, Inertia, spatial_inertia_matrix
from simbodyx.spatial.rotation import Rotation, matrix_to_body_fixed_xyz, matrix_to_quaternion
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm, shift_force, spatial_vec
from simbodyx.stage import Stage
from simbodyx.state import State
from simbodyx.topology import BodySpec

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


class MobilizedBody:
    """Base of every mobilized-body handle; ``MobilizedBody.Pin`` etc. are subclasses."""

    family: type = mobilizers.Weld

    def __init__(self, parent, *args, name: str | None = None):
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
        kind = self.family()
        self._default_q = tuple(float(x) for x in kind.default_q())
        self._default_u = (0.0,) * kind.nu
        self._joint_params = self._parse_joint_params(*rest)
        self._index = matter._add(self)
        self._label = f"{type(self).__name__} {self._name!r} (body {self._index})"

    def _parse_joint_params(self, *rest) -> tuple[float, ...]:
        if rest:
            raise TypeError(f"{self._label}: unexpected extra arguments {rest!r}")
        return ()

    def _checked_mass_properties(self, mp) -> MassProperties:
        if not isinstance(mp, MassProperties):
            raise TypeError(f"{self._label}: mass properties must be a MassProperties")
        return mp.check(where=self._label)

    def _spec(self) -> BodySpec:
        return BodySpec(self._name, self._parent._index, self.family, self._default_q, self._default_u)

    def _quaternion_kind(self):
        return self.family()

    def _set(self, attr: str, value) -> MobilizedBody:
        self._matter.system.check_not_frozen(f"change {self._label}")
        setattr(self, attr, value)
        self._matter._invalidate()
        return self

    # -- identity and tree navigation -----------------------------------------------
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
        at = self._quaternion_kind().quaternion_at
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

    def set_default_mass_properties(self, mass_properties: MassProperties) -> MobilizedBody:
        return self._set("_mass_properties", self._checked_mass_properties(mass_properties))

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
        """[w_AB; v_ABo]: B's velocity measured and expressed in A (Velocity).

        w_AB = w_GB - w_GA; v = v_GB - v_GA - w_GA x (p_GB - p_GA); then R_AG."""
        V_B, V_A = self.get_body_velocity(state), in_body_A.get_body_velocity(state)
        r = self.get_body_origin_location(state) - in_body_A.get_body_origin_location(state)
        V_rel = spatial_vec(V_B[:3] - V_A[:3], V_B[3:] - V_A[3:] - cross(V_A[:3], r))
        R_AG = in_body_A.get_body_transform(state).R.T
        return spatial_vec(R_AG @ V_rel[:3], R_AG @ V_rel[3:])

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

    def _station_pair(self, state: State, location_on_B, body_A, location_on_A, with_accelerations: bool):
        d = body_A.find_station_location_in_ground(state, location_on_A) - self.find_station_location_in_ground(state, location_on_B)
        v = body_A.find_station_velocity_in_ground(state, location_on_A) - self.find_station_velocity_in_ground(state, location_on_B)
        a = None
        if with_accelerations:
            a = body_A.find_station_acceleration_in_ground(state, location_on_A) - self.find_station_acceleration_in_ground(state, location_on_B)
        length = safe_norm(d)
        return d / jnp.where(length > 0, length, 1.0), v, a, length

    def calc_station_to_station_distance_time_derivative(self, state: State, location_on_B, body_A, location_on_A):
        """d/dt of the distance, stations fixed on their bodies: e . (v_A - v_B) (Velocity)."""
        e, v, _, _ = self._station_pair(state, location_on_B, body_A, location_on_A, False)
        return e @ v

    def calc_station_to_station_distance_2nd_time_derivative(self, state: State, location_on_B, body_A, location_on_A):
        """d2/dt2 of the distance: e . a + (|v|^2 - (e . v)^2) / d (Acceleration)."""
        e, v, a, length = self._station_pair(state, location_on_B, body_A, location_on_A, True)
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
        """[alpha_AB; a_ABo]: B's acceleration measured and expressed in A (Acceleration).

        With r = p_AoBo, w = w_GA, and B's velocity relative to A (in G) [w_r; v_r]:
        alpha = alpha_B - alpha_A - w x w_r;
        a = a_B - a_A - alpha_A x r - w x (w x r) - 2 w x v_r."""
        A_B, A_A = self.get_body_acceleration(state), in_body_A.get_body_acceleration(state)
        V_B, V_A = self.get_body_velocity(state), in_body_A.get_body_velocity(state)
        w = V_A[:3]
        r = self.get_body_origin_location(state) - in_body_A.get_body_origin_location(state)
        w_r = V_B[:3] - w
        v_r = V_B[3:] - V_A[3:] - cross(w, r)
        alpha = A_B[:3] - A_A[:3] - cross(w, w_r)
        a = A_B[3:] - A_A[3:] - cross(A_A[:3], r) - cross(w, cross(w, r)) - 2 * cross(w, v_r)
        R_AG = in_body_A.get_body_transform(state).R.T
        return spatial_vec(R_AG @ alpha, R_AG @ a)

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


@eqx.filter_jit
def _all_reactions(s: State):
    """Every mobilizer's reaction at Mo in G, from an Acceleration-stage State."""
    return reactions_articulated(
        s.topology, s.instance, s.position, s.velocity,
        s.dynamics.mobility_forces, s.dynamics.body_forces, s.acceleration.A_GB)


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
        g._default_q, g._default_u, g._joint_params = (), (), ()
        g._index = matter._add(g)
        return g

    def _spec(self) -> BodySpec:
        return BodySpec(self._name, 0, self.family, (), ())


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

    def _parse_joint_params(self, *rest):
        if len(rest) != 1:
            raise TypeError(f"{self._label}: Screw needs exactly one pitch argument")
        return (float(_concrete(rest[0], "pitch", self._label, ())),)

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


for _cls in (Ground, Weld, Pin, Slider, Screw, Universal, Cylinder, Planar, Gimbal, Translation, Ball, Free):
    setattr(MobilizedBody, _cls.__name__, _cls)
MobilizedBody.Torsion = MobilizedBody.Revolute = Pin
MobilizedBody.Prismatic = Slider
MobilizedBody.Orientation = MobilizedBody.Spherical = Ball
MobilizedBody.Cartesian = MobilizedBody.CartesianCoords = Translation
Mobod = MobilizedBody
