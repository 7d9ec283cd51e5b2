"""The package's architecture (docs/architecture.md): its import graph has no
cycle and every import runs downward through the layers (read from the
source with ``ast``, imports inside functions included), and the frozen
Model holds elements, never the builder's handles."""

import ast
import dataclasses
import re
import pathlib

import numpy as np
import pytest

import simbodyx as sx

SOURCE = pathlib.Path(sx.__file__).parent

#: The layers, lowest first: a module may import from its own layer and the
#: ones before it. A name stands for a module or a whole subpackage.
LAYERS = (
    ("_xla", "enums", "stage", "functions", "linalg", "handles", "progress"),
    ("spatial",),
    ("contact",),
    ("tree",),
    ("mobilizers",),
    ("topology",),
    ("parameters",),
    ("state",),
    ("algorithms",),
    ("motion",),
    ("forces",),
    ("constraints", "soft_constraints"),
    ("projection", "runtime_checks"),
    ("matter", "realize", "body_queries"),
    ("model",),
    ("events", "integrate", "rigid_contact"),
    ("integrators", "simulation", "optimize", "parallel"),
    ("builder",),
    ("assembly", "io", "interop", "viz"),
    ("envs",),
)


def _modules() -> dict:
    """Dotted name (without the leading ``simbodyx.``) -> path, package
    ``__init__`` files under the package's name."""
    modules = {}
    for path in SOURCE.rglob("*.py"):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules) -> str | None:
    """The module a dotted import name lands in (an attribute import falls back
    to its module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imported_names(source: str, package: str) -> list:
    """The dotted names a module's source imports, anywhere in it (inside
    functions too); ``package`` resolves relative imports."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                base = ".".join(base[: len(base) - node.level + 1])
                module = f"{base}.{module}" if module else base
            names += [f"{module}.{alias.name}" for alias in node.names]
    return names


