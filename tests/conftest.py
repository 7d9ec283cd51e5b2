"""Shared test setup: float64 on, a persistent compilation cache, one
tolerance table keyed by dtype, and small model builders."""

import contextlib
import gc
import os
import pathlib
import re

import jax
import jax.extend  # noqa: F401  (jax.extend.core below)
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)
#: The suite is bound by compiling: XLA's LLVM optimization passes took a
#: quarter of its compile time and change no result at the suite's
#: tolerances, so tests (and the scripts and notebook kernels they start,
#: through the environment) compile without them; the notebooks that run
#: long simulations are the exception (tests/test_notebooks.py). Benchmarks
#: run on their own compile with them.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
jax.config.update("jax_disable_most_optimizations", os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "1")
#: One piece of LLVM code generation per program: the suite runs a worker per
#: core, so XLA's split of a program's code generation over threads only adds
#: work (10% of two constraint tests' compile time, in one process). Set
#: before JAX starts its CPU backend; the scripts and kernels the tests start
#: inherit it.
if "xla_cpu_parallel_codegen_split_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_parallel_codegen_split_count=1".strip()
#: XLA's CPU options for the whole process (``sx.xla_setup.set_cpu_options``), as
#: the README's examples set them: among them the older fusion emitters, whose
#: programs hold fewer memory mappings (a worker keeps hundreds alive).
from simbodyx._xla import xla_setup  # noqa: E402

