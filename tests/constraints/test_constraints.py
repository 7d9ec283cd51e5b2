"""Constraints: closed forms, every built-in through the protocol's
identities, the SimbodyMatterSubsystem operators, redundancy, disabling
under vmap, Custom against the built-ins, derivatives against finite
differences, and build-time errors."""

import functools

import equinox as eqx

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import simbodyx as sx
from simbodyx import functions as fn
from simbodyx.constraints.equations import Layout

from conftest import FD_STEP, FD_TOL, tol

C = sx.Constraint


def _system(gravity=(0.0, -9.81, 0.0)):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    if gravity is not None:
        sx.Force.UniformGravity(forces, matter, list(gravity))
    return system, matter, forces


def _body(m=1.0):
    return sx.Body.Rigid(sx.MassProperties(m, [0.1, 0.2, -0.1], sx.Inertia(0.3, 0.4, 0.5)))


# -- closed form: a particle on a rod ------------------------------------------------------
G_ACC, MASS, LENGTH = 9.81, 2.0, 1.5


@functools.lru_cache(maxsize=None)
def _pendulum(custom: bool):
    system, matter, _ = _system()
    particle = sx.MobilizedBody.Translation(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(0.0))))
    if custom:
        impl = C.Custom.Implementation(
            bodies=[matter.Ground(), particle], num_position=1, params={"L": LENGTH},
            position_errors=lambda X_AB, q, params: jnp.array(
                [0.5 * (jnp.sum((X_AB[1].p - X_AB[0].p) ** 2) - params["L"] ** 2)]))
        rod = C.Custom(matter, impl)
    else:
        rod = C.Rod(matter.Ground(), [0, 0, 0], particle, [0, 0, 0], LENGTH)
    model, state = system.realize_topology()
    return model, state, rod


@pytest.mark.parametrize("custom", [False, True])
def test_particle_on_rod_closed_form(custom, dtype):
    model, _, rod = _pendulum(custom)
    model = model.astype(dtype)
    state = model.default_state()
    theta, v = 0.4, 0.7
    radial = np.array([np.sin(theta), -np.cos(theta), 0.0])
    tangent = np.array([np.cos(theta), np.sin(theta), 0.0])
    s = model.realize(state.with_q(LENGTH * radial).with_u(v * tangent), sx.Stage.Acceleration)
    lam = MASS * (G_ACC * np.cos(theta) + v ** 2 / LENGTH)
    scale = LENGTH if custom else 1.0  # half squared distance: lambda / L
    np.testing.assert_allclose(rod.get_multipliers_as_vector(s), [lam / scale], rtol=50 * tol(dtype))
    at_rest = model.realize(state.with_q(LENGTH * radial), sx.Stage.Acceleration)
    expected = [-G_ACC * np.sin(theta) * np.cos(theta), -G_ACC * np.sin(theta) ** 2, 0.0]
    np.testing.assert_allclose(at_rest.acceleration.udot, expected, atol=50 * tol(dtype))
    assert abs(rod.calc_power(s)) < 100 * tol(dtype)


