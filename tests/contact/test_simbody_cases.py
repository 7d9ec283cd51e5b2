"""Simbody's own test cases for its compliant contact forces
(TestHuntCrossleyForce.cpp, TestSmoothSphereHalfSpaceForce.cpp), its
BrickHalfSpacePenalty's vertex forces and the MobilityLinearStop formula,
to 1e-10: a sphere on a Translation mobilizer
above the half-space y < 0, at heights from above contact to deep
penetration, with vertical and sliding speeds from -1 to 1 m/s. Each
model's cases run as one vmapped, jitted program."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import simbodyx as sx

GRAVITY = np.array([0.0, -9.8, 0.0])
RADIUS = 0.8
#: heights radius + 0.2 down to 0.1 (Simbody's loop), speeds -1 to 1 by 0.1
HEIGHTS = RADIUS + 0.2 - 0.1 * np.arange(10)
SPEEDS = np.round(np.arange(-1.0, 1.0 + 1e-9, 0.1), 12)
TOL = 1e-10
#: the half-space y < 0: its x axis turned onto -y
FLOOR = sx.Transform(sx.Rotation.about_z(-0.5 * np.pi), np.zeros(3))


def _sphere_system():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, GRAVITY, 0.0)
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(1.0)))
    sphere = sx.MobilizedBody.Translation(matter.Ground(), body, name="sphere")
    return system, matter, forces, sphere


def _cases():
    """(q, u) for every (height, velocity) Simbody's tests visit: vertical
    velocities (0, -v, 0) then sliding ones (v, 0, 0)."""
    h, v = np.meshgrid(HEIGHTS, SPEEDS, indexing="ij")
    h, v = h.ravel(), v.ravel()
    zero = np.zeros_like(h)
    q = np.stack([zero, h, zero], axis=1)
    vertical = np.stack([zero, -v, zero], axis=1)
    sliding = np.stack([v, zero, zero], axis=1)
    return h, v, np.concatenate([q, q]), np.concatenate([vertical, sliding])


def _evaluate(model, state, q, u, extra=lambda s: 0.0):
    @jax.jit
    @functools.partial(jax.vmap)
    def run(q, u):
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity)
        return model.forces.calc_forces(s)[1][1], extra(s)

    return run(jnp.asarray(q), jnp.asarray(u))


def _expected_body_force(point_y, height, total_force):
    """[r x f; f] at the sphere's origin (its centre, at ``height``) for
    ``total_force`` at the ground point (0, point_y, 0)."""
    r = np.stack([np.zeros_like(point_y), point_y - height, np.zeros_like(point_y)], axis=1)
    return np.concatenate([np.cross(r, total_force), total_force], axis=1)


def test_hunt_crossley_force_matches_simbodys_test():
    system, matter, forces, sphere = _sphere_system()
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    contacts.add_body(contact_set, sphere, sx.ContactGeometry.Sphere(RADIUS))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR)
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    k1, k2, c1, c2, us1, us2, ud1, ud2, uv1, uv2 = 1.0, 2.0, 0.5, 1.0, 1.0, 0.7, 0.5, 0.2, 0.1, 0.05
    hc.set_body_parameters(0, k1, c1, us1, ud1, uv1)
    hc.set_body_parameters(1, k2, c2, us2, ud2, uv2)
    vt = 0.001
    hc.set_transition_velocity(vt)
    assert hc.get_transition_velocity() == vt
    model, state = system.realize_topology()

    s1, s2 = k1 ** (2 / 3), k2 ** (2 / 3)
    stiffness = s1 * s2 / (s1 + s2)
    dissipation = (c1 * s2 + c2 * s1) / (s1 + s2)
    us, ud, uv = (2 * a * b / (a + b) for a, b in ((us1, us2), (ud1, ud2), (uv1, uv2)))
    h, v, q, u = _cases()
    depth = RADIUS - h
    fh = np.where(depth > 0, 4 / 3 * stiffness * depth * np.sqrt(RADIUS * stiffness * np.maximum(depth, 0)), 0.0)
    n = len(h)
    got, _ = _evaluate(model, state, q, u)
    got = np.asarray(got)

    normal = np.maximum(fh * (1 + 1.5 * dissipation * v), 0.0)
    np.testing.assert_allclose(got[:n, 3:], GRAVITY + np.outer(normal, [0, 1, 0]), rtol=0, atol=TOL)

    vrel = np.abs(v / vt)
    friction = np.where(v < 0, 1, -1) * fh * (np.minimum(vrel, 1) * (ud + 2 * (us - ud) / (1 + vrel ** 2)) + uv * np.abs(v))
    total = GRAVITY + np.stack([friction, fh, np.zeros(n)], axis=1)
    point_y = -s1 * depth / (s1 + s2)
    np.testing.assert_allclose(got[n:], _expected_body_force(point_y, h, total), rtol=0, atol=TOL)


def test_smooth_sphere_half_space_force_matches_simbodys_test():
    system, matter, forces, sphere = _sphere_system()
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(1.0)))
    half_space = sx.MobilizedBody.Free(matter.Ground(), body, name="half_space")
    k, c, us, ud, uv, vt, cf, bd, bv = 1500.0, 0.5, 1.0, 0.5, 0.1, 0.001, 1e-5, 300.0, 50.0
    smooth = sx.SmoothSphereHalfSpaceForce(forces)
    smooth.set_parameters(k, c, us, ud, uv, vt, cf, bd, bv)
    smooth.set_contact_sphere_body(sphere)
    smooth.set_contact_sphere_location_in_body([0, 0, 0])
    smooth.set_contact_sphere_radius(RADIUS)
    smooth.set_contact_half_space_frame(FLOOR)
    smooth.set_contact_half_space_body(half_space)
    model, state = system.realize_topology()
    element = smooth.element(model)

    h, v, q_sphere, u_sphere = _cases()
    n = len(h)
    q = np.concatenate([q_sphere, np.tile([1.0, 0, 0, 0, 0, 0, 0], (2 * n, 1))], axis=1)
    u = np.concatenate([u_sphere, np.zeros((2 * n, 6))], axis=1)
    got, (energy, (point, force)) = _evaluate(
        model, state, q, u, lambda s: (element.potential_energy(model, s), smooth.get_contact_force(model, s)))
    got, energy = np.asarray(got), np.asarray(energy)
    # Simbody's getters read the settings back; the force on the half-space is minus the sphere's, at (x, y) of
    # the midpoint of the overlap
    assert (smooth.get_body_sphere(), smooth.get_body_half_space()) == (sphere, half_space)
    assert smooth.get_contact_sphere_radius() == RADIUS
    np.testing.assert_array_equal(smooth.get_contact_sphere_location_in_body(), [0, 0, 0])
    np.testing.assert_array_equal(smooth.get_contact_half_space_transform().R, FLOOR.R)
    np.testing.assert_allclose(force, -(got[:, 3:] - GRAVITY), rtol=0, atol=TOL)

    stiffness = 0.5 * k ** (2 / 3)
    depth = RADIUS - h
    fh = 4 / 3 * stiffness * np.sqrt(depth ** 2 + cf) ** 1.5 * np.sqrt(RADIUS * stiffness) * (0.5 + 0.5 * np.tanh(bd * depth))
    np.testing.assert_allclose(energy[:n], 0.4 * fh * depth, rtol=0, atol=TOL)
    normal = fh * (1 + 1.5 * c * v) * (0.5 + 0.5 * np.tanh(bv * (v + 2 / (3 * c))))
    np.testing.assert_allclose(got[:n, 3:], GRAVITY + np.outer(normal, [0, 1, 0]), rtol=0, atol=TOL)

    # sliding: the normal (0, -1, 0) into the half-space, the tangent velocity (v, 0, 0)
    vslip = np.sqrt(v ** 2 + cf)
    vrel = vslip / vt
    ff = fh * (np.minimum(vrel, 1) * (ud + 2 * (us - ud) / (1 + vrel ** 2)) + uv * vslip) * v / vslip
    total = GRAVITY + np.stack([-ff, fh, np.zeros(n)], axis=1)
    np.testing.assert_allclose(got[n:], _expected_body_force(-depth / 2, h, total), rtol=0, atol=TOL)
    np.testing.assert_allclose(point[:, 1], np.tile(-depth / 2, 2), rtol=0, atol=TOL)


def test_mobility_linear_stop_matches_simbodys_formula():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [1, 0, 0], sx.Inertia(0.1)))
    pin = sx.MobilizedBody.Pin(matter.Ground(), body)
    k, d, low, high = 300.0, 0.2, -0.5, 0.7
    stop = sx.Force.MobilityLinearStop(forces, pin, 0, k, d, low, high)
    with pytest.raises(ValueError, match="MobilityLinearStop: the lower bound 1.0 is above the upper bound 0.0"):
        sx.Force.MobilityLinearStop(forces, pin, 0, k, d, 1.0, 0.0)
    with pytest.raises(ValueError, match="MobilityLinearStop: stiffness must be >= 0"):
        sx.Force.MobilityLinearStop(forces, pin, 0, -k, d, low, high)
    model, state = system.realize_topology()
    q, qdot = np.meshgrid(np.linspace(-1.0, 1.2, 23), np.linspace(-8.0, 8.0, 9), indexing="ij")
    q, qdot = q.ravel(), qdot.ravel()

    @jax.jit
    @jax.vmap
    def run(q, u):
        s = model.realize(state.with_q(q[None]).with_u(u[None]), sx.Stage.Velocity)
        return model.forces.calc_forces(s)[0][0], model.forces.calc_potential_energy(s)

    got, energy = run(jnp.asarray(q), jnp.asarray(qdot))
    expected = np.where(q > high, np.minimum(0, -k * (q - high) * (1 + d * qdot)),
                        np.where(q < low, np.maximum(0, -k * (q - low) * (1 - d * qdot)), 0.0))
    x = np.where(q > high, q - high, np.where(q < low, q - low, 0.0))
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(energy, 0.5 * k * x ** 2, rtol=0, atol=TOL)
    assert (stop.get_lower_bound(), stop.get_upper_bound(), stop.get_stiffness(), stop.get_dissipation()) == (low, high, k, d)


def test_brick_vertices_take_simbodys_brick_half_space_penalty():
    """A tilted, moving, spinning brick pressed into the floor, two surfaces
    with different numbers, against CompliantContactSubsystem's
    calcPointHalfSpacePenaltyForce written out here: the face most
    antiparallel to the floor's normal, each of its vertices below the floor
    pushed by k x (1 + c xdot) at the vertex moved out by sB x, friction
    against its slip, summed as the force on the brick about its origin."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(1.0)))
    brick = sx.MobilizedBody.Free(matter.Ground(), body, name="brick")
    half = np.array([0.3, 0.2, 0.1])
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    contacts.add_body(contact_set, brick, sx.ContactGeometry.Brick(half))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR)
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    (kB, cB, usB, udB, uvB), (kH, cH, usH, udH, uvH) = (3e4, 0.5, 0.9, 0.6, 0.1), (1e4, 2.0, 0.7, 0.4, 0.05)
    hc.set_body_parameters(0, kB, cB, usB, udB, uvB)
    hc.set_body_parameters(1, kH, cH, usH, udH, uvH)
    vt = 0.05
    hc.set_transition_velocity(vt)
    model, state = system.realize_topology()

    rng = np.random.default_rng(3)
    axis = rng.normal(size=3)
    quaternion = np.concatenate([[np.cos(0.2)], np.sin(0.2) * axis / np.linalg.norm(axis)])
    position, w, v = np.array([0.1, 0.12, -0.05]), rng.normal(size=3), rng.normal(size=3)
    s = model.realize(state.with_q(np.concatenate([quaternion, position])).with_u(np.concatenate([w, v])),
                      sx.Stage.Velocity)
    R = np.asarray(s.position.X_GB.R[1])

    sH = kB / (kH + kB)
    sB = 1 - sH
    k, c = kH * sH, cH * sH + cB * sB
    us, ud, uv = (2 * a * b / (a + b) for a, b in ((usH, usB), (udH, udB), (uvH, uvB)))
    normal = np.array([0.0, 1.0, 0.0])  # the floor's outward normal, in G
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
    face_axis, side = min(((a, s_) for a in range(3) for s_ in (-1, 1)), key=lambda f: f[1] * R[:, f[0]] @ normal)
    expected = np.zeros(6)
    for corner in corners[np.sign(corners[:, face_axis]) == side]:
        vertex = R @ corner + position
        x = -vertex @ normal
        if x <= 0:
            continue
        point = vertex + x * sB * normal
        velocity = v + np.cross(w, point - position)
        xdot = -velocity @ normal
        f_normal = k * x * (1 + c * xdot)
        if f_normal <= 0:
            continue
        tangent = velocity + xdot * normal
        slip = np.linalg.norm(tangent)
        vrel = slip / vt
        mu = min(vrel, 1) * (ud + 2 * (us - ud) / (1 + vrel ** 2)) + uv * slip
        force = f_normal * normal - f_normal * mu * tangent / slip
        expected += np.concatenate([np.cross(point - position, force), force])
    assert np.count_nonzero(expected) and abs(expected[4]) > 1.0  # pressed in: the case is not empty
    got = np.asarray(model.forces.calc_forces(s)[1][1])
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL * max(1.0, np.abs(expected).max()))

    def brick_force(q, u):
        return model.forces.calc_forces(model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity))[1][1]

    # derivatives: central differences where the force is smooth, finite where a face just touches at rest
    check_grads(jax.jit(brick_force), (s.q, s.u), order=1, modes=("fwd", "rev"), eps=1e-6, atol=1e-4, rtol=1e-6)
    touching = jnp.asarray([1.0, 0, 0, 0, 0, half[1], 0])
    for d in jax.jacfwd(brick_force, argnums=(0, 1))(touching, jnp.zeros(6)):
        assert np.all(np.isfinite(np.asarray(d)))


