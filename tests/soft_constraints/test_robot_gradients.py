"""Gradients through MuJoCo's constraint model at a robot's own time step
(``simbodyx.soft_constraints``): a push-off of gymnasium's Ant, every foot
on the floor, against central differences.

The derivative of each solve is the implicit one, exact while the set of
pushing, sticking and sliding rows holds; a finite difference whose step
moves a contact across that boundary (a foot leaving the floor, a row
starting to slide) sees the jump, which the derivative does not: the
central differences here use steps small enough to keep every row in its
piece."""

import pathlib
import warnings

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

import simbodyx as sx

ASSETS = pathlib.Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"


def test_an_ant_push_off_gradient_matches_central_differences():
    """The Ant settled on the floor for 1 s, then 0.5 s (50 RK4 steps at the
    file's 10 ms) under constant motor controls: d(torso x)/d(controls) by
    reverse mode equals central differences of step 1e-7 within 1e-5 of
    its size (a step of 1e-6 moves a contact row across its boundary)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # everything in the file is modelled
        system, _, _, robot = sx.io.load_mjcf(ASSETS / "ant.xml")
    model, state = system.realize_topology()
    h, steps = robot.timestep, 50
    settled, _ = sx.integrate.rollout(model, state, h, 100, method=robot.stepper, energy=False)
    torso = robot["torso"]

    def forward(controls):
        final, _ = sx.integrate.rollout(model, settled, h, method=robot.stepper,
                                        actuator_controls=jnp.tile(controls, (steps, 1)), energy=False)
        return torso.get_body_transform(model.realize(final, sx.Stage.Position)).p[0]

    controls = jnp.asarray(np.random.default_rng(0).uniform(-0.5, 0.5, len(robot.actuators)))
    grad = np.asarray(jax.jit(jax.grad(forward))(controls))
    f, eps = jax.jit(forward), 1e-7
    central = np.array([(f(controls.at[i].add(eps)) - f(controls.at[i].add(-eps))) / (2 * eps)
                        for i in range(controls.shape[0])])
    assert np.all(np.isfinite(grad)) and np.abs(grad).max() > 0.1
    np.testing.assert_allclose(grad, central, rtol=0, atol=1e-5 * np.abs(central).max())
