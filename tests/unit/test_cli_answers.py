"""What answer a wait expects, as ``pending``, ``show`` and ``follow`` print it: the tool's
arguments, a sketch of its output schema, an example result that validates, and a
``dbos-agents submit`` line that can be pasted as printed; readable at 80 columns."""

from __future__ import annotations

import io
import json
import shlex
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal
from uuid import UUID

import jsonschema
import pytest
from pydantic import BaseModel, Field
from rich.console import Console

from dbos_agents.cli import expected, render
from dbos_agents.events import PendingEvent
from dbos_agents.records import PendingCall


def _valid(schema: dict[str, Any], value: object) -> bool:
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return not list(validator.iter_errors(value))


class ConfirmOut(BaseModel):
    confirmed: bool
    note: str = ""


class Color(StrEnum):
    red = "red"
    blue = "blue"


class Line(BaseModel):
    sku: str = Field(min_length=5, max_length=8)
    quantity: int = Field(ge=1, le=9)
    price: float = Field(gt=0.5, multiple_of=0.25)


class Order(BaseModel):
    id: UUID
    when: datetime
    day: date
    color: Color
    mode: Literal["fast", "slow"]
    lines: list[Line] = Field(min_length=2)
    tags: list[str]
    parent: Order | None
    maybe: int | None = None
    email: str = Field(json_schema_extra={"format": "email"})
    site: str = Field(json_schema_extra={"format": "uri"})
    code: str = Field(pattern=r"^[A-Z]{3}-\d{2}$")
    const: Literal["v1"]


def test_the_example_of_a_simple_result_is_its_required_fields() -> None:
    schema = ConfirmOut.model_json_schema()
    assert expected.example(schema) == expected.Example({"confirmed": True})


def test_an_example_validates_against_nested_constrained_and_formatted_schemas() -> None:
    schema = Order.model_json_schema()
    found = expected.example(schema)
    assert found is not None and _valid(schema, found.value), found
    value = found.value
    assert isinstance(value, dict)
    assert set(value) == set(schema["$defs"]["Order"]["required"])  # the required ones only
    assert value["code"] == "AAA-00"  # a simple pattern is followed
    assert len(value["lines"]) == 2 and value["lines"][0]["quantity"] >= 1
    assert value["parent"] is None  # the cheapest branch that validates, not a recursion


@pytest.mark.parametrize(
    "schema",
    [
        {},  # anything
        {"type": "string"},
        {"type": ["integer", "null"], "minimum": 3},
        {"type": "number", "exclusiveMinimum": 10, "exclusiveMaximum": 11},
        {"type": "array", "items": {"type": "boolean"}, "minItems": 3},
        {"enum": [3, "x"]},
        {"type": "object"},
        {"anyOf": [{"type": "string", "maxLength": 0}, {"type": "integer"}]},
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 1.5}]},
        {
            "allOf": [
                {"type": "object", "required": ["a"]},
                {"properties": {"a": {"type": "integer"}}},
            ]
        },
    ],
)
def test_examples_of_bare_schemas_validate(schema: dict[str, Any]) -> None:
    found = expected.example(schema)
    assert found is not None and _valid(schema, found.value), (schema, found)


def test_no_example_when_none_validates() -> None:
    assert expected.example({"type": "string", "minLength": 3, "maxLength": 2}) is None
    assert expected.example({"not": {}}) is None
    assert expected.example({"type": "string", "pattern": "(?=a)b"}) is None
    assert expected.example({"type": "null"}) == expected.Example(None)


def test_the_sketch_names_fields_types_and_what_is_optional() -> None:
    assert expected.sketch(ConfirmOut.model_json_schema()) == (
        '{"confirmed": boolean, "note"?: string}'
    )
    sketch = expected.sketch(Order.model_json_schema())
    assert '"id": string (uuid)' in sketch and '"mode": "fast" | "slow"' in sketch
    assert '"lines": [{"sku": string, "quantity": integer, "price": number}]' in sketch
    assert '"maybe"?: integer | null' in sketch and '"const": "v1"' in sketch


