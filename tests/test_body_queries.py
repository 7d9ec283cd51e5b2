"""MobilizedBody's queries between bodies, of moving points, of mass
properties and of single entries, each against a second route: velocities
as the time derivative of positions and accelerations as that of
velocities (forward-mode autodiff of the position- or velocity-level
query along (qdot, udot), exact, so 1e-12), mass properties from the
Ground-frame ones, stations by round trips; all in one jit(vmap) over two
States, with a gradient."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import random_state, with_forces

LOCATION, VELOCITY, ACCELERATION = jnp.array([0.1, -0.2, 0.3]), jnp.array([0.4, 0.1, -0.3]), jnp.array([-0.2, 0.5, 0.1])
STATION_A = jnp.array([-0.3, 0.2, 0.1])


@functools.lru_cache(maxsize=None)
def _tree():
    system, matter, _, bodies = with_forces(["Pin", "Ball", "Slider", "Gimbal", "Free"], seed=3)
    model, _ = system.realize_topology()
    states = [model.matter.normalize_quaternions(random_state(model, seed=s, scale=0.7)) for s in range(2)]
    return model, bodies, jax.tree.map(lambda *x: jnp.stack(x), *states)


def _queries(model, B, A, s):
    """Every query of B relative to A at an Acceleration-stage State, with the
    derivative routes' inputs."""
    return {
        "R_AB": B.find_body_rotation_in_another_body(s, A).matrix,
        "p_AB": B.find_body_origin_location_in_another_body(s, A),
        "station": B.find_station_location_in_another_body(s, LOCATION, A),
        "w_AB": B.find_body_angular_velocity_in_another_body(s, A),
        "v_AB": B.find_body_origin_velocity_in_another_body(s, A),
        "v_station": B.find_station_velocity_in_another_body(s, LOCATION, A),
        "v_moving": B.calc_body_moving_point_velocity_in_body(s, LOCATION, VELOCITY, A),
        "alpha_AB": B.find_body_angular_acceleration_in_another_body(s, A),
        "a_AB": B.find_body_origin_acceleration_in_another_body(s, A),
        "a_station": B.find_station_acceleration_in_another_body(s, LOCATION, A),
        "a_moving": B.calc_body_moving_point_acceleration_in_body(s, LOCATION, VELOCITY, ACCELERATION, A),
        "V_FM": B.get_mobilizer_velocity(s),
        "A_FM": B.get_mobilizer_acceleration(s),
        "distance_dot": B.calc_moving_point_to_point_distance_time_derivative(s, LOCATION, VELOCITY, A, STATION_A,
                                                                              -VELOCITY),
        "distance_dotdot": B.calc_moving_point_to_point_distance_2nd_time_derivative(
            s, LOCATION, VELOCITY, ACCELERATION, A, STATION_A, -VELOCITY, ACCELERATION),
    }


