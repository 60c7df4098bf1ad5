"""The AG-UI mapping of a session's log, without a database: retractions never leave text
twice at a client that applies the events as AG-UI's client does; what was not streamed
is sent whole; waits and run ends close the run; the posted thread's tail is read right."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Message,
    RunAgentInput,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as AgToolCall

from dbos_agents.errors import InvalidRequestError
from dbos_agents.events import (
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StatusEvent,
    ToolCallPiece,
)
from dbos_agents.ids import ask_id, child_session_id
from dbos_agents.messages import ToolCall
from dbos_agents.records import HistoryEntry, PendingCall
from dbos_agents.server.ag_ui.mapping import PROGRESS_EVENT, Mapper
from dbos_agents.server.ag_ui.parse import parse_input
from dbos_agents.server.ag_ui.reconcile import answers_of, new_message, operation_of
from dbos_agents.server.ag_ui.view import ClientView

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def text(t: str, turn: int = 1, attempt: int = 0, run: int = 1) -> DeltaEvent:
    return DeltaEvent(run=run, turn=turn, attempt=attempt, text=t, cursor="0")


def piece(index: int, args: str, id: str | None = None, name: str | None = None) -> DeltaEvent:
    p = ToolCallPiece(index=index, id=id, name=name, arguments=args)
    return DeltaEvent(run=1, turn=1, attempt=0, tool_call=p, cursor="0")


def retract(tool_index: int | None = None, attempt: int = 1) -> RetractEvent:
    return RetractEvent(run=1, turn=1, attempt=attempt, tool_index=tool_index, cursor="0")


def message(role: str, content: str | None, seq: int, run: int = 1, **kw: Any) -> MessageEvent:
    return MessageEvent(
        role=role, content=content, seq=seq, run_seq=run, created_at=NOW, cursor=str(seq), **kw
    )


def status(s: str, run: int = 1, error: str | None = None) -> StatusEvent:
    return StatusEvent(status=s, run_seq=run, final_output=None, error=error)  # type: ignore[arg-type]


class Client:
    """What AG-UI's client does with the events (its ``defaultApplyEvents``), reduced."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages

    def find(self, id: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if m["id"] == id), None)

    def apply(self, events: list[BaseEvent]) -> None:
        for e in events:
            d = e.model_dump(by_alias=True, mode="json")
            kind = d["type"]
            if kind == "TEXT_MESSAGE_START" and self.find(d["messageId"]) is None:
                self.messages.append({"id": d["messageId"], "role": "assistant", "content": ""})
            elif kind == "TEXT_MESSAGE_CONTENT":
                m = self.find(d["messageId"])
                assert m is not None
                m["content"] = (m.get("content") or "") + d["delta"]
            elif kind == "TOOL_CALL_START":
                m = self.find(d["parentMessageId"])
                if m is None:
                    m = {"id": d["parentMessageId"], "role": "assistant"}
                    self.messages.append(m)
                m.setdefault("toolCalls", []).append(
                    {"id": d["toolCallId"], "name": d["toolCallName"], "arguments": ""}
                )
            elif kind == "TOOL_CALL_ARGS":
                for m in self.messages:
                    for c in m.get("toolCalls") or []:
                        if c["id"] == d["toolCallId"]:
                            c["arguments"] += d["delta"]
            elif kind == "TOOL_CALL_RESULT":
                self.messages.append(
                    {"id": d["messageId"], "role": "tool", "content": d["content"]}
                )
            elif kind == "MESSAGES_SNAPSHOT":
                self.messages = [
                    {
                        "id": m["id"],
                        "role": m["role"],
                        "content": m.get("content"),
                        **(
                            {
                                "toolCalls": [
                                    {
                                        "id": c["id"],
                                        "name": c["function"]["name"],
                                        "arguments": c["function"]["arguments"],
                                    }
                                    for c in m["toolCalls"]
                                ]
                            }
                            if m.get("toolCalls")
                            else {}
                        ),
                    }
                    for m in d["messages"]
                ]

    def texts(self) -> list[str]:
        return [m["content"] for m in self.messages if m["role"] == "assistant" and m["content"]]


