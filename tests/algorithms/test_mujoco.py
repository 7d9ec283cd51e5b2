"""Against MuJoCo (an independent C engine) with contacts and constraints
disabled, float64: body positions to 1e-12 and unconstrained accelerations
to 1e-9 relative, on random trees of every kind MuJoCo can represent (Pin,
Slider, Universal, Gimbal, Ball, and a Free base), on random frames and
states. The mapping is simbodyx.interop.mujoco."""

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
