"""simbodyx.parallel: a batch sharded over CPU devices computes what the
unsharded batch does; clear errors for what cannot be sharded."""

import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simbodyx as sx

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _pendulum_states(n):
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    sx.Force.UniformGravity(sx.GeneralForceSubsystem(system), matter, [0, -9.81, 0])
    body = sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0, -0.5, 0], sx.Inertia(0.02)))
    link = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform(), body, sx.Transform())
    sx.MobilizedBody.Ball(link, sx.Transform([0, -1, 0]), body, sx.Transform())
    model, state = system.realize_topology()
    rng = np.random.default_rng(0)
    q = jnp.asarray(np.asarray(state.q) + 0.3 * rng.normal(size=(n, model.topology.nq)))
    u = jnp.asarray(rng.normal(size=(n, model.topology.nu)))
    states = jax.vmap(lambda q, u: model.matter.normalize_quaternions(state.with_q(q).with_u(u)))(q, u)
    return model, states


def test_one_device_is_a_placement_that_changes_nothing():
    model, states = _pendulum_states(4)
    sharded = sx.parallel.shard_batch(states)
    for a, b in zip(jax.tree.leaves(states), jax.tree.leaves(sharded)):
        np.testing.assert_array_equal(a, b)
    assert sx.parallel.use_cpu_cores(len(jax.devices("cpu"))) == len(jax.devices("cpu"))


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
    """use_cpu_cores(2) before JAX starts; the sharded batch's forward
    dynamics and gradient equal the unsharded ones, and the results stay
    spread over both devices."""
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        import simbodyx as sx
        assert sx.parallel.use_cpu_cores(2) == 2 and len(jax.devices()) == 2
        import test_parallel as t
        model, states = t._pendulum_states(6)
        fd = lambda s: model.realize(s, sx.Stage.Acceleration).acceleration.udot
        grad = lambda s: jax.grad(lambda q: jnp.sum(fd(s.with_q(q)) ** 2))(s.q)
        sharded = sx.parallel.shard_batch(states)
        assert len(sharded.q.sharding.device_set) == 2
        for f in (fd, grad):
            out = jax.jit(jax.vmap(f))(sharded)
            assert len(out.sharding.device_set) == 2, out.sharding
            np.testing.assert_allclose(out, jax.jit(jax.vmap(f))(states), rtol=1e-13, atol=1e-13)
        try:
            sx.parallel.shard_batch(t._pendulum_states(5)[1])
        except ValueError as e:
            assert "batch size 5 is not divisible by the 2 devices" in str(e), e
        else:
            raise AssertionError("no error for 5 states on 2 devices")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=ROOT / "tests")
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