def test_sphere_on_an_incline_rolls_or_slides_in_closed_form():
    """A solid sphere (I = 2/5 m r^2) on a plane inclined at alpha: rolling, its
    centre accelerates down the slope at 5/7 g sin(alpha) with normal force
    m g cos(alpha) and friction 2/7 m g sin(alpha); without rolling, at
    g sin(alpha). Both contacts in one model, one or the other disabled (one
    compiled call). A negative normal multiplier is compression (Simbody's sign)."""
    alpha, r = 0.3, 0.25
    system, matter, _ = _system()
    inertia = 0.4 * MASS * r * r
    ball = sx.MobilizedBody.Free(matter.Ground(), sx.Body.Rigid(sx.MassProperties(MASS, [0, 0, 0], sx.Inertia(inertia))))
    down = np.array([np.cos(alpha), -np.sin(alpha), 0.0])
    normal = np.array([np.sin(alpha), np.cos(alpha), 0.0])
    plane = sx.Transform(np.stack([down, np.cross(normal, down), normal], axis=1), [0, 0, 0])
    rolling = C.SphereOnPlaneContact(matter.Ground(), plane, ball, [0, 0, 0], r, True)
    sliding = C.SphereOnPlaneContact(matter.Ground(), plane, ball, [0, 0, 0], r, False)
    model, state = system.realize_topology()
    q = np.asarray(state.q).copy()
    q[4:] = r * normal + 0.3 * down

    @jax.jit
    @jax.vmap
    def run(disabled):
        s = model.realize(state.with_q(q).with_constraint_disabled(disabled), sx.Stage.Acceleration)
        return s.acceleration.udot, s.acceleration.multipliers, rolling.calc_power(s) + sliding.calc_power(s)

    udot, lam, power = run(jnp.array([[False, True], [True, False]]))
    gs, gc = G_ACC * np.sin(alpha), G_ACC * np.cos(alpha)
    np.testing.assert_allclose(udot[0, 3:], 5 / 7 * gs * down, atol=1e-12)
    np.testing.assert_allclose(udot[0, :3], 5 / 7 * gs / r * np.cross(normal, down), atol=1e-12)  # omega_dot x (-r n) = a
    # rows [P; V]: rolling's and sliding's normal rows, then rolling's two tangential rows
    np.testing.assert_allclose(lam[0], [-MASS * gc, 0.0, 2 / 7 * MASS * gs, 0.0], atol=1e-12)
    np.testing.assert_allclose(udot[1], np.concatenate([np.zeros(3), gs * down]), atol=1e-12)
    np.testing.assert_allclose(lam[1], [0.0, -MASS * gc, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(power, 0.0, atol=1e-12)

    # Through the contact to its numbers, in float64 and float32: with the radius
    # (a Model leaf) changed and the inertia kept, the rolling acceleration is
    # a = g sin(alpha) / (1 + k), k = I / (m r^2), and da/dr = 2 a k / (r (1 + k)).
    def rolling_acceleration(radius, model):
        model = eqx.tree_at(lambda m: m.params.constraints[0].sphere_radius, model, radius)
        s = model.realize(model.default_state().with_q(q).with_constraint_disabled(jnp.array([False, True])),
                          sx.Stage.Acceleration)
        return s.acceleration.udot[3:] @ jnp.asarray(down, radius.dtype)

    k = 2 / 5
    for dtype in (jnp.float64, jnp.float32):
        a, da = jax.jit(jax.value_and_grad(rolling_acceleration))(jnp.asarray(r, dtype), model.astype(dtype))
        assert a.dtype == da.dtype == dtype
        np.testing.assert_allclose(a, gs / (1 + k), rtol=50 * tol(dtype))
        np.testing.assert_allclose(da, 2 * gs / (1 + k) * k / (r * (1 + k)), rtol=50 * tol(dtype))


# -- every built-in on one tree of mixed mobilizers ------------------------------------------

@functools.lru_cache(maxsize=None)
def _mixed():
    """Six mobilizer kinds, one constraint of each built-in kind (contacts with
    and without rolling, and a Rod and a LineOnLineContact whose Ancestor is a
    body); States enable one constraint at a time."""
    system, constraints = _build_mixed()
    model, state = system.realize_topology()
    rng = np.random.default_rng(0)
    q = np.asarray(state.q) + 0.1 * rng.standard_normal(state.q.shape)
    state = model.matter.normalize_quaternions(state.with_q(q).with_u(rng.standard_normal(state.u.shape)).with_time(0.3))
    return model, state, constraints


def _build_mixed():
    """_mixed's system, not yet frozen, and its constraints."""
    system, matter, _ = _system()
    G = matter.Ground()
    b1 = sx.MobilizedBody.Free(G, sx.Transform([0, 1, 0]), _body(), sx.Transform())
    b2 = sx.MobilizedBody.Pin(b1, sx.Transform([0.5, 0, 0]), _body(), sx.Transform([0, 0.3, 0]))
    b3 = sx.MobilizedBody.Ball(G, sx.Transform([1, 0, 0]), _body(), sx.Transform([0, 0.4, 0]))
    b4 = sx.MobilizedBody.Slider(b3, sx.Transform([0, -0.2, 0]), _body(), sx.Transform())
    b5 = sx.MobilizedBody.Universal(G, sx.Transform([-1, 0, 0]), _body(), sx.Transform([0, 0.2, 0.1]))
    b6 = sx.MobilizedBody.Planar(G, sx.Transform([0, 0, 1]), _body(), sx.Transform())
    b2.set_armature([0.2])  # rotors on two joints: the constrained solve works with M + diag(armature)
    b3.set_armature([0.1, 0.3, 0.05])
    constraints = [
        C.Rod(b2, [0.1, 0, 0], b4, [0, 0.1, 0], 1.2),
        C.Ball(b1, [0.2, 0, 0], b5, [0, 0, 0.1]),
        C.Weld(b3, sx.Transform(sx.Rotation.about_x(0.3), [0.1, 0, 0]),
               b1, sx.Transform([0, 0.1, 0])),
        C.PointInPlane(b6, [0, 1, 0], 0.3, b3, [0.1, 0.1, 0]),
        C.PointOnLine(b3, [1, 0.2, 0], [0, 0.1, 0], b1, [0, 0, 0.2]),
        C.ConstantAngle(b5, [1, 0, 0], b6, [0, 1, 0], 1.0),
        C.ConstantOrientation(b1, np.eye(3), b6, np.eye(3)),
        C.ConstantCoordinate(b4, 0, 0.1),
        C.ConstantSpeed(b2, 0, 0.5),
        C.ConstantAcceleration(b5, 1, -0.3),
        C.CoordinateCoupler(matter, fn.Linear((1.0, -2.0, 0.1)), [b2, b4], [0, 0]),
        C.SpeedCoupler(matter, lambda x: x[0] - 0.5 * x[1] * jnp.cos(x[2]), [b3, b6], [0, 1], [b2], [0]),
        C.PrescribedMotion(matter, fn.Sinusoid(0.3, 2.0, 0.1), b6, 2),
        C.NoSlip1D(G, [0, 0, 0], [1, 0, 0], b1, b3),
        C.PointOnPlaneContact(b6, sx.Transform(sx.Rotation.about_x(0.2), [0, 0.1, 0]), b5, [0.1, 0, 0]),
        C.SphereOnPlaneContact(G, sx.Transform(sx.Rotation.about_z(0.1), [0, -0.5, 0]), b1, [0, 0, 0.1], 0.3, True),
        C.SphereOnSphereContact(b3, [0.1, 0, 0], 0.2, b6, [0, 0.1, 0], 0.3, True),
        C.SphereOnSphereContact(b2, [0, 0, 0], 0.1, b5, [0.05, 0, 0], 0.15, False),
        C.LineOnLineContact(b3, sx.Transform(sx.Rotation.about_y(0.3), [0, 0.1, 0]), 0.5,
                            b4, sx.Transform(sx.Rotation.about_z(1.2), [0.1, 0, 0]), 0.4, True),
        C.LineOnLineContact(G, sx.Transform([0, -1, 0]), 1.0, b6, sx.Transform(sx.Rotation.about_z(0.7), [0, 0.1, 0]),
                            0.3, False),
        C.Rod(b1, [0.3, 0.1, 0], b2, [0, 0.2, 0.1], 0.7),
    ]
    return system, constraints


def test_default_setters_of_every_builtin():
    """Simbody's setDefault*/getDefault* on each built-in: a value set before
    freezing is checked like the constructor's, read back, and is the
    Model's; after freezing the setter refuses."""
    system, cs = _build_mixed()
    named = {}
    for c in cs:
        for name in type(c).DEFAULTS:
            value = getattr(c, f"get_default_{name}")()
            assert getattr(c, f"set_default_{name}")(value) is c  # chainable, as in Simbody
            named[type(c).__name__, name] = c
    assert len(named) == 36  # every setter of the 15 built-ins that have them (the couplers are Custom)
    assert cs[0].get_default_num_constraint_equations() == (1, 0, 0)  # the Rod: one distance
    rod, line, sphere = cs[0], cs[4], cs[15]
    rod.set_default_rod_length(1.5).set_default_point_on_body2([0, 0.2, 0])
    line.set_default_line_direction([0, 0, 2])  # normalized, as the constructor does
    np.testing.assert_allclose(line.get_default_line_direction(), [0, 0, 1])
    with pytest.raises(ValueError, match=r"Constraint.Rod 'constraint0' \(constraint 0\): rod_length must be positive"):
        rod.set_default_rod_length(-1.0)
    with pytest.raises(ValueError, match="sphere_radius must be positive"):
        sphere.set_default_sphere_radius(0.0)
    with pytest.raises(ValueError, match="must have shape"):
        rod.set_default_point_on_body1([1, 2])
    model, _ = system.realize_topology()
    frozen = model.params.constraints
    assert float(frozen[0].length) == 1.5 and np.allclose(frozen[0].station2, [0, 0.2, 0])
    np.testing.assert_allclose(frozen[4].direction, [0, 0, 1])
    with pytest.raises(RuntimeError, match="frozen"):
        rod.set_default_rod_length(2.0)


def test_ancestor_is_the_deepest_common_ancestor():
    _, _, cs = _mixed()
    assert [c.ancestor for c in cs[:2]] == [0, 0]
    assert cs[-1].ancestor == 1 and cs[-1].get_ancestor_mobilized_body().index == 1
    assert cs[7].get_num_constrained_mobilizers() == 1 and cs[0].get_num_constrained_bodies() == 2


def test_every_builtin_one_at_a_time():
    """Each constraint alone (the others disabled, one compiled vmapped call):
    G udot = b after realize(Acceleration) even off the manifold, G's rows are
    the u-Jacobian of its velocity-level errors (autodiff through the
    kinematics), its forces are G^T lambda, and with u on its velocity
    manifold it does no work."""
    model, state, cs = _mixed()
    nc, layout = len(cs), Layout(model.constraints)
    masks = jnp.asarray(~np.eye(nc, dtype=bool))
    velocity_rows = np.concatenate([layout.rows[i][:c.mp + c.mv] for i, c in enumerate(cs)])

    def one(disabled):
        s = model.realize(state.with_constraint_disabled(disabled), sx.Stage.Acceleration)
        m = model.matter
        G = m.calc_g(s)
        lam = m.get_constraint_multipliers(s)
        F, f = m.find_constraint_forces(s)
        generalized = m.multiply_by_system_jacobian_transpose(s, F) + f
        # u on this constraint's velocity manifold (the errors are affine in u: one Newton step)
        on = [~disabled[i] for i in range(nc)]
        verr = jnp.concatenate([c.get_velocity_errors_as_vector(s) * on[i] for i, c in enumerate(cs)])
        u_ok = s.u - jnp.linalg.pinv(G[velocity_rows]) @ verr
        ok = model.realize(s.with_u(u_ok), sx.Stage.Acceleration)
        velocity_errors = [c.get_velocity_errors_as_vector(ok) for c in cs]
        power = m.calc_constraint_power(ok)
        return (m.calc_constraint_acceleration_errors(s, s.acceleration.udot), generalized - G.T @ lam, power,
                velocity_errors)

    aerr, force_mismatch, power, verr_ok = jax.jit(jax.vmap(one))(masks)
    for i, c in enumerate(cs):
        assert np.abs(aerr[i]).max() < 1e-12, c.label
        assert np.abs(force_mismatch[i]).max() < 1e-12, c.label
        if not isinstance(c, (C.ConstantSpeed, C.ConstantAcceleration, C.PrescribedMotion)):  # the workless ones
            assert abs(power[i]) < 1e-11, c.label
        assert np.abs(verr_ok[i][i]).max(initial=0.0) < 1e-12, c.label

    def velocity_errors(u):
        s = model.realize(state.with_u(u), sx.Stage.Velocity)
        return jnp.concatenate([c.get_velocity_errors_as_vector(s) for c in cs])

    J = jax.jacfwd(velocity_errors)(state.u)
    G = model.matter.calc_g(state)
    np.testing.assert_allclose(G[velocity_rows], J, atol=1e-13)


def test_alike_constraints_share_one_trace_and_keep_their_own_numbers(monkeypatch):
    """Three Rods and two Balls, each on its own bodies with its own stations
    and lengths: each kind's errors are traced once per level and shape
    (equations._alike), every row of G is still its own constraint's, the
    u-Jacobian of its velocity errors (autodiff through the kinematics),
    and udot and the multipliers are those traced constraint by
    constraint."""
    system, matter, _ = _system()
    G = matter.Ground()
    b1 = sx.MobilizedBody.Free(G, sx.Transform([0, 1, 0]), _body(), sx.Transform())
    b2 = sx.MobilizedBody.Pin(b1, sx.Transform([0.5, 0, 0]), _body(), sx.Transform([0, 0.3, 0]))
    b3 = sx.MobilizedBody.Ball(G, sx.Transform([1, 0, 0]), _body(), sx.Transform([0, 0.4, 0]))
    cs = [C.Rod(b1, [0.1, 0, 0], b3, [0, 0.1, 0], 1.2), C.Rod(b2, [0, 0.2, 0.1], b3, [0.3, 0, 0], 0.8),
          C.Rod(G, [0, 2, 0], b2, [0.1, 0.1, 0], 1.9), C.Ball(b2, [0.2, 0, 0], b3, [0, 0, 0.1]),
          C.Ball(b1, [0.5, 1, 0], b3, [0.3, 0, 0.2])]
    model, state = system.realize_topology()
    rng = np.random.default_rng(5)
    state = model.matter.normalize_quaternions(state.with_q(state.q + 0.1 * rng.standard_normal(state.q.shape))
                                               .with_u(rng.standard_normal(state.u.shape)))
    traced = []
    jax.clear_caches()  # alike constraints of the file's other models share these traces too
    for kind in (C.Rod, C.Ball):
        for level in ("position_level", "velocity_level", "acceleration_level"):
            method = getattr(kind, level)
            monkeypatch.setattr(kind, level, lambda self, *args, level=level, method=method: (
                traced.append((level, type(self).__name__)) or method(self, *args)))

    def realized(s):
        return model.realize(s, sx.Stage.Acceleration)

    s = jax.jit(realized)(state)
    jax.jit(model.matter.get_q_err)(s), jax.jit(model.matter.get_u_err)(s)
    # per level and kind, once per number of bodies read (a Rod to Ground reads one body's accelerations
    # fewer); 3 Rods and 2 Balls before sharing
    assert sorted(traced) == [("acceleration_level", "Ball"), ("acceleration_level", "Rod"),
                              ("acceleration_level", "Rod"), ("position_level", "Ball"), ("position_level", "Rod"),
                              ("velocity_level", "Ball"), ("velocity_level", "Rod")]

    def velocity_errors(u):
        s = model.realize(state.with_u(u), sx.Stage.Velocity)
        return jnp.concatenate([c.get_velocity_errors_as_vector(s) for c in cs])

    np.testing.assert_allclose(model.matter.calc_g(s), jax.jacfwd(velocity_errors)(state.u), atol=1e-13)
    jax.clear_caches()
    monkeypatch.setattr(C.Rod, "ALIKE", False)
    monkeypatch.setattr(C.Ball, "ALIKE", False)
    unshared = jax.jit(realized)(state)
    assert len([level for level, _ in traced if level == "acceleration_level"]) == 3 + 5
    np.testing.assert_allclose(s.acceleration.udot, unshared.acceleration.udot, atol=1e-12)
    np.testing.assert_allclose(s.acceleration.multipliers, unshared.acceleration.multipliers, atol=1e-12)


def test_errors_are_the_geometric_quantities():
    model, state, cs = _mixed()
    s = model.realize(state, sx.Stage.Velocity)
    b = [cs[0].matter.get_mobilized_body(i) for i in range(7)]
    rod, ball, weld, plane = cs[0], cs[1], cs[2], cs[3]
    d = b[2].calc_station_to_station_distance(s, [0.1, 0, 0], b[4], [0, 0.1, 0])
    np.testing.assert_allclose(rod.get_position_errors_as_vector(s), [d - 1.2], atol=1e-14)
    ddot = b[2].calc_station_to_station_distance_time_derivative(s, [0.1, 0, 0], b[4], [0, 0.1, 0])
    np.testing.assert_allclose(rod.get_velocity_errors_as_vector(s), [ddot], atol=1e-14)
    gap = b[5].find_station_location_in_ground(s, [0, 0, 0.1]) - b[1].find_station_location_in_ground(s, [0.2, 0, 0])
    np.testing.assert_allclose(ball.get_position_errors_as_vector(s), gap, atol=1e-14)
    p_BS = b[6].find_station_at_ground_point(s, b[3].find_station_location_in_ground(s, [0.1, 0.1, 0]))
    np.testing.assert_allclose(plane.get_position_errors_as_vector(s), [p_BS[1] - 0.3], atol=1e-14)
    assert weld.get_position_errors_as_vector(s).shape == (6,)
    # ConstantCoordinate, PrescribedMotion: q minus the held or prescribed value
    np.testing.assert_allclose(cs[7].get_position_errors_as_vector(s), [b[4].get_one_q(s, 0) - 0.1], atol=1e-15)
    np.testing.assert_allclose(cs[12].get_position_errors_as_vector(s),
                               [b[6].get_one_q(s, 2) - 0.3 * np.sin(2.0 * 0.3 + 0.1)], atol=1e-15)
    np.testing.assert_allclose(cs[8].get_velocity_errors_as_vector(s), [b[2].get_one_u(s, 0) - 0.5], atol=1e-15)
    _check_contacts(s, b, cs)


def test_function_numbers_are_model_leaves():
    """jax.jacfwd reaches a PrescribedMotion's Sinusoid amplitude and a
    CoordinateCoupler's Linear coefficients through the Model."""
    model, state, cs = _mixed()
    b2, b4 = cs[0].get_constrained_bodies()

    def errors(amplitude, coefficients):
        m = eqx.tree_at(lambda m: (m.params.constraints[12].function.amplitude,
                                   m.params.constraints[10].function.coefficients), model, (amplitude, coefficients))
        s = m.realize(state, sx.Stage.Position)
        return jnp.concatenate([cs[12].get_position_errors_as_vector(s), cs[10].get_position_errors_as_vector(s)])

    d_amplitude, d_coefficients = jax.jacfwd(errors, argnums=(0, 1))(0.3, jnp.array([1.0, -2.0, 0.1]))
    np.testing.assert_allclose(d_amplitude, [-np.sin(2.0 * 0.3 + 0.1), 0.0], atol=1e-14)
    s = model.realize(state, sx.Stage.Position)
    np.testing.assert_allclose(d_coefficients[1], [b2.get_one_q(s, 0), b4.get_one_q(s, 0), 1.0], atol=1e-14)


def _check_contacts(s, b, cs):
    """Contacts' separations, contact frames and slip velocities from body queries."""
    G = b[0]

    def slip(c, F, B):  # B's material point at Co relative to F's, along Cx and Cy
        X = c.find_contact_frame(s)
        v = [body.find_station_velocity_in_ground(s, body.find_station_at_ground_point(s, X.p)) for body in (F, B)]
        return np.asarray(X.R)[:, :2].T @ (v[1] - v[0])

    point_plane, sphere_plane, spheres, spheres_slipping, lines_rolling, lines = cs[14:20]
    # PointOnPlaneContact: height of the follower point over the plane, in the plane body
    R_SP = np.asarray(sx.Rotation.about_x(0.2).matrix)
    p_GF = b[5].find_station_location_in_ground(s, [0.1, 0, 0])
    height = (b[6].find_station_at_ground_point(s, p_GF) - np.array([0, 0.1, 0])) @ R_SP[:, 2]
    np.testing.assert_allclose(point_plane.find_separation(s), height, atol=1e-14)
    X = point_plane.find_contact_frame(s)
    np.testing.assert_allclose(X.p, p_GF, atol=1e-14)
    np.testing.assert_allclose(X.R, b[6].get_body_transform(s).R @ R_SP, atol=1e-14)
    np.testing.assert_allclose(point_plane.get_velocity_errors_as_vector(s)[1:], slip(point_plane, b[6], b[5]),
                               atol=1e-13)
    # SphereOnPlaneContact on Ground's plane z = 0 (about_z keeps the normal): centre height minus radius
    p_GO = b[1].find_station_location_in_ground(s, [0, 0, 0.1])
    np.testing.assert_allclose(sphere_plane.find_separation(s), p_GO[2] - 0.3, atol=1e-14)
    np.testing.assert_allclose(sphere_plane.find_contact_frame(s).p, p_GO - np.array([0, 0, 0.3]), atol=1e-14)
    np.testing.assert_allclose(sphere_plane.get_velocity_errors_as_vector(s)[1:], slip(sphere_plane, G, b[1]),
                               atol=1e-13)
    # SphereOnSphereContact: centre distance minus the radii, Co on the centre line at rf / (rf + rb)
    Sf, Sb = b[3].find_station_location_in_ground(s, [0.1, 0, 0]), b[6].find_station_location_in_ground(s, [0, 0.1, 0])
    np.testing.assert_allclose(spheres.find_separation(s), np.linalg.norm(Sb - Sf) - 0.5, atol=1e-14)
    X = spheres.find_contact_frame(s)
    np.testing.assert_allclose(X.p, Sf + 0.4 * (Sb - Sf), atol=1e-14)
    np.testing.assert_allclose(X.R[:, 2], (Sb - Sf) / np.linalg.norm(Sb - Sf), atol=1e-14)
    np.testing.assert_allclose(spheres.get_velocity_errors_as_vector(s)[1:], slip(spheres, b[3], b[6]), atol=1e-13)
    assert spheres_slipping.get_velocity_errors_as_vector(s).shape == (1,) and not spheres_slipping.is_enforcing_rolling()
    assert sx.constraints.check_derivatives(spheres, s)["position_dot_errors"] < 1e-13  # hand-written d/dt |p_SfSb|
    # LineOnLineContact: |perr| is the distance of the lines, Co halfway between their closest points
    for c, F, B, (Ef, Eb) in ((lines_rolling, b[3], b[4], (sx.Transform(sx.Rotation.about_y(0.3), [0, 0.1, 0]),
                                                             sx.Transform(sx.Rotation.about_z(1.2), [0.1, 0, 0]))),
                              (lines, G, b[6], (sx.Transform([0, -1, 0]), sx.Transform(sx.Rotation.about_z(0.7), [0, 0.1, 0])))):
        Ef, Eb = F.get_body_transform(s) @ Ef, B.get_body_transform(s) @ Eb
        df, db = np.asarray(Ef.R)[:, 0], np.asarray(Eb.R)[:, 0]
        t = np.linalg.lstsq(np.stack([df, -db], axis=1), np.asarray(Eb.p - Ef.p), rcond=None)[0]
        Qf, Qb = Ef.p + t[0] * df, Eb.p + t[1] * db
        np.testing.assert_allclose(abs(c.find_separation(s)), np.linalg.norm(Qb - Qf), atol=1e-13)
        np.testing.assert_allclose(c.find_contact_frame(s).p, 0.5 * (Qf + Qb), atol=1e-13)
    np.testing.assert_allclose(lines_rolling.get_velocity_errors_as_vector(s)[1:], slip(lines_rolling, b[3], b[4]),
                               atol=1e-13)


def test_operators_agree_with_explicit_matrices():
    """Every operator in one compiled program (each is also a jitted call of its own)."""
    model, state, cs = _mixed()
    m = model.matter
    s = model.realize(state, sx.Stage.Acceleration)  # all constraints on: overdetermined, least squares
    mp, mv, ma = m.get_num_constraint_equations()
    nu, nq = s.topology.nu, s.topology.nq
    rng = np.random.default_rng(1)
    v, lam = rng.standard_normal(nu), rng.standard_normal(mp + mv + ma)

    @jax.jit
    def operators(s, v, lam):
        G = m.calc_g(s)
        qdot = m.calc_qdot(s, v)
        return dict(
            G=G, GT=m.calc_g_transpose(s), Gv=m.multiply_by_g(s, v),
            Gv_bias=m.multiply_by_g(s, v, m.calc_bias_for_multiply_by_g(s)),
            GTlam=m.multiply_by_g_transpose(s, lam), minus_b=m.calc_bias_for_acceleration_constraints(s),
            aerr0=m.calc_constraint_acceleration_errors(s, None), aerr=m.calc_constraint_acceleration_errors(s, v),
            P=m.calc_p(s), Pq=m.calc_pq(s), qdot=qdot, Pq_qdot=m.multiply_by_pq(s, qdot),
            Pq_qdot_bias=m.multiply_by_pq(s, qdot, m.calc_bias_for_multiply_by_pq(s)), PqT=m.calc_pq_transpose(s),
            PqT_lam=m.multiply_by_pq_transpose(s, lam[:mp]), PT=m.calc_pt(s), W=m.calc_projected_m_inv(s),
            GTlam_parts=m.calc_constraint_forces_from_multipliers(s, lam),
            M_inv=m.calc_m_inv(s),
            residual=m.calc_residual_force(s, s.dynamics.mobility_forces, s.dynamics.body_forces,
                                           s.acceleration.udot, s.acceleration.multipliers),
            udot=m.calc_acceleration(s, s.dynamics.mobility_forces, s.dynamics.body_forces)[0],
            impulse=m.solve_for_constraint_impulses(s, G @ v))

    r = jax.tree.map(np.asarray, operators(s, v, lam))
    G, P, Pq, W = r["G"], r["P"], r["Pq"], r["W"]
    np.testing.assert_allclose(r["GT"], G.T, atol=1e-14)
    np.testing.assert_allclose(r["Gv"], G @ v, atol=1e-13)
    np.testing.assert_allclose(r["Gv_bias"], G @ v, atol=1e-12)
    np.testing.assert_allclose(r["GTlam"], G.T @ lam, atol=1e-13)
    np.testing.assert_allclose(r["aerr0"], r["minus_b"], atol=1e-14)
    np.testing.assert_allclose(r["aerr"], G @ v + r["minus_b"], atol=1e-12)
    assert P.shape == (mp, nu) and Pq.shape == (mp, nq)
    np.testing.assert_allclose(Pq @ r["qdot"], P @ v, atol=1e-12)  # Pq = P N^-1
    np.testing.assert_allclose(r["Pq_qdot"], P @ v, atol=1e-12)
    np.testing.assert_allclose(r["Pq_qdot_bias"], P @ v, atol=1e-12)
    np.testing.assert_allclose(r["PqT"], Pq.T, atol=0)
    F, f = r["GTlam_parts"]  # G^T lambda as body and mobility forces: J^T F + f
    np.testing.assert_allclose(m.multiply_by_system_jacobian_transpose(s, F) + f, G.T @ lam, atol=1e-12)
    np.testing.assert_allclose(r["PqT_lam"], Pq.T @ lam[:mp], atol=1e-12)
    np.testing.assert_allclose(r["PT"], P.T, atol=0)
    np.testing.assert_allclose(W, G @ r["M_inv"] @ G.T, atol=1e-11)
    # the constrained residual vanishes at the realized udot and lambda, off the manifold
    np.testing.assert_allclose(r["residual"], 0.0, atol=1e-11)
    np.testing.assert_allclose(r["udot"], s.acceleration.udot, atol=1e-12)
    np.testing.assert_allclose(W @ r["impulse"], W @ np.linalg.pinv(W) @ (G @ v), atol=1e-10)


# -- Weld constraint against a Weld mobilizer ---------------------------------------------

def test_weld_constraint_equals_weld_mobilizer_reaction():
    force = jnp.array([0.3, -0.2, 0.5, 1.0, 2.0, -3.0])

    def build(as_constraint):
        system, matter, forces = _system()
        X = sx.Transform(np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]]), [0.2, 0.5, -0.1])
        if as_constraint:
            body = sx.MobilizedBody.Free(matter.Ground(), sx.Transform(), _body(1.3), sx.Transform())
            C.Weld(matter.Ground(), X, body, sx.Transform())
        else:
            body = sx.MobilizedBody.Weld(matter.Ground(), X, _body(1.3), sx.Transform())
        sx.Force.Custom(forces, lambda model, state: (jnp.zeros(0), jnp.zeros((2, 6)).at[1].set(force)))
        model, state = system.realize_topology()
        if as_constraint:
            state = body.set_q_to_fit_transform(state, X)
        return model, model.realize(state, sx.Stage.Acceleration), body

    model, s, body = build(True)
    np.testing.assert_allclose(s.acceleration.udot, 0.0, atol=1e-12)
    F_c, f_c = model.matter.find_constraint_forces(s)
    _, s_ref, body_ref = build(False)
    reaction = body_ref.find_mobilizer_reaction_on_body_at_origin_in_ground(s_ref)
    np.testing.assert_allclose(F_c[1], -reaction, atol=1e-12)
    np.testing.assert_allclose(model.matter.calc_mobilizer_reaction_forces(s)[1], 0.0, atol=1e-12)


