"""User-defined mobilizers: Custom (any pure JAX X_FM(q)) and FunctionBased
(Simbody's joint made of three rotation and three translation functions).

Both derive H_FM from X_FM by forward-mode automatic differentiation along
the columns of N: row k of H is the spatial velocity [w; v] of M in F (in F)
when u = e_k, i.e. w = vee(dR/dt R^T) and v = dp/dt along qdot = N e_k.
HDot_FM follows from the protocol's AD rule, so a user writes only geometry.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.functions import as_function
from simbodyx.mobilizers.base import Mobilizer, euler_q_to_quaternion_q
from simbodyx.mobilizers.orientation import (
    block_diag,
    euler_xyz_N_body,
    euler_xyz_rates_to_body_velocity,
    quaternion_N,
    quaternion_N_inv,
)
from simbodyx.spatial.rotation import axis_angle_to_matrix, body_fixed_xyz_to_matrix, rot_x, rot_y, rot_z, vee
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import mat_mul

#: Parallel-axis test for FunctionBased (|a x b| below this is parallel).
_PARALLEL_TOL = 1e-8


def hinge_from_transform(kind: Mobilizer, q, params):
    """(nu, 6) H_FM by forward-mode AD of kind.X_FM along each column of N(q)."""

    def velocity(qdot):
        (R, _), (R_dot, p_dot) = jax.jvp(lambda q_: kind.X_FM(q_, params), (q,), (qdot,))
        return jnp.concatenate([vee(mat_mul(R_dot, R, transpose_b=True)), p_dot])

    return jax.vmap(velocity, in_axes=1)(kind.N(q))


def _as_pose(X, dtype):
    """(R, p) from a Transform or an (R, p) pair returned by user code."""
    R, p = (X.R, X.p) if isinstance(X, Transform) else X
    return jnp.asarray(R, dtype), jnp.asarray(p, dtype)


@dataclasses.dataclass(frozen=True)
class Custom(Mobilizer):
    """A mobilizer defined by a pure JAX function ``transform(q) -> (R_FM, p_FM)``
    (or a Transform) of ``num_q`` coordinates with ``num_u`` mobilities.

    ``num_angles`` counts the leading q that are angles (rad); 4 means q[0:4]
    is a quaternion [w, x, y, z] (unnormalized in the State: normalize it
    inside ``transform``), which the model's Euler-angle option replaces by
    body-fixed X-Y-Z angles (``transform`` and the user's N always see the
    quaternion layout). Optional pieces, all pure functions of the quaternion-
    layout q:

    * ``n_matrix(q)`` (num_q, num_u), qdot = N u. Required when num_q != num_u,
      except for a quaternion with num_q = num_u + 1, whose default takes the
      first three u as w_FM in F (as Ball) and the rest as qdot.
    * ``n_inv_matrix(q)`` (num_u, num_q); default: the quaternion block's
      unnormalized inverse (as Ball), else N's least-squares left inverse.
    * ``n_dot_matrix(q, qdot)``; default: forward-mode AD of N.
    * ``hinge_matrix(q)`` (num_u, 6), rows [w; v] in F per unit u_k, for speed;
      default: AD of ``transform`` along N.
    """

    num_q: int
    num_u: int
    transform: Callable
    num_angles: int = 0
    n_matrix: Callable | None = None
    n_inv_matrix: Callable | None = None
    n_dot_matrix: Callable | None = None
    hinge_matrix: Callable | None = None
    use_euler_angles: bool = False

    def __post_init__(self):
        if not 1 <= self.num_u <= 6:
            raise ValueError(f"Custom mobilizer: num_u must be 1 to 6, got {self.num_u}")
        if not self.num_u <= self.num_q <= 7:
            raise ValueError(f"Custom mobilizer: num_q must be num_u ({self.num_u}) to 7, got {self.num_q}")
        if not 0 <= self.num_angles <= min(4, self.num_q):
            raise ValueError(f"Custom mobilizer: num_angles must be 0 to min(4, num_q), got {self.num_angles}")
        if not callable(self.transform):
            raise TypeError("Custom mobilizer: transform must be a callable q -> (R_FM, p_FM)")
        quaternion_default = self.num_angles == 4 and self.num_q == self.num_u + 1
        if self.num_q != self.num_u and self.n_matrix is None and not quaternion_default:
            raise ValueError(
                f"Custom mobilizer: num_q ({self.num_q}) != num_u ({self.num_u}) needs n_matrix(q) (qdot = N u)"
            )

    @property
    def has_quaternion(self) -> bool:
        return self.num_angles == 4

    @property
    def nq(self):
        return self.num_q - (self.has_quaternion and self.use_euler_angles)

    @property
    def nu(self):
        return self.num_u

    @property
    def quaternion_at(self):
        return 0 if self.has_quaternion and not self.use_euler_angles else None

    @property
    def qdot_is_u(self):
        return self.n_matrix is None and not self.has_quaternion

    @property
    def _euler_mode(self) -> bool:
        return self.has_quaternion and self.use_euler_angles

    def default_q(self):
        if self.has_quaternion and not self.use_euler_angles:
            return (1.0,) + (0.0,) * (self.num_q - 1)
        return (0.0,) * self.nq

    def in_mode(self, use_euler_angles):
        return dataclasses.replace(self, use_euler_angles=use_euler_angles) if self.has_quaternion else self

    def user_q(self, q):
        """q in the quaternion layout the user's functions take."""
        return euler_q_to_quaternion_q(q, 0, positive_w=False) if self._euler_mode else q

    def X_FM(self, q, params):
        return _as_pose(self.transform(self.user_q(q)), q.dtype)

    def H_FM(self, q, params):
        # u means the same in both modes, so H is the quaternion layout's at
        # user_q(q): no derivative of the Euler-angle conversion is needed.
        qu = self.user_q(q)
        if self.hinge_matrix is not None:
            return jnp.asarray(self.hinge_matrix(qu), q.dtype)
        return hinge_from_transform(self.in_mode(False), qu, params)

    def _user_N(self, qu):
        if self.n_matrix is not None:
            return jnp.asarray(self.n_matrix(qu), qu.dtype)
        if self.has_quaternion:
            return block_diag(quaternion_N(qu[:4]), jnp.eye(self.num_q - 4, dtype=qu.dtype))
        return jnp.eye(self.num_q, self.num_u, dtype=qu.dtype)

    def _user_N_inv(self, qu):
        if self.n_inv_matrix is not None:
            return jnp.asarray(self.n_inv_matrix(qu), qu.dtype)
        if self.n_matrix is not None:
            N = self._user_N(qu)
            return jnp.linalg.solve(N.T @ N, N.T)
        if self.has_quaternion:
            return block_diag(quaternion_N_inv(qu[:4]), jnp.eye(self.num_q - 4, dtype=qu.dtype))
        return jnp.eye(self.num_u, self.num_q, dtype=qu.dtype)

    def _euler_blocks(self, q):
        """(T, T_inv): Euler-angle qdot from the quaternion-layout qdot and back,
        both through the angular velocity in F (no branch of the angle chart)."""
        a, quat = q[:3], self.user_q(q)[:4]
        R = body_fixed_xyz_to_matrix(a)
        to_euler = mat_mul(mat_mul(euler_xyz_N_body(a), R, transpose_b=True), quaternion_N_inv(quat)) / (quat @ quat)
        to_quat = mat_mul(quaternion_N(quat), mat_mul(R, euler_xyz_rates_to_body_velocity(a)))
        eye = jnp.eye(self.num_q - 4, dtype=q.dtype)
        return block_diag(to_euler, eye), block_diag(to_quat, eye)

    def N(self, q):
        if not self._euler_mode:
            return self._user_N(q)
        return self._euler_blocks(q)[0] @ self._user_N(self.user_q(q))

    def N_inv(self, q):
        if not self._euler_mode:
            return self._user_N_inv(q)
        return self._user_N_inv(self.user_q(q)) @ self._euler_blocks(q)[1]

    def N_dot(self, q, qdot):
        if self.n_dot_matrix is not None and not self._euler_mode:
            return jnp.asarray(self.n_dot_matrix(q, qdot), q.dtype)
        return super().N_dot(q, qdot)


