"""Pictures of a mechanism.

``view`` builds a 3-D viewer (three.js, embedded): each body's shapes from a
robot's file or the Model's contact surfaces, a trajectory played at real
time, a batch side by side or overlaid. It shows inline in Jupyter and
saves as one HTML file that needs no server. ``image`` and ``video`` take
stills and mp4/gif movies of it in a headless Chromium. ``plot`` and
``animate`` draw the skeleton with matplotlib.

    viewer = sx.viz.view(model, state, trajectory, robot=robot)
    viewer.save("ant.html")                    # or end a notebook cell with it
    sx.viz.video(viewer, "ant.mp4")            # headless, needs Chromium
    sx.viz.plot(model, state)                  # a matplotlib 3-D Axes

The optional dependencies are in ``pip install simbodyx[viz]``.
"""

from simbodyx.viz.browser import image, video
from simbodyx.viz.page import Viewer, view
from simbodyx.viz.scene import Visual, body_poses, robot_visuals
from simbodyx.viz.skeleton import Skeleton, animate, plot, skeleton, skeleton_of_trajectory

__all__ = ["Skeleton", "Viewer", "Visual", "animate", "body_poses", "image", "plot", "robot_visuals", "skeleton",
           "skeleton_of_trajectory", "video", "view"]