def _derivatives(model, B, A, s):
    """d/dt of the position-level queries along (qdot, moving point) and of the
    velocity-level ones along (qdot, udot)."""
    base = model.default_state()

    def position(q, location):
        p = model.realize(base.with_q(q), sx.Stage.Position)
        return (B.find_body_transform_in_another_body(p, A).R, B.find_body_origin_location_in_another_body(p, A),
                B.find_station_location_in_another_body(p, location, A))

    def velocity(q, u, location, velocity):
        v = model.realize(base.with_q(q).with_u(u), sx.Stage.Velocity)
        return (B.find_body_angular_velocity_in_another_body(v, A), B.find_body_origin_velocity_in_another_body(v, A),
                B.calc_body_moving_point_velocity_in_body(v, location, velocity, A), B.get_mobilizer_velocity(v))

    def distance(q, location_B, location_A):
        p = model.realize(base.with_q(q), sx.Stage.Position)
        return B.calc_station_to_station_distance(p, location_B, A, location_A)

    def distance_dot(q, u, location_B, location_A, velocity_B, velocity_A):
        qdot = model.matter.multiply_by_n(model.realize(base.with_q(q), sx.Stage.Position), False, u)
        return jax.jvp(distance, (q, location_B, location_A), (qdot, velocity_B, velocity_A))[1]

    qdot, udot = s.velocity.qdot, s.acceleration.udot
    (R, R_dot), (_, p_dot), (_, station_dot) = [jax.jvp(lambda q, x: position(q, x)[k], (s.q, LOCATION),
                                                        (qdot, VELOCITY)) for k in range(3)]
    outs = jax.jvp(velocity, (s.q, s.u, LOCATION, VELOCITY), (qdot, udot, VELOCITY, ACCELERATION))[1]
    w_skew = R_dot @ R.T
    d_dot, d_dotdot = jax.jvp(distance_dot, (s.q, s.u, LOCATION, STATION_A, VELOCITY, -VELOCITY),
                              (qdot, udot, VELOCITY, -VELOCITY, ACCELERATION, ACCELERATION))
    return {
        "w_AB": jnp.array([w_skew[2, 1], w_skew[0, 2], w_skew[1, 0]]),
        "v_AB": p_dot,
        "v_moving": station_dot,
        "alpha_AB": outs[0],
        "a_AB": outs[1],
        "a_moving": outs[2],
        "A_FM": outs[3],
        "distance_dot": d_dot,
        "distance_dotdot": d_dotdot,
    }


def test_relative_kinematics_are_the_time_derivatives_of_positions():
    model, bodies, states = _tree()
    B, A = bodies[4], bodies[2]  # in different branches or not, whatever the seed made

    @jax.jit
    @jax.vmap
    def run(s):
        s = model.realize(s, sx.Stage.Acceleration)
        return _queries(model, B, A, s), _derivatives(model, B, A, s)

    ours, theirs = run(states)
    for name, value in theirs.items():
        np.testing.assert_allclose(ours[name], value, rtol=1e-12, atol=1e-12, err_msg=name)
    # the fixed-station forms are the moving ones at zero relative motion; rotation and origin from X_AB
    s = model.realize(jax.tree.map(lambda x: x[0], states), sx.Stage.Acceleration)
    X_AB = B.find_body_transform_in_another_body(s, A)
    np.testing.assert_allclose(ours["R_AB"][0], X_AB.R, atol=1e-15)
    np.testing.assert_allclose(ours["p_AB"][0], X_AB.p, atol=1e-15)
    np.testing.assert_allclose(ours["v_station"][0],
                               B.calc_body_moving_point_velocity_in_body(s, LOCATION, jnp.zeros(3), A), atol=1e-15)
    np.testing.assert_allclose(B.calc_station_to_station_distance_time_derivative(s, LOCATION, A, STATION_A),
                               B.calc_moving_point_to_point_distance_time_derivative(
                                   s, LOCATION, jnp.zeros(3), A, STATION_A, jnp.zeros(3)), atol=1e-15)
    # against Ground, the in-another-body forms are the Ground ones
    np.testing.assert_allclose(B.find_station_acceleration_in_another_body(s, LOCATION, bodies[0]),
                               B.find_station_acceleration_in_ground(s, LOCATION), atol=1e-12)
    # differentiable: the gradient of a moving point's acceleration in A with respect to q
    g = jax.jit(jax.grad(lambda q: jnp.sum(B.calc_body_moving_point_acceleration_in_body(
        model.realize(s.with_q(q), sx.Stage.Acceleration), LOCATION, VELOCITY, ACCELERATION, A))))(s.q)
    assert np.all(np.isfinite(g)) and np.any(g != 0)