def _quintic(x):
    x = np.clip(x, 0, 1)
    return x ** 3 * (10 + x * (6 * x - 15))


def _simbody_eccentricity(kmax, kmin):
    """CompliantContactSubsystem's calcHertzForceEccentricityCorrection, as
    Simbody writes it (Antoine's axis ratio, Abramowitz and Stegun's K and E)."""
    if kmax == kmin:
        return 1.0
    u = [0.40227436, 3.7491752e-2, 7.4855761e-4, 2.1667028e-6]
    w = [0.42678878, 4.2605401e-2, 9.0786922e-4, 2.7868927e-6]
    q = np.log10(kmax / kmin) ** 2
    n = 1 + sum(c * q ** (i + 1) for i, c in enumerate(u))
    d = 1 + sum(c * q ** (i + 1) for i, c in enumerate(w))
    k = (kmax / kmin) ** (2 * n / (3 * d))
    m1 = 1 / k ** 2
    a = [1.38629436112, 0.09666344259, 0.03590092383, 0.03742563713, 0.01451196212]
    b = [0.5, 0.12498593597, 0.06880248576, 0.03328355346, 0.00441787012]
    c = [1, 0.44325141463, 0.06260601220, 0.04757383546, 0.01736506451]
    e = [0, 0.24998368310, 0.09200180037, 0.04069697526, 0.00526449639]
    K = sum(x * m1 ** i for i, x in enumerate(a)) - np.log(m1) * sum(x * m1 ** i for i, x in enumerate(b))
    E = sum(x * m1 ** i for i, x in enumerate(c)) - np.log(m1) * sum(x * m1 ** i for i, x in enumerate(e))
    return np.pi * k * np.sqrt(E * K) / (2 * K * K)