def import_graph() -> dict:
    """Module -> the set of simbodyx modules it imports, the root package
    excluded. Importing ``simbodyx.P.X`` from outside P also runs P's
    ``__init__``, so it counts as importing P as well."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = "simbodyx." + (name if path.name == "__init__.py" else name.rpartition(".")[0])
        targets = set()
        for full in imported_names(path.read_text(), package.rstrip(".")):
            if not full.startswith("simbodyx."):
                continue
            target = _resolve(full.removeprefix("simbodyx."), modules)
            if target is None:
                continue
            targets.add(target)
            parts = target.split(".")
            for k in range(1, len(parts)):
                outer = ".".join(parts[:k])
                if not (name == outer or name.startswith(outer + ".")):
                    targets.add(outer)
        targets.discard(name)
        graph[name] = targets
    return graph


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"simbodyx.{module} is in no layer of tests/test_layers.py: add it to LAYERS")


def cycles(graph) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_every_import_runs_down_the_layers():
    upward = sorted(
        f"simbodyx.{module} (layer {layer_of(module)}) imports simbodyx.{target} (layer {layer_of(target)})"
        for module, targets in import_graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )
    assert upward == []


def test_the_checks_see_a_cycle_and_lazy_imports():
    """Imports inside functions and relative imports count, and a cycle is found."""
    source = "import jax\ndef f():\n    from simbodyx.builder import mobilized_body\n    from ..tree import take_rows\n"
    assert imported_names(source, "simbodyx.algorithms") == [
        "jax", "simbodyx.builder.mobilized_body", "simbodyx.tree.take_rows"]
    assert "constraints" in import_graph()["matter"]  # through constraints.dynamics
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("nowhere")


def _guarded(node, parents) -> bool:
    """Whether an import sits in a ``try`` that catches ImportError, or in a
    function that returned early on a release check (``if JAX >= ...: return``)."""
    for parent in reversed(parents):
        if isinstance(parent, ast.Try) and any(
                "ImportError" in ast.unparse(h.type) for h in parent.handlers if h.type is not None):
            return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = parent.body[1] if isinstance(parent.body[0], ast.Expr) else parent.body[0]
            return (isinstance(first, ast.If) and "JAX" in ast.unparse(first.test)
                    and isinstance(first.body[-1], ast.Return))
    return False


def test_private_jax_imports_are_guarded_and_only_in_xla():
    """``jax._src`` changes without notice: simbodyx imports it only in
    ``simbodyx._xla``, each import with a fallback or behind a release check."""
    found = []
    for path in SOURCE.rglob("*.py"):
        def visit(node, parents):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    names = [child.module or ""] if isinstance(child, ast.ImportFrom) else [a.name for a in child.names]
                    if any(n.startswith("jax._src") for n in names):
                        found.append((path.relative_to(SOURCE).as_posix(), child.lineno, _guarded(child, parents)))
                visit(child, parents + [child])
        visit(ast.parse(path.read_text()), [])
    assert found and all(where.startswith("_xla/") and guarded for where, _, guarded in found), found


def test_custom_primitives_are_only_in_xla():
    """A JAX primitive of simbodyx's own (with its hand-written derivative,
    transpose and batching rules) lives in ``simbodyx._xla``; the rest of
    the package calls it by its mathematical name and imports none of
    JAX's interpreter modules."""
    found = []
    for path in SOURCE.rglob("*.py"):
        where = path.relative_to(SOURCE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [(where, name) for name in names if name.startswith(("jax.interpreters", "jax.extend"))]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Primitive":
                found.append((where, "Primitive"))
    assert found and all(where.startswith("_xla/") for where, _ in found), found


def _objects(node, seen=None):
    """Every object reachable from ``node`` through dataclass fields (static
    ones included), tuples, lists and dicts."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    yield node
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        children = [getattr(node, f.name, None) for f in dataclasses.fields(node)]
    elif isinstance(node, (tuple, list)):
        children = node
    elif isinstance(node, dict):
        children = node.values()
    else:
        return
    for child in children:
        yield from _objects(child, seen)


def test_the_model_holds_elements_not_handles():
    """The frozen Model refers to nothing of the builder; its constraint and
    Motion elements answer the handles' State queries, and the building-time
    methods say to ask the handle."""
    system = sx.MultibodySystem()
    matter = sx.SimbodyMatterSubsystem(system)
    forces = sx.GeneralForceSubsystem(system)
    body = sx.Body.Rigid(sx.MassProperties(1.0, [0, 0, 0], sx.Inertia(0.1)))
    a = sx.MobilizedBody.Pin(matter.Ground(), sx.Transform([0, 1, 0]), body, sx.Transform([0.5, 0, 0]))
    b = sx.MobilizedBody.Free(matter.Ground(), sx.Transform(), body, sx.Transform())
    rod = sx.Constraint.Rod(a, [0, 0, 0], b, [0, 0, 0], 1.0)
    motion = sx.Motion.Steady(a, 0.5)
    sx.Force.UniformGravity(forces, matter, [0, -9.81, 0])
    sx.Force.MobilityLinearSpring(forces, a, 0, 2.0, 0.1)
    model, state = system.realize_topology()
    builder = (sx.MultibodySystem, sx.SimbodyMatterSubsystem, sx.GeneralForceSubsystem, sx.MobilizedBody)
    held = [type(o).__name__ for o in _objects(model) if isinstance(o, builder)]
    assert held == []
    element = model.constraints[0]
    assert element is not rod and element.matter is None and model.matter.get_constraint(0) is element
    state = model.realize(state, sx.Stage.Position)
    np.testing.assert_array_equal(element.get_position_errors_as_vector(state), rod.get_position_errors_as_vector(state))
    assert rod.get_constrained_bodies() == (a, b)
    with pytest.raises(ValueError, match="Rod .*get_constrained_bodies: this is the frozen Model's copy"):
        element.get_constrained_bodies()
    assert not model.params.motions[0].is_disabled(state) and not motion.is_disabled(state)
    with pytest.raises(ValueError, match="Motion.Steady .*get_mobilized_body: this is the frozen Model's copy"):
        model.params.motions[0].get_mobilized_body()


#: Functions with 8 or more positional parameters (self not counted), each
#: with its reason; any other is an error. Pass a record instead (as
#: ``aba.ForwardInputs`` does for forward dynamics and ``impulse.Problem``
#: for the impulse solver).
LONG_SIGNATURES = {
    # Simbody's own signatures, argument for argument
    "body_queries.BodyQueries.calc_moving_point_to_point_distance_2nd_time_derivative": "Simbody's signature",
    "builder/contact.SmoothSphereHalfSpaceForce.set_parameters": "Simbody's setParameters",
    "rigid_contact/unilateral.PointPlaneContact.__init__": "Simbody's constructor",
    "rigid_contact/unilateral.SpherePlaneContact.__init__": "Simbody's constructor",
    "rigid_contact/unilateral.SphereSphereContact.__init__": "Simbody's constructor",
    "rigid_contact/unilateral.EdgeEdgeContact.__init__": "Simbody's constructor",
    "forces/discrete.MobilityActuator.__init__": "Simbody's constructor",
    # internal, each argument its own concept
    "algorithms/residual_tangent._joint_tangents": "vmapped over a joint group, one argument per row array",
    "body_queries.BodyQueries._point_pair": "two stations of two bodies at three levels, as Simbody's callers",
    "events.localize": "a bracket: its two times, its two values, the window and the active set",
    "io/mjcf_fit._contact": "the importer's tables, read once",
    "io/mjcf._equalities": "the importer's tables, read once",
    "optimize._augmented_lagrangian": "the public function's options, forwarded",
    "rigid_contact/time_stepper.SemiExplicitEulerTimeStepper._position_correction": "the step's matrices at one point of it",
}


def test_long_positional_signatures_are_the_listed_exceptions():
    found = {}
    for path in SOURCE.rglob("*.py"):
        module = path.relative_to(SOURCE).with_suffix("").as_posix().removesuffix("/__init__")
        tree = ast.parse(path.read_text())
        owners = {id(f): f"{c.name}." for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(names) >= 8:
                    found[f"{module}.{owners.get(id(node), '')}{node.name}"] = len(names)
    assert set(found) == set(LONG_SIGNATURES), (sorted(set(found) - set(LONG_SIGNATURES)),
                                                sorted(set(LONG_SIGNATURES) - set(found)))


def test_no_module_is_over_900_lines_and_those_over_600_are_listed_with_why():
    """A reader finds one concept per module: none over 900 lines, and each
    over 600 named in docs/architecture.md's "Module sizes" table (one
    concept a reader would not want split), with its size kept current."""
    listed = dict(re.findall(r"^\| `([\w/]+\.py)` \| (\d+) \|", (SOURCE.parents[1] / "docs" / "architecture.md")
                             .read_text(), re.M))
    sizes = {path.relative_to(SOURCE).as_posix(): len(path.read_text().splitlines()) for path in SOURCE.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > 900} == {}
    long = {m: n for m, n in sizes.items() if n > 600}
    assert set(long) == set(listed), (sorted(long), sorted(listed))
    stale = {m: (n, int(listed[m])) for m, n in long.items() if abs(n - int(listed[m])) > 50}
    assert not stale, f"docs/architecture.md's sizes are out of date: {stale}"