def test_mass_properties_and_stations_between_bodies():
    model, bodies, states = _tree()
    B, A = bodies[5], bodies[3]
    s = model.realize(jax.tree.map(lambda x: x[1], states), sx.Stage.Position)
    mp = B.get_body_mass_properties(s)
    R_GB = B.get_body_transform(s).R
    # about Bo in G: the existing 6x6 form
    np.testing.assert_allclose(B.get_body_spatial_inertia_in_ground(s).to_spatial_mat(),
                               B.calc_body_spatial_inertia_matrix_in_ground(s), atol=1e-14)
    in_G = B.express_mass_properties_in_ground_frame(s)
    np.testing.assert_allclose(in_G.inertia.matrix, R_GB @ mp.inertia.matrix @ R_GB.T, atol=1e-14)
    in_A = B.express_mass_properties_in_another_body_frame(s, A)
    R_AB = B.find_body_rotation_in_another_body(s, A).matrix
    np.testing.assert_allclose(in_A.com, R_AB @ mp.com, atol=1e-14)
    np.testing.assert_allclose(B.get_body_unit_inertia_about_body_origin(s).matrix * mp.mass, mp.inertia.matrix,
                               atol=1e-14)
    # central inertia: parallel axes from the inertia about Bo
    c = mp.com
    central = mp.inertia.matrix - mp.mass * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    np.testing.assert_allclose(B.calc_body_central_inertia(s).matrix, central, atol=1e-14)
    # about a station S of A, in A: parallel axes in G from the mass center, then into A
    p_GS = A.find_station_location_in_ground(s, STATION_A)
    d = B.find_mass_center_location_in_ground(s) - p_GS
    about_S_in_G = R_GB @ central @ R_GB.T + mp.mass * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    R_GA = A.get_body_transform(s).R
    np.testing.assert_allclose(B.calc_body_inertia_about_another_body_station(s, A, STATION_A).matrix,
                               R_GA.T @ about_S_in_G @ R_GA, atol=1e-13)
    # stations: round trips through Ground
    np.testing.assert_allclose(B.find_station_location_in_ground(s, B.find_station_at_another_body_station(
        s, A, STATION_A)), p_GS, atol=1e-14)
    np.testing.assert_allclose(B.find_station_location_in_ground(s, B.find_station_at_another_body_origin(s, A)),
                               A.get_body_origin_location(s), atol=1e-14)
    np.testing.assert_allclose(B.find_station_location_in_ground(s, B.find_station_at_another_body_mass_center(s, A)),
                               A.find_mass_center_location_in_ground(s), atol=1e-14)
    np.testing.assert_allclose(A.find_station_location_in_ground(s, B.find_mass_center_location_in_another_body(s, A)),
                               B.find_mass_center_location_in_ground(s), atol=1e-14)


def test_single_entries():
    model, bodies, states = _tree()
    s = model.realize(jax.tree.map(lambda x: x[0], states), sx.Stage.Acceleration)
    ball = bodies[2]
    for k in range(ball.num_q):
        assert float(ball.get_one_qdot(s, k)) == float(s.velocity.qdot[ball.first_q_index + k])
        assert float(ball.get_one_qdotdot(s, k)) == float(s.acceleration.qdotdot[ball.first_q_index + k])
        assert float(ball.get_one_from_q_partition(s, k, s.q)) == float(s.q[ball.first_q_index + k])
    for k in range(ball.num_u):
        assert float(ball.get_one_from_u_partition(s, k, s.u)) == float(s.u[ball.first_u_index + k])
    with pytest.raises(ValueError, match="q-like vector has shape"):
        ball.get_one_from_q_partition(s, 0, jnp.zeros(3))
    with pytest.raises(IndexError):
        ball.get_one_qdot(s, ball.num_q)


