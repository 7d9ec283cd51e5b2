"""What the 3-D viewer costs: building a page, its size, a still and a video.

    python benchmarks/viewer.py

Prints the table and saves the rows as JSON (``benchmarks/results/viewer.json``;
``render.py`` puts them on the benchmark page).

For gymnasium's Ant (1 s at its file's 10 ms step; alone, with its contact
forces, and 16 side by side) and the Panda's URDF (its Collada meshes, 30
frames): seconds to build the page (``sx.viz.view``, poses computed,
compile included), its size, and seconds for a 640x480 still and for a
video at 30 frames per second in a headless Chromium (its start included).
"""

from __future__ import annotations

import pathlib
import tempfile
import time

import jax
import numpy as np


def viewer_rows(sx, frames: int = 100, video: bool = True):
    """Rows (dicts): per scene, build seconds, page MB, still and video seconds."""
    from simbodyx.envs.task import gymnasium_asset

    system, _, _, ant = sx.io.load_mjcf(gymnasium_asset("ant.xml"))
    model, state = system.realize_topology()
    start = state.with_q(state.q.at[2].add(0.3))
    _, trajectory = sx.integrate.rollout(model, start, ant.timestep, frames, method=ant.stepper)
    batch = jax.tree.map(lambda x: np.broadcast_to(x, (16, *x.shape)), trajectory)
    system, _, _, panda = sx.io.load_urdf(sx.io.example_robot_data("panda_description/urdf/panda.urdf"))
    arm, arm_state = system.realize_topology()
    sweep = np.linspace(0, 1, 30)[:, None] * np.full(arm.topology.nq, 0.5)
    scenes = {"ant": lambda: sx.viz.view(model, state, trajectory, robot=ant),
              "ant, contacts": lambda: sx.viz.view(model, state, trajectory, robot=ant, contacts=True),
              "ant x 16": lambda: sx.viz.view(model, state, batch, robot=ant),
              "panda meshes": lambda: sx.viz.view(arm, arm_state, sweep, robot=panda)}
    rows = []
    folder = pathlib.Path(tempfile.mkdtemp())
    for name, make in scenes.items():
        begin = time.perf_counter()
        viewer = make()
        build = time.perf_counter() - begin
        row = {"scene": name, "frames": len(viewer.payload["times"]), "build_s": build,
               "page_mb": len(viewer.html().encode()) / 1e6}
        if video:
            begin = time.perf_counter()
            sx.viz.image(viewer, folder / "still.png")
            row["still_s"] = time.perf_counter() - begin
            begin = time.perf_counter()
            sx.viz.video(viewer, folder / "movie.mp4")
            row["video_s"] = time.perf_counter() - begin
        rows.append(row)
    return rows


def render(rows) -> str:
    """The benchmark page's table."""
    lines = ["| scene | frames | build (s) | page (MB) | still (s) | video (s) |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['scene']} | {r['frames']} | {r['build_s']:.2f} | {r['page_mb']:.2f} | "
              f"{r.get('still_s', float('nan')):.2f} | {r.get('video_s', float('nan')):.2f} |" for r in rows]
    return "\n".join(lines)


def main():
    jax.config.update("jax_enable_x64", True)
    import simbodyx as sx

    rows = viewer_rows(sx)
    print(render(rows))
    import record

    record.save("viewer", rows)


if __name__ == "__main__":
    main()
