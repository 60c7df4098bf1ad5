"""``POST /ag-ui/{agent}`` driven by the official AG-UI client (``@ag-ui/client``'s
``HttpAgent``, ``js/ag-ui/*.mjs``) against a real server and a real worker subprocess:
streamed answers, frontend tools, approvals (interrupt and resume), a rerun after the
worker is SIGKILLed mid-answer, and refused input."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi import Request

from dbos_agents.server.auth import Operation, Principal
from dbos_agents.server.chats import chat_session_id
from dbos_agents.server.context import ServerContext
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.chat.app import SENTENCE, SLOW_REPLY
from tests.chat.conftest import Serve
from tests.http.conftest import LiveServer, wait_pending

pytestmark = pytest.mark.integration

Node = Callable[..., list[dict[str, Any]]]


def session_of(server: LiveServer, agent: str, thread: str) -> str:
    ctx: ServerContext = server.server.config.app.state.dbos_agents
    return chat_session_id(ctx, agent, thread)


def thread() -> str:
    return f"t-{uuid.uuid4()}"


def stored_reply(harness: CrashHarness, sid: str) -> str | None:
    replies = [h.content for h in harness.client.history(sid) if h.role == "assistant"]
    return replies[-1] if replies else None


def approver(request: Request, operation: Operation, session_id: str | None) -> Principal:
    return Principal(subject="approver-1")


def test_streamed_answer(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = thread()
    first, second = node(
        "ag-ui/chat.mjs",
        json.dumps(
            {
                "url": server.url,
                "agent": "talker",
                "threadId": t,
                "message": "hello",
                "followUp": "more",
            }
        ),
    )
    sid = session_of(server, "talker", t)
    assert first["error"] is None, first
    assert first["events"][0] == "RUN_STARTED"
    assert first["events"][-1] == "RUN_FINISHED"
    assert first["events"].count("TEXT_MESSAGE_CONTENT") > 3
    assert first["token"], "a new thread on a server with a secret delivers a session token"
    assert first["finished"]["outcome"] == "success"
    history = harness.client.history(sid)
    replies = [h.content for h in history if h.role == "assistant"]
    assert first["streamed"] == replies[0] == f"You said: hello. {SENTENCE}"
    # The follow-up went with the token (the server has no hook: it is required).
    assert second["error"] is None, second
    assert second["token"] is None
    assert second["streamed"] == replies[1] == second["text"] == f"You said: more. {SENTENCE}"
    assert [m["content"] for m in second["messages"] if m["role"] == "assistant"] == replies


def test_token_header_and_no_token_refused(
    serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    server = serve()
    t = thread()
    body = {
        "threadId": t,
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
    }
    with httpx.stream("POST", f"{server.url}/ag-ui/talker", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        token = r.headers["x-dbos-agents-token"]
        r.read()
    # The thread exists now: without its token the next run is refused, nothing sent.
    sid = session_of(server, "talker", t)
    harness.client.wait(sid, timeout=30)
    body["messages"].append({"id": "u2", "role": "user", "content": "again"})  # type: ignore[attr-defined]
    r2 = httpx.post(f"{server.url}/ag-ui/talker", json=body, timeout=30)
    assert r2.status_code == 401, r2.text
    assert harness.client.session(sid).run_seq == 1
    assert token.startswith("v2.")


def test_client_tool(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = thread()
    first, second, third = node(
        "ag-ui/client-tool.mjs",
        json.dumps(
            {
                "url": server.url,
                "agent": "asker",
                "threadId": t,
                "message": "delete it?",
                "again": True,
            }
        ),
    )
    sid = session_of(server, "asker", t)
    # The run ends with the call for the frontend to run.
    assert first["error"] is None, first
    assert first["finished"]["outcome"] == "success"
    (call_id,) = first["finished"]["pendingToolCallIds"]
    assert "TOOL_CALL_START" in first["events"] and "TOOL_CALL_END" in first["events"]
    assert first["events"][-1] == "RUN_FINISHED"
    # The rerun with the tool message submits it; the reply uses the result.
    assert second["error"] is None, second
    assert second["answered"] == call_id
    reply = stored_reply(harness, sid)
    assert reply is not None and reply.startswith("asker got: ")
    assert json.loads(reply.removeprefix("asker got: ")) == {
        "ok": True,
        "note": "confirmed: delete it?",
    }
    assert second["streamed"] == reply == second["text"]
    tools = [h for h in harness.client.history(sid) if h.role == "tool"]
    assert [h.tool_call_id for h in tools] == [call_id]
    # The same thread again, nothing new: the run is shown again, nothing twice.
    assert third["error"] is None, third
    assert harness.client.session(sid).run_seq == 1
    assert [m.get("content") for m in third["messages"] if m["role"] == "assistant"] == [
        None,
        reply,
    ]
    assert [m["toolCallId"] for m in third["messages"] if m["role"] == "tool"] == [call_id]


def test_approval_with_an_approver(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve(authenticate=approver)
    t = thread()
    first, second = node(
        "ag-ui/approval.mjs",
        json.dumps({"url": server.url, "agent": "closer", "threadId": t, "message": "close"}),
    )
    sid = session_of(server, "closer", t)
    assert first["error"] is None, first
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == interrupt["id"]
    assert interrupt["metadata"]["tool"] == "close_account"
    assert "expiresAt" in interrupt
    assert second["error"] is None, second
    assert second["expired"] is False
    assert "TOOL_CALL_RESULT" in second["events"]
    assert second["finished"]["outcome"] == "success"
    assert second["text"] == stored_reply(harness, sid)
    assert "acc-1" in (second["text"] or "")
    (row,) = harness.client.pending(session_id=sid, include_resolved=True)
    assert row.submission["approved"] is True  # type: ignore[index, call-overload]
    assert row.submission["decided_by"] == "approver-1"  # type: ignore[index, call-overload]


def test_approval_with_a_token_only_is_refused(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = thread()
    first, second = node(
        "ag-ui/approval.mjs",
        json.dumps({"url": server.url, "agent": "closer", "threadId": t, "message": "close"}),
    )
    sid = session_of(server, "closer", t)
    assert first["finished"]["outcome"] == "interrupt"
    assert second["error"]["status"] == 403, second
    assert second["events"] == []
    (wait,) = harness.client.pending(session_id=sid)
    assert wait.status == "waiting"
    assert [h.role for h in harness.client.history(sid)] == ["user", "assistant"]
    harness.client.submit_approval(sid, wait.tool_call_id, False, "test over")


def test_malformed_bodies_are_400_naming_the_field(serve: Serve) -> None:
    server = serve()
    url = f"{server.url}/ag-ui/talker"
    cases: list[tuple[Any, str]] = [
        ({"runId": "r", "messages": []}, "threadId"),
        ({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user"}]}, "messages[0]"),
        ({"threadId": "t", "runId": "r", "messages": "hi"}, "messages"),
        ({"threadId": "no spaces", "runId": "r", "messages": []}, "threadId"),
        ([1, 2], "body"),
    ]
    for body, name in cases:
        r = httpx.post(url, json=body, timeout=10)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"] == "INVALID_REQUEST"
        assert r.json()["message"].startswith(name), (body, r.json())
    r = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["message"].startswith("body")


def test_tool_result_for_an_unknown_call_is_a_run_error(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = thread()
    (done,) = node(
        "ag-ui/chat.mjs",
        json.dumps({"url": server.url, "agent": "talker", "threadId": t, "message": "hi"}),
    )
    sid = session_of(server, "talker", t)
    before = harness.client.history(sid)
    spec = {
        "url": server.url,
        "agent": "talker",
        "threadId": t,
        "token": done["token"],
        "messages": done["messages"],
        "tool": {"toolCallId": "call_nobody_made", "content": "{}"},
    }
    (out,) = node("ag-ui/rerun.mjs", json.dumps(spec))
    assert out["events"] == ["RUN_STARTED", "RUN_ERROR"], out
    assert out["runError"]["code"] == "UNKNOWN_TOOL_CALL"
    assert "call_nobody_made" in out["runError"]["message"]
    assert harness.client.history(sid) == before
    assert harness.client.session(sid).run_seq == 1
    # Another session's open wait, answered through this thread: refused the same way.
    other = harness.client.start("asker", "is it yours?")
    wait = wait_pending(harness.client, other)
    (foreign,) = node(
        "ag-ui/rerun.mjs",
        json.dumps({**spec, "tool": {"toolCallId": wait.tool_call_id, "content": '{"ok": true}'}}),
    )
    assert foreign["runError"]["code"] == "UNKNOWN_TOOL_CALL", foreign
    assert harness.client.history(sid) == before
    (still,) = harness.client.pending(session_id=other)
    assert still.status == "waiting"
    harness.client.submit_tool_result(other, wait.tool_call_id, result={"ok": False})


def test_a_durable_tool_asks_for_an_approval_then_a_frontend_tool_mid_call(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    """The approval a durable tool asks for mid-call is an interrupt; the frontend tool it
    asks for next is a tool call of its own the client runs; then the agent answers."""
    server = serve(authenticate=approver)
    t = thread()
    first, second, third = node(
        "ag-ui/asks.mjs",
        json.dumps({"url": server.url, "agent": "keeper", "threadId": t, "message": "close"}),
        timeout=90,
    )
    sid = session_of(server, "keeper", t)
    assert first["error"] is None, first
    assert first["finished"]["outcome"] == "interrupt", first
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["metadata"] == {"tool": "checked_close", "arguments": {"close": "acc-7"}}
    assert interrupt["id"].endswith(".ask2")  # opened with the tool's second note
    assert second["error"] is None, second
    assert second["finished"]["outcome"] == "success", second
    (asked,) = second["finished"]["pendingToolCallIds"]
    assert asked.endswith(".ask3")
    assert third["error"] is None, third
    assert third["answered"] == asked and third["args"] == {"question": "close acc-7?"}
    assert third["finished"]["outcome"] == "success", third
    reply = stored_reply(harness, sid)
    assert reply is not None and "confirmed: close acc-7?" in reply and "approver-1" in reply
    assert third["text"] == reply
    assert harness.client.session(sid).status == "completed"


def test_a_sub_agent_asks_for_an_approval_then_a_frontend_tool(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    """A sub-agent's waits reach the root's thread as a durable tool's asks do: its approval
    is an interrupt, its frontend tool a tool call of its own; the answers reach it."""
    server = serve(authenticate=approver)
    t = thread()
    spec = {"url": server.url, "agent": "delegator", "threadId": t, "message": "acc-9"}
    first, second, third = node("ag-ui/asks.mjs", json.dumps(spec), timeout=90)
    sid = session_of(server, "delegator", t)
    rows = harness.client.pending(session_id=sid, include_resolved=True)
    [close] = [r for r in rows if r.kind == "approval"]
    [ask] = [r for r in rows if r.kind == "client"]
    assert close.tool_call_id.startswith("deputy-close"), rows  # the sub-agent's waits
    assert ask.tool_call_id.startswith("deputy-confirm"), rows
    deputy = close.owner_session_id
    assert deputy.startswith(f"{sid}::sub::") and ask.owner_session_id == deputy
    assert first["error"] is None, first
    assert first["finished"]["outcome"] == "interrupt", first
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["id"] == close.tool_call_id
    assert interrupt["metadata"] == {"tool": "close_account", "arguments": {"account_id": "acc-9"}}
    assert second["error"] is None, second
    assert second["finished"]["outcome"] == "success", second
    assert second["finished"]["pendingToolCallIds"] == [ask.tool_call_id]
    assert third["error"] is None, third
    assert third["answered"] == ask.tool_call_id
    assert third["args"] == {"question": "close acc-9?"}
    assert third["finished"]["outcome"] == "success", third
    reply = stored_reply(harness, sid)
    assert reply is not None and reply.startswith("delegator got:") and "deputy got:" in reply
    assert "confirmed: close acc-9?" in reply and "acc-9" in reply
    assert third["text"] == reply
    assert harness.client.session(sid).status == "completed"
    assert (close.status, ask.status) == ("resolved", "resolved")
    assert close.submission["decided_by"] == "approver-1"  # type: ignore[index, call-overload]
    assert harness.client.session(deputy).status == "completed"


def test_rerun_after_the_worker_is_killed_mid_answer(
    serve: Serve,
    worker: WorkerProcess,
    node: Node,
    harness: CrashHarness,
    request: pytest.FixtureRequest,
) -> None:
    server = serve()
    t = thread()
    spec: dict[str, Any] = {"url": server.url, "agent": "slow", "threadId": t, "message": "go"}
    (cut,) = node("ag-ui/rerun.mjs", json.dumps({**spec, "stopAfter": 10}))
    worker.kill()
    sid = session_of(server, "slow", t)
    assert cut["aborted"] and cut["error"] is None, cut
    assert harness.client.session(sid).status == "running"  # killed mid-answer
    partial = cut["streamed"]
    assert partial and SLOW_REPLY.startswith(partial) and partial != SLOW_REPLY
    time.sleep(0.5)
    restarted = harness.start_worker()
    request.addfinalizer(restarted.stop)
    (rerun,) = node(
        "ag-ui/rerun.mjs",
        json.dumps({**spec, "token": cut["token"], "messages": cut["messages"]}),
        timeout=120,
    )
    assert rerun["error"] is None, rerun
    assert rerun["events"][-1] == "RUN_FINISHED"
    assert stored_reply(harness, sid) == SLOW_REPLY
    # The run streamed again from its start, in place of the partial copy: no piece twice.
    assert rerun["streamed"] == SLOW_REPLY
    assert rerun["replies"] == [SLOW_REPLY]
    # The restarted worker continued the reply (a second attempt of the turn).
    with harness.client.engine.connect() as conn:
        attempts = conn.execute(
            sa.text("SELECT max(attempt) FROM dbos_agents.deltas WHERE session_id = :s"),
            {"s": sid},
        ).scalar_one()
    assert attempts >= 1