# -- redundancy ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _four_bar(closure: str):
    """(model, state, crank): a planar four-bar (z pins) closed at the
    coupler's tip by a Ball (its z row redundant) or by the same coincidence
    in x and y only (a Custom); or a four-bar-like chain closed by one Rod or
    by two identical Rods."""
    system, matter, _ = _system()
    link = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.5, 0, 0], sx.Inertia(0.01, 0.1, 0.1)))
    crank = sx.MobilizedBody.Pin(matter.Ground(), link)
    coupler = sx.MobilizedBody.Pin(crank, sx.Transform([1.0, 0, 0]), link, sx.Transform())
    rocker = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform([1.5, 0, 0]), link, sx.Transform())
    if closure == "ball":
        C.Ball(coupler, [1.2, 0, 0], rocker, [1.1, 0, 0])
    elif closure == "planar":
        C.Custom(matter, C.Custom.Implementation(
            bodies=[coupler, rocker], num_position=2,
            position_errors=lambda X, q: (X[1].apply(jnp.array([1.1, 0, 0])) - X[0].apply(jnp.array([1.2, 0, 0])))[:2]))
    else:
        for _ in range(2 if closure == "two rods" else 1):
            C.Rod(coupler, [1.2, 0, 0], rocker, [0, 0, 0], 1.1)
    model, state = system.realize_topology()
    # a closed configuration: crank at 60 degrees, the rest solved in closed form
    a = np.pi / 3
    p1 = np.array([np.cos(a), np.sin(a)])
    d = np.linalg.norm(np.array([1.5, 0]) - p1)
    beta = np.arctan2(-p1[1], 1.5 - p1[0])
    gamma = np.arccos((1.2 ** 2 + d ** 2 - 1.1 ** 2) / (2 * 1.2 * d))
    phi = beta + gamma
    tip = p1 + 1.2 * np.array([np.cos(phi), np.sin(phi)])
    psi = np.arctan2(tip[1], tip[0] - 1.5)
    state = model.realize(state.with_q([a, phi - a, psi]).with_u([1.0, 0.0, 0.0]), sx.Stage.Velocity)
    assert np.abs(model.constraints[0].get_position_errors_as_vector(state)).max() < 1e-14
    # u on the velocity manifold: one least-squares step (the errors are linear in u)
    verr = jnp.concatenate([c.get_velocity_errors_as_vector(state) for c in model.constraints])
    return model, state.with_u(state.u - jnp.linalg.pinv(model.matter.calc_g(state)) @ verr), crank


