"""Compliant contact against closed forms, by simulation: a sphere resting
at Hertz's depth, sliding to a stop after v0^2 / (2 mu g), bouncing with
its energy conserved when there is no dissipation, rolling down an incline
at (5/7) g sin(theta); a brick resting on its vertices at Simbody's
BrickHalfSpacePenalty depth and sliding to the same stop; a sphere resting
on a brick at Hertz's depth; a cylinder rolling down an incline at
(2/3) g sin(theta); a pendulum resting on a joint stop. The sphere's
cases share one compiled rollout: its numbers are Model leaves, changed
with eqx.tree_at."""

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from conftest import counting_compiles

import simbodyx as sx

G = 9.8
RADIUS = 0.1
MASS = 1.0
#: each surface's modulus: the pair's Hertz constant is (E^(2/3) / 2)^(3/2) = E / 2^(3/2)
MODULUS = 2.0e6
FLOOR = sx.Transform(sx.Rotation.about_z(-0.5 * np.pi), np.zeros(3))  # the half-space y < 0


def _ball(mobilizer, floor=FLOOR):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    body = sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(0.4 * MASS * RADIUS ** 2)))  # solid
    ball = getattr(sx.MobilizedBody, mobilizer)(matter.Ground(), body, name="ball")
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    contacts.add_body(surfaces, ball, sx.ContactGeometry.Sphere(RADIUS))
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace(), floor)
    hc = sx.HuntCrossleyForce(forces, contacts, surfaces)
    for surface in (0, 1):
        hc.set_body_parameters(surface, MODULUS, 1.0, 0.5, 0.5, 0.0)
    return system, hc


def _hertz_depth(weight):
    """Depth where (4/3) k^(3/2) sqrt(R) d^(3/2) carries ``weight``."""
    k32 = MODULUS / 2 ** 1.5
    return (3 * weight / (4 * k32 * np.sqrt(RADIUS))) ** (2 / 3)


@functools.lru_cache(maxsize=None)
def translating_ball():
    system, hc = _ball("Translation")
    model, state = system.realize_topology()
    return model, state, hc


