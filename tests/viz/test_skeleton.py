"""simbodyx.viz: the skeleton against the closed form of a double pendulum,
batched over a trajectory and in float32, and the matplotlib drawing and animation."""

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import simbodyx as sx  # noqa: E402
from conftest import link, new_system  # noqa: E402


def _double_pendulum():
    """Pins about z at Ground's origin and 1 m along the upper link's x."""
    system, matter, _ = new_system()
    upper = sx.MobilizedBody.Pin(matter.Ground(), link())
    lower = sx.MobilizedBody.Pin(upper, sx.Transform([1.0, 0, 0]), link(), sx.Transform())
    model, state = system.realize_topology()
    return model, state, lower


def test_skeleton_is_the_closed_form_and_batches():
    model, state, lower = _double_pendulum()
    a, b = 0.3, -0.7
    skeleton = sx.viz.skeleton(model, state.with_q(jnp.array([a, b])), [(lower, [1.0, 0, 0])])
    elbow = np.array([np.cos(a), np.sin(a), 0.0])
    hand = elbow + np.array([np.cos(a + b), np.sin(a + b), 0.0])
    zero = np.zeros(3)
    expected = [[zero, zero], [zero, elbow], [zero, zero], [elbow, elbow], [elbow, hand]]
    np.testing.assert_allclose(skeleton.segments, expected, atol=1e-12)
    np.testing.assert_allclose(skeleton.origins, [zero, zero, elbow], atol=1e-12)
    np.testing.assert_allclose(skeleton.axes[2][:, 0], hand - elbow, atol=1e-12)  # the lower link's x axis
    q = jnp.array([[0.0, 0.0], [a, b], [1.0, 2.0]])
    batch = sx.viz.skeleton_of_trajectory(model, state, q, [(lower, [1.0, 0, 0])])
    assert batch.segments.shape == (3, 5, 2, 3)
    np.testing.assert_allclose(batch.segments[1], skeleton.segments, atol=1e-12)
    single = model.astype("float32")
    narrow = sx.viz.skeleton(single, single.default_state().with_q(jnp.array([a, b], "float32")),
                             [(lower, [1.0, 0, 0])])
    assert narrow.segments.dtype == np.float32
    np.testing.assert_allclose(narrow.segments, expected, atol=1e-6)


def test_plot_and_animation_draw_every_frame():
    model, state, lower = _double_pendulum()
    ax = sx.viz.plot(model, state.with_q(jnp.array([0.3, -0.7])), [(lower, [1.0, 0, 0])])
    assert len(ax.lines) == 5 + 1 + 3 * 3  # segments, origins, a triad per body
    q = jnp.stack([jnp.linspace(0, 1, 4), jnp.zeros(4)], axis=1)
    ax = plt.figure().add_subplot(projection="3d")
    animation = sx.viz.animate(model, state, q, [(lower, [1.0, 0, 0])], ax=ax)
    html = animation.to_jshtml()
    assert html.count("frames[") >= 4
    last = np.asarray(ax.lines[4].get_data_3d())  # Bo -> station, at the last frame drawn
    np.testing.assert_allclose(last[:, 1], [np.cos(1.0) * 2, np.sin(1.0) * 2, 0.0], atol=1e-12)