def test_redundant_constraints_give_exact_udot_and_minimum_norm_multipliers():
    results = {}
    for closure in ("rod", "two rods", "ball", "planar"):
        model, state, _ = _four_bar(closure)
        s = model.realize(state, sx.Stage.Acceleration)
        results[closure] = (s.acceleration.udot, s.acceleration.multipliers)
        assert np.all(np.isfinite(s.acceleration.multipliers))
        np.testing.assert_allclose(model.matter.calc_constraint_acceleration_errors(s, s.acceleration.udot), 0.0,
                                   atol=1e-12)
    np.testing.assert_allclose(results["two rods"][0], results["rod"][0], atol=1e-12)
    np.testing.assert_allclose(results["ball"][0], results["planar"][0], atol=1e-12)
    np.testing.assert_allclose(results["two rods"][1], [results["rod"][1][0] / 2] * 2, atol=1e-12)
    np.testing.assert_allclose(results["ball"][1], np.append(results["planar"][1], 0.0), atol=1e-12)


def test_derivatives_match_finite_differences_even_when_redundant():
    """Gradients, JVPs and a second derivative (the gradient's own JVP) of
    udot and the multipliers against central differences: two identical
    rods (one redundant), then the crank's udot held by a lock and one rod
    disabled (the rule's prescribed and masked rows). On the array program:
    the scalar path, which small models like this one take inside jit,
    differentiates the solve's arithmetic instead."""
    model, state, crank = _four_bar("two rods")
    model = model.with_scalar_path(False)

    def udot_of(q, u, station):  # the rods' station on the coupler: a Model leaf
        m = eqx.tree_at(lambda m: (m.params.constraints[0].station1, m.params.constraints[1].station1), model,
                        (station, station))
        return m.realize(state.with_q(q).with_u(u), sx.Stage.Acceleration).acceleration.udot

    args = (state.q, state.u, jnp.array([1.2, 0.0, 0.0]))
    f = jax.jit(lambda *a: jnp.sum(udot_of(*a) * jnp.array([1.0, -0.5, 0.25])))
    gradient = jax.jit(jax.grad(f, argnums=(0, 1, 2)))
    grads = gradient(*args)
    for i, g in enumerate(grads):
        x = np.asarray(args[i], float)
        fd = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[j] = FD_STEP
            moved = [a if k != i else jnp.asarray(x + e) for k, a in enumerate(args)]
            back = [a if k != i else jnp.asarray(x - e) for k, a in enumerate(args)]
            fd[j] = (f(*moved) - f(*back)) / (2 * FD_STEP)
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, fd, atol=10 * FD_TOL)  # accelerations of order 10
    tangent = jax.jvp(lambda q: udot_of(q, state.u, args[2]), (state.q,), (jnp.array([1.0, 0.0, 0.0]),))[1]
    assert np.all(np.isfinite(tangent))
    # the derivative rule differentiated: d/dq of the gradient along e, against central differences of the
    # gradient (truncation ~1e-12 times fourth derivatives of order 10, rounding 1e-16 * 10 / 1e-6; a rule
    # that held its factorizations constant was off by order 1)
    e = jnp.array([0.3, -1.0, 0.5])
    gradient_q = lambda q: gradient(q, *args[1:])[0]
    second = jax.jit(lambda q: jax.jvp(gradient_q, (q,), (e,))[1])(state.q)
    differences = gradient_q(state.q + FD_STEP * e) - gradient_q(state.q - FD_STEP * e)
    np.testing.assert_allclose(second, differences / (2 * FD_STEP), atol=1e-6)

    def dynamics(q, u):  # udot and the (minimum-norm) multipliers of the redundant pair
        s = model.realize(state.with_q(q).with_u(u), sx.Stage.Acceleration)
        return jnp.concatenate([s.acceleration.udot, s.acceleration.multipliers])

    check_grads(jax.jit(dynamics), (state.q, state.u), order=1, modes=["fwd", "rev"])
    state = model.constraints[1].disable(crank.lock_at(state, 0.7, sx.Motion.Acceleration))
    udot = model.realize(state, sx.Stage.Acceleration).acceleration.udot
    assert udot[0] == 0.7 and np.abs(model.matter.calc_constraint_acceleration_errors(
        model.realize(state, sx.Stage.Velocity), udot)).max() < 1e-12
    check_grads(jax.jit(dynamics), (state.q, state.u), order=1, modes=["fwd", "rev"])



