"""Running a batch fast: over every CPU core, in cache-sized chunks, and
over every device of every process.

JAX's CPU backend is one device by default: a batched call runs its kernels
one after another and splits each across a shared thread pool. The dynamics
are hundreds of small kernels, for which that split barely pays
(docs/explanation/performance.md). With one CPU device per core and the batch's leading axis sharded
over them, ``jax.jit`` compiles the same program for each device's share and
runs the shares side by side, with no communication (a ``vmap`` needs none).
And a ``vmap`` over thousands of states makes every intermediate thousands
of states long, out of cache; :func:`batched` runs each device's share as a
loop over chunks of ``chunk_size`` states instead. Figures in
benchmarks/README.md.

    import jax, simbodyx as sx
    sx.parallel.use_cpu_cores()          # before any JAX computation
    ...
    udot = jax.jit(sx.parallel.batched(forward_dynamics))(states)   # like jax.vmap
    # or keep jax.vmap and only shard its input:
    udot = jax.jit(jax.vmap(forward_dynamics))(sx.parallel.shard_batch(states))

Nothing here changes JAX's configuration unless ``use_cpu_cores`` is called.
On a GPU or TPU the same calls spread the batch over the accelerators.

Across processes and machines it is JAX's own multi-controller model: start
the same script once per process, call ``jax.distributed.initialize()``
first (arguments detected under SLURM, Open MPI and on Cloud TPU, given
otherwise), and ``jax.devices()`` is then every device of every process.
Each process passes its part of the batch to :func:`shard_process_batch`,
the computation is the same ``jax.jit(batched(f))`` over the one global
batch, and :func:`gather` brings the whole result to every process:

    jax.distributed.initialize()          # before any JAX computation
    mine = sx.parallel.shard_process_batch(my_states)   # this process's rows
    out = jax.jit(sx.parallel.batched(forward_dynamics))(mine)
    everything = sx.parallel.gather(out)  # NumPy, the rows of every process
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from simbodyx.progress import progress_of, report

#: States per chunk in :func:`batched`: for the suite's chain7 and humanoid
#: forward dynamics, chunks of 64-256 were within noise of each other and 32
#: or 512 slower (docs/explanation/performance.md).
CHUNK_SIZE = 128


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def use_cpu_cores(n: int | None = None) -> int:
    """Expose CPU devices to JAX, one per core, for :func:`batched` and :func:`shard_batch`.

    Sets ``jax_num_cpu_devices``, so it must run before JAX's first
    computation; afterwards it only succeeds if JAX already has ``n`` CPU
    devices.

    Args:
        n: How many devices; None: :func:`usable_cores`.

    Returns:
        The number of CPU devices, ``n``.

    Raises:
        ValueError: ``n`` is below 1.
        RuntimeError: JAX already runs with another number of CPU devices.
    """
    n = usable_cores() if n is None else int(n)
    if n < 1:
        raise ValueError(f"use_cpu_cores: n must be at least 1, got {n}")
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError as error:  # backends already initialized
        have = len(jax.devices("cpu"))
        if have != n:
            raise RuntimeError(
                f"use_cpu_cores({n}): JAX is already running with {have} CPU device(s); call "
                "simbodyx.parallel.use_cpu_cores() right after `import jax`, before any JAX "
                "computation (or set XLA_FLAGS=--xla_force_host_platform_device_count=N)"
            ) from error
    return n


def _batch_size(caller: str, tree) -> int:
    """The leading size that every array leaf of ``tree`` shares; a clear
    error naming the leaf otherwise."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    if not leaves:
        raise ValueError(f"{caller}: the tree has no array leaves")
    sizes = {}
    for path, leaf in leaves:
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(f"{caller}: leaf {jax.tree_util.keystr(path)} is a scalar; every batched leaf "
                             "needs a leading batch axis (vmap the construction of the State)")
        sizes.setdefault(shape[0], jax.tree_util.keystr(path))
    if len(sizes) > 1:
        detail = ", ".join(f"{where}: {size}" for size, where in sizes.items())
        raise ValueError(f"{caller}: leaves disagree on the batch size ({detail})")
    (batch,) = sizes
    return batch


def _batch_mesh(devices) -> Mesh:
    """A one-axis mesh, axis "batch", over ``devices``."""
    return Mesh(np.asarray(devices), ("batch",))


def shard_batch(tree, devices=None):
    """Place a batch so that each device holds an equal, contiguous slice of it.

    Args:
        tree: A State, arrays, any pytree of arrays batched along axis 0
            (every leaf of the same leading size, divisible by the number of
            devices).
        devices: The devices; None: ``jax.devices()``.

    Returns:
        The same pytree, sharded along axis 0 over the devices.

    Raises:
        ValueError: Leaves of different leading sizes, or a batch size not
            divisible by the number of devices.
    """
    devices = list(jax.devices() if devices is None else devices)
    batch = _batch_size("shard_batch", tree)
    if batch % len(devices):
        raise ValueError(f"shard_batch: batch size {batch} is not divisible by the {len(devices)} devices; "
                         "pad the batch or pass fewer devices")
    return jax.device_put(tree, NamedSharding(_batch_mesh(devices), PartitionSpec("batch")))


