"""A trajectory viewer as one self-contained HTML page: three.js (embedded,
MIT licence, in ``_three/``) draws each body's shapes and plays their
poses with play/pause, a time slider and a speed choice; the page needs no
server and fetches nothing, so a saved file opens anywhere and the same
page shows inline in Jupyter."""

from __future__ import annotations

import base64
import functools
import html
import json
import pathlib

import numpy as np

from simbodyx.viz import scene as scenes

_HERE = pathlib.Path(__file__).parent

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; font: 13px system-ui, sans-serif; }}
#simbodyx-root {{ position: relative; width: 100%; height: 100%; overflow: hidden; }}
#simbodyx-root canvas {{ display: block; }}
#simbodyx-bar {{ position: absolute; left: 8px; right: 8px; bottom: 8px; gap: 8px; align-items: center;
  padding: 4px 8px; background: rgba(255,255,255,0.8); border-radius: 4px; }}
#simbodyx-bar input {{ flex: 1; }}
</style></head><body>
<div id="simbodyx-root"><div id="simbodyx-bar" style="display: none">
<button type="button">Play</button><input type="range" min="0" max="0" value="0" aria-label="time">
<span>t = 0</span><select aria-label="speed"><option value="0.25">0.25x</option>
<option value="0.5">0.5x</option><option value="1" selected>1x</option><option value="2">2x</option></select>
</div></div>
<script type="text/plain" id="three-src">{three}</script>
<script type="text/plain" id="orbit-src">{orbit}</script>
<script type="application/json" id="simbodyx-scene">{scene}</script>
<script type="module">{viewer}</script>
</body></html>
"""


@functools.cache
def _vendored(name: str) -> str:
    source = (_HERE / name).read_text()
    assert "</script" not in source.lower(), name  # it sits inside a <script> element
    return source


def _b64(array, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype).tobytes()).decode()


def _trajectory(model, state, q, t):
    """(q (instances, frames, nq), u (instances, frames, nu) or None: the
    State's, times (frames,)) from what ``view`` takes."""
    if q is None:
        q = state.q
    u = None
    if hasattr(q, "q") and hasattr(q, "t"):  # a Trajectory, or a batch of them
        q, u, t = q.q, np.asarray(q.u), (q.t if t is None else t)
    q = np.asarray(q)
    nq = model.topology.nq
    if q.ndim not in (1, 2, 3) or q.shape[-1] != nq:
        raise ValueError(f"sx.viz.view: q must be (nq,), (frames, nq) or (instances, frames, nq) with nq = {nq}, "
                         f"got shape {q.shape}")
    q = q.reshape((1,) * (3 - q.ndim) + q.shape)
    u = None if u is None else u.reshape(q.shape[:2] + u.shape[-1:])
    frames = q.shape[1]
    if t is None:
        t = np.arange(frames) * (1 / 30)
    t = np.asarray(t, float)
    if t.ndim > 1:  # a batch of Trajectories shares its times
        t = t.reshape(-1, t.shape[-1])[0]
    if t.shape != (frames,) or not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
        raise ValueError(f"sx.viz.view: t must be ({frames},) finite and nondecreasing, got shape {t.shape}")
    return q, u, t


class Viewer:
    """A 3-D view of a model along a trajectory: ``html()`` the page,
    ``save(path)`` writes it, and a notebook shows it inline (an iframe).
    ``payload`` is the scene the page draws (JSON-ready)."""

    def __init__(self, payload: dict, height: int = 480, title: str = "simbodyx"):
        self.payload, self.height, self.title = payload, height, title

    def html(self) -> str:
        """The page: one HTML document with three.js and the scene inside."""
        return _PAGE.format(title=html.escape(self.title), three=_vendored("_three/three.module.min.js"),
                            orbit=_vendored("_three/OrbitControls.js"),
                            scene=json.dumps(self.payload).replace("</", "<\\/"), viewer=_vendored("viewer.js"))

    def save(self, path) -> pathlib.Path:
        """Write the page to ``path`` (.html); returns the path."""
        path = pathlib.Path(path)
        path.write_text(self.html())
        return path

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" style="width: 100%; '
                f'height: {self.height}px; border: 0"></iframe>')