def test_derivative_with_respect_to_applied_forces_alone():
    """With a tangent on the applied mobility forces only (a control), d udot
    / d f is the constrained operator M^-1 - M^-1 G^T pinv(G M^-1 G^T) G M^-1
    (the Ball's redundant row included), in forward and reverse mode, through
    one Euler step of a rollout: u1 = u + dt udot."""
    model, state, _ = _four_bar("ball")
    s = model.realize(state, sx.Stage.Position)
    M_inv = jnp.linalg.inv(model.matter.calc_m(s))
    G = model.matter.calc_g(s)
    expected = M_inv - M_inv @ G.T @ jnp.linalg.pinv(G @ M_inv @ G.T) @ G @ M_inv

    def u1(f):
        final, _ = sx.integrate.rollout(model, state, 0.5, controls=f[None], method="euler", energy=False)
        return final.u

    for jacobian in (jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(jax.jit(jacobian(u1))(jnp.ones(3)), 0.5 * expected, atol=1e-12)

# -- Custom against the built-ins, with a body as Ancestor -------------------------------------

def test_custom_constraints_reproduce_builtins():
    def build(custom):
        system, matter, _ = _system()
        b1 = sx.MobilizedBody.Free(matter.Ground(), _body())
        b2 = sx.MobilizedBody.Ball(b1, sx.Transform([0.4, 0, 0]), _body(0.7), sx.Transform([0, 0.2, 0]))
        b3 = sx.MobilizedBody.Pin(b1, sx.Transform([0, 0.3, 0]), _body(0.5), sx.Transform())
        b4 = sx.MobilizedBody.Slider(matter.Ground(), sx.Transform([0, 0, 1]), _body(0.9), sx.Transform())
        s2, s3 = np.array([0.1, 0.2, 0.0]), np.array([0.3, 0.0, 0.1])
        if not custom:
            C.Rod(b2, s2, b3, s3, 0.5)  # Ancestor b1
            C.Ball(b2, s2, b4, [0, 0, 0.2])
            C.ConstantSpeed(b3, 0, 0.4)
            C.CoordinateCoupler(matter, fn.Linear((1.0, 2.0, -0.1)), [b3, b4], [0, 0])
            C.ConstantAcceleration(b2, 1, -0.3)
        else:
            I = C.Custom.Implementation
            C.Custom(matter, I(bodies=[b2, b3], num_position=1, params={"L": 0.5, "s2": s2, "s3": s3},
                               position_errors=lambda X, q, params: jnp.array(
                                   [jnp.linalg.norm(X[1].apply(params["s3"]) - X[0].apply(params["s2"])) - params["L"]])))
            C.Custom(matter, I(bodies=[b2, b4], num_position=3,
                               position_errors=lambda X, q: X[1].apply(jnp.array([0, 0, 0.2])) - X[0].apply(s2),
                               position_dot_errors=lambda V, qdot, X_AB: (
                                   V[1, 3:] + jnp.cross(V[1, :3], X_AB[1].rotate(jnp.array([0, 0, 0.2])))
                                   - V[0, 3:] - jnp.cross(V[0, :3], X_AB[1].apply(jnp.array([0, 0, 0.2])) - X_AB[0].p))))
            C.Custom(matter, I(mobilizers=[b3], num_velocity=1, velocity_errors=lambda V, u: u[0] - 0.4))
            C.Custom(matter, I(mobilizers=[b3, b4], num_position=1,
                               position_errors=lambda X, q: q[0] + 2.0 * q[1] - 0.1))
            C.Custom(matter, I(mobilizers=[b2], num_acceleration=1, acceleration_errors=lambda A, udot: udot[0][1] + 0.3))
        model, state = system.realize_topology()
        rng = np.random.default_rng(3)
        state = state.with_q(np.asarray(state.q) + 0.2 * rng.standard_normal(state.q.shape))
        state = model.matter.normalize_quaternions(state.with_u(rng.standard_normal(state.u.shape)))
        return model, model.realize(state, sx.Stage.Acceleration)

    (m_b, s_b), (m_c, s_c) = build(False), build(True)
    assert m_c.constraints[0].ancestor == 1
    np.testing.assert_allclose(s_c.acceleration.udot, s_b.acceleration.udot, atol=1e-10)
    np.testing.assert_allclose(s_c.acceleration.multipliers, s_b.acceleration.multipliers, atol=1e-10)
    for c_b, c_c in zip(m_b.constraints, m_c.constraints):
        np.testing.assert_allclose(c_c.get_velocity_errors_as_vector(s_c), c_b.get_velocity_errors_as_vector(s_b),
                                   atol=1e-12)
    assert float(s_c.acceleration.udot[m_c.topology.u_start[2] + 1]) == pytest.approx(-0.3, abs=1e-12)


# -- disabling: one compile, each State equal to its own model -------------------------------

def test_disabled_constraints_in_a_batch_match_models_built_without_them():
    def build(which):
        system, matter, _ = _system()
        link = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.5, 0, 0], sx.Inertia(0.01, 0.1, 0.1)))
        a = sx.MobilizedBody.Pin(matter.Ground(), link)
        b = sx.MobilizedBody.Pin(a, sx.Transform([1.0, 0, 0]), link, sx.Transform())
        handles = {}
        if "rod" in which:
            handles["rod"] = C.Rod(matter.Ground(), [1.5, 0, 0], b, [1.0, 0, 0], 1.3)
        if "speed" in which:
            handles["speed"] = C.ConstantSpeed(a, 0, 0.2)
        model, state = system.realize_topology()
        return model, state.with_q([0.3, -0.4]).with_u([0.1, 0.7]), handles

    model, state, handles = build(("rod", "speed"))
    disabled = jnp.array([[False, False], [True, False], [False, True], [True, True]])
    udot = jax.jit(jax.vmap(lambda d: model.realize(state.with_constraint_disabled(d), sx.Stage.Acceleration)
                            .acceleration.udot))(disabled)
    for row, which in zip(udot, [("rod", "speed"), ("speed",), ("rod",), ()]):
        m, s, _ = build(which)
        np.testing.assert_allclose(row, m.realize(s, sx.Stage.Acceleration).acceleration.udot, atol=1e-12)
    s = handles["rod"].disable(state)
    assert bool(handles["rod"].is_disabled(s)) and handles["rod"].get_num_constraint_equations_in_use(s) == (0, 0, 0)
    s = model.realize(s, sx.Stage.Acceleration)
    np.testing.assert_allclose(handles["rod"].get_multipliers_as_vector(s), [0.0])
    assert model.matter.is_constraint_disabled(model.matter.set_constraint_is_disabled(state, 1, True), 1)
    rod, speed = handles["rod"], handles["speed"]
    s = model.realize(rod.enable(rod.disable(state)), sx.Stage.Acceleration)
    assert not bool(rod.is_disabled(s)) and rod.get_default_num_constraint_equations() == (1, 0, 0)
    assert [b.index for b in speed.get_constrained_mobilizers()] == [1]
    # each handle's acceleration errors are its rows of the stacked ones, zero at the realized udot
    stacked = model.matter.calc_constraint_acceleration_errors(s, s.acceleration.udot)
    np.testing.assert_allclose(jnp.concatenate([c.get_acceleration_errors_as_vector(s) for c in (rod, speed)]),
                               stacked, atol=1e-14)
    np.testing.assert_allclose(stacked, 0.0, atol=1e-12)


