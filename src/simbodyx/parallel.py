"""Spreading a batch over the CPU's cores.

JAX's CPU backend is one device by default: a batched call runs its kernels
one after another and splits each across a shared thread pool. The dynamics
are hundreds of small kernels, for which that split barely pays (on a 2-core
machine a 7-link chain's batched forward dynamics ran as fast on one core as
on two). With one CPU device per core and the batch's leading axis sharded
over them, ``jax.jit`` compiles the same program for each device's share and
runs the shares side by side, with no communication (a ``vmap`` needs none):
1.1-2.4x more states per second on 2 cores (benchmarks/README.md).

    import jax, simbodyx as sx
    sx.parallel.use_cpu_cores()          # before any JAX computation
    ...
    states = sx.parallel.shard_batch(states)   # (B, ...) leaves, B divisible by the device count
    udot = jax.jit(jax.vmap(forward_dynamics))(states)   # sharded the same way

Nothing here changes JAX's configuration unless ``use_cpu_cores`` is called.
On a GPU or TPU, ``shard_batch`` spreads the batch over the accelerators.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def use_cpu_cores(n: int | None = None) -> int:
    """Expose ``n`` CPU devices to JAX (default: :func:`usable_cores`), one per
    core, for :func:`shard_batch`. Sets ``jax_num_cpu_devices``, so it must run
    before JAX's first computation; afterwards it only succeeds if JAX already
    has ``n`` CPU devices. Returns ``n``."""
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


def shard_batch(tree, devices=None):
    """``tree`` (a State, arrays, any pytree of arrays batched along axis 0)
    placed so that each of ``devices`` (default: ``jax.devices()``) holds an
    equal, contiguous slice of the batch. Every leaf needs the same leading
    size, divisible by the number of devices."""
    devices = list(jax.devices() if devices is None else devices)
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    if not leaves:
        raise ValueError("shard_batch: the tree has no array leaves")
    sizes = {}
    for path, leaf in leaves:
        shape = np.shape(leaf)
        if not shape:
            raise ValueError(f"shard_batch: leaf {jax.tree_util.keystr(path)} is a scalar; every leaf needs a "
                             "leading batch axis (vmap the construction of the State)")
        sizes.setdefault(shape[0], jax.tree_util.keystr(path))
    if len(sizes) > 1:
        detail = ", ".join(f"{where}: {size}" for size, where in sizes.items())
        raise ValueError(f"shard_batch: leaves disagree on the batch size ({detail})")
    (batch,) = sizes
    if batch % len(devices):
        raise ValueError(f"shard_batch: batch size {batch} is not divisible by the {len(devices)} devices; "
                         "pad the batch or pass fewer devices")
    sharding = NamedSharding(Mesh(np.asarray(devices), ("batch",)), PartitionSpec("batch"))
    return jax.device_put(tree, sharding)
