"""docs/simbody_names.md, the map from Simbody's method names to simbodyx's:
every spelling it gives exists where it says (resolved on a real system,
model and Acceleration-stage State), every "not provided" row gives a
reason, and, with ../shared/seeds/ beside the project, each seed page's
rows are exactly the method names declared on that page."""

import collections
import inspect
import pathlib
import re

import pytest

import simbodyx as sx
from conftest import link, new_system

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "simbody_names.md"
SEEDS = ROOT.parent / "shared" / "seeds"
PAGES = {"MobilizedBody": "MobilizedBody", "SimbodyMatterSubsystem": "SimbodyMatterSubsystem", "System": "System",
         "Constraint::Custom::Implementation": "Constraint_Custom_Implementation",
         "MobilizedBody::Custom::Implementation": "MobilizedBody_Custom_Implementation"}

#: a declaration line of a seed page: "<return type>  name (arguments) [const]"
DECLARATION = re.compile(r"^(?:virtual |static |template<[^>]*>\s*)*(?:[A-Za-z_][\w:<>,&* ]*?)?\s+"
                         r"(?P<name>[A-Za-z_]\w*)\s\([^()]*(?:\([^()]*\)[^()]*)*\)\s*(?:const)?\s*(?:=\s*0)?\s*"
                         r"(?:override)?\s*$")
#: the pages lost the space between some return types and names ("Vec3getBodyOriginLocation")
GLUED_TYPE = re.compile(r"^[A-Z]\w*?(?=(?:get|find|clone)(?:[A-Z]|$))")

Row = collections.namedtuple("Row", "name spellings note")


def _table() -> dict[str, list[Row]]:
    sections, page = {}, None
    for line in TABLE.read_text().splitlines():
        if line.startswith("## "):
            page = line[3:].strip()
            sections[page] = []
        elif page and line.startswith("| `"):
            name, where, note = (cell.strip() for cell in line.strip().strip("|").split("|"))
            sections[page].append(Row(name.strip("`"), re.findall(r"`([^`]+)`", where), note))
    return sections


def _seed_names(page: str) -> set[str]:
    names = set()
    for line in (SEEDS / f"{page}.txt").read_text().splitlines():
        m = DECLARATION.match(line)
        if m:
            names.add(GLUED_TYPE.sub("", m["name"]))
    return names


@pytest.fixture(scope="module")
def roots():
    system, matter, _ = new_system()
    sx.MobilizedBody.Pin(matter.Ground(), link())
    model, state = system.realize_topology()
    return {"sx": sx, "MobilizedBody": sx.MobilizedBody, "Constraint": sx.Constraint, "Force": sx.Force,
            "matter": matter, "system": system, "model": model,
            "state": model.realize(state, sx.Stage.Acceleration)}


def _resolve(spelling: str, roots):
    """The object a spelling names; ``Owner(keyword=)`` checks that Owner takes
    ``keyword`` (a parameter, or one of its ``FUNCTIONS``)."""
    m = re.fullmatch(r"([A-Za-z_][\w.]*)(?:\((\w+)=\))?", spelling)
    assert m, f"malformed spelling {spelling!r}"
    path, keyword = m.groups()
    head, *attributes = path.split(".")
    obj = roots[head]
    for attribute in attributes:
        obj = getattr(obj, attribute)
    if keyword:
        parameters = inspect.signature(obj).parameters
        named = {n for n, p in parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        assert keyword in named | set(getattr(obj, "FUNCTIONS", ())), f"{path} takes no {keyword}="
    return obj


def test_every_spelling_exists_and_every_omission_has_a_reason(roots):
    table = _table()
    assert set(PAGES) <= set(table)  # the rest: Simbody classes with no seed page (contact, force elements)
    for page, rows in table.items():
        duplicated = [n for n, k in collections.Counter(r.name for r in rows).items() if k > 1]
        assert not duplicated, f"{page}: rows repeated: {duplicated}"
        for row in rows:
            if row.spellings and not row.note.startswith("not provided"):
                for spelling in row.spellings:
                    try:
                        _resolve(spelling, roots)
                    except (AttributeError, KeyError) as e:
                        pytest.fail(f"{page}.{row.name}: {spelling} does not exist ({e})")
            else:
                reason = row.note.removeprefix("not provided:").strip()
                assert row.note.startswith("not provided:") and len(reason) > 10, \
                    f"{page}.{row.name}: neither a spelling nor a reason"


@pytest.mark.skipif(not SEEDS.is_dir(), reason="../shared/seeds/ is not beside the project")
def test_the_table_covers_the_seed_pages_exactly():
    table = _table()
    for page, seed in PAGES.items():
        listed, declared = {r.name for r in table[page]}, _seed_names(seed)
        assert declared - listed == set(), f"{page}: seed methods missing from the table"
        assert listed - declared == set(), f"{page}: table rows not on the seed page"
        provided = sum(not r.note.startswith("not provided") for r in table[page])
        print(f"{page}: {len(declared)} names, {provided} provided, {len(declared) - provided} explained")