def shard_process_batch(tree):
    """This process's part of a batch spread over processes (``tree``: a
    State, arrays, any pytree batched along axis 0), as its rows of one
    global batch over every device of every process
    (``jax.make_array_from_process_local_data``). The global batch is the
    processes' parts in process order; every process passes the same number
    of rows, a multiple of its local device count. With one process it is
    :func:`shard_batch`."""
    batch = _batch_size("shard_process_batch", tree)
    local = jax.local_device_count()
    if batch % local:
        raise ValueError(f"shard_process_batch: this process's batch size {batch} is not divisible by its {local} "
                         "local devices; pad the batch")
    sharding = NamedSharding(_batch_mesh(jax.devices()), PartitionSpec("batch"))
    return jax.tree.map(lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), tree)


def gather(tree):
    """A batch spread over devices and processes (as :func:`batched`,
    :func:`shard_batch` or :func:`shard_process_batch` leave it), whole, as
    NumPy arrays on every process (``multihost_utils.process_allgather``);
    one process: its arrays as NumPy. A collective: every process calls it."""
    return multihost_utils.process_allgather(tree, tiled=True)


def batched(fun, in_axes=0, chunk_size: int | None = CHUNK_SIZE, devices=None, progress=False):
    """``jax.vmap(fun, in_axes)`` over axis 0, split over devices and run in chunks.

    Each device computes its share of the batch in a loop over chunks of
    ``chunk_size`` states, which stay in cache. The batch is split over the
    devices only when its size is a multiple of their count; otherwise one
    device runs it all.

    Args:
        fun: The function of one element of the batch.
        in_axes: 0, or a tuple of 0 or None per positional argument (None:
            the argument is shared, not batched).
        chunk_size: States per chunk; None: one ``vmap`` per device's share.
        devices: The devices to split over; None: ``jax.devices()``.
        progress: Show a progress bar of the chunks done (True, or an
            ``sx.Progress``; with several devices, the chunks of one
            device's share), moved by a host callback per chunk; False adds
            nothing to the program.

    Returns:
        The batched function: its results are batched along axis 0 (sharded
        over the devices).

    Raises:
        ValueError: A ``chunk_size`` that is not a positive int or None;
            when called, ``in_axes`` not 0 or 0/None per argument, no
            argument batched, or batched arguments of different sizes.
    """
    devices = list(jax.devices() if devices is None else devices)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"batched: chunk_size must be a positive integer or None, got {chunk_size!r}")
    progress = progress_of(progress, "batched", "chunk")

    def run(*args):
        axes = (in_axes,) * len(args) if not isinstance(in_axes, (tuple, list)) else tuple(in_axes)
        if len(axes) != len(args) or any(a not in (0, None) for a in axes):
            raise ValueError(f"batched: in_axes must be 0 or a tuple of 0/None per argument, got {in_axes!r} "
                             f"for {len(args)} arguments")
        mapped = [i for i, a in enumerate(axes) if a == 0]
        if not mapped:
            raise ValueError("batched: no argument is batched (in_axes all None)")
        batch = _batch_size("batched", {f"arg{i}": args[i] for i in mapped})

        def share(*share_args):
            def one(xs):
                full = list(share_args)
                for i, x in zip(mapped, xs):
                    full[i] = x
                return fun(*full)

            xs = tuple(share_args[i] for i in mapped)
            if chunk_size is None:
                return jax.vmap(one)(xs)
            if progress is None:
                return jax.lax.map(one, xs, batch_size=chunk_size)
            return _chunks_reported(one, xs, chunk_size, progress)

        if len(devices) == 1 or batch % len(devices):
            return share(*args)
        specs = tuple(PartitionSpec("batch") if a == 0 else PartitionSpec() for a in axes)
        # check_vma=False: with JAX's replication typing on, a per-state
        # gradient with respect to a shared argument is summed over the
        # devices (wrong, and a collective); tests/test_parallel.py checks it.
        return jax.shard_map(share, mesh=_batch_mesh(devices), in_specs=specs, out_specs=PartitionSpec("batch"),
                             check_vma=False)(*args)

    return run


def _chunks_reported(one, xs, chunk_size: int, progress):
    """``jax.lax.map(one, xs, batch_size=chunk_size)``, reporting each
    chunk done to ``progress``: a loop over the whole chunks, then the
    remainder."""
    size = jax.tree.leaves(xs)[0].shape[0]
    whole, rest = divmod(size, chunk_size)
    total = whole + (rest > 0)

    def chunk(done, chunk_xs):
        out = jax.vmap(one)(chunk_xs)
        report(progress, done + 1, total)
        return done + 1, out

    head = jax.tree.map(lambda x: x[:whole * chunk_size].reshape(whole, chunk_size, *x.shape[1:]), xs)
    done, out = jax.lax.scan(chunk, jnp.zeros((), jnp.int32), head)
    out = jax.tree.map(lambda y: y.reshape(whole * chunk_size, *y.shape[2:]), out)
    if rest:
        tail = jax.vmap(one)(jax.tree.map(lambda x: x[whole * chunk_size:], xs))
        report(progress, done + 1, total)  # the loop's count: reported after the loop's own reports
        out = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), out, tail)
    return out
