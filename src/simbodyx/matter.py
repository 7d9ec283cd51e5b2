"""``model.matter``: SimbodyMatterSubsystem's operators as pure functions.

Each method takes a State and returns arrays or a new State; none mutates.
An operator uses the State's caches when it is realized far enough and
otherwise realizes what it needs with this Model. Applied-force arguments
that are None or zero-length mean zeros. Spatial results are in G, about
each body's origin, [angular; linear]. Simbody's ``multiplyByN(state, transpose, in)``
argument order is kept.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.scalarize import entry_point
from simbodyx._xla.trace_context import per_context_jit
from simbodyx.algorithms import aba, coordinates, crba, energy, jacobians, reactions, rnea
from simbodyx.algorithms.accelerations import body_accelerations
from simbodyx.algorithms.per_body import spatial_inertias_in_ground
from simbodyx.constraints.dynamics import constrained_forward_dynamics
from simbodyx.constraints.equations import Equations, Layout, constraint_forces_of, net_applied_forces
from simbodyx.linalg import min_norm_solve
from simbodyx.motion import model_prescription, prescribed_udot
from simbodyx.projection import enabled_position_errors
from simbodyx.spatial.inertia import Inertia, MassProperties
from simbodyx.spatial.vectors import mat_vec
from simbodyx.stage import Stage
from simbodyx.state import State


@entry_point(eqx.filter_jit)
def _call(model, method, args, kwargs):
    return method(Matter(model), *args, **kwargs)


def compiled(method):
    """Run ``method`` through ``eqx.filter_jit`` (arrays traced, everything else
    static): an eager call costs one compiled dispatch instead of op-by-op
    execution (calc_m on a 16-body tree: tens of seconds eagerly, about a
    millisecond compiled); inside a user's transformation it is inlined,
    on the scalar path for small models (``simbodyx.scalarize.entry_point``)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        return _call(self.model, method, args, kwargs)

    return wrapper


def _columns(state: State, linear_map, axis: int):
    """The explicit matrix of a linear operator on u-like vectors: its images
    of the unit vectors, stacked along ``axis`` of the output (O(n) each)."""
    eye = jnp.eye(state.topology.nu, dtype=state.u.dtype)
    return jax.vmap(linear_map, out_axes=axis)(eye)


@per_context_jit(eqx.filter_jit)
def motion_forces(s: State):
    """(nu,) tau of an Acceleration-stage State: minus the inverse-dynamics
    residual at the prescribed mobilities (constraint forces counted as
    applied), zero elsewhere."""
    prescribed = prescribed_udot(s)
    if prescribed is None:
        return jnp.zeros_like(s.u)
    T, F = net_applied_forces(s)
    residual = rnea.residual_forces(s.topology, s.instance, s.position, s.velocity, s.acceleration.udot, T, F)[0]
    return -prescribed[0] * residual