xla_setup.set_cpu_options()
#: The persistent compilation cache (SIMBODYX_JAX_CACHE: its folder, or "off"),
#: every program in it however quick its compile: each file's compiled
#: programs are dropped after it (below), and the next file's single
#: operations, called eagerly, read theirs back instead of compiling them
#: again (about 20 ms each). Eight files rich in them took 220-228 against
#: 243-276 s on two workers with a cold cache, with 23 against 10 MB of it.
JAX_CACHE = os.environ.get("SIMBODYX_JAX_CACHE", str(pathlib.Path(__file__).resolve().parents[1] / ".jax_cache"))
if JAX_CACHE != "off":
    jax.config.update("jax_compilation_cache_dir", JAX_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
# The parallel workers share this cache. An entry read while another worker
# is still writing it fails to load; JAX then warns and compiles it again.

import jax.numpy as jnp  # noqa: E402

import simbodyx as sx  # noqa: E402
from simbodyx import functions as fn  # noqa: E402

#: Tracing is a third of the suite's time and makes millions of short-lived
#: Python objects, few of them in cycles. Python's cyclic collector, run
#: every 700 allocations and walking every object left from the imports,
#: took 6-20% of four tracing-bound files' time (113-119 against 90-106 s in
#: one process; the whole suite 1,105 against 1,152 s). So the imports'
#: objects are frozen out of its reach and it runs less often; the notebook
#: kernels do the same (tests/test_notebooks.py).
GC_THRESHOLDS = (100_000, 50, 100)
gc.freeze()
gc.set_threshold(*GC_THRESHOLDS)

#: Absolute tolerances for O(1) quantities computed two ways. float64: a few
#: hundred ulps of accumulated rounding; float32 likewise at its epsilon.
TOL = {np.dtype("float64"): 1e-12, np.dtype("float32"): 2e-5}
#: Tolerances for comparisons against central finite differences with step
#: 1e-6 (float64 only): truncation error O(h^2) ~ 1e-12 times third
#: derivatives, plus rounding eps/h ~ 1e-10.
FD_TOL = 1e-8
FD_STEP = 1e-6


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop a test file's compiled programs after it. From jaxlib 0.7 each
    holds hundreds of memory mappings (``simbodyx._xla.xla_setup``), and a worker
    keeping a whole run's would reach Linux's default limit of 65,530 per
    process, where XLA's compiler aborts."""
    yield
    jax.clear_caches()


#: One (event, list) per open :func:`counting_compiles` block, innermost last.
_COMPILES = []


def _count_compile(event, duration, **_):
    if _COMPILES and event.endswith(_COMPILES[-1][0]):
        _COMPILES[-1][1].append(duration)


jax.monitoring.register_event_duration_secs_listener(_count_compile)


@contextlib.contextmanager
def counting_compiles(event="backend_compile_duration"):
    """A list that gains an entry for each program XLA compiles inside the
    block; with ``event="jaxpr_to_mlir_module_duration"``, for each program
    lowered, those then read from the persistent cache included."""
    _COMPILES.append((event, []))
    try:
        yield _COMPILES[-1][1]
    finally:
        _COMPILES.pop()


def tol(dtype):
    return TOL[np.dtype(dtype)]


#: Sub-jaxprs of an equation's parameters: in ``jax.extend.core`` up to 0.6
#: and from 0.11, only in ``jax.core`` between.
jaxprs_in_params = getattr(jax.extend.core, "jaxprs_in_params", None) or jax.core.jaxprs_in_params


def equations(jaxpr):
    """The equations of a jaxpr and of all its sub-jaxprs (jit, scan, cond
    branches, custom rules), those of a called program once per call."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jaxprs_in_params(eqn.params):
            yield from equations(sub)


def primitive_names(jaxpr):
    """The set of primitive names in a jaxpr and all its sub-jaxprs."""
    return {eqn.primitive.name for eqn in equations(jaxpr)}


def count_primitive(jaxpr, name):
    """How many equations of primitive ``name`` a jaxpr and its sub-jaxprs hold."""
    return sum(eqn.primitive.name == name for eqn in equations(jaxpr))


def compiled_kernels(fn, *args):
    """How many fused kernels XLA's compiled program of ``jax.jit(fn)(*args)``
    runs at its top level (the thunks XLA's CPU runtime dispatches)."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return text[text.index("\nENTRY"):].count(" fusion(")


def loop_bodies(jaxpr):
    """The bodies of a jaxpr's loops (scan and while, its sub-jaxprs'
    included), printed, with the addresses of functions in their parameters
    left out: equal lists mean the same loops."""
    loops = [eqn.params.get("jaxpr", eqn.params.get("body_jaxpr")) for eqn in equations(jaxpr)
             if eqn.primitive.name in ("scan", "while")]
    return [re.sub(" at 0x[0-9a-f]+", "", str(body)) for body in loops]


def assert_energies_are_the_samples(model, state, trajectory):
    """Each saved sample's energy is the total energy of ``state`` at its
    (t, q, u), to 1e-12."""
    for k in range(len(trajectory.t)):
        s = state.with_time(trajectory.t[k]).with_q(trajectory.q[k]).with_u(trajectory.u[k])
        np.testing.assert_allclose(trajectory.energy[k], sx.integrate.total_energy(model, s), rtol=0, atol=1e-12)


@pytest.fixture(params=["float64", "float32"])
def dtype(request):
    return np.dtype(request.param)


def new_system():
    """(system, matter, forces): an empty MultibodySystem with its subsystems."""
    system = sx.MultibodySystem()
    return system, sx.SimbodyMatterSubsystem(system), sx.GeneralForceSubsystem(system)


def link():
    """A 1 kg link whose mass center is 0.5 along its x axis."""
    return sx.Body.Rigid(sx.MassProperties.from_central(1.0, [0.5, 0, 0], sx.Inertia(0.01, 0.1, 0.1)))


def rigid(mass=1.0, com=(0.1, -0.2, 0.3), central=(0.02, 0.03, 0.04, 0.001, -0.002, 0.003)):
    return sx.Body.Rigid(sx.MassProperties.from_central(mass, list(com), sx.Inertia(*central)))


def random_transform(rng, scale=0.5):
    q = rng.normal(size=4)
    return sx.Transform(sx.Rotation.from_quaternion(q / np.linalg.norm(q)), rng.normal(size=3) * scale)


#: A Custom mobilizer as a user would write it: a quaternion then a
#: translation (Free's layout and default u meaning), X_FM from q alone.
CUSTOM_FREE = sx.MobilizedBody.Custom.Implementation(
    7, 6, lambda q: (sx.spatial.quaternion_to_matrix(q[:4]), q[4:]), num_angles=4
)
#: A knee-like FunctionBased joint: rotation about z by q0, translations
#: coupled nonlinearly to both coordinates (one through a natural spline).
COUPLED_FUNCTIONS = (
    (None, None, fn.Linear((1.0, 0.0)),
     lambda x: 0.1 * jnp.sin(x[0]) + x[1], fn.Spline((-3.0, -1.0, 0.0, 1.0, 3.0), (0.2, -0.1, 0.0, 0.3, 0.1)), None),
    ((), (), (0,), (0, 1), (0,), ()),
)

#: The common kinds: the algorithm tests' many separately compiled operators
#: run on trees of these (compile time grows with the number of kinds).
CORE_KINDS = (
    "Weld", "Pin", "Slider", "Screw", "Universal", "Cylinder", "Planar", "Gimbal",
    "Ball", "Translation", "Free",
)
#: Every joint type but Ground (tests/mobilizers/test_all_types.py runs the
#: cross-method identities on one tree of them, in one compilation).
ALL_KINDS = CORE_KINDS + (
    "BendStretch", "Ellipsoid", "SphericalCoords", "LineOrientation", "FreeLine", "Bushing", "Custom", "FunctionBased",
)


def add_body(kind, parent, rng, body=None):
    """One mobilized body of ``kind`` with random frames below ``parent``;
    ``kind`` is a MobilizedBody type name or (name, *constructor arguments)."""
    kind, *extra = (kind,) if isinstance(kind, str) else kind
    cls = getattr(sx.MobilizedBody, kind)
    args = (parent, random_transform(rng), body or rigid(), random_transform(rng))
    if extra:
        args = args + tuple(extra)
    elif kind == "Screw":
        args = args + (0.3,)
    elif kind == "Ellipsoid":
        args = args + (rng.uniform(0.2, 0.8, size=3),)
    elif kind == "Custom":
        args = args + (CUSTOM_FREE,)
    elif kind == "FunctionBased":
        args = args + (2, *COUPLED_FUNCTIONS)
    elif kind == "SphericalCoords":
        args = args + (0.2, True, np.pi / 2, False, "x", True)
    return cls(*args)


def random_tree(kinds, seed=0, branching=True, depth_first=False):
    """A random tree using ``kinds`` in order; each body's parent is random
    (or the previous body when ``branching`` is False). With ``depth_first``
    the parent is the previous body or one of its ancestors, so every
    subtree's bodies are contiguous (Pinocchio's CRBA assumes that order)."""
    rng = np.random.default_rng(seed)
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    bodies = [matter.Ground()]
    for kind in kinds:
        if not branching:
            parent = bodies[-1]
        elif depth_first:
            path = [bodies[-1]]
            while not path[-1].is_ground():
                path.append(path[-1].parent)
            parent = path[rng.integers(len(path))]
        else:
            parent = bodies[rng.integers(len(bodies))]
        bodies.append(add_body(kind, parent, rng))
    return system, matter, bodies


def random_state(model, seed=0, scale=1.0):
    """A default state with random q (quaternions not normalized) and u."""
    rng = np.random.default_rng(seed)
    state = model.default_state()
    q = np.asarray(state.q) + scale * rng.normal(size=state.q.shape)
    u = scale * rng.normal(size=state.u.shape)
    return state.with_q(q).with_u(u)


def with_forces(kinds, seed=0, gravity=(0.0, -9.81, 0.0), **tree_options):
    """A random tree (as random_tree) plus a force subsystem with gravity."""
    system, matter, bodies = random_tree(kinds, seed=seed, **tree_options)
    forces = sx.GeneralForceSubsystem(system)
    sx.Force.UniformGravity(forces, matter, list(gravity))
    return system, matter, forces, bodies