def _compliant_sphere_or_ellipsoid(geometry):
    system, matter, forces, body = _sphere_system()
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    materials = sx.ContactMaterial(1.0, 0.5, 1.0, 0.5, 0.1), sx.ContactMaterial(2.0, 1.0, 0.7, 0.2, 0.05)
    contacts.add_body(contact_set, body, geometry, material=materials[0])
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR, material=materials[1])
    ccs = sx.CompliantContactSubsystem(forces, contacts, contact_set)
    ccs.set_transition_velocity(0.15)  # the slip speeds cross all three pieces of the friction curve
    model, state = system.realize_topology()
    return model, state, materials, ccs.get_transition_velocity()


@pytest.mark.parametrize("shape", ["sphere", "ellipsoid"])
def test_compliant_contact_subsystem_matches_simbodys_generators(shape):
    """CompliantContactSubsystem's HertzCircular (a sphere) and HertzElliptical
    (an ellipsoid with semi-axes a, b, c along x, y, z, its lowest point
    (0, -b, 0) on the floor: principal curvatures b/a^2 and b/c^2) on the
    cases above, written out from Simbody's calcHertzContactForce with its
    quintic Stribeck curve; and the potential energy (2/5) fH x."""
    a, c = 0.5, 0.3
    geometry = (sx.ContactGeometry.Sphere(RADIUS) if shape == "sphere"
                else sx.ContactGeometry.Ellipsoid([a, RADIUS, c]))
    model, state, (m1, m2), vt = _compliant_sphere_or_ellipsoid(geometry)
    if shape == "sphere":
        R, e = RADIUS, 1.0
    else:
        kmax, kmin = RADIUS / c ** 2, RADIUS / a ** 2
        R, e = 2 / (kmax + kmin), _simbody_eccentricity(kmax, kmin)
        assert abs(e - 1) > 0.01  # the correction matters here
    # surface 1 is the half-space (Simbody orders the pair so), with material m2
    s1 = m1.get_stiffness23() / (m1.get_stiffness23() + m2.get_stiffness23())
    k = m2.get_stiffness23() * s1
    dissipation = m2.get_dissipation() * s1 + m1.get_dissipation() * (1 - s1)
    us, ud, uv = (2 * x * y / (x + y) for x, y in ((m1.static_friction, m2.static_friction),
                                                   (m1.dynamic_friction, m2.dynamic_friction),
                                                   (m1.viscous_friction, m2.viscous_friction)))
    h, v, q, u = _cases()
    n = len(h)
    depth = RADIUS - h
    fh = np.where(depth > 0, e * 4 / 3 * k * np.maximum(depth, 0) * np.sqrt(R * k * np.maximum(depth, 0)), 0.0)
    got, energy = _evaluate(model, state, q, u, lambda s: model.forces.calc_potential_energy(s))
    got, energy = np.asarray(got), np.asarray(energy)
    np.testing.assert_allclose(energy[:n], 0.4 * fh * depth + 9.8 * h, rtol=0, atol=TOL)

    normal = np.maximum(fh * (1 + 1.5 * dissipation * v), 0.0)
    np.testing.assert_allclose(got[:n, 3:], GRAVITY + np.outer(normal, [0, 1, 0]), rtol=0, atol=TOL)

    x = np.abs(v) / vt
    dry = np.where(x >= 3, ud, np.where(x >= 1, us - (us - ud) * _quintic((x - 1) / 2), us * _quintic(x)))
    friction = -np.sign(v) * fh * (dry + uv * np.abs(v))
    total = GRAVITY + np.stack([friction, fh, np.zeros(n)], axis=1)
    point_y = -s1 * depth
    np.testing.assert_allclose(got[n:], _expected_body_force(point_y, h, total), rtol=0, atol=TOL)