def _call(**over: Any) -> PendingCall:
    now = datetime.now(UTC)
    row: dict[str, Any] = {
        "root_session_id": "ses_627c3ea6148e4c13b593761ab8c19a8d",
        "tool_call_id": "call_2_1",
        "owner_session_id": "ses_627c3ea6148e4c13b593761ab8c19a8d",
        "owner_workflow_id": "ses_627c3ea6148e4c13b593761ab8c19a8d",
        "kind": "client",
        "tool": "confirm_with_customer",
        "arguments": {"question": "Refund $249.00 for order A-42?"},
        "deadline": now + timedelta(minutes=5),
        "output_schema": ConfirmOut.model_json_schema(),
        "status": "waiting",
        "submitted_at": None,
        "resolved_at": None,
        "user_id": None,
        "tenant_id": None,
        "created_at": now,
    }
    return PendingCall.model_validate({**row, **over})


def _console() -> Console:
    return Console(width=80, record=True, color_system=None, file=io.StringIO())


def _wait_at_80(p: PendingCall | PendingEvent, database_url: str | None = None) -> str:
    console = _console()
    render.print_wait(console, p, database_url=database_url)
    return console.export_text()


def _submit_line(text: str) -> list[str]:
    (line,) = [x for x in text.splitlines() if x.lstrip().startswith("dbos-agents submit")]
    return shlex.split(line)


def test_a_wait_shows_the_question_the_schema_and_a_command_that_validates() -> None:
    p = _call()
    text = _wait_at_80(p)
    assert "Refund $249.00 for order A-42?" in text
    assert '{"confirmed": boolean, "note"?: string}' in text
    argv = _submit_line(text)
    assert argv[:4] == ["dbos-agents", "submit", p.root_session_id, p.tool_call_id]
    assert argv[4] == "--result" and json.loads(argv[5]) == {"confirmed": True}
    assert p.output_schema is not None and _valid(p.output_schema, json.loads(argv[5]))
    assert "…" not in text


def test_the_command_carries_the_database_url_it_was_given() -> None:
    url = "postgresql://u@db.example:5432/app"
    argv = _submit_line(_wait_at_80(_call(), database_url=url))
    assert argv[-2:] == ["--database-url", url]


def test_an_approval_is_answered_with_approve_or_deny() -> None:
    p = _call(kind="approval", tool="close_account", arguments={"account_id": "acc-1"},
              output_schema=None)  # fmt: skip
    text = _wait_at_80(p)
    assert "approval" in text and '{"account_id": "acc-1"}' in text
    assert _submit_line(text)[4:] == ["--approve"]
    assert "--deny" in text


def test_a_followed_wait_reads_the_same() -> None:
    p = _call()
    event = PendingEvent.model_validate(p.model_dump())
    assert _submit_line(_wait_at_80(event)) == _submit_line(_wait_at_80(p))


def test_pending_reads_at_80_columns() -> None:
    rows = [
        _call(),
        _call(
            tool_call_id="call_9_3",
            owner_session_id="ses_ffff3ea6148e4c13b593761ab8c19a8d",
            kind="approval",
            tool="close_account_after_review",
            arguments={"account_id": "acc-1"},
            output_schema=None,
        ),
    ]
    console = _console()
    render.print_pending(console, rows)
    text = console.export_text()
    assert "…" not in text, text
    for word in ("client", "approval", "confirm_with_customer", "close_account_after_review",
                 "waiting", "in 4m", "ses_ffff3ea6148e4c13b593761ab8c19a8d"):  # fmt: skip
        assert word in text, (word, text)
    assert len([x for x in text.splitlines() if "dbos-agents submit" in x]) == 2
    assert all(len(x) <= 80 for x in text.splitlines() if "dbos-agents submit" not in x), text


def test_a_settled_call_shows_what_was_submitted_and_no_command() -> None:
    p = _call(status="submitted", submission={"kind": "result", "result": {"confirmed": True}})
    console = _console()
    render.print_pending(console, [p])
    text = console.export_text()
    assert "submitted" in text and "dbos-agents submit" not in text
    assert '"confirmed": true' in text