class Matter:
    def __init__(self, model):
        self.model = model

    def _check(self, state: State) -> State:
        return state.check_model(self.model)

    # -- counts and modelling options -------------------------------------------------
    def get_num_bodies(self) -> int:
        """Number of mobilized bodies, Ground included."""
        return self.model.topology.num_bodies

    def get_num_mobilities(self) -> int:
        """nu, the number of generalized speeds."""
        return self.model.topology.nu

    def get_num_q(self) -> int:
        """nq in use (depends on the Euler-angle option)."""
        return self.model.topology.nq

    def get_use_euler_angles(self, state: State) -> bool:
        return self._check(state).topology.use_euler_angles

    def get_num_quaternions_in_use(self, state: State) -> int:
        return len(self._check(state).topology.quaternion_bodies)

    def is_using_quaternion(self, state: State, body) -> bool:
        return int(body) in self._check(state).topology.quaternion_bodies

    def get_quaternion_pool_index(self, state: State, body) -> int:
        """Position of this body's quaternion among those in use; -1 if it has none."""
        bodies = self._check(state).topology.quaternion_bodies
        return bodies.index(int(body)) if int(body) in bodies else -1

    def get_total_q_alloc(self) -> int:
        """q slots for either rotation representation: nq with quaternions, the larger."""
        return self.model.topology.with_euler_angles(False).nq

    # -- partial realizations ----------------------------------------------------------
    # Simbody computes parts of a stage on request. A State here carries each
    # stage's cache whole, and the composite and articulated body inertias are
    # computed by their accessors from a Position State, so each of these
    # returns the State realized through the stage that holds its part.
    def realize_position_kinematics(self, state: State) -> State:
        """Body poses (Simbody's first part of Position): the State realized through Position."""
        return self._at(state, Stage.Position)

    def realize_velocity_kinematics(self, state: State) -> State:
        """Body velocities (the first part of Velocity): the State realized through Velocity."""
        return self._at(state, Stage.Velocity)

    def realize_composite_body_inertias(self, state: State) -> State:
        """A State from which ``get_composite_body_inertia`` computes them (Position)."""
        return self._at(state, Stage.Position)

    def realize_articulated_body_inertias(self, state: State) -> State:
        """A State from which ``get_articulated_body_inertia`` computes them (Position)."""
        return self._at(state, Stage.Position)

    def realize_articulated_body_velocity(self, state: State) -> State:
        """The velocity-dependent articulated-body terms' State (Velocity)."""
        return self._at(state, Stage.Velocity)

    def is_position_kinematics_realized(self, state: State) -> bool:
        return self._check(state).stage >= Stage.Position

    def is_velocity_kinematics_realized(self, state: State) -> bool:
        return self._check(state).stage >= Stage.Velocity

    is_composite_body_inertias_realized = is_position_kinematics_realized
    is_articulated_body_inertias_realized = is_position_kinematics_realized
    is_articulated_body_velocity_realized = is_velocity_kinematics_realized

    # -- kinematic differential equations ---------------------------------------------
    @compiled
    def calc_qdot(self, state: State, u):
        """qdot = N(q) u (nq,) for the State's q and the given u."""
        s = self._check(state)
        return coordinates.multiply_by_n(s.topology, s.q, u)

    @compiled
    def calc_qdotdot(self, state: State, udot):
        """qdotdot = N udot + NDot u (nq,) with q and u from the State."""
        s = self._check(state)
        return coordinates.calc_qdotdot(s.topology, s.q, s.u, udot)

    @compiled
    def multiply_by_n(self, state: State, transpose: bool, v):
        """N v (u-like in, q-like out), or N^T v (q-like in, u-like out)."""
        s = self._check(state)
        return coordinates.multiply_by_n(s.topology, s.q, v, transpose)

    @compiled
    def multiply_by_n_inv(self, state: State, transpose: bool, v):
        """NInv v (q-like in, u-like out), or NInv^T v (u-like in, q-like out)."""
        s = self._check(state)
        return coordinates.multiply_by_n_inv(s.topology, s.q, v, transpose)

    @compiled
    def multiply_by_n_dot(self, state: State, transpose: bool, v):
        """NDot(q, u) v (u-like in), or NDot^T v (q-like in)."""
        s = self._check(state)
        return coordinates.multiply_by_n_dot(s.topology, s.q, s.u, v, transpose)

    @compiled
    def normalize_quaternions(self, state: State) -> State:
        """A new State whose quaternions have unit length (caches dropped)."""
        s = self._check(state)
        return s.with_q(coordinates.normalize_quaternions(s.topology, s.q))

    # -- rotation representation --------------------------------------------------------
    def _convert(self, state: State, use_euler_angles: bool) -> State:
        s = self._check(state)
        target = s.topology.with_euler_angles(use_euler_angles)
        q = s.topology.convert_q(s.q, target)
        locks = s.locks
        if locks is not None:
            locks = eqx.tree_at(lambda l: l.q, locks, s.topology.convert_q(locks.q, target))
        return State(s.t, q, s.u, s.z, target, instance_data=dataclasses.replace(s.instance_data, locks=locks),
                     discrete=s.discrete)

    @compiled
    def convert_to_euler_angles(self, state: State) -> State:
        """The same configuration for ``model.with_euler_angles(True)``: every
        quaternion becomes body-fixed X-Y-Z angles (u unchanged; stage Model)."""
        return self._convert(state, True)

    @compiled
    def convert_to_quaternions(self, state: State) -> State:
        """The same configuration for ``model.with_euler_angles(False)``
        (quaternions with w >= 0; u unchanged; stage Model)."""
        return self._convert(state, False)

    # -- realization on demand ----------------------------------------------------------
    def _at(self, state: State, stage: Stage) -> State:
        """The State itself if realized to ``stage``, else realized by the Model."""
        s = self._check(state)
        return s if s.stage >= stage else self.model.realize(s, stage)

    @staticmethod
    def _sized(state: State, x, shape: tuple[int, ...], name: str):
        """``x`` as an array of ``shape`` in the State's dtype; None or
        zero-length means zeros (Simbody's rule for optional inputs)."""
        x = None if x is None else jnp.asarray(x, state.u.dtype)
        if x is None or x.size == 0:
            return jnp.zeros(shape, state.u.dtype)
        if x.shape != shape:
            raise ValueError(f"{name} has shape {x.shape}, expected {shape}")
        return x

    def _applied(self, state: State, mobility_forces=None, body_forces=None):
        top = state.topology
        return (self._sized(state, mobility_forces, (top.nu,), "mobility_forces"),
                self._sized(state, body_forces, (top.num_bodies, 6), "body_forces"))

    def _u_vector(self, state: State, v, name: str):
        return self._sized(state, v, (state.topology.nu,), name)

    # -- mass matrix ----------------------------------------------------------------------
    @compiled
    def multiply_by_m(self, state: State, v):
        """M v (nu,), O(n), no matrix formed (Position)."""
        s = self._at(state, Stage.Position)
        return rnea.multiply_by_m(s.topology, s.instance, s.position, self._u_vector(s, v, "v"))

    @compiled
    def calc_m(self, state: State):
        """The dense mass matrix M (nu, nu) by the composite-rigid-body method (Position)."""
        s = self._at(state, Stage.Position)
        return crba.mass_matrix(s.topology, s.instance, s.position)

    @compiled
    def multiply_by_m_inv(self, state: State, v):
        """M^-1 v (nu,), O(n) by the articulated-body method (Position)."""
        s = self._at(state, Stage.Position)
        return aba.multiply_by_m_inv(s.topology, s.instance, s.position, self._u_vector(s, v, "v"))

    @compiled
    def calc_m_inv(self, state: State):
        """The dense M^-1 (nu, nu), column by column from multiply_by_m_inv."""
        s = self._at(state, Stage.Position)
        return _columns(s, lambda v: aba.multiply_by_m_inv(s.topology, s.instance, s.position, v), -1)

    @compiled
    def calc_composite_body_inertias(self, state: State):
        """(nb, 6, 6): each body and its whole subtree, rigidly welded, about Bo in G."""
        s = self._at(state, Stage.Position)
        return crba.composite_inertias(s.topology, s.instance, s.position)

    def get_composite_body_inertia(self, state: State, body):
        return self.calc_composite_body_inertias(state)[int(body)]

    @compiled
    def calc_articulated_body_inertias(self, state: State):
        """(nb, 6, 6) articulated-body inertias P, about each Bo in G (Position)."""
        s = self._at(state, Stage.Position)
        return aba.articulated_inertias(s.topology, s.instance, s.position)

    def get_articulated_body_inertia(self, state: State, body):
        """(6, 6) articulated-body inertia P of one body, about Bo in G (Position)."""
        return self.calc_articulated_body_inertias(state)[int(body)]

    # -- dynamics -------------------------------------------------------------------------
    @compiled
    def calc_acceleration_ignoring_constraints(self, state: State, mobility_forces=None, body_forces=None):
        """(udot (nu,), A_GB (nb, 6)) from M udot = T + J^T F - f_inertial, O(n);
        locked mobilities take their prescribed udot."""
        s = self._at(state, Stage.Velocity)
        T, F = self._applied(s, mobility_forces, body_forces)
        return aba.forward_dynamics(s.topology, aba.ForwardInputs.at(s, T, F, prescribed_udot(s)))

    @compiled
    def calc_residual_force_ignoring_constraints(self, state: State, mobility_forces, body_forces, known_udot):
        """f_res = M udot + f_inertial - T - J^T F (nu,), O(n) inverse dynamics."""
        s = self._at(state, Stage.Velocity)
        T, F = self._applied(s, mobility_forces, body_forces)
        udot = self._u_vector(s, known_udot, "known_udot")
        return rnea.residual_forces(s.topology, s.instance, s.position, s.velocity, udot, T, F)[0]

    @compiled
    def calc_tree_equivalent_mobility_forces(self, state: State, body_forces):
        """Mobility forces replacing the body forces and the velocity-induced
        inertial forces: J^T F - f_inertial (so M udot = T + this)."""
        s = self._at(state, Stage.Velocity)
        zero_T, F = self._applied(s, None, body_forces)
        zero_udot = jnp.zeros(s.topology.nu, s.u.dtype)
        return -rnea.residual_forces(s.topology, s.instance, s.position, s.velocity, zero_udot, zero_T, F)[0]

    @compiled
    def calc_body_acceleration_from_udot(self, state: State, known_udot):
        """A_GB = J udot + JDot u (nb, 6) in G; zero-length udot gives JDot u."""
        s = self._at(state, Stage.Velocity)
        udot = self._u_vector(s, known_udot, "known_udot")
        return body_accelerations(s.topology, s.position, udot, s.velocity.mobilizer_coriolis)

    @compiled
    def calc_mobilizer_reaction_forces(self, state: State):
        """(nb, 6) reaction on each child at Mo, in G, mobility forces included,
        constraint forces acting on the bodies; O(n) from articulated-body
        quantities (Acceleration)."""
        s = self._at(state, Stage.Acceleration)
        T, F = net_applied_forces(s)
        return reactions.reactions_articulated(s.topology, aba.ForwardInputs.at(s, T, F, prescribed_udot(s)),
                                               s.acceleration.A_GB)

    @compiled
    def calc_mobilizer_reaction_forces_using_free_body_method(self, state: State):
        """The same reactions by tip-to-base free-body diagrams (a cross-check)."""
        s = self._at(state, Stage.Acceleration)
        T, F = net_applied_forces(s)
        return reactions.reactions_free_body(s.topology, s.instance, s.position, s.velocity, F, s.acceleration.A_GB)

    # -- per-body velocity-stage terms ----------------------------------------------------
    def get_gyroscopic_force(self, state: State, body):
        """[w x I w; m w x (w x c)] (6,) of one body about Bo in G (Velocity)."""
        return self._at(state, Stage.Velocity).velocity.gyroscopic[int(body)]

    def get_mobilizer_coriolis_acceleration(self, state: State, body):
        """The mobilizer's own Coriolis contribution to A_GB (6,) (Velocity)."""
        return self._at(state, Stage.Velocity).velocity.mobilizer_coriolis[int(body)]

    def get_mobilizer_centrifugal_forces(self, state: State, body):
        """P a + b (6,) about Bo in G: the body's articulated-body inertia times
        its mobilizer's own Coriolis acceleration, plus its gyroscopic force
        (Velocity). An intermediate of the articulated-body method that Simbody
        deprecates; get_total_centrifugal_forces is the useful quantity."""
        s = self._at(state, Stage.Velocity)
        P = self.get_articulated_body_inertia(s, body)
        return mat_vec(P, self.get_mobilizer_coriolis_acceleration(s, body)) + self.get_gyroscopic_force(s, body)

    def get_total_coriolis_acceleration(self, state: State, body):
        """This body's row of JDot u (6,) in G (Velocity)."""
        s = self._at(state, Stage.Velocity)
        return self.calc_body_acceleration_from_udot(s, jnp.zeros(s.topology.nu, s.u.dtype))[int(body)]

    @compiled
    def calc_total_centrifugal_forces(self, state: State):
        """(nb, 6) M_B a_B + b_B for every body: own spatial inertia times total
        Coriolis acceleration (JDot u) plus gyroscopic force, about Bo in G."""
        s = self._at(state, Stage.Velocity)
        M = spatial_inertias_in_ground(s.instance, s.position.X_GB)
        JDotu = body_accelerations(s.topology, s.position, jnp.zeros_like(s.u), s.velocity.mobilizer_coriolis)
        return mat_vec(M, JDotu) + s.velocity.gyroscopic

    def get_total_centrifugal_forces(self, state: State, body):
        """M_B a + b (6,) of one body (Velocity); see calc_total_centrifugal_forces."""
        return self.calc_total_centrifugal_forces(state)[int(body)]

    # -- whole-system quantities ----------------------------------------------------------
    @compiled
    def calc_kinetic_energy(self, state: State):
        s = self._at(state, Stage.Velocity)
        return energy.kinetic_energy(s.instance, s.position, s.velocity, s.u)

    @compiled
    def calc_system_mass(self, state: State):
        return energy.system_mass(self._at(state, Stage.Instance).instance)

    @compiled
    def calc_system_mass_center_location_in_ground(self, state: State):
        s = self._at(state, Stage.Position)
        return energy.system_mass_center(s.instance, s.position)

    @compiled
    def calc_system_mass_center_velocity_in_ground(self, state: State):
        s = self._at(state, Stage.Velocity)
        return energy.system_mass_center_velocity(s.instance, s.position, s.velocity)

    @compiled
    def calc_system_mass_center_acceleration_in_ground(self, state: State):
        s = self._at(state, Stage.Acceleration)
        return energy.system_mass_center_acceleration(s.instance, s.position, s.velocity, s.acceleration.A_GB)

    @compiled
    def calc_system_mass_properties_in_ground(self, state: State) -> MassProperties:
        """Mass, mass center (from the Ground origin) and inertia about the Ground origin, in G."""
        s = self._at(state, Stage.Position)
        return MassProperties(
            energy.system_mass(s.instance),
            energy.system_mass_center(s.instance, s.position),
            Inertia(energy.system_inertia_about_ground_origin(s.instance, s.position)),
        )

    @compiled
    def calc_system_central_inertia_in_ground(self, state: State) -> Inertia:
        """Inertia of the whole system about its mass center, in G."""
        return self.calc_system_mass_properties_in_ground(state).calc_central_inertia()

    @compiled
    def calc_system_momentum_about_ground_origin(self, state: State):
        s = self._at(state, Stage.Velocity)
        return energy.momentum_about_ground_origin(s.instance, s.position, s.velocity)

    @compiled
    def calc_system_central_momentum(self, state: State):
        s = self._at(state, Stage.Velocity)
        return energy.central_momentum(s.instance, s.position, s.velocity)

    # -- force helpers (return new arrays) ------------------------------------------------
    def add_in_station_force(self, state: State, body, station_on_B, force_in_G, body_forces):
        """body_forces + [R_GB p x f; f] on ``body`` (a point force at a station)."""
        s = self._at(state, Stage.Position)
        b = int(body)
        r = s.position.X_GB.R[b] @ jnp.asarray(station_on_B, s.u.dtype)
        f = jnp.asarray(force_in_G, s.u.dtype)
        _, F = self._applied(s, None, body_forces)
        return F.at[b].add(jnp.concatenate([jnp.cross(r, f), f]))

    def add_in_body_torque(self, state: State, body, torque_in_G, body_forces):
        _, F = self._applied(self._check(state), None, body_forces)
        return F.at[int(body), :3].add(jnp.asarray(torque_in_G, F.dtype))

    def add_in_mobility_force(self, state: State, body, which: int, f, mobility_forces):
        s = self._check(state)
        b = int(body)
        if not 0 <= which < s.topology.body_nu[b]:
            raise IndexError(f"{s.topology.body_label(b)}: mobility index {which} out of range")
        T, _ = self._applied(s, mobility_forces, None)
        return T.at[s.topology.u_start[b] + which].add(f)

    # -- Jacobians (all in G) -------------------------------------------------------------
    def _tasks(self, state: State, bodies, origins, what: str):
        """(single, bodies as a tuple of ints, origins (nt, 3)) with checks."""
        single = not isinstance(bodies, (list, tuple)) and np.ndim(bodies) == 0
        idx = (bodies,) if single else tuple(bodies)
        nb = state.topology.num_bodies
        out = []
        for b in idx:
            i = int(b)
            if not 0 <= i < nb:
                raise IndexError(f"{what}: body index {i} out of range; the model has {nb} bodies")
            out.append(i)
        origins = jnp.asarray(origins, state.u.dtype)
        expected = (3,) if single else (len(out), 3)
        if origins.shape != expected:
            raise ValueError(f"{what}: stations have shape {origins.shape}, expected {expected}")
        return single, tuple(out), origins.reshape(len(out), 3)

    def _task_vector(self, state: State, x, single: bool, nt: int, width: int, what: str):
        x = jnp.asarray(x, state.u.dtype)
        expected = (width,) if single else (nt, width)
        if x.shape != expected:
            raise ValueError(f"{what}: input has shape {x.shape}, expected {expected}")
        return x.reshape(nt, width)

    @compiled
    def multiply_by_system_jacobian(self, state: State, u):
        """J u (nb, 6): every body's [w; v] (at Bo, in G) for speeds u; O(n)."""
        s = self._at(state, Stage.Position)
        return body_accelerations(s.topology, s.position, self._sized(s, u, (s.topology.nu,), "u"))

    @compiled
    def multiply_by_system_jacobian_transpose(self, state: State, F_G):
        """J^T F (nu,) for body spatial forces F_G (nb, 6) [torque; force] at each
        Bo in G (Ground's row ignored); O(n)."""
        s = self._at(state, Stage.Position)
        F = self._sized(s, F_G, (s.topology.num_bodies, 6), "F_G").at[0].set(0.0)
        return rnea.jacobian_transpose_times(s.topology, s.position, F)

    @compiled
    def calc_system_jacobian(self, state: State, flat: bool = False):
        """Explicit J: (nb, nu, 6) spatial blocks (Simbody's Matrix_<SpatialVec>),
        or with ``flat`` the (6 nb, nu) matrix whose rows 6b..6b+5 are body b's [w; v]."""
        s = self._at(state, Stage.Position)
        J = jacobians.body_jacobians(s.topology, s.position, range(s.topology.num_bodies))
        return jnp.swapaxes(J, 1, 2).reshape(-1, s.topology.nu) if flat else J

    @compiled
    def calc_bias_for_system_jacobian(self, state: State, flat: bool = False):
        """JDot u: (nb, 6) per body, or (6 nb,) with ``flat`` (Velocity)."""
        s = self._at(state, Stage.Velocity)
        A = body_accelerations(s.topology, s.position, jnp.zeros_like(s.u), s.velocity.mobilizer_coriolis)
        return A.reshape(-1) if flat else A

    @compiled
    def _frame_velocities(self, state, bodies, origins, u):
        s = self._at(state, Stage.Position)
        return jacobians.frame_velocities(s.topology, s.position, np.asarray(bodies, dtype=np.int32), origins, u)

    @compiled
    def _frame_transpose(self, state, bodies, origins, F):
        s = self._at(state, Stage.Position)
        bodies = np.asarray(bodies, dtype=np.int32)
        return jacobians.frame_forces_to_mobilities(s.topology, s.position, bodies, origins, F)

    @compiled
    def _frame_matrix(self, state, bodies, origins):
        s = self._at(state, Stage.Position)
        J = jacobians.frame_jacobians(s.topology, s.position, np.asarray(bodies, dtype=np.int32), origins)
        return jnp.swapaxes(J, -1, -2)

    @compiled
    def _frame_bias(self, state, bodies, origins):
        s = self._at(state, Stage.Velocity)
        return jacobians.frame_bias(s.topology, s.position, s.velocity, np.asarray(bodies, dtype=np.int32), origins)

    def multiply_by_frame_jacobian(self, state: State, bodies, origins_in_B, u):
        """V_GA = J_F u: (nt, 6) [w; v at Ao] in G for task frames on ``bodies``
        with origins ``origins_in_B`` (nt, 3); one body and a (3,) origin give (6,)."""
        single, b, o = self._tasks(self._check(state), bodies, origins_in_B, "multiply_by_frame_jacobian")
        V = self._frame_velocities(state, b, o, self._u_vector(state, u, "u"))
        return V[0] if single else V

    def multiply_by_frame_jacobian_transpose(self, state: State, bodies, origins_in_B, F_GAo):
        """J_F^T F (nu,) for spatial forces (nt, 6) [torque; force] at the task origins, in G."""
        single, b, o = self._tasks(self._check(state), bodies, origins_in_B, "multiply_by_frame_jacobian_transpose")
        F = self._task_vector(state, F_GAo, single, len(b), 6, "multiply_by_frame_jacobian_transpose")
        return self._frame_transpose(state, b, o, F)

    def calc_frame_jacobian(self, state: State, bodies, origins_in_B):
        """Explicit J_F: (6 nt, nu), rows 6t..6t+5 task t's [w; v]; (6, nu) for one task."""
        single, b, o = self._tasks(self._check(state), bodies, origins_in_B, "calc_frame_jacobian")
        return self._frame_matrix(state, b, o).reshape(6 * len(b), -1)

    def calc_bias_for_frame_jacobian(self, state: State, bodies, origins_in_B):
        """JDot_F u: (nt, 6) in G, or (6,) for one task (Velocity)."""
        single, b, o = self._tasks(self._check(state), bodies, origins_in_B, "calc_bias_for_frame_jacobian")
        A = self._frame_bias(state, b, o)
        return A[0] if single else A

    def multiply_by_station_jacobian(self, state: State, bodies, stations_in_B, u):
        """v_GS = J_S u: (nt, 3) station velocities in G, or (3,) for one station."""
        return self.multiply_by_frame_jacobian(state, bodies, stations_in_B, u)[..., 3:]

    def multiply_by_station_jacobian_transpose(self, state: State, bodies, stations_in_B, f_GS):
        """J_S^T f (nu,) for point forces f_GS (nt, 3) in G applied at the stations."""
        single, b, o = self._tasks(self._check(state), bodies, stations_in_B, "multiply_by_station_jacobian_transpose")
        f = self._task_vector(state, f_GS, single, len(b), 3, "multiply_by_station_jacobian_transpose")
        return self._frame_transpose(state, b, o, jnp.concatenate([jnp.zeros_like(f), f], axis=1))

    def calc_station_jacobian(self, state: State, bodies, stations_in_B):
        """Explicit J_S: (3 nt, nu), rows 3t..3t+2 station t's velocity; (3, nu) for one."""
        single, b, o = self._tasks(self._check(state), bodies, stations_in_B, "calc_station_jacobian")
        return self._frame_matrix(state, b, o)[:, 3:, :].reshape(3 * len(b), -1)

    def calc_bias_for_station_jacobian(self, state: State, bodies, stations_in_B):
        """JDot_S u: (nt, 3) station accelerations at udot = 0, or (3,) (Velocity)."""
        return self.calc_bias_for_frame_jacobian(state, bodies, stations_in_B)[..., 3:]

    # -- constraints (spec/Constraint_and_System.md A; rows [P; V; A]) ----------------------
    def get_num_constraints(self) -> int:
        return len(self.model.constraints)

    def get_constraint(self, index: int):
        """Constraint ``index`` as the Model holds it; it answers the State
        queries of its handle."""
        constraints = self.model.constraints
        if not 0 <= int(index) < len(constraints):
            raise IndexError(f"no constraint {index}; the model has {len(constraints)}")
        return constraints[int(index)]

    def get_num_constraint_equations(self) -> tuple[int, int, int]:
        """(mp, mv, ma) of all constraints, disabled ones included (the rows of G)."""
        layout = Layout(self.model.constraints)
        return layout.mp, layout.mv, layout.ma

    def is_constraint_disabled(self, state: State, index: int):
        return self.get_constraint(index).is_disabled(self._check(state))

    def set_constraint_is_disabled(self, state: State, index: int, disabled) -> State:
        """A new State with constraint ``index`` disabled or enabled (Instance stage:
        caches dropped, nothing recompiled)."""
        return self.get_constraint(index).set_disabled(self._check(state), disabled)

    def _equations(self, state: State, stage: Stage = Stage.Velocity):
        s = self._at(state, stage)
        return s, Equations.of_state(s)

    def _rows_enabled(self, s: State, x):
        """x (m, ...) with disabled constraints' rows zeroed."""
        return Layout(s.instance.constraints).zero_disabled(x, s.constraint_disabled)

    @compiled
    def multiply_by_g(self, state: State, ulike, bias=None):
        """G ulike (m,), O(m + n); with ``bias`` from calc_bias_for_multiply_by_g,
        the constraint errors at ulike minus the bias (Velocity)."""
        s, eqs = self._equations(state)
        v = self._u_vector(s, ulike, "ulike")
        if bias is None:
            return self._rows_enabled(s, eqs.multiply_by_g(s.position, v))
        return self._rows_enabled(s, self._errors_for_g(s, eqs, v) - jnp.asarray(bias, v.dtype))

    def _errors_for_g(self, s, eqs, v):
        """Simbody's errors behind multiplyByG: pverr at u = v for holonomic rows,
        [vaerr; aerr] at udot = v for the others."""
        mp = eqs.layout.mp
        pverr = Equations(s.topology, eqs.constraints, s.t, s.q, s.position.X_GB,
                          V_GB=self.multiply_by_system_jacobian(s, v),
                          qdot=coordinates.multiply_by_n(s.topology, s.q, v), u=v).velocity_errors()[:mp]
        return jnp.concatenate([pverr, eqs.acceleration_errors_at(s.position, s.velocity, v)[mp:]])

    @compiled
    def calc_bias_for_multiply_by_g(self, state: State):
        """The errors behind multiply_by_g at ulike = 0: pverr(u = 0) (= -c(t, q)) for
        holonomic rows, the acceleration-level errors at udot = 0 for the others (Velocity)."""
        s, eqs = self._equations(state)
        return self._errors_for_g(s, eqs, jnp.zeros_like(s.u))

    @compiled
    def calc_g(self, state: State):
        """G (m, nu), rows [P; V; A]; disabled constraints' rows are zero (Position)."""
        s, eqs = self._equations(state, Stage.Position)
        return self._rows_enabled(s, eqs.g_matrix(s.position))

    @compiled
    def calc_g_transpose(self, state: State):
        """G^T (nu, m) from the constraint-force maps (Position)."""
        return self.calc_g(state).T

    @compiled
    def multiply_by_g_transpose(self, state: State, multipliers):
        """G^T lambda (nu,), O(m + n): the constraints' generalized forces (Position)."""
        s, eqs = self._equations(state, Stage.Position)
        lam = self._rows_enabled(s, self._sized(s, multipliers, (eqs.layout.m,), "multipliers"))
        return eqs.generalized_forces(s.position, lam)

    @compiled
    def calc_bias_for_acceleration_constraints(self, state: State):
        """-b (m,): every constraint's acceleration-level error at udot = 0 (Velocity)."""
        s, eqs = self._equations(state)
        return self._rows_enabled(s, -eqs.bias(s.position, s.velocity))

    @compiled
    def calc_constraint_acceleration_errors(self, state: State, known_udot=None):
        """G udot - b (m,); None or zero-length udot gives -b (Velocity)."""
        s, eqs = self._equations(state)
        udot = self._u_vector(s, known_udot, "known_udot")
        return self._rows_enabled(s, eqs.acceleration_errors_at(s.position, s.velocity, udot))

    @compiled
    def calc_p(self, state: State):
        """P (mp, nu) = d pverr / d u, the holonomic rows of G (Position)."""
        s, eqs = self._equations(state, Stage.Position)
        return self.calc_g(s)[:eqs.layout.mp]

    @compiled
    def calc_pt(self, state: State):
        return self.calc_p(state).T

    @compiled
    def calc_pq(self, state: State):
        """Pq (mp, nq) = d perr / d q = P N^-1 (Position)."""
        s = self._at(state, Stage.Position)
        P = self.calc_p(s)
        return jax.vmap(lambda row: coordinates.multiply_by_n_inv(s.topology, s.q, row, True))(P)

    @compiled
    def calc_pq_transpose(self, state: State):
        return self.calc_pq(state).T

    @compiled
    def multiply_by_pq(self, state: State, qlike, bias=None):
        """Pq qlike (mp,): P N^-1 qlike, qlike treated as a qdot (Position); with
        ``bias`` (calc_bias_for_multiply_by_pq) pverr(N^-1 qlike) - bias."""
        s, eqs = self._equations(state, Stage.Position)
        x = self._sized(s, qlike, (s.topology.nq,), "qlike")
        v = coordinates.multiply_by_n_inv(s.topology, s.q, x)
        Pv = self._rows_enabled(s, eqs.multiply_by_g(s.position, v))[:eqs.layout.mp]
        if bias is None:
            return Pv
        return Pv + self.calc_bias_for_multiply_by_pq(s) - jnp.asarray(bias, Pv.dtype)

    @compiled
    def calc_bias_for_multiply_by_pq(self, state: State):
        """pverr at u = 0 (mp,): the explicit time dependence, -c(t, q) (Position)."""
        s = self._at(state, Stage.Position)
        eqs = Equations.of_state(s.with_u(jnp.zeros_like(s.u)))  # no velocity cache: zero velocities
        return eqs.layout.zero_disabled(eqs.velocity_errors()[:eqs.layout.mp], s.constraint_disabled)

    @compiled
    def multiply_by_pq_transpose(self, state: State, multipliers_p):
        """Pq^T lambda_p (nq,) = N^-T P^T lambda_p (Position)."""
        s, eqs = self._equations(state, Stage.Position)
        lam = jnp.zeros(eqs.layout.m, s.u.dtype).at[:eqs.layout.mp].set(
            self._sized(s, multipliers_p, (eqs.layout.mp,), "multipliers_p"))
        f = eqs.generalized_forces(s.position, self._rows_enabled(s, lam))
        return coordinates.multiply_by_n_inv(s.topology, s.q, f, True)

    @compiled
    def calc_projected_m_inv(self, state: State):
        """W = G M^-1 G^T (m, m), with M_ff^-1 where locks prescribe udot (Position)."""
        s = self._at(state, Stage.Position)
        G = self.calc_g(s)
        return G @ jax.vmap(lambda g: self.multiply_by_m_inv(s, g))(G).T

    @compiled
    def solve_for_constraint_impulses(self, state: State, delta_v):
        """The least-squares (minimum-norm) impulse with W impulse = delta_v (Position)."""
        s = self._at(state, Stage.Position)
        W = self.calc_projected_m_inv(s)
        return min_norm_solve(W, self._sized(s, delta_v, (W.shape[0],), "delta_v"))

    @compiled
    def calc_acceleration(self, state: State, mobility_forces=None, body_forces=None):
        """(udot (nu,), A_GB (nb, 6)) with the constraints enforced (least-squares
        multipliers) and locks honoured, for the given applied forces (Velocity)."""
        s = self._at(state, Stage.Velocity)
        T, F = self._applied(s, mobility_forces, body_forces)
        if not s.instance.constraints:
            return self.calc_acceleration_ignoring_constraints(s, T, F)
        udot, A_GB, _ = constrained_forward_dynamics(s.topology, aba.ForwardInputs.at(s, T, F, prescribed_udot(s)), s.t,
                                                     s.constraint_disabled)
        return udot, A_GB

    @compiled
    def calc_residual_force(self, state: State, mobility_forces, body_forces, known_udot, known_lambda):
        """M udot + G^T lambda + f_inertial - f_applied (nu,); locks are ignored and
        udot need not satisfy the constraints; zero-length lambda means zeros (Velocity)."""
        s, eqs = self._equations(state)
        lam = self._sized(s, known_lambda, (eqs.layout.m,), "known_lambda")
        return (self.calc_residual_force_ignoring_constraints(s, mobility_forces, body_forces, known_udot)
                + eqs.generalized_forces(s.position, self._rows_enabled(s, lam)))

    @compiled
    def calc_constraint_forces_from_multipliers(self, state: State, multipliers):
        """G^T lambda as (body forces (nb, 6) [torque; force] at each Bo in G, mobility
        forces (nu,)); the forces the constraints apply are minus these (Position)."""
        s = self._at(state, Stage.Position)
        lam = self._sized(s, multipliers, (Layout(s.instance.constraints).m,), "multipliers")
        return constraint_forces_of(s, self._rows_enabled(s, lam))

    # -- the State's error vectors (Simbody's qErr, uErr, udotErr) ---------------------
    @compiled
    def get_q_err(self, state: State):
        """qerr (mp + quaternions in use,): the constraints' position errors
        (disabled rows zero), then |q| - 1 of each quaternion in quaternion-pool
        order; :meth:`project` drives the first part to zero (Position)."""
        s = self._at(state, Stage.Position)
        top = s.topology
        norms = [jnp.linalg.norm(s.q[top.q_start[b] + top.kinds[b].quaternion_at:][:4]) - 1
                 for b in top.quaternion_bodies]
        return jnp.concatenate([enabled_position_errors(s), jnp.stack(norms) if norms else jnp.zeros(0, s.q.dtype)])

    @compiled
    def get_u_err(self, state: State):
        """uerr (mp + mv,): [pverr; verr], the velocity-level constraint errors
        (disabled rows zero) (Velocity)."""
        s, eqs = self._equations(state)
        return self._rows_enabled(s, eqs.velocity_errors())

    @compiled
    def get_udot_err(self, state: State):
        """udoterr (m,): [paerr; vaerr; aerr] at the realized udot, zero up to
        roundoff after realize(Acceleration) (Acceleration)."""
        s = self._at(state, Stage.Acceleration)
        return self.calc_constraint_acceleration_errors(s, s.acceleration.udot)

    def get_constraint_multipliers(self, state: State):
        """lambda (m,) from realize(Acceleration), rows [P; V; A]."""
        return self._at(state, Stage.Acceleration).acceleration.multipliers

    @compiled
    def find_constraint_forces(self, state: State):
        """The realized multipliers' (body forces (nb, 6), mobility forces (nu,)) (Acceleration)."""
        return constraint_forces_of(self._at(state, Stage.Acceleration))

    @compiled
    def calc_constraint_power(self, state: State):
        """-(F . V + f . u): power the constraints deliver; zero when they are workless (Acceleration)."""
        s = self._at(state, Stage.Acceleration)
        F, f = constraint_forces_of(s)
        return -(jnp.sum(F * s.velocity.V_GB) + f @ s.u)

    # -- free and prescribed coordinates (locks and Motions) -----------------------------
    def _held(self, state: State):
        """(the Prescription or None, concrete (held q, held u, known udot) masks)."""
        s = self._check(state)
        top = s.topology
        p = model_prescription(self.model, s)
        if p is None:
            return None, (np.zeros(top.nq, bool), np.zeros(top.nu, bool), np.zeros(top.nu, bool))
        try:
            return p, tuple(np.asarray(mask) for mask in (p.held_q(top), p.held_u(top), p.known(top)))
        except Exception:
            raise TypeError("the free/known index lists depend on the locks and Motions enabled, which are "
                            "traced here; call these outside jit (Simbody needs only Stage.Instance for "
                            "them)") from None

    def get_free_q_index(self, state: State) -> np.ndarray:
        """Indices of the q that no lock or Motion prescribes (ascending)."""
        return np.flatnonzero(~self._held(state)[1][0])

    def get_free_u_index(self, state: State) -> np.ndarray:
        """Indices of the u that no Position- or Velocity-level prescription holds."""
        return np.flatnonzero(~self._held(state)[1][1])

    def get_known_udot_index(self, state: State) -> np.ndarray:
        """Indices of the u whose udot is prescribed (at any level)."""
        return np.flatnonzero(self._held(state)[1][2])

    def get_free_udot_index(self, state: State) -> np.ndarray:
        return np.flatnonzero(~self._held(state)[1][2])

    @compiled
    def find_motion_forces(self, state: State):
        """(nu,) the motion multipliers tau of every prescribed mobility, zero
        elsewhere, on the left of M udot + tau + G^T lambda + f_inertial =
        f_applied (a motor applies -tau) (Acceleration)."""
        return motion_forces(self._at(state, Stage.Acceleration))

    def get_motion_multipliers(self, state: State):
        """tau packed over ``get_known_udot_index`` (Acceleration)."""
        return self.find_motion_forces(state)[self.get_known_udot_index(state)]

    @compiled
    def calc_motion_power(self, state: State):
        """-tau . u: the power the locks and Motions deliver (positive adds energy) (Acceleration)."""
        s = self._at(state, Stage.Acceleration)
        return -self.find_motion_forces(s) @ s.u

    def calc_motion_errors(self, state: State, stage: Stage):
        """Actual minus prescribed q (``Stage.Position``), u (``Velocity``) or udot
        (``Acceleration``), one entry per prescribed one; ``prescribe`` at the
        same level zeroes them (Time, Position, Acceleration)."""
        stage = Stage(stage)
        if stage not in (Stage.Position, Stage.Velocity, Stage.Acceleration):
            raise ValueError(f"calc_motion_errors: stage must be Position, Velocity or Acceleration, got {stage!r}")
        s = self._check(state)
        p, (held_q, held_u, known) = self._held(s)
        if p is None:
            return jnp.zeros(0, s.q.dtype)
        if stage == Stage.Position:
            index, actual, wanted = np.flatnonzero(held_q), s.q, p.q
        elif stage == Stage.Velocity:
            index, actual, wanted = np.flatnonzero(held_u), s.u, p.u
        else:
            index, actual, wanted = np.flatnonzero(known), self._at(s, Stage.Acceleration).acceleration.udot, p.udot
        return (actual - wanted)[index]

    def pack_free_q(self, state: State, q):
        return self._sized(state, q, (state.topology.nq,), "q")[self.get_free_q_index(state)]

    def unpack_free_q(self, state: State, packed_free_q, q=None):
        """q-like (nq,) with the free entries from ``packed_free_q``, the rest from ``q`` (zeros)."""
        index = self.get_free_q_index(state)
        out = self._sized(state, q, (state.topology.nq,), "q")
        return out.at[index].set(self._sized(state, packed_free_q, (len(index),), "packed_free_q"))

    def pack_free_u(self, state: State, u):
        return self._u_vector(state, u, "u")[self.get_free_u_index(state)]

    def unpack_free_u(self, state: State, packed_free_u, u=None):
        """u-like (nu,) with the free entries from ``packed_free_u``, the rest from ``u`` (zeros)."""
        index = self.get_free_u_index(state)
        out = self._u_vector(state, u, "u")
        return out.at[index].set(self._sized(state, packed_free_u, (len(index),), "packed_free_u"))
