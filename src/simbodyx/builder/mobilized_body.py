"""MobilizedBody handles: Simbody's construction API for mobilized bodies.

A handle is created while building (``MobilizedBody.Pin(parent, X_PF, body,
X_BM)`` or ``MobilizedBody.Pin(parent, body)``): its defaults, frames, mass
properties, default locks and Motion are set here before freezing, and the
Model-editing helpers (``set_mass_properties(model, ...)``) return new
Models. Afterwards it answers queries on States of the frozen model, which
it inherits from :class:`simbodyx.body_queries.BodyQueries`.
"""

from __future__ import annotations

import enum

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from simbodyx import mobilizers
from simbodyx._xla.trace_context import per_context_jit
from simbodyx.body_queries import BodyQueries
from simbodyx.builder.body import Body
from simbodyx.spatial.inertia import MassProperties
from simbodyx.spatial.rotation import Rotation, matrix_to_body_fixed_xyz, matrix_to_quaternion, rotation_problem
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import device_array
from simbodyx.state import Level, Method, State, level_methods
from simbodyx.topology import BodySpec

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
    problem = rotation_problem(R)
    if problem:
        raise ValueError(f"{label}: {what}.R {problem}")
    return Transform(R, p)


class Direction(enum.Enum):
    """Forward: q and u defined from parent to child (the default). Reverse: as
    if the joint were built from child to parent (the tree keeps its direction)."""

    Forward = 0
    Reverse = 1


class MobilizedBody(BodyQueries):
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
        return eqx.tree_at(lambda m: (m.params.mass, m.params.com, m.params.central_inertia), model,
                           (params.mass.at[i].set(jnp.asarray(mp.mass, dtype)),
                            params.com.at[i].set(jnp.asarray(mp.com, dtype)),
                            params.central_inertia.at[i].set(jnp.asarray(mp.calc_central_inertia().matrix,
                                                                         dtype))))

    def _check_model(self, model):
        if not model.topology.same_tree(self._matter.topology()):
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

    # -- default locks and the Motion (Simbody's lockByDefault, hasMotion, getMotion) ----
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
        q = device_array(kind.default_q(), jnp.result_type(float))
        try:
            R, p, H, N, N_inv = _at_default_q(kind, q)
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
        problem = rotation_problem(R)
        if problem:
            raise ValueError(f"{self._label}: transform(q)'s rotation at the default q {problem}")


@per_context_jit(eqx.filter_jit)
def _at_default_q(kind, q):
    """(R_FM, p_FM, H_FM, N, NInv) of a user-defined mobilizer at q, one
    compiled program per implementation instead of one per operation
    (compiled quickly: it runs once)."""
    R, p = kind.X_FM(q, None)
    return R, p, kind.H_FM(q, None), kind.N(q), kind.N_inv(q)


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
