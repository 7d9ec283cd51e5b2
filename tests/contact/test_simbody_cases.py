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
    got, energy = _evaluate(model, state, q, u, lambda s: element.potential_energy(model, s))
    got, energy = np.asarray(got), np.asarray(energy)

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
    check_grads(brick_force, (s.q, s.u), order=1, modes=("fwd", "rev"), eps=1e-6, atol=1e-4, rtol=1e-6)
    touching = jnp.asarray([1.0, 0, 0, 0, 0, half[1], 0])
    for d in jax.jacfwd(brick_force, argnums=(0, 1))(touching, jnp.zeros(6)):
        assert np.all(np.isfinite(np.asarray(d)))