def test_composite_queries_are_their_parts_and_reactions_balance():
    """The queries that bundle or re-express others equal their parts; the
    mobilizer's reaction on the parent is minus the one on the body, its
    moment taken about Fo and about Po (stations found through each body)."""
    model, bodies, states = _tree()
    s = model.realize(jax.tree.map(lambda x: x[0], states), sx.Stage.Acceleration)
    B, A = bodies[4], bodies[2]
    P = B.get_parent_mobilized_body()
    X_BF = sx.Transform(sx.Rotation.about_y(0.4).matrix, STATION_A)
    p, v, a = B.find_station_location_velocity_and_acceleration_in_ground(s, LOCATION)
    for got, want in ((B.find_station_location_and_velocity_in_ground(s, LOCATION), (p, v)),
                      ((p, v, a), (B.find_station_location_in_ground(s, LOCATION),
                                   B.find_station_velocity_in_ground(s, LOCATION),
                                   B.find_station_acceleration_in_ground(s, LOCATION)))):
        for x, y in zip(got, want):
            np.testing.assert_allclose(x, y, atol=0)
    X_GF = B.find_frame_transform_in_ground(s, X_BF)
    np.testing.assert_allclose(X_GF.p, B.find_station_location_in_ground(s, X_BF.p), atol=1e-14)
    np.testing.assert_allclose(X_GF.R, B.get_body_transform(s).R @ X_BF.R, atol=1e-14)
    np.testing.assert_allclose(B.find_frame_acceleration_in_ground(s, X_BF), jnp.concatenate(
        [B.get_body_angular_acceleration(s), B.find_station_acceleration_in_ground(s, X_BF.p)]), atol=1e-14)
    np.testing.assert_allclose(B.get_body_origin_acceleration(s), B.get_body_acceleration(s)[3:], atol=0)
    np.testing.assert_allclose(B.express_vector_in_another_body_frame(s, LOCATION, A),
                               B.find_body_rotation_in_another_body(s, A).matrix @ LOCATION, atol=1e-14)
    zero = jnp.zeros(3)
    np.testing.assert_allclose(B.calc_station_to_station_distance_2nd_time_derivative(s, LOCATION, A, STATION_A),
                               B.calc_moving_point_to_point_distance_2nd_time_derivative(
                                   s, LOCATION, zero, zero, A, STATION_A, zero, zero), atol=1e-14)
    assert float(B.get_body_mass(s)) == float(B.get_body_mass_properties(s).mass)
    for k in range(B.num_u):
        assert float(B.get_one_tau(s, k)) == float(B.get_tau_as_vector(s)[k])
    t, f = np.split(np.asarray(B.find_mobilizer_reaction_on_body_at_m_in_ground(s)), 2)
    p_M = B.find_station_location_in_ground(s, B.get_outboard_frame(s).p)
    for got, Q in ((B.find_mobilizer_reaction_on_parent_at_f_in_ground(s),
                    P.find_station_location_in_ground(s, B.get_inboard_frame(s).p)),
                   (B.find_mobilizer_reaction_on_parent_at_origin_in_ground(s), P.get_body_origin_location(s))):
        np.testing.assert_allclose(got, np.concatenate([-(t + np.cross(p_M - Q, f)), -f]), atol=1e-12)


def test_body_and_clone_before_freezing():
    system, matter, forces, bodies = with_forces(["Pin", ("Screw", 0.25)], seed=1, branching=False)
    pin, screw = bodies[1], bodies[2]
    heavy = sx.Body.Rigid(sx.MassProperties(3.0, [0.1, 0, 0], sx.Inertia(0.2)))
    assert float(pin.set_body(heavy).get_body().mass_properties.mass) == 3.0
    light = sx.Body.Rigid(sx.MassProperties(1.0))
    assert light.set_default_rigid_body_mass_properties(heavy.get_default_rigid_body_mass_properties()) is light
    assert float(light.mass_properties.mass) == 3.0 and forces.get_num_forces() == 1  # gravity
    screw.set_default_q([0.4])
    twin = screw.clone_for_new_parent(pin, name="twin")
    assert type(twin) is type(screw) and twin.parent is pin and twin.get_default_q() == screw.get_default_q()
    np.testing.assert_allclose(twin.get_default_inboard_frame().p, screw.get_default_inboard_frame().p)
    model, state = system.realize_topology()
    assert model.topology.num_bodies == 4
    assert twin.get_default_pitch() == screw.get_default_pitch() == 0.25
    with pytest.raises(RuntimeError, match="frozen by realize_topology"):
        pin.set_body(heavy)
    with pytest.raises(TypeError, match="must be a Body"):
        bodies[1].set_body(3.0)


