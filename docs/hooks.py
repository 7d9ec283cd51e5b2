"""MkDocs hooks: errors.md's catalogue is generated from the ``raise``
statements of src/simbodyx, so it always lists the messages the code can
raise."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "simbodyx"
CATALOGUE = "<!-- error catalogue -->"


def on_page_markdown(markdown: str, page, **_) -> str:
    if CATALOGUE in markdown:
        markdown = markdown.replace(CATALOGUE, error_catalogue())
    return markdown


def _message(node: ast.expr) -> str:
    """A raise's message as written: an f-string's fields shown as ``{expression}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_message(part) if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
                       for part in node.values)
    return "{" + ast.unparse(node) + "}"


#: What an error raised inside compiled code (``faults.fault_if``) is, when
#: the call returns to Python.
RUNTIME_ERROR = "RuntimeCheckError"


def _is_text(node) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def raise_sites(path: pathlib.Path):
    """(function qualname, exception name, message) for each error a file can
    raise: each ``raise``, and each message of an error raised inside
    compiled code (the texts of a list literal given to ``fault_if``, and
    of the lists named ``*messages`` it chooses from, built or appended
    to), as ``RUNTIME_ERROR``."""
    found = []

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            where = ".".join(scope)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, scope + [child.name])
                continue
            if isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call):
                args = child.exc.args
                found.append((where, ast.unparse(child.exc.func), _message(args[0]) if args else ""))
            elif (isinstance(child, ast.Call) and ast.unparse(child.func).endswith("fault_if")
                  and len(child.args) >= 4 and isinstance(child.args[3], ast.List)):
                found.extend((where, RUNTIME_ERROR, _message(text)) for text in child.args[3].elts if _is_text(text))
            elif (isinstance(child, ast.Call) and ast.unparse(child.func).endswith("messages.append")
                  and _is_text(child.args[0])):
                found.append((where, RUNTIME_ERROR, _message(child.args[0])))
            elif (isinstance(child, (ast.Assign, ast.AugAssign)) and isinstance(child.value, ast.ListComp)
                  and _is_text(child.value.elt)
                  and ast.unparse(child.targets[0] if isinstance(child, ast.Assign) else child.target).endswith(
                      "messages")):
                found.append((where, RUNTIME_ERROR, _message(child.value.elt)))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found


def catalogue_sites():
    """(where, exception name, message) for every error simbodyx raises, in
    source order; ``where`` is the raising function, as
    ``module.qualname`` below ``simbodyx``."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for scope, error, message in raise_sites(path):
            yield (f"{module}.{scope}" if scope else module), error, message


def error_calls():
    """{(where, fragment): the call's code} from docs/error_calls.py's
    ``CALLS``, and {(where, fragment): why} from its ``UNCALLED``, read
    without importing it."""
    path = ROOT / "docs" / "error_calls.py"
    text = path.read_text()
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and node.targets[0].id in ("CALLS", "UNCALLED"):
            entries = {}
            for entry in node.value.elts:
                where, fragment, last = entry.elts
                shown = last.value if isinstance(last, ast.Constant) else ast.get_source_segment(text, last.body)
                one_line = " ".join(line.strip() for line in shown.splitlines()).replace("( ", "(")
                entries[where.value, fragment.value] = one_line
            found[node.targets[0].id] = entries
    return found["CALLS"], found["UNCALLED"]


def error_catalogue() -> str:
    """A Markdown table of every error simbodyx raises, by module, with the
    call that raises it (docs/error_calls.py)."""
    calls, uncalled = error_calls()
    lines = ["| where | error | message | raised by |", "|---|---|---|---|"]
    for where, error, message in catalogue_sites():
        call = next((f"`{code}`" for (w, f), code in calls.items() if w == where and f in message), None)
        if call is None:
            call = next((f"no call: {why}" for (w, f), why in uncalled.items() if w == where and f in message), "")
        text = " ".join(message.split()).replace("`", "'")
        cells = [f"`simbodyx.{where}`", f"`{error}`", f"`{text}`", call]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)
