"""simbodyx.parallel: a batch sharded over CPU devices computes what the
unsharded batch does; clear errors for what cannot be sharded."""

import functools
import pathlib
import socket
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx
from simbodyx._xla.scalarize import CHOICE

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pendulum_states(n):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0, -9.81, 0])
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02)))
    link = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), body, sx.Transform())
    sx.MobilizedBody.Pin(link, sx.Transform([0, -1, 0]), body, sx.Transform())
    model, state = system.realize_topology()
    rng = np.random.default_rng(0)
    q = jnp.asarray(np.asarray(state.q) + 0.3 * rng.normal(size=(n, model.topology.nq)))
    u = jnp.asarray(rng.normal(size=(n, model.topology.nu)))
    states = jax.vmap(lambda q, u: model.matter.normalize_quaternions(state.with_q(q).with_u(u)))(q, u)
    return model, states


def _controls_gradient(model):
    """(controls, state) -> d |q(end)|^2 / d controls of a 4-step rollout."""

    def loss(controls, state):
        final, _ = sx.integrate.rollout(model, state, 0.01, controls=controls, energy=False)
        return jnp.sum(final.q**2)

    return jax.grad(loss)


def test_one_device_is_a_placement_that_changes_nothing():
    """Also for a gradient through a rollout: the placement's one-device mesh
    in the primals' types once made forward dynamics' derivative rule fail,
    and its reshard annotations once sent the rollout off the scalar path."""
    model, states = _pendulum_states(4)
    sharded = sx.parallel.shard_batch(states)
    for a, b in zip(jax.tree.leaves(states), jax.tree.leaves(sharded)):
        np.testing.assert_array_equal(a, b)
    grad = jax.jit(jax.vmap(_controls_gradient(model), (None, 0)))
    controls = jnp.ones((4, model.topology.nu))
    np.testing.assert_array_equal(grad(controls, sharded), grad(controls, states))
    assert model.uses_scalar_path() and CHOICE.decisions[CHOICE.key(model)].scalar
    assert sx.parallel.use_cpu_cores(len(jax.devices("cpu"))) == len(jax.devices("cpu"))


def _functions(model):
    """Forward dynamics with a shared (unbatched) mobility force; and for the
    gradients, the squared distance of a shared station p of the last body
    from the origin: its per-state gradient with respect to (q, p), and the
    gradient with respect to p of the sum over a batch mapped by any
    vmap-like ``batch_map``."""
    zero = jnp.zeros((model.topology.num_bodies, 6))

    def fd(s, tau):
        return model.matter.calc_acceleration_ignoring_constraints(model.realize(s, sx.Stage.Velocity), tau, zero)[0]

    def reach(s, p):
        X = model.realize(s, sx.Stage.Position).position.X_GB
        return jnp.sum((X.p[-1] + X.R[-1] @ p) ** 2)

    def per_state_grad(s, p):
        return jax.grad(lambda q, p: reach(s.with_q(q), p), (0, 1))(s.q, p)

    def outer_grad(batch_map, states, p):
        return jax.grad(lambda p: jnp.sum(batch_map(reach, (0, None))(states, p)))(p)

    return fd, per_state_grad, outer_grad


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_batched_equals_vmap(chunk_size):
    """One vmap, and chunks of 3 for 8 states (two chunks and a remainder):
    under jit with gradients inside and through the map, and eagerly."""
    model, states = _pendulum_states(8)
    tau = jnp.asarray(np.random.default_rng(3).normal(size=model.topology.nu))
    p = jnp.asarray([0.1, -1.0, 0.2])
    fd, per_state_grad, outer_grad = _functions(model)
    ours = functools.partial(sx.parallel.batched, chunk_size=chunk_size)

    def close(got, expected):
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * float(jnp.abs(b).max()))

    close(jax.jit(ours(fd, (0, None)))(states, tau), jax.vmap(fd, (0, None))(states, tau))
    close(ours(fd, (0, None))(states, tau), jax.vmap(fd, (0, None))(states, tau))
    close(jax.jit(ours(per_state_grad, (0, None)))(states, p), jax.vmap(per_state_grad, (0, None))(states, p))
    close(jax.jit(lambda p: outer_grad(ours, states, p))(p), outer_grad(jax.vmap, states, p))


def test_batched_errors():
    model, states = _pendulum_states(4)
    fd = _functions(model)[0]
    tau = jnp.zeros(model.topology.nu)
    with pytest.raises(ValueError, match="in_axes must be 0 or a tuple"):
        sx.parallel.batched(fd, (0, 1))(states, tau)
    with pytest.raises(ValueError, match="in_axes must be 0 or a tuple"):
        sx.parallel.batched(fd, (0,))(states, tau)
    with pytest.raises(ValueError, match="chunk_size must be a positive integer or None, got 0"):
        sx.parallel.batched(fd, chunk_size=0)
    with pytest.raises(ValueError, match="no argument is batched"):
        sx.parallel.batched(fd, (None, None))(states, tau)
    disagree = r"batched: leaves disagree on the batch size \(\['arg0'\]\.t: 4, \['arg1'\]: 2\)"
    with pytest.raises(ValueError, match=disagree):
        sx.parallel.batched(fd)(states, jnp.zeros((2, model.topology.nu)))
    with pytest.raises(ValueError, match=r"batched: leaf \['arg1'\] is a scalar"):
        sx.parallel.batched(fd)(states, jnp.float64(0.0))


