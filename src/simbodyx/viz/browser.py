"""Stills and movies of a Viewer, rendered by a headless Chromium (driven by
Playwright; the browser is Debian's ``chromium`` package or any Chrome
named by ``SIMBODYX_CHROMIUM``), so they work on a machine with no display
and no GPU (WebGL in software)."""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import io
import os
import pathlib
import shutil
import tempfile
import time
import warnings

import numpy as np

#: how Chromium is started: headless, software WebGL, no network of its own
CHROMIUM_FLAGS = ("--no-sandbox", "--disable-gpu", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--no-first-run", "--disable-quic")
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str:
    """The Chromium executable: ``$SIMBODYX_CHROMIUM``, else the first of
    chromium, chromium-browser, google-chrome on the PATH."""
    named = os.environ.get("SIMBODYX_CHROMIUM")
    found = named or next((shutil.which(b) for b in _BROWSERS if shutil.which(b)), None)
    if not found or not pathlib.Path(found).exists():
        raise FileNotFoundError("sx.viz renders images and videos in a headless Chromium and found none: install "
                                "one (Debian: apt install chromium) or set SIMBODYX_CHROMIUM to its path")
    return found


@contextlib.contextmanager
def _exec_only():
    """Silence JAX's warning on fork around a subprocess's start: the child
    (Playwright's driver, ffmpeg) execs at once and shares no JAX thread."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        yield


@contextlib.contextmanager
def opened(viewer, width: int = 640, height: int = 480, timeout: float = 120.0):
    """The viewer's page open in a headless Chromium, its scene built within
    ``timeout`` s: yields (Playwright page, the list its console errors go
    to). Raises RuntimeError with the page's errors when it fails."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ImportError("sx.viz drives Chromium with Playwright: pip install simbodyx[viz]") from None
    executable = chromium()
    with _exec_only():
        driver = sync_playwright().start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = viewer.save(pathlib.Path(folder) / "view.html")
            browser = driver.chromium.launch(executable_path=executable, args=list(CHROMIUM_FLAGS))
            page = browser.new_page(viewport={"width": width, "height": height})
            errors = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(path.as_uri())
            deadline = time.monotonic() + timeout
            while not errors and not page.evaluate("Boolean(window.simbodyx && window.simbodyx.ready)"):
                if time.monotonic() > deadline:
                    errors.append(f"no scene after {timeout} s")
                page.wait_for_timeout(20)
            if errors:
                raise RuntimeError(f"sx.viz: the page did not build its scene: {errors}")
            yield page, errors
    finally:
        driver.stop()


def _frame(page, k: int) -> np.ndarray:
    import imageio.v3 as iio

    url = page.evaluate(f"window.simbodyx.setFrame({k}), window.simbodyx.renderer.domElement.toDataURL('image/png')")
    return iio.imread(io.BytesIO(base64.b64decode(url.split(",", 1)[1])), extension=".png")[..., :3]


def _off_the_event_loop(work):
    """Run ``work()`` in a thread: Playwright's sync API refuses to run on a
    thread with an asyncio loop (a notebook's)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


def image(viewer, path=None, frame: int = 0, width: int = 640, height: int = 480) -> np.ndarray:
    """A still of a viewer, rendered in a headless Chromium.

    Args:
        viewer: A ``sx.viz.view`` Viewer.
        path: Where to write it (.png, .jpg); None: not written.
        frame: The trajectory's frame (index) to show.
        width: The image's width (pixels).
        height: The image's height (pixels).

    Returns:
        The pixels, (height, width, 3) uint8.

    Raises:
        FileNotFoundError: No Chromium is installed.
        ImportError: Playwright is not installed (``simbodyx[viz]``).
        RuntimeError: The page failed to build its scene (its console errors).
    """
    def work():
        with opened(viewer, width, height) as (page, _):
            return _frame(page, frame)

    pixels = _off_the_event_loop(work)
    if path is not None:
        import imageio.v3 as iio

        iio.imwrite(path, pixels)
    return pixels


def video(viewer, path, fps: float = 30.0, speed: float = 1.0, width: int = 640, height: int = 480) -> pathlib.Path:
    """A movie of a viewer's trajectory, rendered in a headless Chromium.

    Args:
        viewer: A ``sx.viz.view`` Viewer.
        path: The file to write: .mp4 (H.264, through imageio-ffmpeg) or .gif.
        fps: Frames per second of the movie; each shows the trajectory's
            latest frame at or before its time.
        speed: Simulated seconds per second of movie (1: real time).
        width: The movie's width (pixels).
        height: The movie's height (pixels).

    Returns:
        The path written.

    Raises:
        ValueError: Another file type, or fps or speed not positive.
        FileNotFoundError: No Chromium is installed.
        ImportError: Playwright or imageio-ffmpeg is not installed (``simbodyx[viz]``).
    """
    path = pathlib.Path(path)
    if path.suffix.lower() not in (".mp4", ".gif"):
        raise ValueError(f"sx.viz.video: {path.name}: write .mp4 or .gif")
    if fps <= 0 or speed <= 0:
        raise ValueError(f"sx.viz.video: fps and speed must be positive, got {fps} and {speed}")
    if path.suffix.lower() == ".mp4":
        try:
            import imageio_ffmpeg
        except ImportError:
            raise ImportError("sx.viz.video writes mp4 with imageio-ffmpeg: pip install simbodyx[viz]") from None
    times = np.asarray(viewer.payload["times"]) - viewer.payload["times"][0]
    wanted = np.arange(0.0, times[-1] / speed + 1e-9, 1 / fps) * speed
    indices = np.searchsorted(times, wanted + 1e-9, side="right") - 1

    def work():
        with opened(viewer, width, height) as (page, _):
            return [_frame(page, int(k)) for k in indices]

    frames = _off_the_event_loop(work)
    if path.suffix.lower() == ".mp4":
        writer = imageio_ffmpeg.write_frames(str(path), (frames[0].shape[1], frames[0].shape[0]), fps=fps,
                                             codec="libx264", pix_fmt_out="yuv420p", macro_block_size=8)
        with _exec_only():
            writer.send(None)
        for f in frames:
            writer.send(np.ascontiguousarray(f))
        writer.close()
    else:
        import imageio.v3 as iio

        iio.imwrite(path, np.stack(frames), extension=".gif", duration=1000 / fps, loop=0)
    return path
