"""A sub-agent's waits through the Vercel AI SDK (npm ``ai``, what ``useChat`` runs) on
``POST /ai-sdk/{agent}``: ``delegator``'s sub-agent ``deputy`` asks a human for an approval
and then the page for its client tool ``confirm``. Both reach the root's stream as a
durable tool's mid-call asks do, and the answers posted to the root's chat reach the
sub-agent. (The AG-UI side: ``test_ag_ui.py``.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import Request

from dbos_agents.server.auth import Operation, Principal
from dbos_agents.server.chats import chat_session_id
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.chat.conftest import Serve

pytestmark = [pytest.mark.integration]

Node = Callable[..., list[dict[str, Any]]]


async def approver(request: Request, operation: Operation, session_id: str | None) -> Principal:
    return Principal(subject="alice-the-approver")


def _text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def _assistant(harness: CrashHarness, sid: str) -> str:
    last = [m for m in harness.client.history(sid) if m.role == "assistant"][-1]
    return last.content or ""


def test_a_sub_agent_asks_for_an_approval_then_the_page(
    node: Node, serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    """The sub-agent's approval is requested on the root's part of the sub-agent call
    (approvalId: the wait's id); its client tool is a part of its own (the wait's id) the
    page runs; both answers go to the root's chat and reach the sub-agent, whose answer the
    root reports."""
    server = serve(authenticate=approver)
    chat_id = f"chat-{uuid.uuid4().hex[:12]}"
    output = {"ok": True, "note": "deputy may close"}
    cfg = {
        "url": server.url,
        "agent": "delegator",
        "chatId": chat_id,
        "text": "acc-9",
        "approve": True,
        "toolOutput": output,
        "responses": 3,
        "timeoutMs": 45000,
    }
    lines = node("ai-sdk/talk.mjs", json.dumps(cfg), timeout=90)
    done = lines[-1]
    assert done["event"] == "done" and done["status"] == "ready", done
    assert done["error"] is None and done["errors"] == [], done
    assert done["finishes"] == 3, done
    ctx = server.server.config.app.state.dbos_agents
    sid = chat_session_id(ctx, "delegator", chat_id)
    # Both waits were the sub-agent's (their ids: its calls', made unique in the tree).
    rows = harness.client.pending(session_id=sid, include_resolved=True)
    [close] = [r for r in rows if r.kind == "approval"]
    [ask] = [r for r in rows if r.kind == "client"]
    assert len(rows) == 2, rows
    assert close.tool_call_id.startswith("deputy-close") and close.tool == "close_account"
    assert ask.tool_call_id.startswith("deputy-confirm") and ask.tool == "confirm"
    deputy = close.owner_session_id
    assert deputy.startswith(f"{sid}::sub::") and ask.owner_session_id == deputy

    # Asked on the root's part of the sub-agent call, under the wait's id.
    requests = [c for c in done["chunks"] if c["type"] == "tool-approval-request"]
    assert [(r["approvalId"], r["toolCallId"]) for r in requests] == [
        (close.tool_call_id, "to-deputy")
    ]
    assert done["approvals"] == [
        {"id": close.tool_call_id, "toolCallId": "to-deputy", "type": "tool-subagent__deputy"}
    ]
    # The client tool: a part of its own (the wait's id), run by the page; the root's call
    # is not the page's to run.
    question = {"question": "close acc-9?"}
    assert done["toolCalls"] == [
        {"toolName": "confirm", "toolCallId": ask.tool_call_id, "input": question}
    ]
    refused = {"error", "tool-output-denied", "tool-output-error"}
    assert not [c for c in done["chunks"] if c["type"] in refused], done["chunks"]

    answer = done["messages"][-1]
    [delegated] = [p for p in answer["parts"] if p["type"] == "tool-subagent__deputy"]
    assert delegated["toolCallId"] == "to-deputy"
    assert delegated["state"] == "output-available", delegated
    assert delegated["approval"]["id"] == close.tool_call_id and delegated["approval"]["approved"]
    assert "deputy got:" in json.dumps(delegated["output"])
    [asked] = [p for p in answer["parts"] if p["type"] == "tool-confirm"]
    assert asked["toolCallId"] == ask.tool_call_id
    assert asked["state"] == "output-available" and asked["output"] == output
    assert asked["input"] == question

    stored = _assistant(harness, sid)
    assert stored.startswith("delegator got:") and "deputy got:" in stored
    assert "acc-9" in stored and "deputy may close" in stored
    assert _text(answer) == stored
    assert harness.client.session(sid).status == "completed"

    # The answers, posted to the root's chat, reached the sub-agent.
    assert (close.status, ask.status) == ("resolved", "resolved")
    assert isinstance(close.submission, dict) and close.submission["approved"] is True
    assert close.submission["decided_by"] == "alice-the-approver"
    results = {
        m.tool_call_id: m.content for m in harness.client.history(deputy) if m.role == "tool"
    }
    assert json.loads(results[close.tool_call_id] or "") == {"closed": "acc-9"}
    assert json.loads(results[ask.tool_call_id] or "") == output
    assert harness.client.session(deputy).status == "completed"