def _elliptic_integrals(m):
    """K(m) and E(m) to machine precision by the arithmetic-geometric mean."""
    a, b, K_sum, power = 1.0, np.sqrt(1 - m), m / 2, 0.5
    for _ in range(40):  # quadratic convergence: a handful reach machine precision
        a, b, c = (a + b) / 2, np.sqrt(a * b), (a - b) / 2
        power *= 2
        K_sum += power * c * c
    K = np.pi / (2 * a)
    return K, K * (1 - K_sum)


def test_the_elliptical_correction_is_hertz_theorys_to_five_digits():
    """Simbody's approximations against Hertz's implicit equation solved
    exactly: for curvature ratios kmax/kmin, the ellipse's axis ratio k with
    kmax/kmin = (k^2 E(m) - K(m)) / (K(m) - E(m)), m = 1 - 1/k^2 (by
    bisection, K and E by the arithmetic-geometric mean), and e = pi k
    sqrt(E) / (2 K^(3/2)); and e = 1 for a circle, with a finite derivative
    there."""
    from simbodyx.forces.compliant_contact import _eccentricity

    ratios = np.array([1.0, 1.001, 1.5, 2.0, 5.0, 20.0, 100.0])
    exact = []
    for ratio in ratios:
        low, high = 1.0, 1e3
        for _ in range(200):
            k = (low + high) / 2
            K, E = _elliptic_integrals(1 - 1 / k ** 2)
            low, high = (k, high) if (k * k * E - K) / (K - E) < ratio else (low, k)
        K, E = _elliptic_integrals(1 - 1 / k ** 2)
        exact.append(np.pi * k * np.sqrt(E) / (2 * K ** 1.5) if ratio > 1 else 1.0)
    got = np.asarray(jax.vmap(_eccentricity)(jnp.asarray(ratios)))
    np.testing.assert_allclose(got, exact, rtol=1e-5)
    np.testing.assert_allclose(got, [_simbody_eccentricity(r, 1.0) for r in ratios], rtol=0, atol=1e-12)
    slopes = np.asarray(jax.vmap(jax.grad(_eccentricity))(jnp.asarray(ratios)))
    assert np.all(np.isfinite(slopes)) and slopes[0] == 0  # e is even in log(ratio): flat at a circle


