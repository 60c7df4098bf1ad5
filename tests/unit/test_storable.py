"""storable: caller input refused with the field's path; runtime output repaired."""

from __future__ import annotations

import json
import math

import pytest

from dbos_agents import InvalidRequestError, storable

UGLY = "a\x00b\ud800c"


def test_repaired_text_and_json_hold_nothing_postgres_refuses() -> None:
    assert storable.text(UGLY) == "a\ufffdb\ufffdc"
    assert storable.text("plain \U0001f600") == "plain \U0001f600"  # a real pair stays
    out = storable.dumps({UGLY: [math.nan, math.inf, -math.inf, UGLY, 1, True, None]})
    assert "\\u0000" not in out and "NaN" in out
    assert json.loads(out) == {
        "a\ufffdb\ufffdc": ["NaN", "Infinity", "-Infinity", "a\ufffdb\ufffdc", 1, True, None]
    }
    assert storable.dumps({"ok": "fine"}) == '{"ok": "fine"}'


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"items": [{"name": "x\x00"}]}, "result.items[0].name"),
        ({"n": math.nan}, "result.n"),
        ({"n": -math.inf}, "result.n"),
        ({"n": 10**400}, "result.n"),
        ({"k\ud800": 1}, "result (a key)"),
    ],
)
def test_caller_values_are_refused_with_the_path(value: object, path: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        storable.check_value(value, "result")
    assert str(err.value).startswith(path)


def test_ids() -> None:
    assert storable.check_id("ses_1", "session_id") == "ses_1"
    for bad in ("", "x" * 257, "a\nb", "a\x00b", "\ud800", 5):
        with pytest.raises(InvalidRequestError):
            storable.check_id(bad, "session_id")
    storable.check_value({"ok": True, "n": 2**63 - 1, "f": 1.5, "s": "\U0001f600"}, "result")


def test_a_database_error_reaches_clients_without_its_sql() -> None:
    import sqlalchemy as sa

    from dbos_agents.loop.workflow import _public_error

    exc = sa.exc.DataError(
        "INSERT INTO dbos_agents.messages VALUES (%(secret)s)",
        {"secret": "s3cret"},
        ValueError("value too long for type character varying(5)\nDETAIL: more"),
    )
    text = _public_error(exc)
    assert text == "database error (ValueError): value too long for type character varying(5)"
    assert "INSERT" not in text and "s3cret" not in text
