"""What goes into a State or a Model is checked: one configuration per State
(batches through jax.vmap), the Model's dtype (no silent casts), and the
physical parameters of an edited Model (model.check)."""

import functools
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import new_system, link


@functools.lru_cache(maxsize=None)
def pendulum(handles=False):
    """A 2-link planar pendulum (nq = nu = 2) with a spring on its first joint."""
    system, matter, forces = new_system()
    a = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), link(), sx.Transform())
    b = sx.MobilizedBody.Pin(a, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    sx.Force.MobilityLinearSpring(forces, a, 0, 2.0, 0.0)
    model, state = system.realize_topology()
    return (model, state, a, b) if handles else (model, state)


def test_every_way_into_a_state_checks_one_configuration():
    """State.replace(q=(5, 2)) was taken: realize at Position then used q[0]
    alone and grad gave zeros for the other rows. Now each way in says the
    shape and how to batch."""
    model, state = pendulum()
    batch = jnp.ones((5, 2))
    for put in (lambda: state.replace(q=batch), lambda: state.with_q(batch), lambda: state.replace(u=batch),
                lambda: sx.State(state.t, batch, state.u, state.z, state.topology)):
        with pytest.raises(ValueError, match=r"State.[qu] has shape \(5, 2\), expected \(2,\); .*jax.vmap"):
            put()
    with pytest.raises(ValueError, match=r"State.t has shape \(2,\), expected \(\)"):
        state.with_time(jnp.zeros(2))
    with pytest.raises(ValueError, match=r"State.q has shape \(3,\), expected \(2,\)$"):
        state.replace(q=jnp.zeros(3))
    # The batch, done as the message says, gives every row its own answer.
    f = lambda q: model.realize(state.replace(q=q)).position.X_GB.R[2, 0, 1]  # noqa: E731
    qs = jnp.stack([jnp.zeros(2), jnp.array([0.3, -0.2])])
    np.testing.assert_allclose(jax.vmap(f)(qs), [f(q) for q in qs], atol=1e-15)
    assert jnp.all(jax.vmap(jax.grad(f))(qs)[1] != 0)
    assert state.replace(q=[1, 2]).q.dtype == model.dtype  # numbers take the State's dtype


def test_the_models_dtype_wins():
    """A float32 Model given a float64 State computed in float64, and the
    other way round upcast; both are now errors naming both dtypes."""
    model, state = pendulum()
    single = model.astype(jnp.float32)
    with pytest.raises(TypeError, match="the State is float64 but the Model is float32: .*state.astype"):
        single.realize(state)
    with pytest.raises(TypeError, match="the State is float32 but the Model is float64"):
        model.matter.calc_kinetic_energy(state.astype(jnp.float32))
    s32 = single.realize(state.astype(jnp.float32), sx.Stage.Velocity)
    assert s32.q.dtype == s32.position.X_GB.p.dtype == s32.velocity.V_GB.dtype == jnp.float32
    assert single.params.mass.dtype == jnp.float32 and model.params.mass.dtype == jnp.float64


def test_model_check_finds_what_an_edit_broke():
    """The inertia is stored about the mass center, so raising params.mass
    by eqx.tree_at keeps every body physical (about Bo, the same edit gives a
    negative central moment and a mass matrix with negative eigenvalues).
    An edit that does break a body, a central inertia against the triangle
    inequality, model.check() names; set_mass_properties, the documented
    way, stays physical."""
    model, state, a, b = pendulum(handles=True)
    assert model.check() is model
    heavy = eqx.tree_at(lambda m: m.params.mass, model, model.params.mass.at[2].set(100.0))
    assert heavy.check() is heavy
    assert np.linalg.eigvalsh(heavy.matter.calc_m(heavy.realize(state))).min() > 0
    np.testing.assert_allclose(heavy.params.inertia[2] - heavy.params.central_inertia[2],
                               sx.spatial.point_inertia(100.0, heavy.params.com[2]), rtol=1e-14)
    flat = eqx.tree_at(lambda m: m.params.central_inertia, model,
                       model.params.central_inertia.at[2].set(jnp.diag(jnp.array([0.01, 0.01, 0.1]))))
    with pytest.raises(ValueError, match="body 2 .*triangle inequality"):
        flat.check()
    mp = sx.MassProperties.from_central(100.0, [0.5, 0, 0], sx.Inertia(0.01, 0.1, 0.1))
    fine = b.set_mass_properties(model, mp).check()
    assert np.linalg.eigvalsh(fine.matter.calc_m(fine.realize(state))).min() > 0
    soft = eqx.tree_at(lambda m: m.force_elements[0].stiffness, model, jnp.asarray(-1.0))
    with pytest.raises(ValueError, match="Force.MobilityLinearSpring: stiffness must be >= 0"):
        soft.check()
    tilted = eqx.tree_at(lambda m: m.params.X_PF.R, model, model.params.X_PF.R.at[1].multiply(2.0))
    with pytest.raises(ValueError, match="body 1 .*X_PF.R is not a proper rotation"):
        tilted.check()
    with pytest.raises(TypeError, match="outside jit"):
        jax.jit(lambda m: m.check())(model)
    system, matter, forces = new_system()
    with pytest.raises(ValueError, match="Force.MobilityLinearDamper: damping must be >= 0"):
        sx.Force.MobilityLinearDamper(forces, sx.MobilizedBody.Pin(matter.Ground(), link()), 0, -0.5)


def test_stage_errors_name_the_query_the_user_called():
    """find_station_velocity_in_ground on a Position-stage State said
    'Pin.get_body_velocity needs Stage.Velocity' (the query it delegates to)."""
    model, state, a, b = pendulum(handles=True)
    s = model.realize(state, sx.Stage.Position)
    with pytest.raises(ValueError, match=r"^Pin.find_station_velocity_in_ground needs Stage.Velocity but the State "
                                         r"is realized only to Stage.Position"):
        b.find_station_velocity_in_ground(s, [1.0, 0, 0])
    with pytest.raises(ValueError, match=r"^Pin.get_body_velocity needs Stage.Velocity"):
        b.get_body_velocity(s)
    with pytest.raises(ValueError, match=r"^Pin.calc_body_momentum_about_body_mass_center_in_ground needs"):
        a.calc_body_momentum_about_body_mass_center_in_ground(s)
    np.testing.assert_allclose(b.find_station_velocity_in_ground(model.realize(s, sx.Stage.Velocity), [1.0, 0, 0]),
                               0.0)


def test_a_cache_read_before_its_stage_is_the_stage_error():
    """state.acceleration.udot on a Position-stage State raised
    "AttributeError: 'NoneType' object has no attribute 'udot'"; each cache
    now gives the getters' stage error, inside jit too, and says whether it
    is there (state.has)."""
    model, state = pendulum()
    s = model.realize(state, sx.Stage.Position)
    for read, stage in ((lambda: s.acceleration.udot, "Acceleration"), (lambda: s.velocity.qdot, "Velocity"),
                        (lambda: s.dynamics, "Dynamics"), (lambda: s.report.total_energy, "Report"),
                        (lambda: state.position.X_GB, "Position"), (lambda: state.instance, "Instance")):
        with pytest.raises(ValueError, match=rf"^state.\w+ needs Stage.{stage} but the State is realized only to "
                                             rf"Stage.(Position|Model); call model.realize\(state, Stage.{stage}\)"):
            read()
    with pytest.raises(ValueError, match="state.acceleration needs Stage.Acceleration"):
        jax.jit(lambda s: s.acceleration.udot)(s)
    assert s.has("position") and not s.has("velocity") and s.stage == sx.Stage.Position
    assert model.realize(s, sx.Stage.Acceleration).acceleration.udot.shape == (2,)


def test_a_station_of_the_wrong_shape_is_named():
    """A (2,) station failed with a broadcasting error from inside the query."""
    model, state, a, b = pendulum(handles=True)
    s = model.realize(state, sx.Stage.Velocity)
    with pytest.raises(ValueError, match=r"^Pin.find_station_location_in_ground: station_on_B has shape \(2,\), "
                                         r"expected \(3,\)$"):
        b.find_station_location_in_ground(s, [1.0, 0.0])
    with pytest.raises(ValueError, match=r"^Pin.calc_station_to_station_distance: location_on_A has shape \(4,\)"):
        b.calc_station_to_station_distance(s, [0, 0, 0], a, location_on_A=np.zeros(4))
    assert b.find_station_location_in_ground(s, np.zeros((5, 3))).shape == (5, 3)  # several stations at once


def _checks_model(massless_tip=False):
    """A Pin and a Ball held by a Rod; with ``massless_tip``, a massless Pin
    on the Ball instead of the Rod (the mass matrix is then singular)."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    pin = sx.MobilizedBody.Pin(matter.Ground(), link())
    ball = sx.MobilizedBody.Ball(pin, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    if massless_tip:
        sx.MobilizedBody.Pin(ball, sx.Transform([1.0, 0, 0]), sx.Body.Rigid(sx.MassProperties(0.0)), sx.Transform())
    else:
        sx.Constraint.Rod(matter.Ground(), [2.0, 0, 0], ball, [1.0, 0, 0], 1.0)
    model, state = system.realize_topology()
    return model, state.with_q(state.q.at[0].set(0.2))


def test_the_checks_mode_names_the_body_or_constraint_at_fault_inside_jit_and_vmap():
    """Each fault was silent NaN; with model.with_checks() realize raises,
    under jit and vmap, naming the first body or constraint at fault: a NaN
    q, an infinite u, a zero quaternion (set_one_q on a Ball's first entry),
    a failed constraint solve (a NaN station on the rod) and a singular
    mass matrix (udot). Off, the program holds no check at all."""
    model, state = _checks_model()
    checked = model.with_checks()
    udot = jax.jit(lambda m, s: sx.integrate.derivatives(m, s)[1])
    ball_q = model.topology.q_start[2]
    good = state.with_q(state.q.at[ball_q:ball_q + 4].set(jnp.array([1.0, 0, 0, 0])))
    faults = [
        (good.with_q(good.q.at[ball_q + 2].set(jnp.nan)), r"body 2 \('body2', Ball\): q contains NaN"),
        (good.with_u(good.u.at[0].set(jnp.inf)), r"body 1 \('body1', Pin\): u contains NaN"),
        (good.with_q(good.q.at[ball_q].set(0.0).at[ball_q + 1:ball_q + 4].set(0.0)),
         r"body 2 \('body2', Ball\): zero quaternion .*set_q_to_fit_rotation"),
    ]
    for bad, message in faults:
        assert not jnp.all(jnp.isfinite(udot(model, bad)))  # silent without checks
        with pytest.raises(Exception, match=message):
            udot(checked, bad)
    with pytest.raises(Exception, match=r"body 2 \('body2', Ball\): zero quaternion"):
        jax.vmap(lambda q: udot(checked, good.with_q(q)))(jnp.stack([good.q, faults[2][0].q]))
    np.testing.assert_array_equal(udot(checked, good), udot(model, good))  # a healthy State passes
    broken = eqx.tree_at(lambda m: m.params.constraints[0].station2, checked, jnp.full(3, jnp.nan))
    with pytest.raises(Exception, match="Rod.*: the constraint solve gave NaN or infinite multipliers"):
        udot(broken, good)
    assert "callback" not in str(jax.make_jaxpr(udot)(model, good))
    assert "callback" in str(jax.make_jaxpr(udot)(checked, good))
    singular, state = _checks_model(massless_tip=True)
    assert not jnp.all(jnp.isfinite(udot(singular, state)))
    with pytest.raises(Exception, match=r"udot is NaN or infinite, first at body 1 .*singular mass matrix"):
        udot(singular.with_checks(), state)


def _ball_with_a_late_fault():
    """A Ball pendulum whose Force.Custom turns NaN from t = 4.5 ms on."""
    system, matter, forces = new_system()
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    ball = sx.MobilizedBody.Ball(matter.Ground(), sx.Transform(), link(), sx.Transform())
    sx.Force.Custom(forces, lambda m, s: (jnp.where(s.t >= 4.5e-3, jnp.nan, 0.0) * s.u, jnp.zeros((2, 6))))
    model, state = system.realize_topology()
    return model.with_checks(), state.with_u(jnp.array([0.3, 0.0, 0.0])), ball


def test_a_failed_check_raises_one_error_whose_first_line_names_the_element_and_where(capfd):
    """The issue's call: a zero quaternion set with set_one_q on a Ball raised
    JaxRuntimeError "INTERNAL: CpuCallback error calling callback:
    Traceback ..." with the message mid-traceback and a second traceback on
    stderr. Now every way of calling raises sx.RuntimeCheckError whose text
    is the message, with the State's time and, in a rollout or simulate,
    the step; nothing is printed."""
    model, state, ball = _ball_with_a_late_fault()
    zero = ball.set_one_q(state, 0, 0.0)  # the identity quaternion's one nonzero entry
    quaternion = r"^body 1 \('body1', Ball\): zero quaternion \(checks mode\); set an orientation with " \
                 r"set_q_to_fit_rotation \(at t = 0 s{}\)$"
    for call, where in [(lambda: model.realize(zero, sx.Stage.Acceleration), ""),
                        (lambda: jax.jit(sx.integrate.derivatives)(model, zero), None),
                        (lambda: sx.check_errors()(jax.jit(sx.integrate.derivatives))(model, zero), ""),
                        (lambda: jax.vmap(lambda s: sx.integrate.derivatives(model, s))(
                            jax.tree.map(lambda a, b: jnp.stack([a, b]), state, zero)), ""),
                        (lambda: jax.grad(lambda q: sx.integrate.rollout(model, zero.with_q(q), 1e-3, 3)[0].q.sum())(
                            zero.q), ", in step 1"),
                        (lambda: sx.integrate.rollout(model, zero, 1e-3, 3), ", in step 1")]:
        with pytest.raises(Exception) as raised:
            call()
        if where is None:  # a jax.jit of the user's own, outside sx.check_errors: JAX's error holds the message
            assert type(raised.value).__name__ == "JaxRuntimeError"
            assert "zero quaternion (checks mode)" in str(raised.value)
        else:
            assert type(raised.value) is sx.RuntimeCheckError
            assert re.match(quaternion.format(where), str(raised.value)), str(raised.value)
    assert "Traceback" not in capfd.readouterr().err

    late = r"^udot is NaN or infinite, first at body 1 \('body1', Ball\) \(checks mode\).*" \
           r"\(at t = 0.005 s, in step 6\)$"
    with pytest.raises(sx.RuntimeCheckError, match=late):
        sx.integrate.rollout(model, state, 1e-3, 10, method="euler")
    with pytest.raises(sx.RuntimeCheckError, match=late.replace("0.005 s, in step 6", "0.0045 s, in step 3")):
        sx.integrate.rollout(model, state, 1.5e-3, 10)  # RK4's last stage of step 3, at 3 + 1.5 ms
    with pytest.raises(sx.RuntimeCheckError, match=r"udot is NaN .*\(at t = 0.00[45]\d* s, in step \d+\)$"):
        sx.simulate(model, state, sx.Integrator.RungeKuttaMerson(), [0.01])
    stepper = sx.SemiExplicitEulerTimeStepper()
    with pytest.raises(sx.RuntimeCheckError, match=r"[qu] contains NaN .*\(at t = 0.006 s, in step 6\)$"):
        sx.integrate.rollout(model, state, 1e-3, 10, method=stepper)  # the stepper's udot is not checked: its u
    with pytest.raises(sx.RuntimeCheckError, match=r"[qu] contains NaN .*\(at t = 0.006 s\)$"):  # own loop
        s = state
        for _ in range(10):
            s = stepper.step(model, s, 1e-3)


def test_model_check_names_a_leaf_of_the_wrong_shape_or_dtype_and_realize_does_too():
    """The issue's call: a mass of shape (2,) set with eqx.tree_at passed
    check(), then realize failed with "mul got incompatible shapes". Now
    check(), realize and a jitted rollout name the leaf; dtypes likewise."""
    model, state = pendulum()
    wrong = eqx.tree_at(lambda m: m.params.mass, model, jnp.ones(2))
    shape = r"^model.params.mass has shape \(2,\), expected \(3,\) \(as frozen from the topology\)"
    for call in (wrong.check, lambda: wrong.realize(state, sx.Stage.Acceleration),
                 lambda: jax.jit(lambda m: sx.integrate.rollout(m, state, 1e-3, 2))(wrong)):
        with pytest.raises(ValueError, match=shape):
            call()
    with pytest.raises(ValueError, match=r"^model.force_elements\[0\].stiffness has shape \(3,\), expected \(\)"):
        eqx.tree_at(lambda m: m.force_elements[0].stiffness, model, jnp.ones(3)).check()
    with pytest.raises(ValueError, match=r"^model.params.X_PF.p has dtype int32, expected a floating-point dtype$"):
        eqx.tree_at(lambda m: m.params.X_PF.p, model, jnp.ones((3, 3), jnp.int32)).check()
    with pytest.raises(ValueError, match=r"^model.params.com has dtype float32 where the Model's other numbers are "
                                         r"float64"):
        eqx.tree_at(lambda m: m.params.com, model, jnp.ones((3, 3), jnp.float32)).realize(state)
    assert model.astype(jnp.float32).check() is not None and model.check() is model  # whole-Model casts pass


def test_the_checks_mode_checks_physical_parameters_reached_by_an_edit_or_a_gradient_step():
    """A mass of -1 set with eqx.tree_at was used by realize unless check()
    was called. In checks mode realize now raises naming the parameter, also
    when a gradient step took it there inside jit."""
    model, state = pendulum()
    checked = model.with_checks()
    edits = [(lambda m: m.params.mass, checked.params.mass.at[2].set(-1.0),
              r"^body 2 \('body2', Pin\): model.params.mass is negative or not finite \(checks mode\)"),
             (lambda m: m.params.central_inertia, checked.params.central_inertia.at[1, 0, 0].set(5.0),
              r"^body 1 \('body1', Pin\): model.params.central_inertia is not a physical inertia"),
             (lambda m: m.params.com, checked.params.com.at[1, 2].set(jnp.nan),
              r"^body 1 \('body1', Pin\): model.params.com is not finite"),
             (lambda m: m.force_elements[0].stiffness, -2.0,
              r"^Force.MobilityLinearSpring \(model.force_elements\[0\]\): stiffness is negative or not finite")]
    for where, value, message in edits:
        edited = eqx.tree_at(where, checked, value)
        np.testing.assert_array_equal(eqx.tree_at(where, model, value).realize(state, sx.Stage.Acceleration).u,
                                      state.u)  # silent without checks
        with pytest.raises(sx.RuntimeCheckError, match=message):
            edited.realize(state, sx.Stage.Acceleration)

    def energy(mass):  # grows with the masses: a long descent step takes them below zero
        _, trajectory = sx.integrate.rollout(eqx.tree_at(lambda m: m.params.mass, checked, mass),
                                             state.with_u(jnp.ones(2)), 1e-3, 3)
        return trajectory.energy[-1]

    step = jax.jit(lambda mass: mass - 10.0 * jax.grad(energy)(mass))
    mass = step(checked.params.mass)
    assert mass[1] < 0 and mass[2] < 0
    with pytest.raises(sx.RuntimeCheckError,
                       match=r"^body 1 .*model.params.mass is negative .*\(at t = 0 s, in step 1\)$"):
        energy(mass)
    np.testing.assert_array_equal(checked.realize(state, sx.Stage.Acceleration).acceleration.udot,
                                  model.realize(state, sx.Stage.Acceleration).acceleration.udot)
