"""sx.viz.view's page in a real headless Chromium (Debian's chromium, driven
by Playwright): it builds its scene with no console error, every shape of
every instance sits at offset x X_GB x X_BS (get_body_transform's, to
float32's 1e-5 m), the inline (iframe) form builds too, and stills and
videos show the robot. Skipped where no Chromium is installed, except in CI
(CI set), where that fails."""

import os

import imageio.v3 as iio
import imageio_ffmpeg
import jax
import numpy as np
import pytest

import simbodyx as sx
from simbodyx.envs.task import gymnasium_asset
from simbodyx.viz import browser

jax.config.update("jax_enable_x64", True)

try:
    browser.chromium()
except FileNotFoundError:
    if os.environ.get("CI"):
        raise
    pytest.skip("no Chromium to run the viewer in (apt install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def ant():
    system, matter, _, robot = sx.io.load_mjcf(gymnasium_asset("ant.xml"))
    model, state = system.realize_topology()
    rng = np.random.default_rng(0)
    q = np.asarray(state.q) + 0.3 * rng.standard_normal((2, 3, model.topology.nq))
    q[..., 3:7] /= np.linalg.norm(q[..., 3:7], axis=-1, keepdims=True)
    viewer = sx.viz.view(model, state, q, t=[0.0, 0.05, 0.1], robot=robot, frames=True,
                         stations=[(robot["torso"], [0, 0, 0.3])], contacts=True)
    return model, state, matter, q, viewer


def _orange(pixels):
    """The fraction of pixels in the Ant's tan (r > g > b, clearly warm)."""
    r, g, b = (pixels[..., k].astype(int) for k in range(3))
    return np.mean((r > g + 10) & (g > b + 10))


def test_page_builds_every_shape_where_the_model_puts_it(ant):
    model, state, matter, q, viewer = ant
    payload = viewer.payload
    with browser.opened(viewer) as (page, errors):
        found = page.evaluate("""(k) => {
            window.simbodyx.setFrame(k);
            return window.simbodyx.bodies.map((groups) => groups.map((g) => g.children
                .filter((o) => o.isMesh && o.userData.kind !== 'station')
                .map((o) => Array.from(o.matrixWorld.elements))));
        }""", 2)
        kinds = page.evaluate("""() => {
            const seen = {};
            window.simbodyx.scene.traverse((o) => {
                if (o.isMesh) seen[o.userData.kind] = (seen[o.userData.kind] || 0) + 1;
            });
            return seen;
        }""")
        arrows = page.evaluate("window.simbodyx.contacts.map((marks) => marks.length)")
        assert not errors, errors
    assert arrows == [payload["contacts"]["count"]] * 2 and arrows[0] > 0
    moving = [s for s in payload["shapes"] if s["body"] != 0]
    assert kinds == {"plane": 1, "sphere": 2 * sum(s["kind"] == "sphere" for s in moving),
                     "capsule": 2 * sum(s["kind"] == "capsule" for s in moving), "station": 2,
                     "contact": 2 * arrows[0], "arrow": 2 * arrows[0]}
    for i in range(2):
        realized = model.realize(state.with_q(q[i, 2]), sx.Stage.Position)
        for b in range(1, model.topology.num_bodies):
            X = matter.get_mobilized_body(b).get_body_transform(realized)
            X_GB = np.eye(4)
            X_GB[:3, :3], X_GB[:3, 3] = X.R, np.asarray(X.p) + payload["offsets"][i]
            expected = [X_GB @ np.reshape(s["X_BS"], (4, 4)) for s in moving if s["body"] == b]
            world = [np.reshape(m, (4, 4)).T for m in found[i][b]]  # three.js stores columns
            assert len(world) == len(expected)
            np.testing.assert_allclose(world, expected, atol=1e-5)


def test_play_runs_the_frames_and_the_slider_scrubs(ant):
    model, state = ant[0], ant[1]
    viewer = sx.viz.view(model, state, np.broadcast_to(np.asarray(state.q), (21, model.topology.nq)),
                         t=np.linspace(0.0, 2.0, 21), autoplay=False)
    with browser.opened(viewer) as (page, errors):
        frame = "Number(document.querySelector('#simbodyx-bar input').value)"
        assert page.evaluate(frame) == 0 and page.inner_text("#simbodyx-bar button") == "Play"
        page.click("#simbodyx-bar button")
        page.wait_for_function(f"{frame} >= 2", timeout=10_000)  # 0.2 s of the trajectory played
        page.click("#simbodyx-bar button")
        assert page.inner_text("#simbodyx-bar button") == "Play"
        page.fill("#simbodyx-bar input", "20")
        assert page.inner_text("#simbodyx-bar span") == "t = 2.000 s"
        assert not errors, errors


def test_the_inline_form_builds_in_an_iframe(ant):
    viewer = ant[4]
    inline = viewer._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "<script" not in inline  # all of it escaped into srcdoc
    with browser.opened(viewer) as (page, errors):
        page.set_content(f"<html><body>{inline}</body></html>")
        frame = page.frames[1]
        frame.wait_for_function("window.simbodyx && window.simbodyx.ready", timeout=120_000)
        assert frame.evaluate("window.simbodyx.frameCount") == 3
        assert not errors, errors


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # reading the mp4 back starts ffmpeg
def test_stills_and_videos_show_the_robot(ant, tmp_path):
    viewer = ant[4]
    still = sx.viz.image(viewer, tmp_path / "ant.png", frame=1, width=320, height=240)
    assert still.shape == (240, 320, 3) and iio.imread(tmp_path / "ant.png").shape[:2] == (240, 320)
    assert _orange(still) > 0.004 and still.std() > 10  # the robots, not a blank canvas
    gif = sx.viz.video(viewer, tmp_path / "ant.gif", fps=20, width=160, height=120)
    assert iio.imread(gif).shape == (3, 120, 160, 3)  # 0 to 0.1 s at 20 frames per second
    mp4 = sx.viz.video(viewer, tmp_path / "ant.mp4", fps=40, width=160, height=120)
    reader = imageio_ffmpeg.read_frames(str(mp4))
    meta = next(reader)
    assert meta["size"] == (160, 120) and sum(1 for _ in reader) == 5
    with pytest.raises(ValueError, match="write .mp4 or .gif"):
        sx.viz.video(viewer, tmp_path / "ant.avi")


def test_a_page_that_fails_raises_its_console_errors():
    broken = sx.viz.Viewer({"poses": "not base64!"})
    with pytest.raises(RuntimeError, match="did not build its scene: .*atob"):
        with browser.opened(broken):
            pass