def test_compliant_contact_subsystem_needs_a_material_on_every_surface():
    system, matter, forces, sphere = _sphere_system()
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    contacts.add_body(contact_set, sphere, sx.ContactGeometry.Sphere(RADIUS), material=sx.ContactMaterial(1, 0, 0, 0))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR, name="floor")
    sx.CompliantContactSubsystem(forces, contacts, contact_set)
    with pytest.raises(ValueError, match="CompliantContactSubsystem: surface 1 'floor' \\(HalfSpace on Ground "
                                         ".*\\) has no ContactMaterial"):
        system.realize_topology()
    # a HuntCrossleyForce takes a surface's material unless set_body_parameters says otherwise
    system, matter, forces, sphere = _sphere_system()
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    material = sx.ContactMaterial(3.0, 0.2, 0.9, 0.6, 0.1)
    contacts.add_body(contact_set, sphere, sx.ContactGeometry.Sphere(RADIUS), material=material)
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR, material=material)
    hc = sx.HuntCrossleyForce(forces, contacts, contact_set)
    hc.set_body_parameters(1, 5.0, 0.0, 0.0, 0.0, 0.0)
    model, _ = system.realize_topology()
    element = hc.element(model)
    assert contacts.get_body_material(contact_set, 0) is material
    np.testing.assert_array_equal(np.stack([element.stiffness, element.dissipation, element.static_friction,
                                            element.dynamic_friction, element.viscous_friction]),
                                  [[3.0, 5.0], [0.2, 0.0], [0.9, 0.0], [0.6, 0.0], [0.1, 0.0]])
    with pytest.raises(ValueError, match="ContactMaterial: dynamic_friction 0.5 is above static_friction 0.4"):
        sx.ContactMaterial(1.0, 0.0, 0.4, 0.5)
    with pytest.raises(ValueError, match="ContactMaterial: stiffness must be finite and >= 0"):
        sx.ContactMaterial(-1.0, 0.0, 0.4, 0.3)
    material = sx.ContactMaterial(3.0, 0.2, 0.9, 0.6, 0.1)
    assert (material.get_stiffness(), material.get_dissipation(), material.get_static_friction(),
            material.get_dynamic_friction(), material.get_viscous_friction()) == material.values()
    assert repr(material) == "ContactMaterial(3.0, 0.2, 0.9, 0.6, 0.1)"
    assert sx.ContactMaterial.calc_plane_strain_stiffness(2e9, 0.3) == pytest.approx(2e9 / 0.91, rel=1e-15)
    assert sx.ContactMaterial.calc_confined_compression_stiffness(2e9, 0.3) == pytest.approx(
        2e9 * 0.7 / (1.3 * 0.4), rel=1e-15)
    assert sx.ContactMaterial.calc_dissipation_from_observed_restitution(0.8, 0.1) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="calc_confined_compression_stiffness: needs Young's modulus >= 0 and -1 < "
                                         "Poisson's ratio < 0.5, got 1.0, 0.5"):
        sx.ContactMaterial.calc_confined_compression_stiffness(1.0, 0.5)


