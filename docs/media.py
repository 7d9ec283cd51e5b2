"""Make the docs' viewer page and video: gymnasium's Ant dropped from 30 cm
above its file's pose, 1.5 s at its file's step, with its contact forces.

    python docs/media.py     # writes docs/viewer/ant_drop.html and docs/images/ant_drop.mp4

Needs simbodyx[viz,learn] and a Chromium (the video); the how-to page "View
and record" shows both.
"""

import pathlib

import jax

import simbodyx as sx
from simbodyx.envs.task import gymnasium_asset

DOCS = pathlib.Path(__file__).parent


def main():
    jax.config.update("jax_enable_x64", True)
    system, _, _, robot = sx.io.load_mjcf(gymnasium_asset("ant.xml"))
    model, state = system.realize_topology()
    start = state.with_q(state.q.at[2].add(0.3))
    _, trajectory = sx.integrate.rollout(model, start, robot.timestep, 150, method=robot.stepper)
    viewer = sx.viz.view(model, state, trajectory, robot=robot, contacts=True, title="gymnasium's Ant dropped")
    print(viewer.save(DOCS / "viewer" / "ant_drop.html"))
    print(sx.viz.video(viewer, DOCS / "images" / "ant_drop.mp4", fps=30))


if __name__ == "__main__":
    main()