@eqx.filter_jit
def _rollout(model, state, q0, u0, dt, steps=2000, energy=False):
    start = state.with_q(q0).with_u(u0)
    return sx.integrate.rollout(model, start, dt, steps, save_every=steps // 20, energy=energy)


def _with(model, hc, **numbers):
    element = hc.element(model)
    index = model.force_elements.index(element)
    for name, value in numbers.items():
        element = eqx.tree_at(lambda e: getattr(e, name), element, jnp.full_like(getattr(element, name), value))
    return eqx.tree_at(lambda m: m.force_elements[index], model, element)


def test_a_resting_sphere_sinks_to_hertz_depth():
    model, state, _ = translating_ball()
    start = RADIUS + 0.01
    final, _ = _rollout(model, state, jnp.array([0.0, start, 0.0]), jnp.zeros(3), 1e-3)
    depth = RADIUS - float(final.q[1])
    np.testing.assert_allclose(depth, _hertz_depth(MASS * G), rtol=1e-4)
    assert abs(float(final.u[1])) < 1e-5


def test_a_sliding_sphere_stops_after_v0_squared_over_two_mu_g():
    model, state, _ = translating_ball()
    v0, mu = 1.0, 0.5
    rest = RADIUS - _hertz_depth(MASS * G)
    final, _ = _rollout(model, state, jnp.array([0.0, rest, 0.0]), jnp.array([v0, 0.0, 0.0]), 2e-4)
    np.testing.assert_allclose(float(final.q[0]), v0 ** 2 / (2 * mu * G), rtol=1e-2)
    assert abs(float(final.u[0])) < 1e-6


def test_without_dissipation_a_bouncing_sphere_keeps_its_energy():
    model, state, hc = translating_ball()
    elastic = _with(model, hc, dissipation=0.0)
    final, trajectory = _rollout(elastic, state, jnp.array([0.0, RADIUS + 0.05, 0.0]), jnp.zeros(3), 2.5e-4,
                                 energy=True)
    assert float(jnp.min(trajectory.q[:, 1])) < RADIUS  # it bounced
    assert float(final.u[1]) > 0 or float(final.q[1]) > RADIUS
    energy = np.asarray(trajectory.energy)
    # RK4 at 0.25 ms: 3e-6 of it lost over a bounce (d^(3/2)'s onset costs RK4 its order)
    np.testing.assert_allclose(energy, energy[0], rtol=1e-5)


def test_a_rolling_sphere_accelerates_at_five_sevenths_g_sin_theta():
    theta = 0.3
    incline = sx.Transform(sx.Rotation.about_z(theta - 0.5 * np.pi), np.zeros(3))
    system, hc = _ball("Free", incline)
    model, state = system.realize_topology()
    normal = np.array([-np.sin(theta), np.cos(theta), 0.0])  # the incline's outward normal
    downhill = np.array([-np.cos(theta), -np.sin(theta), 0.0])
    centre = normal * (RADIUS - _hertz_depth(MASS * G * np.cos(theta)))
    q0 = jnp.concatenate([jnp.array([1.0, 0, 0, 0]), jnp.asarray(centre)])
    _, trajectory = _rollout(model, state, q0, jnp.zeros(6), 2.5e-4)
    t, v = np.asarray(trajectory.t), np.asarray(trajectory.u[:, 3:]) @ downhill
    a = (v[-1] - v[5]) / (t[-1] - t[5])
    np.testing.assert_allclose(a, 5 / 7 * G * np.sin(theta), rtol=1e-2)


def test_a_pendulum_rests_on_its_stop_at_the_static_deflection():
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    length, k = 0.5, 200.0
    body = sx.Body.Rigid(sx.MassProperties.from_central(MASS, [length, 0, 0], sx.Inertia(0.01)))
    pin = sx.MobilizedBody.Pin(matter.Ground(), body)
    sx.Force.MobilityLinearStop(forces, pin, 0, k, 5.0, 0.0, 1.0)
    model, state = system.realize_topology()
    final, _ = _rollout(model, state, jnp.array([0.3]), jnp.zeros(1), 1e-3)
    # -k q = m g L cos q at rest on the lower stop
    q = -MASS * G * length / k
    for _ in range(20):
        q -= (k * q + MASS * G * length * np.cos(q)) / (k - MASS * G * length * np.sin(q))
    np.testing.assert_allclose(float(final.q[0]), q, rtol=1e-6)


HALF = np.array([0.2, 0.1, 0.15])  #: the brick's half lengths (m)
BRICK_MASS, VERTEX_STIFFNESS = 2.0, 2.0e5  #: kg; each surface's stiffness number (N/m at a vertex)


@functools.lru_cache(maxsize=None)
def brick_on_floor():
    """A free brick over the floor y < 0 (vertex law: k = 1e5 N/m per vertex)
    and, apart from it, a translating ball over a brick fixed to Ground (the
    top face at y = 0)."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    inertia = sx.Inertia(*(BRICK_MASS / 3 * np.array([HALF[1] ** 2 + HALF[2] ** 2, HALF[0] ** 2 + HALF[2] ** 2,
                                                      HALF[0] ** 2 + HALF[1] ** 2])))
    brick = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(BRICK_MASS, [0, 0, 0], inertia)),
                                  name="brick")
    ball = sx.MobilizedBody.Translation(
        matter.Ground(), sx.Transform([5.0, 0, 0]),
        sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(0.4 * MASS * RADIUS ** 2))), sx.Transform(),
        name="ball")
    contacts = sx.GeneralContactSubsystem(system)
    bricks, balls = contacts.create_contact_set(), contacts.create_contact_set()
    contacts.add_body(bricks, brick, sx.ContactGeometry.Brick(HALF))
    contacts.add_body(bricks, matter.Ground(), sx.ContactGeometry.HalfSpace(), FLOOR)
    sphere = sx.ContactGeometry.Sphere(RADIUS)
    contacts.add_body(balls, ball, sphere)
    contacts.add_body(balls, matter.Ground(), sx.ContactGeometry.Brick([1.0, 0.5, 1.0]), sx.Transform([5.0, -0.5, 0]))
    on_floor, on_brick = sx.HuntCrossleyForce(forces, contacts, bricks), sx.HuntCrossleyForce(forces, contacts, balls)
    assert contacts.get_num_contact_sets() == 2 and on_brick.get_contact_set_index() == balls
    assert contacts.get_body_geometry(balls, 0) is sphere
    np.testing.assert_array_equal(contacts.get_body_transform(balls, 1).p, [5.0, -0.5, 0])
    for surface in (0, 1):
        on_floor.set_body_parameters(surface, VERTEX_STIFFNESS, 10.0, 0.5, 0.5, 0.0)
        on_brick.set_body_parameters(surface, MODULUS, 1.0, 0.5, 0.5, 0.0)
    model, state = system.realize_topology()
    return model, state, on_floor


def test_a_brick_rests_on_its_four_vertices_and_slides_to_a_stop():
    """Each bottom vertex carries m g / 4 at k d (k = k1 k2 / (k1 + k2)):
    d = m g / (4 k) (1e-4); the potential energy is 4 k d^2 / 2; sliding at
    1 m/s with mu = 0.5 it stops after v0^2 / (2 mu g) (1%). A sphere resting
    on a brick's face sinks to the depth it has on a half-space (1e-4).
    get_contact_forces called eagerly compiles one program."""
    model, state, on_floor = brick_on_floor()
    k = VERTEX_STIFFNESS / 2
    depth = BRICK_MASS * G / (4 * k)
    ball = jnp.array([0.0, RADIUS + 0.005, 0.0])
    q0 = jnp.concatenate([jnp.array([1.0, 0, 0, 0, 0, HALF[1] + 0.002, 0]), ball])
    final, _ = _rollout(model, state, q0, jnp.zeros(9), 1e-3)
    np.testing.assert_allclose(HALF[1] - float(final.q[5]), depth, rtol=1e-4)
    np.testing.assert_allclose(RADIUS - float(final.q[8]), _hertz_depth(MASS * G), rtol=1e-4)
    s = model.realize(final, sx.Stage.Velocity)
    with counting_compiles() as compiles:  # called eagerly: one program, not one per operation
        contact = on_floor.get_contact_forces(model, s)
    assert len(compiles) <= 1
    np.testing.assert_allclose(contact.force[:, 1], BRICK_MASS * G / 4, rtol=1e-4)  # the four bottom vertices
    np.testing.assert_allclose(contact.location[:, 1], -depth / 2, atol=1e-12)  # equal stiffness: halfway
    np.testing.assert_allclose(on_floor.element(model).potential_energy(model, s), 4 * k * depth ** 2 / 2, rtol=1e-3)
    rest = jnp.concatenate([jnp.array([1.0, 0, 0, 0, 0, HALF[1] - depth, 0]), ball])
    slid, _ = _rollout(model, state, rest, jnp.zeros(9).at[3].set(1.0), 2e-4)
    np.testing.assert_allclose(float(slid.q[4]), 1.0 / (2 * 0.5 * G), rtol=1e-2)
    assert abs(float(slid.u[3])) < 1e-6


def test_a_cylinder_rolls_down_an_incline_at_two_thirds_g_sin_theta():
    """A solid cylinder lying across an incline, on the lowest point of each
    rim (k d each, mu 0.9), rolls without slipping: its centre accelerates
    at (2/3) g sin(theta) (1%)."""
    theta, r, h = 0.3, 0.1, 0.2
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, [0, -G, 0])
    across = MASS * (3 * r ** 2 + (2 * h) ** 2) / 12
    body = sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(across, across, MASS * r ** 2 / 2)))
    cylinder = sx.MobilizedBody.Free(matter.Ground(), body, name="cylinder")
    contacts = sx.GeneralContactSubsystem(system)
    surfaces = contacts.create_contact_set()
    contacts.add_body(surfaces, cylinder, sx.ContactGeometry.Cylinder(r, h))
    contacts.add_body(surfaces, matter.Ground(), sx.ContactGeometry.HalfSpace(),
                      sx.Transform(sx.Rotation.about_z(theta - 0.5 * np.pi), np.zeros(3)))
    hc = sx.HuntCrossleyForce(forces, contacts, surfaces)
    for surface in (0, 1):
        hc.set_body_parameters(surface, VERTEX_STIFFNESS, 10.0, 0.9, 0.9, 0.0)
    model, state = system.realize_topology()
    normal = np.array([-np.sin(theta), np.cos(theta), 0.0])
    downhill = np.array([-np.cos(theta), -np.sin(theta), 0.0])
    rest = MASS * G * np.cos(theta) / (2 * VERTEX_STIFFNESS / 2)  # two rim points carry the normal load
    q0 = jnp.concatenate([jnp.array([1.0, 0, 0, 0]), jnp.asarray(normal * (r - rest))])
    _, trajectory = _rollout(model, state, q0, jnp.zeros(6), 2.5e-4)
    t, v = np.asarray(trajectory.t), np.asarray(trajectory.u[:, 3:]) @ downhill
    a = (v[-1] - v[5]) / (t[-1] - t[5])
    np.testing.assert_allclose(a, 2 / 3 * G * np.sin(theta), rtol=1e-2)
