"""docs/errors.md's catalogue with its calls (docs/error_calls.py): each
call raises its error, of the catalogue's type and with a message its
template matches, and each entry names exactly one catalogue row."""

import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "docs"))
import error_calls  # noqa: E402
import hooks  # noqa: E402

SITES = list(hooks.catalogue_sites())
#: Catalogue rows with a call or marked internal; it only grows, to all of them.
COVERED_AT_LEAST = 245


def _row(where, fragment):
    rows = [(error, message) for w, error, message in SITES if w == where and fragment in message]
    assert len(rows) == 1, f"{where} / {fragment!r} names {len(rows)} catalogue rows"
    return rows[0]


def _pattern(message):
    return re.compile(".*".join(re.escape(part) for part in re.split(r"\{[^{}]*\}", message)), re.DOTALL)


@pytest.mark.parametrize("where, fragment, call", error_calls.CALLS,
                         ids=[f"{where}:{fragment}" for where, fragment, _ in error_calls.CALLS])
def test_each_call_raises_its_error(where, fragment, call):
    error, message = _row(where, fragment)
    with pytest.raises(Exception) as raised:
        call()
    text = str(raised.value)
    if error == hooks.RUNTIME_ERROR:  # inside jax.jit, JAX's runtime error carries equinox's message
        found = _pattern(message).search(text)
    else:
        if error != "type(e)":  # re-raises the type it caught
            assert type(raised.value).__name__ == error.rsplit(".", 1)[-1], raised.value
        found = _pattern(message).fullmatch(text)
    assert found, f"{text!r} is not {message!r}"


def test_each_entry_names_one_row_and_the_catalogue_is_covered():
    entries = [(w, f) for w, f, _ in error_calls.CALLS + error_calls.INTERNAL]
    assert len(set(entries)) == len(entries)
    rows = {_row(*entry) + entry[:1] for entry in entries}
    assert len(rows) == len(entries), "two entries name the same row"
    assert len(rows) >= COVERED_AT_LEAST, f"{len(rows)} of {len(SITES)} rows have a call"
