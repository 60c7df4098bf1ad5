"""One typed delivery from the HTTP body or the client to the waiting workflow."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter

from dbos_agents.delivery import (
    ApprovalDelivery,
    Delivery,
    ErrorDelivery,
    InterruptDelivery,
    ResultDelivery,
    answers,
    decode,
    encode,
)
from dbos_agents.server.schemas import Submission

DELIVERIES: list[Delivery] = [
    ResultDelivery(result={"ok": True, "nested": [1, 2.5, None, "x"]}),
    ResultDelivery(result=None),
    ErrorDelivery(error="the user closed the dialog"),
    ApprovalDelivery(approved=True),
    ApprovalDelivery(approved=False, reason="not today"),
    InterruptDelivery(),
]


@pytest.mark.parametrize("delivery", DELIVERIES, ids=lambda d: d.kind)
def test_round_trip_through_json(delivery: Delivery) -> None:
    """What the submit path sends is what the wait reads, through DBOS's JSON."""
    wire = json.loads(json.dumps(encode(delivery)))
    assert decode(wire) == delivery


def test_which_wait_each_kind_answers() -> None:
    assert [answers(d) for d in DELIVERIES] == [
        "client",
        "client",
        None,
        "approval",
        "approval",
        None,
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"kind": "client-tool-result", "tool_call_id": "c1", "result": {"ok": True}},
            ResultDelivery(result={"ok": True}),
        ),
        (
            {"kind": "client-tool-error", "tool_call_id": "c1", "error": "gone"},
            ErrorDelivery(error="gone"),
        ),
        (
            {"kind": "approval", "tool_call_id": "c1", "approved": False, "reason": "no"},
            ApprovalDelivery(approved=False, reason="no"),
        ),
    ],
)
def test_http_bodies_map_onto_deliveries(body: dict[str, object], expected: Delivery) -> None:
    sub = TypeAdapter(Submission).validate_python(body)
    assert sub.delivery() == expected
    assert decode(encode(sub.delivery())) == expected


@pytest.mark.parametrize(
    "payload", [None, "text", {"kind": "bogus"}, {"kind": "approval"}, {"kind": "result", "x": 1}]
)
def test_unreadable_payloads_become_errors_the_model_reads(payload: object) -> None:
    got = decode(payload)
    assert isinstance(got, ErrorDelivery) and "unreadable submission" in got.error