def test_elliptical_contact_derivatives_match_central_differences():
    """A tilted, moving ellipsoid pressed into the floor, and a spheroid
    standing on its axis (a circular contact, where the two principal
    curvatures meet): the CompliantContactSubsystem's forces are smooth in
    q and u and their derivatives agree with central differences."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(1.0)))
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    for radii in ([0.5, 0.8, 0.3], [0.4, 0.8, 0.4]):
        mobod = sx.MobilizedBody.Free(matter.Ground(), body)
        contacts.add_body(contact_set, mobod, sx.ContactGeometry.Ellipsoid(radii),
                          material=sx.ContactMaterial(1e5, 0.5, 0.8, 0.5, 0.1))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR,
                      material=sx.ContactMaterial(2e5, 1.0, 0.6, 0.4, 0.0))
    contacts.exclude_pair(contact_set, 0, 1)
    sx.CompliantContactSubsystem(forces, contacts, contact_set).set_transition_velocity(0.1)
    model, state = system.realize_topology()
    axis = np.array([0.3, 0.2, 0.9])
    tilted = np.concatenate([[np.cos(0.3)], np.sin(0.3) * axis / np.linalg.norm(axis), [0.0, 0.7, 0.0]])
    upright = np.array([1.0, 0, 0, 0, 2.0, 0.78, 0.0])
    q = jnp.asarray(np.concatenate([tilted, upright]))
    u = jnp.asarray(np.concatenate([[0.3, -0.2, 0.5, 0.4, -0.1, 0.2], [0.0, 0.1, 0.0, 0.05, -0.02, 0.0]]))

    def body_forces(q, u):
        return model.forces.calc_forces(model.realize(state.with_q(q).with_u(u), sx.Stage.Velocity))[1][1:]

    F = np.asarray(body_forces(q, u))
    assert F[0, 4] > 1.0 and F[1, 4] > 1.0  # both pressed into the floor
    check_grads(jax.jit(body_forces), (q, u), order=1, modes=("fwd", "rev"), eps=1e-6, atol=1e-5, rtol=1e-6)


def test_tracked_dissipated_energy_closes_the_energy_books():
    """A ball thrown sideways onto the floor (dissipation and friction: it
    bounces, slides and starts to roll): with the dissipated energy tracked
    (Simbody's setTrackDissipatedEnergy), kinetic + gravity + contact
    potential energy + dissipated energy stays 9.36 J to the integrator's
    accuracy (Merson at 1e-8: within 1e-6 J; 2.4 J dissipated by 1 s);
    untracked, the State has no z."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, GRAVITY, 0.0)
    ball = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.1))))
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    contacts.add_body(contact_set, ball, sx.ContactGeometry.Sphere(0.5),
                      material=sx.ContactMaterial(1e6, 0.1, 0.6, 0.4, 0.05))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR,
                      material=sx.ContactMaterial(2e6, 0.2, 0.5, 0.3, 0.0))
    ccs = sx.CompliantContactSubsystem(forces, contacts, contact_set)
    ccs.set_track_dissipated_energy()
    assert ccs.get_track_dissipated_energy()
    model, state = system.realize_topology()
    state = state.with_q(jnp.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.7, 0.0]))
    assert state.z.shape == (1,) and float(ccs.get_dissipated_energy(state)) == 0.0
    state = state.with_u(jnp.array([0.0, 0.0, 0.0, 2.0, -1.0, 0.0]))
    _, reported, _ = sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(accuracy=1e-8), jnp.linspace(0, 1, 11))
    lost = reported.z[:, 0]
    assert float(lost[-1]) > 2.0 and np.all(np.diff(np.asarray(lost)) >= -1e-12)  # flat in flight, to round-off
    books = reported.energy + lost
    assert float(jnp.abs(books - books[0]).max()) < 1e-6
    points = ccs.get_contact_forces(model, model.realize(state.with_q(state.q.at[5].set(0.49)), sx.Stage.Velocity))
    assert float(jnp.sum(points.power_dissipation)) > 0  # pressed in and sliding
    s = ccs.set_dissipated_energy(state, 1.5)
    assert float(ccs.get_dissipated_energy(s)) == 1.5
    with pytest.raises(ValueError, match=r"set_dissipated_energy: the energy must be >= 0"):
        ccs.set_dissipated_energy(state, -1.0)
    system, matter, forces, sphere = _sphere_system()
    contacts = sx.GeneralContactSubsystem(system)
    contact_set = contacts.create_contact_set()
    contacts.add_body(contact_set, sphere, sx.ContactGeometry.Sphere(RADIUS), material=sx.ContactMaterial(1e6, 0, 0, 0))
    contacts.add_body(contact_set, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR,
                      material=sx.ContactMaterial(1e6, 0, 0, 0))
    untracked = sx.CompliantContactSubsystem(forces, contacts, contact_set)
    _, plain = system.realize_topology()
    assert plain.z.shape == (0,)
    with pytest.raises(ValueError, match=r"get_dissipated_energy: the dissipated energy is not tracked"):
        untracked.get_dissipated_energy(plain)