def test_mobilizer_centrifugal_forces():
    """P a + b; for a leaf on Ground (body 1, a Pin) P is the body's own
    spatial inertia and a its total Coriolis acceleration, so it equals the
    total centrifugal force computed by a different route (M JDot u + b)."""
    model, bodies, states = _tree()
    s = model.realize(jax.tree.map(lambda x: x[0], states), sx.Stage.Velocity)
    m = model.matter
    np.testing.assert_allclose(m.get_mobilizer_centrifugal_forces(s, 1), m.get_total_centrifugal_forces(s, 1),
                               atol=1e-12)
    P, a, b = m.get_articulated_body_inertia(s, 3), m.get_mobilizer_coriolis_acceleration(s, 3), \
        m.get_gyroscopic_force(s, 3)
    np.testing.assert_allclose(m.get_mobilizer_centrifugal_forces(s, 3), P @ a + b, atol=1e-12)


def test_inboard_and_outboard_frames_after_freezing():
    """set_inboard/outboard_frame(model, X) equals building with those default
    frames; the frame is a traced Model leaf (the origin of a Pin's body on
    Ground moves one for one with p_PF)."""
    X_PF = sx.Transform(sx.Rotation.about_y(0.3).matrix, jnp.array([0.2, -0.1, 0.4]))
    X_BM = sx.Transform(sx.Rotation.about_x(-0.2).matrix, jnp.array([0.0, 0.3, 0.1]))

    def build(set_defaults):
        system, matter, _, bodies = with_forces(["Pin", ("Screw", 0.25)], seed=1, branching=False)
        if set_defaults:
            bodies[2].set_default_inboard_frame(X_PF).set_default_outboard_frame(X_BM)
        model, state = system.realize_topology()
        return model, bodies, state.with_q(jnp.array([0.3, -0.5]))

    reference, _, reference_state = build(True)
    model, bodies, state = build(False)
    one_pin = sx.MultibodySystem()
    sx.MobilizedBody.Pin(sx.SimbodyMatterSubsystem(one_pin).Ground(), sx.Body.Rigid(sx.MassProperties(1.0)))
    with pytest.raises(ValueError, match="different MultibodySystem"):
        bodies[2].set_inboard_frame(one_pin.realize_topology()[0], X_PF)
    with pytest.raises(ValueError, match="not a proper rotation"):
        bodies[2].set_inboard_frame(model, sx.Transform(2 * X_PF.R, X_PF.p))
    model = bodies[2].set_outboard_frame(bodies[2].set_inboard_frame(model, X_PF), X_BM)
    want = reference.realize(reference_state, sx.Stage.Position).position.X_GB
    got = model.realize(state, sx.Stage.Position).position.X_GB
    np.testing.assert_allclose(got.R, want.R, atol=1e-14)
    np.testing.assert_allclose(got.p, want.p, atol=1e-14)

    def origin(p):
        m = bodies[1].set_inboard_frame(model, sx.Transform(jnp.eye(3), p))
        return bodies[1].get_body_origin_location(m.realize(state, sx.Stage.Position))

    np.testing.assert_allclose(jax.jit(jax.jacfwd(origin))(jnp.zeros(3)), np.eye(3), atol=1e-14)


