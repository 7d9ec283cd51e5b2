"""Simbody's holonomic constraints between two bodies' points, lines, planes
and frames: Rod, Ball, Weld, PointInPlane, PointOnLine, ConstantAngle,
ConstantOrientation. Errors are Simbody's (Constraint.cpp, ConstraintImpl.h,
Constraint_RodImpl.h), written in the Ancestor frame A; where Simbody takes
the velocity-level error at the material point C of the first body that
coincides with the follower point (Ball, Weld), so that the force pair is
collinear, ``position_dot_errors`` says so and the rest is derived from it.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from simbodyx.constraints.base import Constraint
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm


def vec3(x, what: str, kind: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != (3,):
        raise ValueError(f"Constraint.{kind}: {what} must have shape (3,), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"Constraint.{kind}: {what} contains NaN or infinity")
    return a


def unit3(x, what: str, kind: str) -> np.ndarray:
    a = vec3(x, what, kind)
    norm = np.linalg.norm(a)
    if norm == 0:
        raise ValueError(f"Constraint.{kind}: {what} must not be zero")
    return a / norm


def scalar(x, what: str, kind: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.shape != () or not np.isfinite(a):
        raise ValueError(f"Constraint.{kind}: {what} must be a finite number, got {x!r}")
    return a


def positive(x, what: str, kind: str) -> np.ndarray:
    a = scalar(x, what, kind)
    if a <= 0:
        raise ValueError(f"Constraint.{kind}: {what} must be positive, got {x!r}")
    return a


def rotation3(R, what: str, kind: str) -> np.ndarray:
    R = np.asarray(getattr(R, "matrix", R), dtype=np.float64)
    if R.shape != (3, 3) or np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"Constraint.{kind}: {what} must be a proper rotation (3x3)")
    return R


def frame(X, what: str, kind: str) -> Transform:
    if not isinstance(X, Transform):
        raise TypeError(f"Constraint.{kind}: {what} must be a Transform, got {type(X).__name__}")
    return Transform(rotation3(X.R, f"{what}.R", kind), vec3(X.p, f"{what}.p", kind))


def station_velocity(X_AB: Transform, V_AB, station):
    """v_AS = v_AB + w_AB x (R_AB p_BS) for a station fixed on B."""
    return V_AB[3:] + cross(V_AB[:3], X_AB.rotate(station))


def material_point_velocity(X_AB: Transform, V_AB, p_AS):
    """Velocity in A of B's material point now at p_AS."""
    return V_AB[3:] + cross(V_AB[:3], p_AS - X_AB.p)


def perpendicular(z):
    """Simbody's UnitVec3::perp: the unit vector along z x e_k, e_k the axis of
    z's smallest |component|."""
    axis = jnp.eye(3, dtype=z.dtype)[jnp.argmin(jnp.abs(z))]
    x = cross(z, axis)
    return x / safe_norm(x)


def _orientation_errors(RB, RF):
    """[RFx . RBy, RFy . RBz, RFz . RBx] for frames (columns) in A: zero when aligned."""
    return jnp.stack([RF[:, 0] @ RB[:, 1], RF[:, 1] @ RB[:, 2], RF[:, 2] @ RB[:, 0]])