def test_errors_name_the_problem():
    model, states = _pendulum_states(4)
    with pytest.raises(ValueError, match=r"\.t is a scalar"):
        sx.parallel.shard_batch(jax.tree.map(lambda x: x[0], states))
    with pytest.raises(ValueError, match=r"disagree on the batch size \(\[0\]: 4, \[1\]: 3\)"):
        sx.parallel.shard_batch((jnp.zeros((4, 2)), jnp.zeros((3, 2))))
    with pytest.raises(ValueError, match="no array leaves"):
        sx.parallel.shard_batch(None)
    with pytest.raises(ValueError, match="at least 1"):
        sx.parallel.use_cpu_cores(0)
    with pytest.raises(RuntimeError, match=r"already running with \d+ CPU device.*use_cpu_cores\(\)"):
        sx.parallel.use_cpu_cores(len(jax.devices("cpu")) + 1)


def test_two_cpu_devices_in_a_fresh_process():
    """use_cpu_cores(2) before JAX starts. shard_batch + jit(vmap): forward
    dynamics, an RK4 rollout and its gradient with respect to shared controls
    equal the unsharded ones and stay spread over both devices. batched: a per-state gradient with respect to a shared
    argument stays per state (no sum over devices), the gradient through the
    map is the sum over all states. In one process, shard_process_batch
    places the whole batch as shard_batch does and gather returns NumPy."""
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        import conftest  # float64 and the persistent compilation cache
        import simbodyx as sx
        assert sx.parallel.use_cpu_cores(2) == 2 and len(jax.devices()) == 2
        import test_parallel as t
        model, states = t._pendulum_states(6)
        sharded = sx.parallel.shard_batch(states)
        assert len(sharded.q.sharding.device_set) == 2
        fd = lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot
        rollout = lambda s: sx.integrate.rollout(model, s, 1e-3, 10, energy=False)[1].q
        controls = jnp.ones((4, model.topology.nu))
        grad = lambda s: t._controls_gradient(model)(controls, s)
        for f in (fd, rollout, grad):
            out = jax.jit(jax.vmap(f))(sharded)
            assert len(out.sharding.device_set) == 2, out.sharding
            np.testing.assert_allclose(out, jax.jit(jax.vmap(f))(states), rtol=1e-13, atol=1e-13)

        p = jnp.asarray([0.1, -1.0, 0.2])
        _, per_state_grad, outer_grad = t._functions(model)
        got = jax.jit(sx.parallel.batched(per_state_grad, (0, None), chunk_size=2))(states, p)
        expected = jax.vmap(per_state_grad, (0, None))(states, p)
        for a, b in zip(got, expected):
            assert len(a.sharding.device_set) == 2, a.sharding
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * float(jnp.abs(b).max()))
        got = jax.jit(lambda p: outer_grad(lambda f, ax: sx.parallel.batched(f, ax, chunk_size=2), states, p))(p)
        expected = outer_grad(jax.vmap, states, p)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * float(jnp.abs(expected).max()))

        for shard, message in ((sx.parallel.shard_batch, "batch size 5 is not divisible by the 2 devices"),
                               (sx.parallel.shard_process_batch, "batch size 5 is not divisible by its 2 local")):
            try:
                shard(t._pendulum_states(5)[1])
            except ValueError as e:
                assert message in str(e), e
            else:
                raise AssertionError(f"no error for 5 states on 2 devices from {shard.__name__}")
        # one process: its part is the whole batch, gathered back as NumPy
        mine = sx.parallel.shard_process_batch(states)
        assert mine.q.sharding == sharded.q.sharding
        back = sx.parallel.gather(jax.jit(jax.vmap(fd))(mine))
        assert isinstance(back, np.ndarray) and back.shape == (6, model.topology.nu)
        np.testing.assert_array_equal(back, jax.jit(jax.vmap(fd))(sharded))
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=ROOT / "tests")
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


def _per_state(model):
    """What the two-process test computes per state: udot, and u after a
    10-step rollout."""
    return (lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot,
            lambda s: sx.integrate.rollout(model, s, 1e-3, 10, energy=False)[0].u)


def test_two_processes_split_a_global_batch(tmp_path):
    """jax.distributed with two CPU processes started here (JAX's gloo
    collectives over localhost), one device each: each passes its half of 8
    states to shard_process_batch; forward dynamics and a 10-step rollout
    through batched, gathered on both processes, equal one process's vmap."""
    script = textwrap.dedent("""
        import sys
        import jax
        port, process = int(sys.argv[1]), int(sys.argv[2])
        jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process)
        import numpy as np
        import conftest  # float64 and the persistent compilation cache
        import simbodyx as sx
        import test_parallel as t
        assert jax.process_count() == 2 and len(jax.devices()) == 2 and jax.local_device_count() == 1
        model, states = t._pendulum_states(8)
        mine = sx.parallel.shard_process_batch(jax.tree.map(lambda x: x[4 * process:4 * process + 4], states))
        assert mine.q.shape == states.q.shape and not mine.q.is_fully_addressable
        whole = [sx.parallel.gather(jax.jit(sx.parallel.batched(f, chunk_size=2))(mine))
                 for f in t._per_state(model)]
        np.save(sys.argv[3], np.stack(whole))
    """)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outputs = [tmp_path / f"process{i}.npy" for i in range(2)]
    processes = [subprocess.Popen([sys.executable, "-c", script, str(port), str(i), str(outputs[i])],
                                  cwd=ROOT / "tests", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2)]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
    model, states = _pendulum_states(8)
    expected = np.stack([jax.vmap(f)(states) for f in _per_state(model)])
    for path in outputs:
        np.testing.assert_allclose(np.load(path), expected, rtol=1e-13, atol=1e-13)
