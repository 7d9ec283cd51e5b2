"""docs/errors.md's catalogue with its calls (docs/error_calls.py): each
call raises its error, of the catalogue's type and with a message its
template matches; each entry names exactly one catalogue row, and every
row has a call or a reason why none reaches it."""

import pathlib
import re
import sys

import pytest

import simbodyx as sx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "docs"))
import error_calls  # noqa: E402
import hooks  # noqa: E402

SITES = list(hooks.catalogue_sites())


def _row(where, fragment):
    rows = [(error, message) for w, error, message in SITES if w == where and fragment in message]
    assert len(rows) == 1, f"{where} / {fragment!r} names {len(rows)} catalogue rows"
    return rows[0]


def _pattern(message):
    """The message's template as a regex, its fields as wildcards."""
    return ".*".join(re.escape(part) for part in re.split(r"\{[^{}]*\}", message))


@pytest.mark.parametrize("where, fragment, call", error_calls.CALLS,
                         ids=[f"{where}:{fragment}" for where, fragment, _ in error_calls.CALLS])
def test_each_call_raises_its_error(where, fragment, call):
    error, message = _row(where, fragment)
    with pytest.raises(Exception) as raised:
        call()
    text = raised.value.args[0] if isinstance(raised.value, KeyError) else str(raised.value)
    if error == hooks.RUNTIME_ERROR:  # raised inside compiled code: the message first, then where it happened
        assert isinstance(raised.value, sx.RuntimeCheckError), raised.value
        found = re.fullmatch(f"{_pattern(message)}( \\(at [^()]*\\))?", text, re.DOTALL)
    else:
        if error != "type(e)":  # re-raises the type it caught
            assert type(raised.value).__name__ == error.rsplit(".", 1)[-1], raised.value
        # the whole message, or its end where a caller prefixes its own name ("{label}: {e}")
        found = re.fullmatch(f"(.*: )?{_pattern(message)}", text, re.DOTALL)
    assert found, f"{text!r} is not {message!r}"


def test_each_row_has_one_call_or_a_reason():
    entries = [(w, f) for w, f, _ in error_calls.CALLS + error_calls.UNCALLED]
    assert len(set(entries)) == len(entries)
    named = {(where, _row(where, fragment)[1]) for where, fragment in entries}
    assert len(named) == len(entries), "two entries name the same row"
    missing = [(where, message) for where, _, message in SITES if (where, message) not in named]
    assert not missing, f"catalogue rows without a call in docs/error_calls.py: {missing}"
