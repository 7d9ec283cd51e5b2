"""The per-body queries of a MobilizedBody handle on States of the frozen
model (Simbody's MobilizedBody state-taking methods), by stage: q and u,
fitting them to a pose or velocity, locks, Instance data, Position,
Velocity and Acceleration quantities, reactions, and force helpers.

Each query reads the State's caches (the stage it needs is named in its
docstring) and returns arrays; each setter returns a new State. Results are
measured and expressed in Ground unless the name says otherwise (``V_FM``
is expressed in F). :class:`BodyQueries` is the base of
``simbodyx.builder.MobilizedBody``, which provides ``_index``, ``_label``,
``_joint_params`` (the default joint parameters),
``parent``, ``is_ground()`` and ``get_matter_subsystem()``.
"""

from __future__ import annotations

import contextvars
import functools
import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.trace_context import per_context_jit
from simbodyx.algorithms.aba import ForwardInputs
from simbodyx.algorithms.reactions import reactions_articulated
from simbodyx.constraints.equations import net_applied_forces
from simbodyx.matter import motion_forces
from simbodyx.motion import prescribed_udot
from simbodyx.spatial.inertia import Inertia, MassProperties, SpatialInertia, UnitInertia, spatial_inertia_matrix
from simbodyx.spatial.rotation import Rotation
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm, shift_force, spatial_vec
from simbodyx.stage import Stage
from simbodyx.state import Level, Locks, State


#: the public query the user called, while it runs: stage errors name it
#: rather than the query it delegates to
_called = contextvars.ContextVar("simbodyx_body_query", default=None)


class BodyQueries:
    """A mobilized body's queries on States (see the module docstring)."""

    # -- layout, from a State ----------------------------------------------------------
    def get_num_q(self, state: State) -> int:
        return self._topology_of(state).body_nq[self._index]

    def get_num_u(self, state: State) -> int:
        return self._topology_of(state).body_nu[self._index]

    def get_first_q_index(self, state: State) -> int:
        return self._topology_of(state).q_start[self._index]

    def get_first_u_index(self, state: State) -> int:
        return self._topology_of(state).u_start[self._index]

    # -- State plumbing --------------------------------------------------------------
    def _topology_of(self, state: State):
        top = state.topology
        if not top.same_tree(self.get_matter_subsystem().topology()):
            raise ValueError(f"{self._label} belongs to a different MultibodySystem than this State")
        return top

    def _cache(self, state: State, stage: Stage, what: str):
        self._topology_of(state)
        state.require(stage, f"{type(self).__name__}.{_called.get() or what}")
        return getattr(state, stage.name.lower())

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
        if not State.has(state, "instance"):
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

    # -- locks (Simbody's lock, lockAt, unlock) ---------------------------------------------
    # Position: q held, u = udot = 0. Velocity: u held, udot = 0. Acceleration:
    # udot held (0 unless lock_at says otherwise). See simbodyx.motion.

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
        in_ground = self.express_vector_in_ground_frame(state, vector_in_B)
        return in_body_A.express_ground_vector_in_body_frame(state, in_ground)

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
        p_A = body_A.find_station_location_in_ground(state, location_on_A)
        return safe_norm(p_A - self.find_station_location_in_ground(state, location_on_B))

    def _point_pair(self, state: State, location_on_B, velocity_on_B, acceleration_on_B, body_A, location_on_A,
                    velocity_on_A, acceleration_on_A):
        """(unit vector from B's point to A's, their relative velocity, relative
        acceleration or None, distance), in G, for points moving on their bodies
        (velocities and accelerations relative to the body, in the body)."""
        ground = self.get_matter_subsystem().Ground()
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




#: the query arguments that are 3-vectors (stations, directions, forces): a
#: wrong shape is an error naming the argument and the query
_VECTORS = frozenset({
    "station_on_B", "station_on_A", "location_in_G", "location_on_B", "location_on_A", "about_location_on_A",
    "vector_in_B", "vector_in_G", "velocity_on_B", "velocity_on_A", "acceleration_on_B", "acceleration_on_A",
    "point_in_B", "force_in_G", "torque_in_G"})


def _named(method):
    """``method``, which checks its 3-vector arguments' shapes and names itself
    in the stage errors of the queries it calls."""
    names = list(inspect.signature(method).parameters)[1:]
    vectors = [(k, name) for k, name in enumerate(names) if name in _VECTORS]

    @functools.wraps(method)
    def query(self, *args, **kwargs):
        for k, name in vectors:
            value = args[k] if k < len(args) else kwargs.get(name)
            if value is not None and np.shape(value)[-1:] != (3,):
                raise ValueError(f"{type(self).__name__}.{method.__name__}: {name} has shape {np.shape(value)}, "
                                 "expected (3,)")
        if _called.get() is not None:
            return method(self, *args, **kwargs)
        token = _called.set(method.__name__)
        try:
            return method(self, *args, **kwargs)
        finally:
            _called.reset(token)

    return query


for _name, _method in list(vars(BodyQueries).items()):
    if not _name.startswith("_") and callable(_method):
        setattr(BodyQueries, _name, _named(_method))


@per_context_jit(eqx.filter_jit)
def _all_reactions(s: State):
    """Every mobilizer's reaction at Mo in G, from an Acceleration-stage State
    (constraint forces act on the bodies like applied ones)."""
    T, F = net_applied_forces(s)
    return reactions_articulated(s.topology, ForwardInputs.at(s, T, F, prescribed_udot(s)), s.acceleration.A_GB)
