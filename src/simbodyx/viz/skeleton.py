"""Pictures of a mechanism: its skeleton computed from the Model, drawn and
animated with matplotlib (an optional dependency: ``pip install
simbodyx[viz]``; imported only when drawing).

Each body is drawn as lines from its parent's origin to its inboard joint
frame F and from its outboard frame M to its own origin Bo, with a small
frame triad (x red, y green, z blue) at Bo; ``stations`` adds lines from a
body's origin to points fixed on it (a link's far end, a constraint's
attachment point).

    sx.viz.plot(model, state)                               # a 3-D Axes
    animation = sx.viz.animate(model, state, trajectory.q)  # matplotlib FuncAnimation
    IPython.display.HTML(animation.to_jshtml())             # in a notebook
    animation.save("mechanism.gif", writer="pillow")        # or a file
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from simbodyx.spatial.vectors import mat_vec
from simbodyx.stage import Stage

_AXIS_COLORS = ("tab:red", "tab:green", "tab:blue")


class Skeleton(NamedTuple):
    """A mechanism's drawing at one State, in Ground (m); batched along a
    leading axis when computed for a trajectory."""

    #: (n, 2, 3) line segments: parent origin to F, M to Bo, Bo to each station
    segments: jnp.ndarray
    #: (nb, 3) body origins, Ground's first
    origins: jnp.ndarray
    #: (nb, 3, 3) R_GB: column k is the body's k-th axis in Ground
    axes: jnp.ndarray


def skeleton(model, state, stations=()) -> Skeleton:
    """The Skeleton of ``state`` (realized to Position here). ``stations``:
    pairs (MobilizedBody or its index, p_BS (3,) in B) drawn as lines from Bo. Pure:
    ``jax.vmap`` over States (or :func:`skeleton_of_trajectory`) draws a
    whole trajectory at once."""
    X_GB = model.realize(state, Stage.Position).position.X_GB
    parent = np.asarray(model.topology.parent[1:])
    params = model.params
    F = X_GB.p[parent] + mat_vec(X_GB.R[parent], params.X_PF.p[1:])  # F's origin, in G
    M = X_GB.p[1:] + mat_vec(X_GB.R[1:], params.X_BM.p[1:])  # M's origin, in G
    segments = [jnp.stack([X_GB.p[parent], F], axis=1), jnp.stack([M, X_GB.p[1:]], axis=1)]
    for body, p_BS in stations:
        b = operator.index(body)  # a MobilizedBody or an index
        segments.append(jnp.stack([X_GB.p[b], X_GB.p[b] + X_GB.R[b] @ jnp.asarray(p_BS, X_GB.p.dtype)])[None])
    return Skeleton(jnp.concatenate(segments), X_GB.p, X_GB.R)


def skeleton_of_trajectory(model, state, q, stations=()) -> Skeleton:
    """Skeletons (batched) of ``state`` at each row of q (n, nq), computed at once."""
    return jax.jit(jax.vmap(lambda qk: skeleton(model, state.with_q(qk), stations)))(jnp.asarray(q))


def _matplotlib(caller: str):
    """matplotlib, or an ImportError naming the extra that installs it."""
    try:
        import matplotlib.animation
        import matplotlib.pyplot
    except ImportError:
        raise ImportError(f"sx.viz.{caller} draws with matplotlib: pip install simbodyx[viz]") from None
    return matplotlib


def _new_axes(ax, caller):
    matplotlib = _matplotlib(caller)
    if ax is not None:
        return ax
    return matplotlib.pyplot.figure(figsize=(5, 5)).add_subplot(projection="3d")


def _frame_limits(ax, points):
    """Equal scales on the three axes around ``points`` (k, 3)."""
    low, high = points.min(axis=0), points.max(axis=0)
    center, half = (low + high) / 2, max(float((high - low).max()) / 2, 1e-3) * 1.1
    ax.set_xlim(center[0] - half, center[0] + half)
    ax.set_ylim(center[1] - half, center[1] + half)
    ax.set_zlim(center[2] - half, center[2] + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    return 0.08 * 2 * half  # a triad's length


class _Artists:
    """The lines of one Skeleton on an Axes3D, updated frame by frame."""

    def __init__(self, ax, frame: Skeleton, triad: float, color):
        self.ax, self.triad = ax, triad
        self.links = [ax.plot(*s.T, color=color, lw=2.5, solid_capstyle="round")[0] for s in frame.segments]
        self.joints = ax.plot(*frame.origins.T, "o", color="black", ms=3)[0]
        self.axes = [[ax.plot([], [], [], color=c, lw=1)[0] for c in _AXIS_COLORS] for _ in frame.origins]
        self.update(frame)

    def update(self, frame: Skeleton):
        for line, s in zip(self.links, frame.segments):
            line.set_data_3d(*s.T)
        self.joints.set_data_3d(*frame.origins.T)
        for lines, origin, R in zip(self.axes, frame.origins, frame.axes):
            for k, line in enumerate(lines):
                line.set_data_3d(*np.stack([origin, origin + self.triad * R[:, k]]).T)
        return self.links + [self.joints] + [line for lines in self.axes for line in lines]


def plot(model, state, stations=(), ax=None, color="tab:gray"):
    """Draw the mechanism's skeleton at a State with matplotlib.

    Args:
        model: The Model.
        state: The State drawn (realized to Position here).
        stations: Points drawn as lines from their body's origin: pairs
            (MobilizedBody or its index, p_BS (3,) in B, m).
        ax: A matplotlib 3-D Axes; None: a new one.
        color: The links' colour (matplotlib's).

    Returns:
        The Axes.

    Raises:
        ImportError: matplotlib is not installed (``simbodyx[viz]``).
    """
    frame = Skeleton(*(np.asarray(a) for a in skeleton(model, state, stations)))
    ax = _new_axes(ax, "plot")
    triad = _frame_limits(ax, frame.segments.reshape(-1, 3))
    _Artists(ax, frame, triad, color)
    return ax


def animate(model, state, q, stations=(), interval_ms: float = 40.0, ax=None, color="tab:gray"):
    """Animate the mechanism's skeleton through a trajectory with matplotlib.

    Show it in a notebook with ``IPython.display.HTML(a.to_jshtml())`` or
    save it with ``a.save("name.gif", writer="pillow")``; ``sx.viz.view``
    draws the bodies' shapes in 3-D and ``sx.viz.video`` writes mp4.

    Args:
        model: The Model.
        state: A State of it, whose other fields fill in each frame.
        q: (n, nq) configurations, one frame each (a Trajectory's q).
        stations: Points drawn as lines from their body's origin: pairs
            (MobilizedBody or its index, p_BS (3,) in B, m).
        interval_ms: Milliseconds between frames.
        ax: A matplotlib 3-D Axes; None: a new one.
        color: The links' colour (matplotlib's).

    Returns:
        A matplotlib ``FuncAnimation``.

    Raises:
        ImportError: matplotlib is not installed (``simbodyx[viz]``).
    """
    frames = Skeleton(*(np.asarray(a) for a in skeleton_of_trajectory(model, state, q, stations)))
    ax = _new_axes(ax, "animate")
    triad = _frame_limits(ax, frames.segments.reshape(-1, 3))
    artists = _Artists(ax, Skeleton(*(a[0] for a in frames)), triad, color)
    count = frames.origins.shape[0]
    animation = _matplotlib("animate").animation
    return animation.FuncAnimation(ax.figure, lambda k: artists.update(Skeleton(*(a[k] for a in frames))),
                                   frames=count, interval=interval_ms, blit=False)