def test_disabled_by_default():
    system, matter, _ = _system()
    body = sx.MobilizedBody.Slider(matter.Ground(), _body())
    c = C.ConstantSpeed(body, 0, 1.0).set_disabled_by_default()
    model, state = system.realize_topology()
    assert c.is_disabled_by_default() and bool(c.is_disabled(state))


# -- build-time errors -------------------------------------------------------------------------

def test_bad_input_is_named():
    system, matter, _ = _system()
    pin = sx.MobilizedBody.Pin(matter.Ground(), _body(), name="crank")
    with pytest.raises(IndexError, match="crank"):
        C.ConstantCoordinate(pin, 1, 0.0)
    with pytest.raises(ValueError, match="length must be positive"):
        C.Rod(matter.Ground(), [0, 0, 0], pin, [0, 0, 0], 0.0)
    with pytest.raises(ValueError, match="normal must not be zero"):
        C.PointInPlane(matter.Ground(), [0, 0, 0], 0.0, pin, [0, 0, 0])
    with pytest.raises(ValueError, match="Ground has no mobilizer"):
        C.ConstantSpeed(matter.Ground(), 0, 1.0)
    with pytest.raises(ValueError, match="position_errors is required"):
        C.Custom(matter, C.Custom.Implementation(bodies=[pin], num_position=1))
    for make in (lambda: C.Rod(pin, [0, 0, 0], pin, [1, 0, 0], 1.0), lambda: C.Weld(pin, pin),
                 lambda: C.Ball(matter.Ground(), [0, 0, 0], matter.Ground(), [1, 0, 0])):
        with pytest.raises(ValueError, match="constraint0.*a constraint between a body and itself"):
            make()
    other_system, other_matter, _ = _system()
    other = sx.MobilizedBody.Pin(other_matter.Ground(), _body())
    with pytest.raises(ValueError, match="different matter subsystem"):
        C.Rod(pin, [0, 0, 0], other, [0, 0, 0], 1.0)
    system.realize_topology()
    with pytest.raises(RuntimeError, match="frozen"):
        C.Rod(matter.Ground(), [1, 0, 0], pin, [0, 0, 0], 1.0)