def view(model, state, q=None, t=None, *, robot=None, collision: bool = False, package_dirs=(),
         layout: str = "grid", spacing: float | None = None, opacity: float | None = None,
         frames: bool = False, stations=(), visuals=(), skeleton: bool | None = None, contacts: bool = False,
         force_scale: float | None = None, autoplay: bool = True, height: int = 480,
         background: str = "#f4f6f8", title: str = "simbodyx") -> Viewer:
    """A 3-D viewer of ``model`` at ``state`` or along a trajectory.

    Args:
        model: The Model.
        state: A State of it (its q is drawn when ``q`` is None; its other
            fields fill in each frame).
        q: The configurations: (nq,), (frames, nq), (instances, frames, nq)
            for a batch, or a ``Trajectory`` (batched too), whose t it takes.
        t: The frames' times (frames,) in s; by default a Trajectory's, else
            30 frames per second. The page plays them at real time.
        robot: The ``Robot`` from ``sx.io.load_urdf`` or ``load_mjcf``:
            its file's shapes, colours and meshes are drawn. Without it, the
            Model's contact surfaces are.
        collision: A URDF's <collision> shapes instead of its <visual> ones.
        package_dirs: Folders holding the packages a URDF's
            ``package://`` meshes name (the URDF's own folder and its
            ancestors are searched too).
        layout: "grid" (each instance of a batch beside the others) or
            "overlay" (all at the model's own place, see-through).
        spacing: The grid's pitch (m); by default 1.5 times the size of
            the region the trajectories cover.
        opacity: The moving shapes' opacity (by default 1, or 0.35 when
            overlaid).
        frames: Draw each body's frame (x red, y green, z blue).
        stations: Points to mark: pairs (MobilizedBody or index, p_BS (3,)
            in B, m); the skeleton joins them to their body's origin.
        visuals: More shapes to draw (``sx.viz.Visual``s: a body index,
            a kind, sizes, a pose in the body, a colour).
        skeleton: Draw each body as a ball at its origin and lines joint
            to joint and to its stations (``sx.viz.plot``'s drawing); by
            default only for the bodies with no shape.
        contacts: Mark the touching contact points of the Model's contact
            force elements and soft constraints, with each one's force as
            an arrow (on the moving body), at each frame's q and u (u: a
            Trajectory's, else the State's).
        force_scale: The arrows' length per force (m/N); by default a
            large force (the 95th percentile of the trajectory's) is drawn
            half the mechanism's size.
        autoplay: Start playing when the page opens.
        height: The inline view's height in a notebook (pixels).
        background: The page's background colour (CSS).
        title: The page's title.

    Returns:
        A Viewer: ``save(path)`` writes the HTML page; a notebook cell
        ending in it shows it.

    Raises:
        ValueError: q or t have the wrong shape, or an unknown layout.
        FileNotFoundError: A URDF mesh is not found.
    """
    if layout not in ("grid", "overlay"):
        raise ValueError(f"sx.viz.view: layout must be 'grid' or 'overlay', got {layout!r}")
    q, u, t = _trajectory(model, state, q, t)
    poses = scenes.body_poses(model, state, q)  # (instances, frames, nb, 7)
    shapes = (scenes.robot_visuals(robot, collision, package_dirs=package_dirs) if robot is not None
              else [scenes.surface_visual(s) for s in scenes.contact_surfaces(model)])
    shapes += list(visuals)
    stations = [(int(getattr(b, "index", b)), np.asarray(p, float)) for b, p in stations]
    size = _size(model, poses, shapes, stations)
    positions = poses[..., 1:, :3].reshape(-1, 3)
    extent = (float(np.ptp(positions, axis=0).max()) if positions.size else 0.0) + 2 * size  # the motion's
    drawn = {v.body for v in shapes}
    if skeleton or (skeleton is None and len(drawn - {0}) < model.topology.num_bodies - 1):
        shapes += [v for v in scenes.bones(model, 0.015 * size, stations) if skeleton or v.body not in drawn]
    up = scenes.up_direction(model)
    offsets = _offsets(len(q), layout, spacing or 1.5 * extent, up)
    payload = {
        "bodies": int(poses.shape[2]), "instances": int(poses.shape[0]), "times": t.tolist(),
        "names": list(model.topology.names),
        "poses": _b64(poses, np.float32), "offsets": offsets.tolist(), "up": up.tolist(),
        "opacity": float(opacity if opacity is not None else (0.35 if layout == "overlay" and len(q) > 1 else 1.0)),
        "shapes": [_shape(v, up) for v in shapes], "frames": bool(frames), "triad": 0.3 * size,
        "reach": _reach(poses.shape[2], shapes, stations),
        "stations": [[b, p.tolist()] for b, p in stations],
        "marker": 0.035 * size, "extent": 20 * extent + float(np.abs(offsets).max(initial=0)) * 2,
        "grid": _grid_pitch(size), "autoplay": bool(autoplay), "background": background,
        "contacts": _contacts(model, state, q, u, force_scale, size) if contacts else None,
    }
    return Viewer(payload, height, title)


