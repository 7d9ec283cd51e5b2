"""The benchmark page's tables, rendered from the runs' JSON.

    python benchmarks/render.py           # rewrite benchmarks/README.md's result blocks
    python benchmarks/render.py --check   # exit 1 if the page differs from its JSON

A result block of benchmarks/README.md is the text between
``<!-- results: NAME -->`` and ``<!-- end results: NAME -->``: the run's
header (command, date, machine, versions) and ``NAME.render(results)`` of
the script ``benchmarks/NAME.py``, from ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).parent
PAGE = HERE / "README.md"
sys.path.insert(0, str(HERE))  # the scripts import each other by name

import record  # noqa: E402
BLOCK = re.compile(r"(<!-- results: (\w+) -->\n)(.*?)(<!-- end results: \2 -->)", re.S)


def block(name: str) -> str:
    """The rendered text of one result block."""
    script = importlib.import_module(name)
    data = record.load(name)
    return f"{record.header(data['run'])}\n\n{script.render(data['results']).strip()}\n\n"


def rendered(page: str) -> str:
    return BLOCK.sub(lambda m: m[1] + block(m[2]) + m[4], page)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is not its JSON rendered")
    args = parser.parse_args()
    page = PAGE.read_text()
    new = rendered(page)
    if args.check:
        if new != page:
            print(f"{PAGE} differs from its JSON rendered: run python benchmarks/render.py", file=sys.stderr)
            sys.exit(1)
        return
    PAGE.write_text(new)
    print(f"rendered {len(BLOCK.findall(page))} result blocks into {PAGE}")


if __name__ == "__main__":
    main()