_DEFAULT_AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)) * 2
_COORDINATE_ROTATIONS = dict(zip(_DEFAULT_AXES[:3], (rot_x, rot_y, rot_z)))


def _rotation_about(axis: tuple[float, float, float], angle):
    """Rotation by angle about a static unit axis (the elementary form for x, y, z)."""
    if axis in _COORDINATE_ROTATIONS:
        return _COORDINATE_ROTATIONS[axis](angle)
    return axis_angle_to_matrix(jnp.asarray(axis, angle.dtype), angle)


@dataclasses.dataclass(frozen=True)
class FunctionBased(Mobilizer):
    """Simbody's FunctionBased mobilizer: nq = nu = ``num_mobilities`` (1 to 6),
    u = qdot, and six functions of chosen coordinates, in Simbody's order:

    * R_FM = R(f0, a0) R(f1, a1) R(f2, a2), rotations (rad) about the unit
      axes a0, a1, a2, composed body-fixed;
    * p_FM = f3 a3 + f4 a4 + f5 a5 (m), translations along a3, a4, a5 in F.

    ``functions[i]`` takes the coordinates listed in ``coordinates[i]`` (None
    means the constant 0); axes default to x, y, z twice. The rotation axes
    must be pairwise non-parallel, as must the translation axes.
    """

    num_mobilities: int
    functions: tuple
    coordinates: tuple[tuple[int, ...], ...]
    axes: tuple[tuple[float, float, float], ...] = _DEFAULT_AXES

    def __post_init__(self):
        n = self.num_mobilities
        if not 1 <= n <= 6:
            raise ValueError(f"FunctionBased: num_mobilities must be 1 to 6, got {n}")
        if len(self.functions) != 6 or len(self.coordinates) != 6 or len(self.axes) != 6:
            raise ValueError(
                "FunctionBased: give exactly 6 functions, 6 coordinate lists and 6 axes "
                "(x, y, z rotation, then x, y, z translation)"
            )
        coordinates = tuple(tuple(int(i) for i in c) for c in self.coordinates)
        functions = []
        for k, (f, c) in enumerate(zip(self.functions, coordinates)):
            f = as_function(f, len(c)) if f is not None else None
            if f is not None and f.num_args is not None and f.num_args != len(c):
                raise ValueError(
                    f"FunctionBased: function {k} takes {f.num_args} arguments but is given {len(c)} coordinates"
                )
            if any(not 0 <= i < n for i in c):
                raise ValueError(f"FunctionBased: function {k}'s coordinates {list(c)} must lie in 0..{n - 1}")
            functions.append(f)
        unused = sorted(set(range(n)) - {i for f, c in zip(functions, coordinates) if f is not None for i in c})
        if unused:
            raise ValueError(f"FunctionBased: coordinates {unused} drive no function (their mobilities would be empty)")
        axes = np.asarray(self.axes, dtype=np.float64)
        if axes.shape != (6, 3) or not np.all(np.isfinite(axes)):
            raise ValueError("FunctionBased: axes must be 6 finite 3-vectors")
        norms = np.linalg.norm(axes, axis=1)
        if np.any(norms == 0):
            raise ValueError("FunctionBased: an axis is zero")
        axes = axes / norms[:, None]
        for group, what in ((axes[:3], "rotation"), (axes[3:], "translation")):
            for i in range(3):
                for j in range(i + 1, 3):
                    if np.linalg.norm(np.cross(group[i], group[j])) < _PARALLEL_TOL:
                        raise ValueError(f"FunctionBased: {what} axes {i} and {j} are parallel")
        object.__setattr__(self, "functions", tuple(functions))
        object.__setattr__(self, "coordinates", coordinates)
        object.__setattr__(self, "axes", tuple(tuple(float(x) for x in a) for a in axes))

    @property
    def nq(self):
        return self.num_mobilities

    @property
    def nu(self):
        return self.num_mobilities

    def X_FM(self, q, params):
        R, p = jnp.eye(3, dtype=q.dtype), jnp.zeros(3, q.dtype)
        for k, (f, c, axis) in enumerate(zip(self.functions, self.coordinates, self.axes)):
            if f is None:  # static: absent functions cost nothing
                continue
            value = jnp.asarray(f(q[np.asarray(c, dtype=np.int32)]), q.dtype)
            if k < 3:
                R = mat_mul(R, _rotation_about(axis, value))
            else:
                p = p + value * jnp.asarray(axis, q.dtype)
        return R, p

    def H_FM(self, q, params):
        return hinge_from_transform(self, q, params)
