"""Contact-style constraints: Simbody's PointOnPlaneContact,
SphereOnPlaneContact, SphereOnSphereContact and LineOnLineContact (bilateral
contact, optionally without slip), and NoSlip1D.

A contact constraint joins a surface body F (first) and a body B (second)
and defines a contact frame C in the Ancestor frame: origin Co at the
contact point, Cz the contact normal pointing from F towards B. Its one
position error is the signed separation along Cz (positive apart); with
rolling, two velocity errors forbid slip:

    verr = [Cx . (v_B(Co) - v_F(Co)); Cy . (v_B(Co) - v_F(Co))]

the velocity of B's material point at Co relative to F's, so the
multipliers are force components along Cz, Cx, Cy acting on B at Co (and
opposite on F). The remaining derivatives and the forces come from the
protocol's automatic differentiation, which reproduces Simbody's hand-derived
ones; SphereOnSphere and LineOnLine differ from Simbody only off the velocity
manifold, where Simbody neglects the contact frame's spin about Cz.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from simbodyx._xla.trace_context import per_context_jit
from simbodyx.constraints.base import Constraint
from simbodyx.constraints.equations import Equations
from simbodyx.constraints.geometric import (
    distance,
    distance_direction,
    distance_rate,
    frame,
    material_point_velocity,
    perpendicular,
    positive,
    unit3,
    vec3,
)
from simbodyx.linalg import significant_real
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import cross, safe_norm
from simbodyx.stage import Stage


def _slip(X_AB: Transform, V_AB, X_AC: Transform):
    """[Cx; Cy] . (v_B(Co) - v_F(Co)): B's material point at Co relative to F's."""
    v = material_point_velocity(X_AB[1], V_AB[1], X_AC.p) - material_point_velocity(X_AB[0], V_AB[0], X_AC.p)
    return X_AC.R[:, :2].T @ v


class Contact(Constraint):
    """Base of the contact constraints: the contact frame, rolling and the
    Simbody queries on it. Subclasses define ``contact_frame(X_AB)`` and
    ``position_errors``."""

    enforce_rolling: bool = eqx.field(static=True)

    def _register_contact(self, kind, surface_body, body, enforce_rolling: bool, name):
        self.enforce_rolling = bool(enforce_rolling)
        self._register(kind, bodies=(surface_body, body), counts=(1, 2 if self.enforce_rolling else 0, 0), name=name)

    def contact_frame(self, X_AB: Transform) -> Transform:
        """X_AC: the contact frame in the Ancestor frame."""
        raise NotImplementedError

    def velocity_errors(self, k, V_AB, u):
        return _slip(k.X_AB, V_AB, self.contact_frame(k.X_AB))

    def is_enforcing_rolling(self) -> bool:
        return self.enforce_rolling

    def find_separation(self, state):
        """The signed separation along the contact normal (Position); negative
        when penetrating."""
        return self.get_position_errors_as_vector(state)[0]

    def find_contact_frame(self, state) -> Transform:
        """X_GC: the contact frame in Ground (Position)."""
        return _contact_frame(self._in(state, Stage.Position, "find_contact_frame"), state)


@per_context_jit(eqx.filter_jit)
def _contact_frame(c: Contact, state) -> Transform:
    k = Equations.of_state(state, (c,), velocity=False).kinematics(c)
    return state.position.X_GB[c.ancestor].compose(c.contact_frame(k.X_AB))


class PointOnPlaneContact(Contact):
    """A follower point F on body B touches a plane P fixed on the plane
    body S and does not slip (1, 2, 0): perr = (p_SF - Po) . Pz in S, verr
    the velocity of F relative to S's coincident point along Px, Py. The
    plane frame P (``X_SP``) has its normal along Pz."""

    DEFAULTS = {"plane_frame": ("plane_frame", frame), "follower_point": ("follower_point", vec3)}

    plane_frame: Transform
    follower_point: jnp.ndarray

    def __init__(self, plane_body, plane_frame, follower_body, follower_point, *, name=None):
        self._set_numbers("PointOnPlaneContact", plane_frame=plane_frame, follower_point=follower_point)
        self._register_contact("PointOnPlaneContact", plane_body, follower_body, True, name)

    def contact_frame(self, X_AB):
        """Axes of P, origin at the follower point."""
        return Transform(X_AB.R[0] @ self.plane_frame.R, X_AB[1].apply(self.follower_point))

    def position_errors(self, t, X_AB, q):
        p_SF = X_AB[0].inverse().apply(X_AB[1].apply(self.follower_point))
        return ((p_SF - self.plane_frame.p) @ self.plane_frame.R[:, 2])[None]


class SphereOnPlaneContact(Contact):
    """A sphere (centre O on body B, radius r) touches a plane P fixed on the
    plane body F (1, rolling ? 2 : 0, 0): perr = (p_FO - Po) . Pz - r, the
    contact point Co = O - r Pz at the bottom of the sphere."""

    DEFAULTS = {"plane_frame": ("plane_frame", frame), "sphere_center": ("sphere_center", vec3),
                "sphere_radius": ("sphere_radius", positive)}

    plane_frame: Transform
    sphere_center: jnp.ndarray
    sphere_radius: jnp.ndarray

    def __init__(self, plane_body, plane_frame, sphere_body, sphere_center, sphere_radius, enforce_rolling, *,
                 name=None):
        kind = "SphereOnPlaneContact"
        self._set_numbers(kind, plane_frame=plane_frame, sphere_center=sphere_center, sphere_radius=sphere_radius)
        self._register_contact(kind, plane_body, sphere_body, enforce_rolling, name)

    def contact_frame(self, X_AB):
        R_AP = X_AB.R[0] @ self.plane_frame.R
        return Transform(R_AP, X_AB[1].apply(self.sphere_center) - self.sphere_radius * R_AP[:, 2])

    def position_errors(self, t, X_AB, q):
        p_FO = X_AB[0].inverse().apply(X_AB[1].apply(self.sphere_center))
        return ((p_FO - self.plane_frame.p) @ self.plane_frame.R[:, 2])[None] - self.sphere_radius


class SphereOnSphereContact(Contact):
    """Two spheres (centre Sf on F with radius rf, centre Sb on B with radius
    rb) touch (1, rolling ? 2 : 0, 0): perr = |p_SfSb| - (rf + rb). Cz runs
    from Sf to Sb (F's z axis while the centres coincide), Co = Sf + rf /
    (rf + rb) p_SfSb, and Cx = perp(Cz), Cy = Cz x Cx as Simbody's
    Rotation::setRotationFromOneAxis picks them."""

    DEFAULTS = {"center_on_f": ("center_on_f", vec3), "radius_on_f": ("radius_on_f", positive),
                "center_on_b": ("center_on_b", vec3), "radius_on_b": ("radius_on_b", positive)}

    center_on_f: jnp.ndarray
    radius_on_f: jnp.ndarray
    center_on_b: jnp.ndarray
    radius_on_b: jnp.ndarray

    def __init__(self, body_f, center_on_f, radius_on_f, body_b, center_on_b, radius_on_b, enforce_rolling, *,
                 name=None):
        kind = "SphereOnSphereContact"
        self._set_numbers(kind, center_on_f=center_on_f, radius_on_f=radius_on_f, center_on_b=center_on_b,
                          radius_on_b=radius_on_b)
        self._register_contact(kind, body_f, body_b, enforce_rolling, name)

    def contact_frame(self, X_AB):
        z = distance_direction(X_AB, self.center_on_f, self.center_on_b)
        x = perpendicular(z)
        p_ASf = X_AB[0].apply(self.center_on_f)
        fraction = self.radius_on_f / (self.radius_on_f + self.radius_on_b)
        Co = p_ASf + fraction * (X_AB[1].apply(self.center_on_b) - p_ASf)
        return Transform(jnp.stack([x, cross(z, x), z], axis=-1), Co)

    def position_errors(self, t, X_AB, q):
        return distance(X_AB, self.center_on_f, self.center_on_b)[None] - (self.radius_on_f + self.radius_on_b)

    def position_dot_errors(self, k, V_AB, qdot):
        return distance_rate(k.X_AB, V_AB, self.center_on_f, self.center_on_b)[None]


class LineOnLineContact(Contact):
    """An edge Ef on F and a crossing edge Eb on B touch (1, rolling ? 2 : 0, 0).

    Each edge frame (``X_FEf``, ``X_BEb``) has its origin at the edge's centre
    P, x along the edge direction d and z the outward direction s of the solid
    it bounds. The normal n = sense (df x db) / |df x db| points out of F (the
    sense taken from whichever of sf, sb gives the clearer signal); perr =
    (Pb - Pf) . n, the signed distance of the lines. Co lies halfway between
    the lines' closest points, with Cx = df, Cy = n x df, Cz = n. Parallel
    edges have no normal: their errors are zero. The half-lengths do not enter
    the equations."""

    DEFAULTS = {"edge_frame_f": ("edge_frame_f", frame), "half_length_f": ("half_length_f", positive),
                "edge_frame_b": ("edge_frame_b", frame), "half_length_b": ("half_length_b", positive)}

    edge_frame_f: Transform
    half_length_f: jnp.ndarray
    edge_frame_b: Transform
    half_length_b: jnp.ndarray

    def __init__(self, body_f, edge_frame_f, half_length_f, body_b, edge_frame_b, half_length_b, enforce_rolling, *,
                 name=None):
        kind = "LineOnLineContact"
        self._set_numbers(kind, edge_frame_f=edge_frame_f, half_length_f=half_length_f, edge_frame_b=edge_frame_b,
                          half_length_b=half_length_b)
        self._register_contact(kind, body_f, body_b, enforce_rolling, name)

    def _lines(self, X_AB):
        """(Pf, df, Pb, db, n, parallel) in A."""
        Ef, Eb = X_AB[0].compose(self.edge_frame_f), X_AB[1].compose(self.edge_frame_b)
        df, db, sf, sb = Ef.R[:, 0], Eb.R[:, 0], Ef.R[:, 2], Eb.R[:, 2]
        w = cross(df, db)
        wsf, wsb = w @ sf, w @ sb
        sense = jnp.where(jnp.abs(wsf) > jnp.abs(wsb), jnp.where(wsf >= 0, 1.0, -1.0), jnp.where(wsb >= 0, -1.0, 1.0))
        s = safe_norm(w)
        parallel = s < significant_real(s.dtype)
        n = sense * w / jnp.where(parallel, 1.0, s)
        return Ef.p, df, Eb.p, db, n, parallel

    def _frame(self, X_AB):
        """(X_AC, parallel)."""
        Pf, df, Pb, db, n, parallel = self._lines(X_AB)
        pXn = cross(Pb - Pf, n)
        # closest points Qf = Pf + tf df and Qb = Pb + tb db of Pf + tf df + r n = Pb + tb db,
        # dotted with n x db and n x df (df . (n x db) = -(db . (n x df)) = -sense |df x db|)
        denom = jnp.where(parallel, 1.0, df @ cross(n, db))
        tf, tb = (db @ pXn) / denom, (df @ pXn) / denom
        Co = 0.5 * (Pf + tf * df + Pb + tb * db)
        return Transform(jnp.stack([df, cross(n, df), n], axis=-1), Co), parallel

    def contact_frame(self, X_AB):
        return self._frame(X_AB)[0]

    def position_errors(self, t, X_AB, q):
        Pf, _, Pb, _, n, parallel = self._lines(X_AB)
        return jnp.where(parallel, 0.0, (Pb - Pf) @ n)[None]

    def velocity_errors(self, k, V_AB, u):
        X_AC, parallel = self._frame(k.X_AB)
        return jnp.where(parallel, 0.0, _slip(k.X_AB, V_AB, X_AC))


class NoSlip1D(Constraint):
    """At a contact point P fixed on the case body, the two moving bodies'
    material points at P have equal velocity along a direction n fixed on the
    case body (0, 1, 0): verr = (v_AP1 - v_AP0) . n_A."""

    DEFAULTS = {"contact_point": ("contact_point", vec3), "direction": ("direction", unit3)}

    contact_point: jnp.ndarray
    direction: jnp.ndarray

    def __init__(self, case_body, contact_point, direction, moving_body0, moving_body1, *, name=None):
        self._set_numbers("NoSlip1D", contact_point=contact_point, direction=direction)
        self._register("NoSlip1D", bodies=(case_body, moving_body0, moving_body1), counts=(0, 1, 0), name=name)

    def velocity_errors(self, k, V_AB, u):
        X = k.X_AB
        p_AP = X[0].apply(self.contact_point)
        n_A = X[0].rotate(self.direction)
        v0 = material_point_velocity(X[1], V_AB[1], p_AP)
        v1 = material_point_velocity(X[2], V_AB[2], p_AP)
        return ((v1 - v0) @ n_A)[None]