def test_each_kind_default_setter_poses_its_mobilizer():
    """The kinds' default setters (Simbody's setDefaultAngle, setDefaultTransform,
    ...) put the default State's X_FM where they say, their getters read the
    values back, and the tree's navigation answers by the chain's shape."""
    MB = sx.MobilizedBody
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    ground, body = matter.Ground(), sx.Body.Rigid(sx.MassProperties(1.0, [0.1, 0.2, 0.3], sx.Inertia(0.5)))
    R = sx.Rotation.from_body_fixed_xyz(jnp.array([0.3, -0.4, 0.2])).matrix
    p = np.array([0.3, -0.2, 0.5])
    X = sx.Transform(R, jnp.asarray(p))
    pin = MB.Pin(ground, body).set_default_angle(0.3)
    slider = MB.Slider(pin, body).set_default_length(0.7)
    screw = MB.Screw(slider, body, 0.2).set_default_pitch(0.1).set_default_q([0.5])
    planar = MB.Planar(ground, body).set_default_angle(0.2).set_default_translation([0.1, -0.3])
    gimbal = MB.Gimbal(ground, body).set_default_rotation(R)
    translation = MB.Translation(ground, body).set_default_translation(p)
    ball = MB.Ball(ground, body).set_default_rotation(R)
    free = MB.Free(ground, body).set_default_transform(X)
    ellipsoid = MB.Ellipsoid(ground, body).set_default_radii([0.4, 0.3, 0.2])
    spherical = MB.SphericalCoords(ground, body).set_default_angles([0.4, -0.6]).set_default_radius(1.5)
    bushing = MB.Bushing(ground, body).set_default_transform(X)
    pin.set_default_u([2.0])
    Rz, Ry = (lambda a: sx.Rotation.about_z(a).matrix), (lambda a: sx.Rotation.about_y(a).matrix)
    zero = np.zeros(3)
    want = {pin: (Rz(0.3), zero), slider: (np.eye(3), [0.7, 0, 0]), screw: (Rz(0.5), [0, 0, 0.05]),
            planar: (Rz(0.2), [0.1, -0.3, 0]), gimbal: (R, zero), translation: (np.eye(3), p), ball: (R, zero),
            free: (R, p), ellipsoid: (np.eye(3), [0, 0, 0.2]),
            spherical: (Rz(0.4) @ Ry(-0.6), Rz(0.4) @ Ry(-0.6) @ jnp.array([0, 0, 1.5])), bushing: (R, p)}

    assert pin.get_default_angle() == 0.3 and slider.get_default_length() == 0.7 and screw.get_default_pitch() == 0.1
    for got in (ball.get_default_rotation().matrix, free.get_default_transform().R, bushing.get_default_transform().R):
        np.testing.assert_allclose(got, R, atol=1e-14)
    for got in (free.get_default_transform().p, bushing.get_default_transform().p):
        np.testing.assert_allclose(got, p, atol=1e-15)
    np.testing.assert_allclose(ellipsoid.get_default_radii(), [0.4, 0.3, 0.2])
    np.testing.assert_allclose(spherical.get_default_angles(), [0.4, -0.6])
    assert spherical.get_default_radius() == 1.5 and pin.get_default_u().tolist() == [2.0]

    assert [b.get_level_in_multibody_tree() for b in (ground, pin, slider, screw, ball)] == [0, 1, 2, 3, 1]
    assert screw.get_base_mobilized_body() is pin and pin.get_base_mobilized_body() is pin
    assert ground.get_base_mobilized_body() is ground and screw.get_parent_mobilized_body() is slider
    assert screw.is_same_mobilized_body(screw) and not screw.is_same_mobilized_body(slider)
    assert screw.get_direction() is sx.MobilizedBody.Direction.Forward

    model, state = system.realize_topology()
    assert float(state.u[pin.first_u_index]) == 2.0
    s = model.realize(state, sx.Stage.Position)
    for b, (R_FM, p_FM) in want.items():
        X_FM = b.get_mobilizer_transform(s)
        np.testing.assert_allclose(X_FM.R, R_FM, atol=1e-14, err_msg=b.name)
        np.testing.assert_allclose(X_FM.p, p_FM, atol=1e-14, err_msg=b.name)