def _contacts(model, state, q, u, force_scale, size) -> dict:
    """The page's contact arrows: points (instances, frames, k, 3) and
    forces scaled to metres (zero where a point is apart: not drawn)."""
    if u is None:
        u = np.broadcast_to(np.asarray(state.u), q.shape[:2] + state.u.shape)
    points, forces = scenes.contact_points(model, state, q, u)
    sizes = np.linalg.norm(forces, axis=-1)
    typical = float(np.percentile(sizes[sizes > 0], 95)) if np.any(sizes > 0) else 0.0  # not an impact's spike
    scale = force_scale if force_scale is not None else (0.5 * size / typical if typical > 0 else 0.0)
    return {"count": int(points.shape[2]), "points": _b64(points, np.float32),
            "forces": _b64(forces * scale, np.float32), "radius": 0.02 * size}


def _shape(v: scenes.Visual, up) -> dict:
    """A Visual as the page takes it; ``shared``: a floor (a plane on Ground
    facing up), drawn once under every instance of a grid."""
    X = np.asarray(v.X_BS, float)
    out = {"body": v.body, "kind": v.kind, "size": [float(s) for s in v.size], "rgba": [float(c) for c in v.rgba],
           "X_BS": X.ravel().tolist(), "name": v.name,
           "shared": bool(v.body == 0 and v.kind == "plane" and abs(X[:3, 2] @ up) > 1 - 1e-9)}
    if v.mesh is not None:
        out["vertices"], out["faces"] = _b64(v.mesh[0], np.float32), _b64(v.mesh[1], np.uint32)
    return out


def _offsets(count: int, layout: str, spacing: float, up) -> np.ndarray:
    """Each instance's place (m, in Ground): a square grid across ``up``."""
    if layout == "overlay" or count == 1:
        return np.zeros((count, 3))
    a = np.cross(up, [1.0, 0, 0] if abs(up[0]) < 0.9 else [0, 1.0, 0])
    a /= np.linalg.norm(a)
    b = np.cross(up, a)
    side = int(np.ceil(np.sqrt(count)))
    k = np.arange(count)
    row, column = k // side - (side - 1) / 2, k % side - (side - 1) / 2
    return spacing * (column[:, None] * a + row[:, None] * b)


def _reach(count: int, shapes, stations) -> list:
    """How far each body's drawing reaches from its origin (m), for the
    camera's framing (a floor excluded)."""
    reach = np.zeros(count)
    for v in shapes:
        if v.kind != "plane":
            extent = (np.abs(v.mesh[0]).max() * np.sqrt(3) if v.mesh is not None and len(v.mesh[0]) else
                      np.linalg.norm(v.size) if v.size else 0.0)
            reach[v.body] = max(reach[v.body], np.linalg.norm(np.asarray(v.X_BS)[:3, 3]) + extent)
    for b, p in stations:
        reach[b] = max(reach[b], np.linalg.norm(p))
    return reach.tolist()


def _size(model, poses, shapes, stations) -> float:
    """The mechanism's own size (m), for the skeleton's thickness, markers
    and the grid: the spread of its bodies at the first frame, its joints'
    offsets, its stations' and shapes' reach."""
    params = model.params
    first = poses[0, 0, :, :3]
    lengths = [float(np.ptp(first, axis=0).max()), *np.linalg.norm(np.asarray(params.X_BM.p), axis=-1),
               *np.linalg.norm(np.asarray(params.X_PF.p), axis=-1), *(float(np.linalg.norm(p)) for _, p in stations),
               *(2 * max(v.size, default=0.0) for v in shapes if v.kind != "plane")]
    return max(lengths + [0.1])


def _grid_pitch(size: float) -> float:
    """A floor grid's pitch (m): the power of ten at or below the mechanism's size."""
    return float(10.0 ** np.floor(np.log10(size)))
