"""Against MuJoCo (an independent C engine) with contacts and constraints
disabled, float64: body positions to 1e-12 and unconstrained accelerations
to 1e-9 relative, on random trees of every kind MuJoCo can represent (Pin,
Slider, Universal, Gimbal, Ball, and a Free base), on random frames and
states; Ball and Weld constraints as equalities between sites placed exactly.
The mapping is simbodyx.interop.mujoco."""

import numpy as np
import pytest
from conftest import random_state, with_forces

import simbodyx as sx

mujoco = pytest.importorskip("mujoco")
from simbodyx.interop.mujoco import configuration, to_mjcf, velocity_map  # noqa: E402

KINDS = ("Pin", "Slider", "Universal", "Gimbal", "Ball")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accelerations_match_mujoco(seed):
    kinds = ("Free",) + tuple(str(k) for k in np.random.default_rng(seed).choice(KINDS, size=11))
    system, matter, _, bodies = with_forces(kinds, seed=seed)
    model, _ = system.realize_topology()
    state = model.matter.normalize_quaternions(random_state(model, seed=seed, scale=0.5))
    state = model.realize(state, sx.Stage.Acceleration)

    xml, order = to_mjcf(matter)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = configuration(matter, state, order)
    mujoco.mj_forward(m, d)

    for k, b in enumerate(order):
        X_GM = bodies[b].get_body_transform(state) @ bodies[b].get_default_outboard_frame()
        np.testing.assert_allclose(d.xpos[k + 1], X_GM.p, atol=1e-12)
    a = velocity_map(matter, state, order) @ np.asarray(state.acceleration.udot)
    np.testing.assert_allclose(d.qacc, a, rtol=1e-9, atol=1e-9 * np.abs(a).max())


def test_unsupported_mobilizers_are_named():
    system, matter, _, bodies = with_forces(("Pin", "Free"), seed=0, branching=False)
    with pytest.raises(ValueError, match="free joints only on bodies hanging from Ground"):
        to_mjcf(matter)
    system, matter, _, bodies = with_forces(("Screw",), seed=0)
    with pytest.raises(ValueError, match="Screw.*no MuJoCo joint"):
        to_mjcf(matter)


def test_ball_and_weld_constraints_become_equalities_between_sites():
    """With ``constraints=True`` each Ball or Weld becomes a connect or weld
    equality between two sites at exactly its stations or frames (any State);
    other constraints are named as unsupported."""
    system, matter, _, bodies = with_forces(("Pin", "Ball", "Gimbal"), seed=3)
    C = sx.Constraint
    stations = ([0.1, 0.2, 0], [0, -0.1, 0.3])
    frames = (sx.Transform(sx.Rotation.about_x(0.4), [0, 1, 0]), sx.Transform(sx.Rotation.about_z(-0.2), [0.2, 0, 0]))
    C.Ball(bodies[1], stations[0], bodies[3], stations[1])
    C.Weld(matter.Ground(), frames[0], bodies[2], frames[1])
    model, _ = system.realize_topology()
    state = model.realize(model.matter.normalize_quaternions(random_state(model, seed=3)), sx.Stage.Position)

    xml, order = to_mjcf(matter, constraints=True)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:] = configuration(matter, state, order)[0]
    mujoco.mj_kinematics(m, d)
    assert m.neq == 2 and list(m.eq_type) == [mujoco.mjtEq.mjEQ_CONNECT, mujoco.mjtEq.mjEQ_WELD]
    site = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_SITE, i): i for i in range(m.nsite)}
    for k, (body, station) in enumerate(zip((bodies[1], bodies[3]), stations)):
        np.testing.assert_allclose(d.site_xpos[site[f"constraint0_{k + 1}"]],
                                   body.find_station_location_in_ground(state, station), atol=1e-12)
    for k, (body, X_BF) in enumerate(zip((matter.Ground(), bodies[2]), frames)):
        X_GF = body.get_body_transform(state) @ X_BF
        i = site[f"constraint1_{k + 1}"]
        np.testing.assert_allclose(d.site_xpos[i], X_GF.p, atol=1e-12)
        np.testing.assert_allclose(d.site_xmat[i].reshape(3, 3), X_GF.R, atol=1e-12)

    system, matter, _, bodies = with_forces(("Pin", "Pin"), seed=0)
    C.Rod(bodies[1], bodies[2], 1.0)
    with pytest.raises(ValueError, match="Rod.*no MuJoCo equality"):
        to_mjcf(matter, constraints=True)