class Rod(Constraint):
    """Constant distance between station 1 on body 1 and station 2 on body 2:
    perr = |p_S1S2| - length (1, 0, 0). The multiplier acts along the unit
    vector Cz from S1 to S2 (body 1's z axis while they coincide):
    +lambda Cz on S2, -lambda Cz on S1. ``Rod(body1, body2, length)`` joins
    the body origins."""

    DEFAULTS = {"point_on_body1": ("station1", vec3), "point_on_body2": ("station2", vec3),
                "rod_length": ("length", positive)}

    station1: jnp.ndarray
    station2: jnp.ndarray
    length: jnp.ndarray

    def __init__(self, body1, station1, body2=None, station2=None, length=None, *, name=None):
        if length is None and station2 is None:  # Rod(body1, body2, length)
            body1, body2, length, station1, station2 = body1, station1, body2, np.zeros(3), np.zeros(3)
        self._set_numbers("Rod", station1=station1, station2=station2, length=length)
        self._register("Rod", bodies=(body1, body2), counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return distance(X_AB, self.station1, self.station2)[None] - self.length

    def position_dot_errors(self, k, V_AB, qdot):
        return distance_rate(k.X_AB, V_AB, self.station1, self.station2)[None]


def distance(X_AB: Transform, station1, station2):
    """|p_S1S2|: station 1 on constrained body 0, station 2 on body 1."""
    return safe_norm(X_AB[1].apply(station2) - X_AB[0].apply(station1))


def distance_direction(X_AB: Transform, station1, station2):
    """The unit vector Cz in A from station 1 to station 2; body 0's z axis
    while they coincide (Simbody's choice)."""
    p = X_AB[1].apply(station2) - X_AB[0].apply(station1)
    r = safe_norm(p)
    return jnp.where(r > 0, p / jnp.where(r > 0, r, 1.0), X_AB.R[0][:, 2])


def distance_rate(X_AB: Transform, V_AB, station1, station2):
    """d/dt |p_S1S2| as Simbody takes it: (v_AS2 - v_AS1) . Cz, defined at zero length too."""
    v = station_velocity(X_AB[1], V_AB[1], station2) - station_velocity(X_AB[0], V_AB[0], station1)
    return v @ distance_direction(X_AB, station1, station2)


class Ball(Constraint):
    """Coincident points (3, 0, 0): station 2 on body 2 (S) meets station 1 on
    body 1 (P). perr = p_AS - p_AP; the velocity error is taken at body 1's
    material point C coincident with S, pverr = v_AS - v_AC, so the force
    lambda acts at S on body 2 and -lambda at C on body 1."""

    DEFAULTS = {"point_on_body1": ("station1", vec3), "point_on_body2": ("station2", vec3)}

    station1: jnp.ndarray
    station2: jnp.ndarray

    def __init__(self, body1, station1, body2=None, station2=None, *, name=None):
        if body2 is None:  # Ball(body1, body2): the body origins
            body1, body2, station1, station2 = body1, station1, np.zeros(3), np.zeros(3)
        self._set_numbers("Ball", station1=station1, station2=station2)
        self._register("Ball", bodies=(body1, body2), counts=(3, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return X_AB[1].apply(self.station2) - X_AB[0].apply(self.station1)

    def position_dot_errors(self, k, V_AB, qdot):
        p_AS = k.X_AB[1].apply(self.station2)
        return station_velocity(k.X_AB[1], V_AB[1], self.station2) - material_point_velocity(k.X_AB[0], V_AB[0], p_AS)


class Weld(Constraint):
    """Coincident frames (6, 0, 0): frame 2 on body 2 onto frame 1 on body 1.
    perr = [RFx . RBy, RFy . RBz, RFz . RBx, p_AF2 - p_AF1] (RB, RF: the
    frames' axes in A); the translational rows are taken at body 1's material
    point coincident with frame 2's origin, as Ball's. ``Weld(body1, body2)``
    welds the body frames."""

    DEFAULTS = {"frame_on_body1": ("frame1", frame), "frame_on_body2": ("frame2", frame)}

    frame1: Transform
    frame2: Transform

    def __init__(self, body1, frame1, body2=None, frame2=None, *, name=None):
        if body2 is None:
            body1, body2, frame1, frame2 = body1, frame1, Transform(), Transform()
        self._set_numbers("Weld", frame1=frame1, frame2=frame2)
        self._register("Weld", bodies=(body1, body2), counts=(6, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        RB, RF = X_AB.R[0] @ self.frame1.R, X_AB.R[1] @ self.frame2.R
        p = X_AB[1].apply(self.frame2.p) - X_AB[0].apply(self.frame1.p)
        return jnp.concatenate([_orientation_errors(RB, RF), p])

    def position_dot_errors(self, k, V_AB, qdot):
        X = k.X_AB
        RB, RF = X.R[0] @ self.frame1.R, X.R[1] @ self.frame2.R
        w = V_AB[1, :3] - V_AB[0, :3]
        rotation = jnp.stack([w @ cross(RF[:, 0], RB[:, 1]), w @ cross(RF[:, 1], RB[:, 2]),
                              w @ cross(RF[:, 2], RB[:, 0])])
        p_AF2 = X[1].apply(self.frame2.p)
        v = station_velocity(X[1], V_AB[1], self.frame2.p) - material_point_velocity(X[0], V_AB[0], p_AF2)
        return jnp.concatenate([rotation, v])


class PointInPlane(Constraint):
    """A follower point stays in a plane fixed on the plane body (1, 0, 0):
    perr = p_BS . n - height (n the plane's unit normal, in B)."""

    DEFAULTS = {"plane_normal": ("normal", unit3), "plane_height": ("height", scalar),
                "follower_point": ("follower_point", vec3)}

    normal: jnp.ndarray
    height: jnp.ndarray
    follower_point: jnp.ndarray

    def __init__(self, plane_body, normal, height, follower_body, follower_point, *, name=None):
        self._set_numbers("PointInPlane", normal=normal, height=height, follower_point=follower_point)
        self._register("PointInPlane", bodies=(plane_body, follower_body), counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        p_BS = X_AB[0].inverse().apply(X_AB[1].apply(self.follower_point))
        return (p_BS @ self.normal)[None] - self.height


class PointOnLine(Constraint):
    """A follower point stays on a line fixed on the line body (2, 0, 0):
    perr = [p_PS . x, p_PS . y] in B, P the line's point, x = perp(direction)
    (Simbody's choice) and y = direction x x."""

    DEFAULTS = {"line_direction": ("direction", unit3), "point_on_line": ("point_on_line", vec3),
                "follower_point": ("follower_point", vec3)}

    direction: jnp.ndarray
    point_on_line: jnp.ndarray
    follower_point: jnp.ndarray

    def __init__(self, line_body, direction, point_on_line, follower_body, follower_point, *, name=None):
        self._set_numbers("PointOnLine", direction=direction, point_on_line=point_on_line,
                          follower_point=follower_point)
        self._register("PointOnLine", bodies=(line_body, follower_body), counts=(2, 0, 0), name=name)

    def normals(self):
        """(x, y): the two directions perpendicular to the line, in B."""
        x = perpendicular(self.direction)
        return x, cross(self.direction, x)

    def position_errors(self, t, X_AB, q):
        p_PS = X_AB[0].inverse().apply(X_AB[1].apply(self.follower_point)) - self.point_on_line
        x, y = self.normals()
        return jnp.stack([p_PS @ x, p_PS @ y])


class ConstantAngle(Constraint):
    """Keeps the angle between an axis on the base body and one on the
    follower (1, 0, 0): perr = b_A . f_A - cos(angle)."""

    DEFAULTS = {"base_axis": ("axis_on_base", unit3), "follower_axis": ("axis_on_follower", unit3),
                "angle": ("angle", scalar)}

    axis_on_base: jnp.ndarray
    axis_on_follower: jnp.ndarray
    angle: jnp.ndarray

    def __init__(self, base_body, axis_on_base, follower_body, axis_on_follower, angle=np.pi / 2, *, name=None):
        self._set_numbers("ConstantAngle", axis_on_base=axis_on_base, axis_on_follower=axis_on_follower, angle=angle)
        self._register("ConstantAngle", bodies=(base_body, follower_body), counts=(1, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        b = X_AB[0].rotate(self.axis_on_base)
        f = X_AB[1].rotate(self.axis_on_follower)
        return (b @ f)[None] - jnp.cos(self.angle)


class ConstantOrientation(Constraint):
    """Keeps a frame on the follower aligned with one on the base (3, 0, 0):
    perr = [RFx . RBy, RFy . RBz, RFz . RBx]."""

    DEFAULTS = {"base_rotation": ("rotation_on_base", rotation3),
                "follower_rotation": ("rotation_on_follower", rotation3)}

    rotation_on_base: jnp.ndarray
    rotation_on_follower: jnp.ndarray

    def __init__(self, base_body, rotation_on_base, follower_body, rotation_on_follower, *, name=None):
        self._set_numbers("ConstantOrientation", rotation_on_base=rotation_on_base,
                          rotation_on_follower=rotation_on_follower)
        self._register("ConstantOrientation", bodies=(base_body, follower_body), counts=(3, 0, 0), name=name)

    def position_errors(self, t, X_AB, q):
        return _orientation_errors(X_AB.R[0] @ self.rotation_on_base, X_AB.R[1] @ self.rotation_on_follower)

