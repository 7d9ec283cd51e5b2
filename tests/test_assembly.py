"""The Assembler: a four-bar assembled from all-zero q (one guess and a
vmapped batch), QValue goals with the loop required, locked and restricted
q, Markers recovering a known pose, and the failure paths."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from conftest import link, new_system

C = sx.Constraint
TIGHT = 1e-10


@functools.lru_cache(maxsize=None)
def _four_bar():
    """Crank, coupler and rocker on z Pins closed by a Ball; the rocker's pin
    frame is turned 90 degrees so that q = 0 is an open, non-singular pose."""
    system, matter, _ = new_system()
    crank = sx.MobilizedBody.Pin(matter.Ground(), link())
    coupler = sx.MobilizedBody.Pin(crank, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    rocker = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(sx.Rotation.about_z(np.pi / 2), [1.5, 0, 0]), link(),
                                  sx.Transform())
    ball = C.Ball(coupler, [1.2, 0, 0], rocker, [1.1, 0, 0])
    model, state = system.realize_topology()
    return model, state, (crank, coupler, rocker), ball


def test_four_bar_assembles_from_zero_and_in_a_batch():
    model, state, _, ball = _four_bar()
    assert np.abs(ball.get_position_errors_as_vector(model.realize(state))).max() > 0.5  # far off
    assembler = sx.Assembler(model).set_error_tolerance(TIGHT)
    s, results = assembler.assemble(state)
    assert bool(results.succeeded) and float(results.error_norm) <= TIGHT
    assert np.abs(ball.get_position_errors_as_vector(s)).max() < 1e-9
    guesses = jnp.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 2.0, 0.5], [2.5, -0.3, -1.0]])

    @jax.jit
    @jax.vmap
    def run(q):
        s, r = assembler.assemble(state.with_q(q), throw=False)
        return r.status, jnp.max(jnp.abs(ball.get_position_errors_as_vector(s)))

    status, errors = run(guesses)
    np.testing.assert_array_equal(status, sx.ProjectStatus.Succeeded)
    assert float(errors.max()) < 1e-9


def test_goals_locks_and_ranges():
    model, state, (crank, coupler, rocker), ball = _four_bar()
    assembler = sx.Assembler(model).set_error_tolerance(TIGHT)
    # a QValue goal the loop can meet exactly: crank at 0.5
    s, r = assembler.adopt_assembly_goal(sx.QValue(crank, 0, 0.5)).assemble(state)
    assert s.q[0] == pytest.approx(0.5, abs=1e-8) and float(r.goal) < 1e-16
    assert np.abs(ball.get_position_errors_as_vector(s)).max() < 1e-9
    # a locked crank keeps its value; the others close the loop
    s, r = assembler.lock_mobilizer(crank).assemble(state.with_q([0.3, 0.0, 0.0]))
    assert float(s.q[0]) == 0.3 and bool(r.succeeded)
    # a restricted crank stops at its bound while the goal pulls further
    restricted = assembler.adopt_assembly_goal(sx.QValue(crank, 0, 0.5)).restrict_q(crank, 0, -1.0, 0.4)
    s, r = restricted.assemble(state)
    assert float(s.q[0]) == pytest.approx(0.4, abs=1e-12) and bool(r.succeeded)
    assert np.abs(ball.get_position_errors_as_vector(s)).max() < 1e-9


def test_undoing_settings_and_weighing_the_constraints():
    """unlock and unrestrict undo lock and restrict; the constraints weighed
    0 are ignored (the goal alone is met, by the crank alone) and weighed
    finitely are a goal beside the others (both met, the loop closable with
    the crank where the goal wants it); the max norm reports the largest
    error where the RMS norm reports their root mean square."""
    model, state, (crank, coupler, rocker), ball = _four_bar()
    assembler = sx.Assembler(model).set_error_tolerance(TIGHT)
    assert assembler.get_accuracy_in_use() == 1e-3 and assembler.set_accuracy(1e-5).get_accuracy_in_use() == 1e-5
    for undone in (assembler.lock_mobilizer(crank).unlock_mobilizer(crank),
                   assembler.lock_q(rocker, 0).lock_q(crank, 0).unlock_q(rocker, 0).unlock_q(crank, 0),
                   assembler.restrict_q(crank, 0, -1.0, 0.4).unrestrict_q(crank, 0)):
        assert undone.locked_q == frozenset() and undone.ranges == ()
    goal = assembler.adopt_assembly_goal(sx.QValue(crank, 0, 0.5))
    s, _ = goal.set_system_constraints_weight(0).assemble(state)  # only the crank moves
    np.testing.assert_allclose(s.q, [0.5, 0.0, 0.0], atol=1e-8)
    assert np.abs(ball.get_position_errors_as_vector(s)).max() > 0.4
    s, _ = goal.set_system_constraints_weight(1.0).assemble(state)
    assert float(s.q[0]) == pytest.approx(0.5, abs=1e-5)
    assert np.abs(ball.get_position_errors_as_vector(s)).max() < 1e-5
    unconverged = state.with_q([0.3, 0.2, -0.1])
    for rms, norm in ((True, lambda e: np.sqrt(np.mean(e ** 2))), (False, lambda e: np.abs(e).max())):
        s, r = assembler.set_use_rms_error_norm(rms).assemble(unconverged, throw=False)
        np.testing.assert_allclose(r.error_norm, norm(ball.get_position_errors_as_vector(s)), rtol=1e-12)


def test_markers_recover_a_known_pose():
    """A planar two-link arm without constraints: markers on the elbow and the
    hand, observed where a known pose puts them, pull the arm to that pose."""
    system, matter, _ = new_system()
    upper = sx.MobilizedBody.Pin(matter.Ground(), link())
    lower = sx.MobilizedBody.Pin(upper, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    model, state = system.realize_topology()
    markers = sx.Markers([("elbow", upper, [1.0, 0, 0]), ("hand", lower, [0.8, 0, 0], 2.0)])
    pose = jnp.array([0.7, -1.1])
    s = model.realize(state.with_q(pose))
    observed = np.stack([upper.find_station_location_in_ground(s, [1.0, 0, 0]),
                         lower.find_station_location_in_ground(s, [0.8, 0, 0])])
    assembler = sx.Assembler(model).set_accuracy(1e-9).adopt_assembly_goal(markers.move_all_observations(observed))
    assembled, r = assembler.assemble(state.with_q([0.2, 0.3]))
    np.testing.assert_allclose(assembled.q, pose, atol=1e-6)
    assert markers.get_marker_index("hand") == 1 and float(r.goal) < 1e-12
    # the hand required exactly, the elbow a goal it cannot meet: the hand is where it was seen
    moved = observed + np.array([[0.0, 0.3, 0.0], [0.0, 0.0, 0.0]])
    hand_only = sx.Markers([("hand", lower, [0.8, 0, 0])]).move_all_observations(moved[1:])
    elbow = sx.Markers([("elbow", upper, [1.0, 0, 0])]).move_all_observations(moved[:1])
    both = (sx.Assembler(model).set_error_tolerance(TIGHT).adopt_assembly_goal(hand_only, np.inf)
            .adopt_assembly_goal(elbow))
    s, r = both.assemble(state.with_q([0.2, 0.3]))
    assert bool(r.succeeded) and float(r.goal) > 1e-4
    np.testing.assert_allclose(lower.find_station_location_in_ground(s, [0.8, 0, 0]), moved[1], atol=1e-9)


def test_bad_input_and_failure_are_named():
    model, state, (crank, _, _), _ = _four_bar()
    assembler = sx.Assembler(model)
    with pytest.raises(ValueError, match="has 1 q; no q 3"):
        assembler.lock_q(crank, 3)
    with pytest.raises(ValueError, match="accuracy must be in"):
        assembler.set_accuracy(2.0)
    with pytest.raises(ValueError, match="has 1 q; no q 2"):  # replacing a condition checks it as adopting does
        assembler.adopt_assembly_goal(sx.QValue(crank, 0, 0.1)).update_condition(0, sx.QValue(crank, 2, 0.1))
    with pytest.raises(ValueError, match="condition refers to body 9"):  # and so does the constructor
        sx.Assembler(model, conditions=(sx.QValue(9, 0, 0.1),), weights=(1.0,))
    with pytest.raises(ValueError, match="marker 'a': station"):
        sx.Markers([("a", crank, [1.0, 2.0])])
    with pytest.raises(TypeError, match="expected Markers or QValue"):
        assembler.adopt_assembly_goal("crank")
    # the loop cannot close with the coupler and rocker locked far from closure
    stuck = assembler.lock_mobilizer(2).lock_q(3, 0).set_error_tolerance(TIGHT)
    with pytest.raises(Exception, match="Assembler.assemble failed"):
        stuck.assemble(state)
    _, r = stuck.assemble(state, throw=False)
    assert int(r.status) != sx.ProjectStatus.Succeeded