def run(
    log: list[SessionEvent], posted: list[Message] | None = None
) -> tuple[Mapper, Client, list[str]]:
    posted = posted or [UserMessage(id="u1", content="hi")]
    mapper = Mapper(ClientView(posted), 1, "t", "r")
    client = Client([m.model_dump(by_alias=True, mode="json") for m in posted])
    events = mapper.feed(log)
    client.apply(events)
    return mapper, client, [e.type.value for e in events]


def test_a_streamed_turn() -> None:
    mapper, client, types = run(
        [text("Hel"), text("lo"), message("assistant", "Hello", 2), status("completed")]
    )
    assert types == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert client.texts() == ["Hello"] and mapper.finished


def test_a_retracted_reply_leaves_no_text_twice() -> None:
    log: list[SessionEvent] = [
        text("The quick"),
        text(" brown"),
        retract(),  # the model had to start again
        text("The quick", attempt=1),
        text(" brown fox", attempt=1),
        message("assistant", "The quick brown fox", 2),
        status("completed"),
    ]
    _, client, types = run(log)
    assert client.texts() == ["The quick brown fox"]
    assert types.count("TEXT_MESSAGE_START") == 2 == types.count("TEXT_MESSAGE_END")
    assert "MESSAGES_SNAPSHOT" in types
    assert [m["id"] for m in client.messages] == ["u1", "dbos:1:1:1"]


def test_a_continued_reply_is_one_message() -> None:
    log: list[SessionEvent] = [
        text("The quick"),
        text(" brown", attempt=1),  # a crash: the next attempt continues the text
        message("assistant", "The quick brown", 2),
    ]
    _, client, types = run(log)
    assert client.texts() == ["The quick brown"] and "MESSAGES_SNAPSHOT" not in types


def test_a_retracted_tool_call_comes_whole_once() -> None:
    log: list[SessionEvent] = [
        piece(0, '{"que', id="call_1", name="confirm"),
        retract(tool_index=0),
        piece(0, '{"question": "ok?"}', id="call_1", name="confirm"),
        message(
            "assistant",
            None,
            2,
            tool_calls=[ToolCall(id="call_1", name="confirm", arguments='{"question": "ok?"}')],
        ),
    ]
    _, client, types = run(log)
    (reply,) = [m for m in client.messages if m["role"] == "assistant"]
    assert reply["toolCalls"] == [
        {"id": "call_1", "name": "confirm", "arguments": '{"question": "ok?"}'}
    ]
    assert types.count("TOOL_CALL_START") == 2 == types.count("TOOL_CALL_END")


def test_a_reply_that_was_not_streamed_is_sent_whole() -> None:
    call = ToolCall(id="c9", name="lookup", arguments="{}")
    log: list[SessionEvent] = [
        message("assistant", "Looking.", 2, tool_calls=[call]),
        message("tool", "found", 3, tool_call_id="c9", name="lookup"),
        message("assistant", "Done.", 4),
        status("completed"),
    ]
    _, client, types = run(log)
    assert client.texts() == ["Looking.", "Done."]
    assert [m["id"] for m in client.messages] == ["u1", "dbos:1:m2", "dbos:1:tool:c9", "dbos:1:m4"]
    assert types.count("TOOL_CALL_RESULT") == 1


def test_earlier_runs_and_user_messages_are_skipped() -> None:
    mapper = Mapper(ClientView([]), 2, "t", "r")
    events = mapper.feed(
        [text("old", run=1), status("completed", run=1), message("user", "hi", 5, run=2)]
    )
    assert events == [] and not mapper.finished


