"""``model.matter``: SimbodyMatterSubsystem's operators as pure functions.

Each method takes a State and returns arrays or a new State; none mutates.
Operators that need only q and u compute from them directly, so they work
on a State at any stage. Simbody's ``multiplyByN(state, transpose, in)``
argument order is kept.
"""

from __future__ import annotations

from simbodyx.algorithms import coordinates
from simbodyx.state import State


class Matter:
    def __init__(self, model):
        self.model = model

    def _check(self, state: State) -> State:
        if state.topology != self.model.topology:
            raise ValueError(
                "this State belongs to a different model (or the other rotation representation)"
            )
        return state

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

    # -- kinematic differential equations ---------------------------------------------
    def calc_qdot(self, state: State, u):
        """qdot = N(q) u (nq,) for the State's q and the given u."""
        s = self._check(state)
        return coordinates.multiply_by_n(s.topology, s.q, u)

    def calc_qdotdot(self, state: State, udot):
        """qdotdot = N udot + NDot u (nq,) with q and u from the State."""
        s = self._check(state)
        return coordinates.calc_qdotdot(s.topology, s.q, s.u, udot)

    def multiply_by_n(self, state: State, transpose: bool, v):
        """N v (u-like in, q-like out), or N^T v (q-like in, u-like out)."""
        s = self._check(state)
        return coordinates.multiply_by_n(s.topology, s.q, v, transpose)

    def multiply_by_n_inv(self, state: State, transpose: bool, v):
        """NInv v (q-like in, u-like out), or NInv^T v (u-like in, q-like out)."""
        s = self._check(state)
        return coordinates.multiply_by_n_inv(s.topology, s.q, v, transpose)

    def multiply_by_n_dot(self, state: State, transpose: bool, v):
        """NDot(q, u) v (u-like in), or NDot^T v (q-like in)."""
        s = self._check(state)
        return coordinates.multiply_by_n_dot(s.topology, s.q, s.u, v, transpose)

    def normalize_quaternions(self, state: State) -> State:
        """A new State whose quaternions have unit length (caches dropped)."""
        s = self._check(state)
        return s.with_q(coordinates.normalize_quaternions(s.topology, s.q))

    # -- rotation representation --------------------------------------------------------
    def _convert(self, state: State, use_euler_angles: bool) -> State:
        s = self._check(state)
        target = s.topology.with_euler_angles(use_euler_angles)
        q = s.topology.convert_q(s.q, target)
        return State(s.t, q, s.u, s.z, target)

    def convert_to_euler_angles(self, state: State) -> State:
        """The same configuration for ``model.with_euler_angles(True)``: every
        quaternion becomes body-fixed X-Y-Z angles (u unchanged; stage Model)."""
        return self._convert(state, True)

    def convert_to_quaternions(self, state: State) -> State:
        """The same configuration for ``model.with_euler_angles(False)``
        (quaternions with w >= 0; u unchanged; stage Model)."""
        return self._convert(state, False)
