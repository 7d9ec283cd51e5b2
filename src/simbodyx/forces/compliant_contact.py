"""Compliant contact, Simbody's: Hunt-Crossley forces on a contact set's
point contacts, as Simbody's HuntCrossleyForce computes them (``HuntCrossley``,
built by ``sx.HuntCrossleyForce``) and as its CompliantContactSubsystem does
(``CompliantContact``, built by ``sx.CompliantContactSubsystem``: elliptical
Hertz contact and a smoother friction curve), and the smooth
sphere-on-half-space force made for gradient-based optimization
(``SmoothSphereHalfSpace``, built by ``sx.SmoothSphereHalfSpaceForce``).

All follow Simbody's formulas and signs: Hertz's normal force
(4/3) k d sqrt(R k d) on penetration d, times the Hunt-Crossley factor
(1 + 3/2 c v) for approach speed v (at a brick's vertices on a half-space,
Simbody's BrickHalfSpacePenalty instead: k d (1 + c v)), and Stribeck
friction against the slip velocity. Every value and first derivative is finite everywhere,
including exactly at contact onset and zero slip (the square roots and
norms there are the safe forms).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from simbodyx._xla.module import Module
from simbodyx.contact.detection import detect
from simbodyx.forces.base import ForceElement, forces_at, velocity_at, zeros
from simbodyx.spatial.transform import Transform
from simbodyx.spatial.vectors import safe_norm


class ContactForces(Module):
    """Per candidate contact point, in G: ``location`` (where the force acts,
    m), ``normal`` (unit, from surface 1 into 2), ``depth`` (m, > 0 when
    touching: the overlap plus the pair's margin) and ``force`` (N) on
    surface 2 (surface 1 gets its negative); ``surface1`` and ``surface2``
    are the points' surface indices in the set; ``power_dissipation`` (W,
    >= 0; the compliant elements') the rate at which each point's damping
    and friction take energy out, Simbody's
    ContactForce::getPowerDissipation."""

    location: jnp.ndarray
    normal: jnp.ndarray
    depth: jnp.ndarray
    force: jnp.ndarray
    surface1: tuple = eqx.field(static=True)
    surface2: tuple = eqx.field(static=True)
    power_dissipation: jnp.ndarray | None = None


def _positive_part(x):
    """(max(x, 0), max(x, 0)^(3/2)) with zero gradients (not NaN) for x <= 0."""
    inside = x > 0
    xp = jnp.where(inside, x, 0.0)
    return xp, jnp.where(inside, xp * jnp.sqrt(jnp.where(inside, x, 1.0)), 0.0)


def _stribeck(normal_force, slip, us, ud, uv, vt):
    """HuntCrossleyForce's friction magnitude for slip speed ``slip`` >= 0."""
    vrel = slip / vt
    return normal_force * (jnp.minimum(vrel, 1.0) * (ud + 2 * (us - ud) / (1 + vrel * vrel)) + uv * slip)


def _step5(x):
    """0 to 1 over x in [0, 1], a quintic with zero first and second
    derivatives at both ends (x is clipped to [0, 1])."""
    x = jnp.clip(x, 0.0, 1.0)
    return x * x * x * (10 + x * (6 * x - 15))


def _quintic_stribeck(normal_force, slip, us, ud, uv, vt):
    """CompliantContactSubsystem's friction magnitude: with v = slip / vt,
    mu = us step5(v) for v < 1, falling to ud by step5 over 1 <= v < 3, ud
    beyond, plus uv slip."""
    v = slip / vt
    dry = jnp.where(v >= 3, ud, jnp.where(v >= 1, us - (us - ud) * _step5((v - 1) / 2), us * _step5(v)))
    return normal_force * (dry + uv * slip)


#: Coefficients of the approximations in ``_eccentricity``: Antoine, Visa,
#: Sauvey and Abba's exponent of the contact ellipse's axis ratio (ASME J.
#: Tribology 128:660, 2006), and Abramowitz and Stegun's 17.3.34 and 17.3.36
#: for the complete elliptic integrals K(m) and E(m).
_RATIO_NUMERATOR = (0.40227436, 3.7491752e-2, 7.4855761e-4, 2.1667028e-6)
_RATIO_DENOMINATOR = (0.42678878, 4.2605401e-2, 9.0786922e-4, 2.7868927e-6)
_K_A = (1.38629436112, 0.09666344259, 0.03590092383, 0.03742563713, 0.01451196212)
_K_B = (0.5, 0.12498593597, 0.06880248576, 0.03328355346, 0.00441787012)
_E_C = (1.0, 0.44325141463, 0.06260601220, 0.04757383546, 0.01736506451)
_E_D = (0.0, 0.24998368310, 0.09200180037, 0.04069697526, 0.00526449639)


def _polynomial(coefficients, x):
    return sum(c * x ** i for i, c in enumerate(coefficients))


def _eccentricity(ratio):
    """Hertz's elliptical correction e of the force (4/3) e k sqrt(R k) d^(3/2)
    for relative principal curvatures in the ratio kmax / kmin = ``ratio``,
    Simbody's: the contact ellipse's axis ratio k = ratio^p with Antoine's
    exponent p, m = 1 - 1/k^2, e = pi k sqrt(E(m)) / (2 K(m)^(3/2)); 1 for a
    circle."""
    circular = ratio == 1
    ratio = jnp.where(circular, 2.0, ratio)
    q = jnp.log10(ratio) ** 2
    p = 2 * (1 + q * _polynomial(_RATIO_NUMERATOR, q)) / (3 * (1 + q * _polynomial(_RATIO_DENOMINATOR, q)))
    k = ratio ** p
    m1 = 1 / (k * k)  # 1 - m
    log_m1 = jnp.log(m1)
    K = _polynomial(_K_A, m1) - log_m1 * _polynomial(_K_B, m1)
    E = _polynomial(_E_C, m1) - log_m1 * _polynomial(_E_D, m1)
    return jnp.where(circular, 1.0, jnp.pi * k * jnp.sqrt(E * K) / (2 * K * K))


def _harmonic(a, b):
    """Simbody's combination of two surfaces' friction coefficients,
    2 a b / (a + b), and 0 when both are 0."""
    total = a + b
    return jnp.where(total > 0, 2 * a * b / jnp.where(total > 0, total, 1.0), 0.0)


def _offset(state, body, point):
    """The ground ``point`` measured from each ``body``'s origin, in G."""
    return point - state.position.X_GB.p[body]


class PointContactForce(ForceElement):
    """Compliant forces on the candidate points of one contact set, the part
    Simbody's HuntCrossleyForce and CompliantContactSubsystem share.

    Per surface: ``stiffness`` (Pa, Simbody's plain-strain modulus k; two
    surfaces combine as k = (s1 k1^(2/3))^(3/2) with s1 = k2^(2/3) /
    (k1^(2/3) + k2^(2/3))), ``dissipation`` c (s/m, combined c1 s1 + c2 s2),
    the friction coefficients (combined 2 a b / (a + b)). The normal force is
    Hertz's fH = (4/3) e k sqrt(R k) d^(3/2) times the Hunt-Crossley factor
    (1 + 3/2 c v), and zero where that would pull; e and R are the
    subclass's (``_hertz``). It acts at the point that divides the overlap by
    the surfaces' relative stiffness. Potential energy: (2/5) fH d per
    contact.

    A brick's vertices on a half-space (``detection.VERTEX_KERNELS``) take
    Simbody's BrickHalfSpacePenalty (CompliantContactSubsystem's brick
    generator): k d (1 + c v) with k = k1 k2 / (k1 + k2) and c = c1 s1 + c2
    (1 - s1), s1 = k2 / (k1 + k2), the force at the vertex moved out by
    (1 - s1) d (Simbody takes the stiffness's number as N/m there: a face's
    area does not change with d), and potential energy k d^2 / 2. Friction
    is the subclass's curve (``_friction``) times the normal force, against
    the slip velocity. A point's power dissipation is Simbody's: the
    damping part of the normal force times the penetration rate plus the
    friction force times the slip speed, 0 where the force would pull (the
    elastic energy stored there is then lost uncounted, as in Simbody).
    """

    NONNEGATIVE = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction")

    surfaces: tuple
    groups: tuple = eqx.field(static=True)
    stiffness: jnp.ndarray  #: (n,) one per surface
    dissipation: jnp.ndarray
    static_friction: jnp.ndarray
    dynamic_friction: jnp.ndarray
    viscous_friction: jnp.ndarray
    transition_velocity: jnp.ndarray  #: () m/s
    label: str = eqx.field(static=True)

    def _hertz(self, radius, ratio):
        """(R, e) of each point's Hertz force, from the detection's effective
        radius and curvature ratio (``detection.PointContact``)."""
        raise NotImplementedError

    def _friction(self, normal_force, slip, us, ud, uv, vt):
        """The friction force's magnitude at slip speed ``slip``."""
        raise NotImplementedError

    def check(self) -> None:
        super().check()
        if not np.all(np.asarray(self.transition_velocity) > 0):
            raise ValueError(f"{self.label}: the transition velocity must be positive, got {self.transition_velocity}")
        slower = np.asarray(self.dynamic_friction) > np.asarray(self.static_friction)
        if np.any(slower):
            i = int(np.argmax(slower))
            raise ValueError(f"{self.label}: {self.surfaces[i].name} has dynamic friction "
                             f"{self.dynamic_friction[i]} above its static friction {self.static_friction[i]}")

    def _bodies(self):
        return np.array([s.body for s in self.surfaces])

    def _contacts(self, state):
        """(ContactForces with the forces still zero, the elastic force
        (Hertz's, or k d at a vertex), the stiffness share s1 of each point
        and the vertex mask) for a State realized to Position."""
        c, i1, i2, vertex = detect(self.surfaces, self.groups, state.position.X_GB)
        hertzian = _two_thirds_power(self.stiffness)
        k1 = jnp.where(vertex, self.stiffness[i1], hertzian[i1])
        k2 = jnp.where(vertex, self.stiffness[i2], hertzian[i2])
        total = k1 + k2
        s1 = jnp.where(total > 0, k2 / jnp.where(total > 0, total, 1.0), 0.5)
        location = c.location + (c.depth * (0.5 - s1))[:, None] * c.normal
        k = k1 * s1
        depth, depth32 = _positive_part(c.depth)
        R, e = self._hertz(jnp.where(vertex, 1.0, c.radius), c.ratio)  # a vertex's 0 would give sqrt'(0) below
        elastic = jnp.where(vertex, k * depth, (4.0 / 3.0) * e * k * jnp.sqrt(R * k) * depth32)
        return ContactForces(location, c.normal, c.depth, jnp.zeros_like(location), tuple(i1.tolist()),
                             tuple(i2.tolist())), elastic, s1, vertex

    def contact_forces(self, model, state) -> ContactForces:
        """Every candidate point's location, normal, depth, force and power
        dissipation (State realized to Velocity)."""
        contacts, elastic, s1, vertex = self._contacts(state)
        i1, i2 = np.array(contacts.surface1), np.array(contacts.surface2)
        body1, body2 = self._bodies()[i1], self._bodies()[i2]
        n, point = contacts.normal, contacts.location
        c = self.dissipation[i1] * s1 + self.dissipation[i2] * (1 - s1)
        v = (velocity_at(state, body1, _offset(state, body1, point))
             - velocity_at(state, body2, _offset(state, body2, point)))
        vn = jnp.sum(v * n, axis=-1)
        factor = jnp.asarray(np.where(vertex, 1.0, 1.5), elastic.dtype)  # Hunt-Crossley's 3/2, a vertex's 1
        normal_force = jnp.maximum(elastic * (1 + factor * c * vn), 0.0)
        tangent = v - vn[:, None] * n
        slip = safe_norm(tangent)
        friction = self._friction(normal_force, slip,
                                  _harmonic(self.static_friction[i1], self.static_friction[i2]),
                                  _harmonic(self.dynamic_friction[i1], self.dynamic_friction[i2]),
                                  _harmonic(self.viscous_friction[i1], self.viscous_friction[i2]),
                                  self.transition_velocity)
        direction = tangent / jnp.where(slip > 0, slip, 1.0)[:, None]
        force = normal_force[:, None] * n + friction[:, None] * direction
        power = jnp.where(normal_force > 0, elastic * factor * c * vn * vn + friction * slip, 0.0)
        return ContactForces(contacts.location, n, contacts.depth, force, contacts.surface1, contacts.surface2, power)

    def calc(self, model, state):
        f = self.contact_forces(model, state)
        body1, body2 = self._bodies()[np.array(f.surface1)], self._bodies()[np.array(f.surface2)]
        F = forces_at(state, body2, _offset(state, body2, f.location), f.force)
        F = F + forces_at(state, body1, _offset(state, body1, f.location), -f.force)
        return zeros(state)[0], F

    def potential_energy(self, model, state):
        contacts, elastic, _, vertex = self._contacts(state)
        depth, _ = _positive_part(contacts.depth)
        return jnp.sum(jnp.asarray(np.where(vertex, 0.5, 0.4), elastic.dtype) * elastic * depth)


class HuntCrossley(PointContactForce):
    """Simbody's HuntCrossleyForce (``sx.HuntCrossleyForce``): Hertz's force
    with Simbody's effective radius R = sqrt(r1 r2) of the relative principal
    radii (e = 1), and the friction f (min(v/vt, 1) (ud + 2 (us - ud) / (1 +
    (v/vt)^2)) + uv v) at slip speed v."""

    def _hertz(self, radius, ratio):
        return radius, 1.0

    def _friction(self, normal_force, slip, us, ud, uv, vt):
        return _stribeck(normal_force, slip, us, ud, uv, vt)


class CompliantContact(PointContactForce):
    """Simbody's CompliantContactSubsystem (``sx.CompliantContactSubsystem``),
    its HertzCircular and HertzElliptical generators: R = 2 / (kmax + kmin)
    of the relative principal curvatures and Hertz's elliptical correction
    e(kmax / kmin) (``_eccentricity``; R is the radius and e = 1 where the
    contact is circular), and its friction curve (``_quintic_stribeck``).
    With ``track_dissipated_energy`` its one auxiliary state z is the energy
    dissipated so far (J), zdot the points' total power dissipation."""

    track_dissipated_energy: bool = eqx.field(static=True, default=False)
    z_start: int = eqx.field(static=True, default=-1)

    def _hertz(self, radius, ratio):
        return 2 * radius * jnp.sqrt(ratio) / (1 + ratio), _eccentricity(ratio)

    def num_z(self) -> int:
        return int(self.track_dissipated_energy)

    def calc_zdot(self, model, state):
        return jnp.sum(self.contact_forces(model, state).power_dissipation)[None]

    def _friction(self, normal_force, slip, us, ud, uv, vt):
        return _quintic_stribeck(normal_force, slip, us, ud, uv, vt)


def _two_thirds_power(k):
    """k^(2/3), with a zero (not NaN) gradient at k = 0."""
    positive = k > 0
    return jnp.where(positive, jnp.where(positive, k, 1.0) ** (2.0 / 3.0), 0.0)


class SmoothSphereHalfSpace(ForceElement):
    """Simbody's SmoothSphereHalfSpaceForce: a sphere (``radius``, centred at
    ``sphere_location`` on ``sphere_body``) against the half-space x > 0 of
    the frame ``half_space_frame`` on ``half_space_body``, with every switch
    of Hunt-Crossley contact smoothed:

    fH = (4/3) k sqrt(R k) (d^2 + cf)^(3/4) (1/2 + 1/2 tanh(bd d)), k = (1/2) E^(2/3)
    f  = fH (1 + 3/2 c v) (1/2 + 1/2 tanh(bv (v + 2 / (3 c))))
    ff = f (min(vs/vt, 1) (ud + 2 (us - ud) / (1 + (vs/vt)^2)) + uv vs), vs = sqrt(|vt|^2 + cf)

    and the potential energy (2/5) fH d, Simbody's approximation.
    """

    NONNEGATIVE = ("stiffness", "dissipation", "static_friction", "dynamic_friction", "viscous_friction",
                   "constant_contact_force", "hertz_smoothing", "hunt_crossley_smoothing")

    sphere_body: int = eqx.field(static=True)
    half_space_body: int = eqx.field(static=True)
    sphere_location: jnp.ndarray  #: (3,) m, in the sphere's body
    radius: jnp.ndarray  #: () m
    half_space_frame: Transform  #: in the half-space's body
    stiffness: jnp.ndarray
    dissipation: jnp.ndarray
    static_friction: jnp.ndarray
    dynamic_friction: jnp.ndarray
    viscous_friction: jnp.ndarray
    transition_velocity: jnp.ndarray
    constant_contact_force: jnp.ndarray
    hertz_smoothing: jnp.ndarray
    hunt_crossley_smoothing: jnp.ndarray

    def check(self) -> None:
        super().check()
        label = "SmoothSphereHalfSpaceForce"
        if not float(self.radius) > 0:
            raise ValueError(f"{label}: the contact sphere's radius must be positive, got {self.radius}")
        if not float(self.transition_velocity) > 0:
            raise ValueError(f"{label}: the transition velocity must be positive, got {self.transition_velocity}")
        if not float(self.constant_contact_force) > 0:
            raise ValueError(f"{label}: the constant contact force cf must be positive (it keeps the force and "
                             f"the slip speed smooth at zero), got {self.constant_contact_force}")
        if float(self.dynamic_friction) > float(self.static_friction):
            raise ValueError(f"{label}: dynamic friction {self.dynamic_friction} is above static friction "
                             f"{self.static_friction}")

    def _geometry(self, state):
        """(indentation d, normal (into the half-space), contact point) in G."""
        X = state.position.X_GB
        center = X[self.sphere_body].apply(self.sphere_location)
        X_GH = X[self.half_space_body].compose(self.half_space_frame)
        normal = X_GH.R[:, 0]
        indentation = self.radius + jnp.dot(center - X_GH.p, normal)
        return indentation, normal, center + (self.radius - indentation / 2) * normal

    def _hertz(self, indentation):
        k = 0.5 * _two_thirds_power(self.stiffness)
        smoothed = (indentation * indentation + self.constant_contact_force) ** 0.75
        switch = 0.5 + 0.5 * jnp.tanh(self.hertz_smoothing * indentation)
        return (4.0 / 3.0) * k * jnp.sqrt(self.radius * k) * smoothed * switch

    def contact_force(self, model, state):
        """(contact point (3,), force (3,) on the half-space; the sphere gets its
        negative), in G, for a State realized to Velocity."""
        indentation, normal, point = self._geometry(state)
        sphere, half_space = self.sphere_body, self.half_space_body
        v = (velocity_at(state, sphere, _offset(state, sphere, point))
             - velocity_at(state, half_space, _offset(state, half_space, point)))
        vn = jnp.dot(v, normal)
        c = self.dissipation
        dissipative = c > 0
        onset = 2.0 / (3.0 * jnp.where(dissipative, c, 1.0))  # the approach speed where 1 + 3/2 c v = 0
        switch = jnp.where(dissipative, 0.5 + 0.5 * jnp.tanh(self.hunt_crossley_smoothing * (vn + onset)), 1.0)
        f = self._hertz(indentation) * (1 + 1.5 * c * vn) * switch
        tangent = v - vn * normal
        slip = jnp.sqrt(jnp.dot(tangent, tangent) + self.constant_contact_force)
        friction = _stribeck(f, slip, self.static_friction, self.dynamic_friction, self.viscous_friction,
                             self.transition_velocity)
        return point, f * normal + friction * tangent / slip

    def calc(self, model, state):
        point, force = self.contact_force(model, state)
        sphere, half_space = self.sphere_body, self.half_space_body
        F = (forces_at(state, half_space, _offset(state, half_space, point), force)
             + forces_at(state, sphere, _offset(state, sphere, point), -force))
        return zeros(state)[0], F

    def potential_energy(self, model, state):
        indentation, _, _ = self._geometry(state)
        return 0.4 * self._hertz(indentation) * indentation