def test_a_client_tool_wait_and_an_approval_end_the_run() -> None:
    wait = PendingEvent(
        root_session_id="s",
        tool_call_id="call_1",
        kind="client",
        tool="confirm",
        arguments={},
        output_schema=None,
        deadline=NOW,
    )
    call = ToolCall(id="call_1", name="confirm", arguments="{}")
    mapper, _, types = run([message("assistant", None, 2, tool_calls=[call]), wait])
    assert types[-1] == "RUN_FINISHED" and mapper.finished
    approval = wait.model_copy(update={"kind": "approval", "tool": "close_account"})
    mapper = Mapper(ClientView([]), 1, "t", "r")
    (*_, finished) = mapper.feed([message("assistant", None, 2, tool_calls=[call]), approval])
    d = finished.model_dump(by_alias=True, mode="json")
    assert d["outcome"]["type"] == "interrupt"
    assert d["outcome"]["interrupts"][0]["toolCallId"] == "call_1"


@pytest.mark.parametrize(
    ("state", "kind", "code"),
    [
        ("completed", "RUN_FINISHED", None),
        ("failed", "RUN_ERROR", "FAILED"),
        ("max_turns", "RUN_ERROR", "MAX_TURNS"),
        ("interrupted", "RUN_FINISHED", None),
    ],
)
def test_run_ends(state: str, kind: str, code: str | None) -> None:
    mapper = Mapper(ClientView([]), 1, "t", "r")
    (*_, last) = mapper.feed([text("a"), status(state, error="boom")])
    assert last.type.value == kind
    assert getattr(last, "code", None) == code


def body(messages: list[dict[str, Any]], **kw: Any) -> RunAgentInput:
    return RunAgentInput.model_validate({"threadId": "t", "runId": "r", "messages": messages, **kw})


def test_the_posted_tail() -> None:
    u1 = {"id": "u1", "role": "user", "content": "one"}
    a1 = {"id": "dbos:1:1:0", "role": "assistant", "content": "reply"}
    u2 = {"id": "u2", "role": "user", "content": [{"type": "text", "text": "two"}]}
    assert new_message(body([u1]), 0) == "one"
    assert new_message(body([u1]), 1) is None  # a rerun: that message started run 1
    assert new_message(body([u1, a1, u2]), 1) == "two"
    assert new_message(body([u1, a1]), 1) is None
    assert operation_of(body([u1, a1])) == "read_events"
    assert operation_of(body([u1])) == "send_message"
    tool = {"id": "x", "role": "tool", "toolCallId": "c1", "content": "{}"}
    assert operation_of(body([u1, a1, tool])) == "submit_result"
    resume = [{"interruptId": "c1", "status": "resolved", "payload": {"approved": True}}]
    assert operation_of(body([u1, a1], resume=resume)) == "decide_approval"


def test_answers_are_checked_against_the_waits() -> None:
    wait = PendingCall(
        root_session_id="s",
        tool_call_id="c1",
        owner_session_id="s",
        owner_workflow_id="w",
        kind="client",
        tool="confirm",
        arguments={},
        deadline=NOW,
        output_schema=None,
        status="waiting",
        submitted_at=None,
        resolved_at=None,
        user_id=None,
        tenant_id=None,
        created_at=NOW,
    )
    u1 = {"id": "u1", "role": "user", "content": "one"}
    ok = {"id": "x", "role": "tool", "toolCallId": "c1", "content": '{"ok": true}'}
    stray = {"id": "y", "role": "tool", "toolCallId": "c2", "content": "{}"}
    minted = {"id": "dbos:1:tool:c3", "role": "tool", "toolCallId": "c3", "content": "{}"}
    got = answers_of(body([u1, ok, stray, minted]), 1, [], [wait])
    assert [a.tool_call_id for a in got.submit] == ["c1"] and got.unknown == ["c2"]
    stored = HistoryEntry(
        role="tool", content="{}", tool_call_id="c2", seq=3, run_seq=1, created_at=NOW
    )
    assert answers_of(body([u1, stray]), 1, [stored], []).unknown == []
    resume = [{"interruptId": "c1", "status": "resolved", "payload": {"approved": True}}]
    assert answers_of(body([u1], resume=resume), 1, [], [wait]).unknown == ["c1"]  # not an approval
    approval = wait.model_copy(update={"kind": "approval"})
    got = answers_of(body([u1], resume=resume), 1, [], [approval])
    assert got.approvals and got.submit[0].delivery.approved  # type: ignore[union-attr]
    bad = [{"interruptId": "c1", "status": "resolved", "payload": {"yes": 1}}]
    with pytest.raises(InvalidRequestError, match=r"resume\[0\]\.payload"):
        answers_of(body([u1], resume=bad), 1, [], [approval])


