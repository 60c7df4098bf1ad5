"""A tool's progress notes through the chat-UI adapters (a real server and worker; the SSE
bytes read here): the AI SDK's ``data-progress`` parts and AG-UI's ``CUSTOM`` ``progress``
events, once each in a stream, on the replay paths too. The notes are written with
``deltas.progress_stmt`` while the ``asker`` run waits on its client tool, as a durable
tool's ``ctx.progress`` will write them."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from dbos_agents.server.chats import chat_session_id
from dbos_agents.server.context import ServerContext
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.chat.conftest import Serve
from tests.http.conftest import LiveServer, auth, report_progress

pytestmark = [pytest.mark.integration]


def _sid(server: LiveServer, agent: str, chat_id: str) -> str:
    ctx: ServerContext = server.server.config.app.state.dbos_agents  # type: ignore[union-attr]
    return chat_session_id(ctx, agent, chat_id)


def _data(r: httpx.Response) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` line (AI SDK parts, AG-UI events), ``[DONE]`` left out."""
    assert r.status_code == 200, r.text
    lines = [line.removeprefix("data: ") for line in r.text.splitlines()]
    return [json.loads(line) for line in lines if line.startswith("{")]


def _report(harness: CrashHarness, sid: str, call_id: str) -> None:
    report_progress(harness.client, sid, call_id, 1, 0.5)
    report_progress(harness.client, sid, call_id, 2)
    report_progress(harness.client, sid, call_id, 1, 0.5)  # a re-executed body: nothing


def _note(call_id: str, part: int, fraction: float | None) -> dict[str, Any]:
    return {"toolCallId": call_id, "tool": "confirm", "note": f"step {part}", "fraction": fraction}


def test_ai_sdk_sends_data_progress_parts_once_on_a_resume_and_after_an_answer(
    serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    server = serve()
    chat_id = f"chat-{uuid.uuid4().hex[:12]}"
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go on?"}]}
    body = {"id": chat_id, "messages": [user], "trigger": "submit-message"}
    r = httpx.post(f"{server.url}/ai-sdk/asker", json=body, timeout=30)
    token = r.headers["x-dbos-agents-token"]
    first = _data(r)
    assert first[-1] == {"type": "finish", "finishReason": "tool-calls"}
    (asked,) = [p for p in first if p["type"] == "tool-input-available"]
    call_id = asked["toolCallId"]
    _report(harness, _sid(server, "asker", chat_id), call_id)
    expected = [
        {"type": "data-progress", "id": f"{call_id}-1", "data": _note(call_id, 1, 0.5)},
        {"type": "data-progress", "id": f"{call_id}-2", "data": _note(call_id, 2, None)},
    ]

    # The resume (the page reloaded): the run from its start, each note once, after the call.
    r = httpx.get(f"{server.url}/ai-sdk/asker/{chat_id}/stream", headers=auth(token), timeout=30)
    replay = _data(r)
    assert [p for p in replay if p["type"] == "data-progress"] == expected
    kinds = [p["type"] for p in replay]
    assert kinds.index("tool-input-available") < kinds.index("data-progress")
    assert replay[-1] == {"type": "finish", "finishReason": "tool-calls"}

    # The page answers: the stream goes on after the call's message. Notes it may already
    # hold come again under the same id, which the AI SDK replaces in place.
    tool = {
        "type": "tool-confirm",
        "toolCallId": call_id,
        "state": "output-available",
        "output": {"ok": True},
    }
    answer = {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, tool]}
    body = {"id": chat_id, "messages": [user, answer], "trigger": "submit-message"}
    r = httpx.post(f"{server.url}/ai-sdk/asker", json=body, headers=auth(token), timeout=30)
    rest = _data(r)
    assert [p for p in rest if p["type"] == "data-progress"] == expected
    kinds = [p["type"] for p in rest]
    assert kinds.index("data-progress") < kinds.index("tool-output-available")
    assert rest[-1] == {"type": "finish", "finishReason": "stop"}


def test_ag_ui_sends_custom_progress_events_once_on_a_rerun_and_after_an_answer(
    serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    server = serve()
    thread = f"t-{uuid.uuid4()}"
    user = {"id": "u1", "role": "user", "content": "go on?"}

    def run(messages: list[dict[str, Any]], token: str | None) -> httpx.Response:
        body = {"threadId": thread, "runId": f"r-{uuid.uuid4().hex[:8]}", "messages": messages}
        return httpx.post(f"{server.url}/ag-ui/asker", json=body, headers=auth(token), timeout=30)

    r = run([user], None)
    token = r.headers["x-dbos-agents-token"]
    first = _data(r)
    assert first[-1]["type"] == "RUN_FINISHED"
    (call_id,) = first[-1]["outcome"]["pendingToolCallIds"]
    (start,) = [e for e in first if e["type"] == "TOOL_CALL_START"]
    _report(harness, _sid(server, "asker", thread), call_id)
    expected = [
        {"type": "CUSTOM", "name": "progress", "value": {"id": f"{call_id}-{n}", **note}}
        for n, note in ((1, _note(call_id, 1, 0.5)), (2, _note(call_id, 2, None)))
    ]

    # A rerun (nothing new posted): the run from its start, each note once.
    call = {"id": call_id, "type": "function", "function": {"name": "confirm", "arguments": "{}"}}
    asked = {"id": start["parentMessageId"], "role": "assistant", "toolCalls": [call]}
    again = _data(run([user, asked], token))
    assert [e for e in again if e["type"] == "CUSTOM"] == expected
    types = [e["type"] for e in again]
    assert types.index("TOOL_CALL_END") < types.index("CUSTOM")
    assert again[-1]["type"] == "RUN_FINISHED"

    # The frontend tool's answer: a new AG-UI run from the call's message, notes included
    # (stable ids: a client keeping notes across runs keys them by ``value.id``).
    result = {"id": "tr1", "role": "tool", "toolCallId": call_id, "content": '{"ok": true}'}
    rest = _data(run([user, asked, result], token))
    assert [e for e in rest if e["type"] == "CUSTOM"] == expected
    assert rest[-1]["type"] == "RUN_FINISHED" and "outcome" not in rest[-1]
