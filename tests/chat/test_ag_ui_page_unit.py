"""The page side of AG-UI without a database: a ``RunAgentInput``'s tools, state, context
and forwarded props read into a run's page input, and the state sent back as JSON Patch."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from ag_ui.core import RunAgentInput, StateDeltaEvent, StateSnapshotEvent
from fastapi import HTTPException

from dbos_agents.client_tools import FrontendTool
from dbos_agents.errors import DefinitionError, InvalidRequestError
from dbos_agents.events import StateEvent
from dbos_agents.server.ag_ui.page import page_input
from dbos_agents.server.ag_ui.shared_state import PageState

PICK = {"name": "pick", "description": "d", "parameters": {"type": "object"}}


def body(**fields: Any) -> RunAgentInput:
    return RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": [], **fields})


def event(version: int, state: dict[str, Any]) -> StateEvent:
    return StateEvent(version=version, run=1, turn=1, tool_call_id="c", state=state)


def test_page_input_carries_tools_context_props_and_a_changed_state() -> None:
    page = page_input(
        body(
            tools=[PICK],
            context=[{"description": "Page", "value": "cart"}],
            forwardedProps={"a": 1},
            state={"n": 2, "_version": 3},
        ),
        {"n": 1},
        3,
        starts_run=True,
    )
    assert page == {
        "tools": [PICK],
        "context": [{"description": "Page", "value": "cart"}],
        "forwarded_props": {"a": 1},
        "state": {"n": 2},
        "state_base": 3,
    }


def test_a_state_equal_to_the_sessions_or_with_no_run_is_not_committed() -> None:
    assert "state" not in page_input(
        body(state={"n": 1, "_version": 0}), {"n": 1}, 5, starts_run=True
    )
    assert page_input(body(state={"n": 9}), {"n": 1}, 5, starts_run=False) == {}
    assert page_input(body(state={}), {"n": 1}, 5, starts_run=True) == {}


def test_a_state_older_than_the_sessions_is_a_conflict() -> None:
    with pytest.raises(HTTPException) as raised:
        page_input(body(state={"n": 2, "_version": 1}), {"n": 1}, 2, starts_run=True)
    assert raised.value.status_code == 409
    assert "version 1, the session's is 2" in str(raised.value.detail)


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"tools": [{**PICK, "parameters": {"type": 3}}]}, "tools[0].parameters"),
        ({"tools": [{**PICK, "parameters": {"type": "array"}}]}, "tools[0].parameters"),
        ({"tools": [PICK, PICK]}, "tools[1].name"),
        ({"tools": [{**PICK, "name": "subagent__x"}]}, "tools[0].name"),
        ({"state": "text"}, "state"),
        ({"state": {"_version": -1}}, "state._version"),
    ],
)
def test_bad_page_input_names_the_field(fields: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        page_input(body(**fields), None, 0, starts_run=True)
    assert str(raised.value).startswith(f"{name}: "), raised.value


def test_states_sent_are_deltas_from_what_the_page_holds() -> None:
    held: dict[str, Any] = {"owner": "ada", "_version": 0}
    page = PageState(held, posted=True)
    assert page.unsettled
    first = page.settle(1)
    assert not page.unsettled
    assert isinstance(first, StateDeltaEvent)
    shown = jsonpatch.apply_patch(held, [op.model_dump() for op in first.delta])
    for version, state in [(2, {"owner": "ada", "n": [1]}), (3, {"owner": "bo", "n": [1, 2]})]:
        sent = page.event(event(version, state))
        assert isinstance(sent, StateDeltaEvent)
        shown = jsonpatch.apply_patch(shown, [op.model_dump(by_alias=True) for op in sent.delta])
        assert shown == {**state, "_version": version}
    assert page.event(event(3, {"owner": "bo", "n": [1, 2]})) is None  # held already
    assert page.settle(3) is None


def test_a_refused_commit_leaves_the_pages_version() -> None:
    page = PageState({"owner": "ada"}, posted=True)
    assert page.settle(0) is None and page.held == {"owner": "ada"}
    assert not PageState({}, posted=True).unsettled  # nothing posted, nothing to settle


def test_a_page_that_holds_nothing_gets_a_snapshot() -> None:
    sent = PageState({}).event(event(4, {"n": 1}))
    assert isinstance(sent, StateSnapshotEvent) and sent.snapshot == {"n": 1, "_version": 4}


def test_frontend_tool_checks_its_schema_and_arguments() -> None:
    tool = FrontendTool("pick", parameters={"type": "object", "required": ["x"]})
    assert tool.input_schema == {"type": "object", "required": ["x"]}
    assert tool.output_schema == {}
    assert tool.output.model_validate([1, "two"]).root == [1, "two"]
    with pytest.raises(ValueError, match="'x' is a required property"):
        tool.validate_arguments({})
    with pytest.raises(DefinitionError, match="not a valid JSON schema"):
        FrontendTool("pick", parameters={"type": 3})