def test_malformed_input_names_the_field() -> None:
    with pytest.raises(InvalidRequestError, match=r"^messages\[0\]"):
        parse_input(b'{"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user"}]}')
    with pytest.raises(InvalidRequestError, match=r"^runId"):
        parse_input(b'{"threadId": "t", "messages": []}')


def test_the_view_drops_a_rerun_run() -> None:
    call = AgToolCall(id="c1", function=FunctionCall(name="confirm", arguments="{}"))
    view = ClientView(
        [
            UserMessage(id="u1", content="hi"),
            AssistantMessage(id="dbos:1:1:0", tool_calls=[call]),
            ToolMessage(id="client-1", tool_call_id="c1", content="{}"),
            ToolMessage(id="client-2", tool_call_id="c0", content="{}"),
            AssistantMessage(id="dbos:0:1:0", content="older"),
        ]
    )
    assert view.drop_run(1)
    assert [m.id for m in view.messages] == ["u1", "client-2", "dbos:0:1:0"]
    assert not view.drop_run(1)


# --- the encoder over the reducer's operations, for what the crash tests produce --------


def waiting(call_id: str, kind: str = "client", tool: str = "confirm", **kw: Any) -> PendingEvent:
    return PendingEvent(
        root_session_id="s",
        tool_call_id=call_id,
        kind=kind,  # type: ignore[arg-type]
        tool=tool,
        arguments={"q": 1},
        output_schema=None,
        deadline=NOW,
        **kw,
    )


def note(call_id: str, part: int, text: str) -> ProgressEvent:
    return ProgressEvent(
        run=1, turn=1, tool_call_id=call_id, tool="research", part=part, note=text, cursor="3"
    )


def test_a_withdrawn_tool_call_leaves_the_text_and_the_other_call_as_they_are() -> None:
    c1 = ToolCall(id="c1", name="fetch", arguments="{}")
    c0b = ToolCall(id="c0b", name="search", arguments='{"q":"y"}')
    log: list[SessionEvent] = [
        text("Looking. "),
        piece(0, '{"q":', id="c0", name="search"),
        piece(1, "{}", id="c1", name="fetch"),
        retract(tool_index=0),
        piece(0, '{"q":"y"}', id="c0b", name="search"),
        message("assistant", "Looking. ", 2, tool_calls=[c1, c0b]),
        status("completed"),
    ]
    _, client, types = run(log)
    (reply,) = [m for m in client.messages if m["role"] == "assistant"]
    assert reply["id"] == "dbos:1:1:0" and reply["content"] == "Looking. "
    assert [c["id"] for c in reply["toolCalls"]] == ["c1", "c0b"]
    assert types.count("TEXT_MESSAGE_START") == 1 == types.count("TEXT_MESSAGE_END")
    assert types.count("TOOL_CALL_START") == 3 == types.count("TOOL_CALL_END")
    assert types.count("MESSAGES_SNAPSHOT") == 1 and types[-1] == "RUN_FINISHED"