def test_check_derivatives_flags_an_inconsistent_override():
    system, matter, _ = _system()
    a = sx.MobilizedBody.Free(matter.Ground(), _body())
    b = sx.MobilizedBody.Pin(a, sx.Transform([0.4, 0, 0]), _body(0.6), sx.Transform())
    I = C.Custom.Implementation
    perr = lambda X, q: jnp.array([X[1].p @ X[1].p - 1.0])  # |p_GB|^2 - 1
    good = C.Custom(matter, I(bodies=[matter.Ground(), b], num_position=1, position_errors=perr,
                              position_dot_errors=lambda V, qdot, X_AB: jnp.array([2 * X_AB[1].p @ V[1, 3:]])))
    bad = C.Custom(matter, I(bodies=[matter.Ground(), b], num_position=1, position_errors=perr,
                             position_dot_errors=lambda V, qdot, X_AB: jnp.array([X_AB[1].p @ V[1, 3:]])))
    no_force = C.Custom(matter, I(bodies=[matter.Ground(), b], num_position=1, position_errors=perr,
                                  constraint_forces=lambda lam: (jnp.zeros((2, 6)), (), ())))
    speed = C.ConstantSpeed(b, 0, 0.3)
    model, state = system.realize_topology()
    rng = np.random.default_rng(5)
    s = model.realize(model.matter.normalize_quaternions(
        state.with_q(np.asarray(state.q) + 0.3 * rng.standard_normal(state.q.shape))
        .with_u(rng.standard_normal(state.u.shape))), sx.Stage.Velocity)
    assert max(sx.constraints.check_derivatives(good, s).values()) < 1e-12
    assert max(sx.constraints.check_derivatives(speed, s).values()) < 1e-12
    report = sx.constraints.check_derivatives(bad, s)
    assert report["position_dot_errors"] > 1e-3 and report["constraint_forces"] < 1e-12  # forces follow pverr
    assert sx.constraints.check_derivatives(no_force, s)["constraint_forces"] > 1e-3