def test_a_sub_agents_waits_are_asked_under_messages_minted_for_them() -> None:
    call = ToolCall(id="sub1", name="helper", arguments='{"message":"go"}')
    child = child_session_id("s", "sub1")
    log: list[SessionEvent] = [
        message("assistant", None, 2, tool_calls=[call]),
        waiting("deep", kind="approval", owner_session_id=child),
        waiting("deep2", tool="pick", owner_session_id=child),
    ]
    mapper, client, types = run(log)
    asked = client.find("dbos:1:ask:deep2")
    assert asked is not None and asked["toolCalls"] == [
        {"id": "deep2", "name": "pick", "arguments": '{"q": 1}'}
    ]
    assert types.count("TOOL_CALL_START") == 2 == types.count("TOOL_CALL_END")
    finished = mapper.feed([])  # nothing after the end
    assert finished == [] and mapper.finished
    mapper = Mapper(ClientView([]), 1, "t", "r")
    *_, last = mapper.feed(log)
    outcome = last.model_dump(by_alias=True, mode="json")["outcome"]
    assert outcome["type"] == "interrupt"
    assert [i["toolCallId"] for i in outcome["interrupts"]] == ["deep"]


def test_a_durable_tools_notes_and_its_ask_mid_call() -> None:
    call = ToolCall(id="d1", name="research", arguments="{}")
    ask = ask_id("d1", 2)
    log: list[SessionEvent] = [
        message("assistant", None, 2, tool_calls=[call]),
        note("d1", 1, "found 3 pages"),
        note("d1", 2, "summarize?"),
        waiting(ask, kind="approval"),
    ]
    mapper = Mapper(ClientView([]), 1, "t", "r")
    events = mapper.feed(log)
    notes = [e.model_dump(by_alias=True, mode="json") for e in events if e.type.value == "CUSTOM"]
    assert [n["value"]["id"] for n in notes] == ["d1-1", "d1-2"]
    assert {n["name"] for n in notes} == {PROGRESS_EVENT}
    outcome = events[-1].model_dump(by_alias=True, mode="json")["outcome"]
    assert [i["id"] for i in outcome["interrupts"]] == [ask]
    # A frontend tool it asks for, on a rerun by a client that holds the call already:
    # the call is not sent twice; the run still ends waiting on it.
    client_ask = waiting(ask, tool="pick")
    held: list[Message] = [AssistantMessage(id=f"dbos:1:ask:{ask}", tool_calls=[_ag_call(ask)])]
    mapper = Mapper(ClientView(held), 1, "t", "r")
    sent = [e.model_dump(by_alias=True, mode="json") for e in mapper.feed([*log[:3], client_ask])]
    assert [e["toolCallId"] for e in sent if e["type"] == "TOOL_CALL_START"] == ["d1"]
    assert sent[-1]["outcome"]["pendingToolCallIds"] == [ask]


def test_results_the_client_posted_are_not_sent_back_and_a_later_run_ends_this_one() -> None:
    posted: list[Message] = [
        UserMessage(id="u1", content="hi"),
        AssistantMessage(id="dbos:1:m2", tool_calls=[_ag_call("c1")]),
        ToolMessage(id="mine", tool_call_id="c1", content='{"ok": true}'),
    ]
    log: list[SessionEvent] = [
        message("tool", '{"ok": true}', 3, tool_call_id="c1", name="confirm"),
        text("Thanks", turn=2),
        message("assistant", "Thanks", 4),
        message("user", "next", 5, run=2),
    ]
    mapper, client, types = run(log, posted)
    assert "TOOL_CALL_RESULT" not in types and types[-1] == "RUN_FINISHED"
    replies = [m.get("content") for m in client.messages if m["role"] == "assistant"]
    assert replies == [None, "Thanks"] and mapper.finished


def test_a_stream_stopped_early_ends_the_run_once() -> None:
    mapper = Mapper(ClientView([]), 1, "t", "r")
    mapper.feed([text("partial")])
    types = [e.type.value for e in mapper.error("the stream timed out", "STREAM_TIMEOUT")]
    assert types == ["TEXT_MESSAGE_END", "RUN_ERROR"]
    assert mapper.error("again", "STREAM_TIMEOUT") == [] and mapper.feed([text("x")]) == []


def _ag_call(call_id: str) -> AgToolCall:
    return AgToolCall(id=call_id, function=FunctionCall(name="pick", arguments='{"q": 1}'))
