"""The Vercel AI SDK (npm ``ai``, its ``AbstractChat`` and ``DefaultChatTransport``: what
``useChat`` runs) against ``POST /ai-sdk/{agent}`` on a real server and worker: a streamed
answer, a client tool run in the page, an approval, a resume after the worker is SIGKILLed
mid-answer, and bad input."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import Request

from dbos_agents.server.auth import Operation, Principal
from dbos_agents.server.chats import chat_session_id
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.chat.app import SENTENCE, SLOW_REPLY
from tests.chat.conftest import JS, Serve
from tests.http.conftest import LiveServer

pytestmark = [pytest.mark.integration]

Node = Callable[..., list[dict[str, Any]]]


def _chat_id() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


def _sid(server: LiveServer, agent: str, chat_id: str) -> str:
    ctx = server.server.config.app.state.dbos_agents
    return chat_session_id(ctx, agent, chat_id)


def _talk(node: Node, server: LiveServer, agent: str, chat_id: str, **cfg: Any) -> dict[str, Any]:
    lines = node(
        "ai-sdk/talk.mjs",
        json.dumps({"url": server.url, "agent": agent, "chatId": chat_id, **cfg}),
    )
    assert lines and lines[-1]["event"] == "done", lines
    return lines[-1]


def _text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def _assistant(harness: CrashHarness, sid: str) -> str:
    last = [m for m in harness.client.history(sid) if m.role == "assistant"][-1]
    return last.content or ""


@pytest.fixture(scope="module")
def server(serve: Serve) -> LiveServer:
    return serve()


async def approver(request: Request, operation: Operation, session_id: str | None) -> Principal:
    return Principal(subject="alice-the-approver")


def test_a_streamed_answer_arrives_in_pieces_and_equals_the_stored_message(
    node: Node, server: LiveServer, worker: WorkerProcess, harness: CrashHarness
) -> None:
    chat_id = _chat_id()
    done = _talk(node, server, "talker", chat_id, text="hello")
    assert done["status"] == "ready", done
    types = [c["type"] for c in done["chunks"]]
    assert types[0] == "start" and types[-1] == "finish"
    assert types.count("text-delta") >= 3
    assert types.index("text-delta") < types.index("finish")
    assert done["chunks"][-1]["finishReason"] == "stop"
    assert done["token"], "a new chat gets its session token (data-session)"
    sid = _sid(server, "talker", chat_id)
    user, answer = done["messages"]
    assert user["role"] == "user" and answer["role"] == "assistant"
    assert _text(answer) == _assistant(harness, sid) == f"You said: hello. {SENTENCE}"

    # A follow-up in the same chat, let in by the token the first answer carried.
    again = _talk(
        node,
        server,
        "talker",
        chat_id,
        text="again",
        token=done["token"],
        messages=done["messages"],
    )
    assert again["status"] == "ready", again
    assert [m["role"] for m in again["messages"]] == ["user", "assistant"] * 2
    assert (
        _text(again["messages"][-1]) == _assistant(harness, sid) == f"You said: again. {SENTENCE}"
    )
    assert again["messages"][-1]["id"] != again["messages"][1]["id"]


def test_a_follow_up_without_the_token_is_refused(
    node: Node, server: LiveServer, worker: WorkerProcess
) -> None:
    chat_id = _chat_id()
    done = _talk(node, server, "talker", chat_id, text="hi")
    assert done["status"] == "ready"
    refused = _talk(node, server, "talker", chat_id, text="again", messages=done["messages"])
    assert refused["status"] == "error"
    assert "401" in (refused["error"] or "") or "UNAUTHORIZED" in (refused["error"] or "")


def test_a_client_tool_runs_in_the_page_and_the_agent_uses_its_output(
    node: Node, server: LiveServer, worker: WorkerProcess, harness: CrashHarness
) -> None:
    chat_id = _chat_id()
    output = {"ok": True, "note": "fine by me"}
    done = _talk(node, server, "asker", chat_id, text="delete it?", toolOutput=output, responses=2)
    assert done["status"] == "ready", done
    assert done["finishes"] == 2
    [_user_message, answer] = done["messages"]
    tools = [p for p in answer["parts"] if p["type"] == "tool-confirm"]
    assert len(tools) == 1
    assert tools[0]["state"] == "output-available"
    assert tools[0]["input"] == {"question": "delete it?"}
    assert tools[0]["output"] == output
    assert not tools[0].get("providerExecuted")
    sid = _sid(server, "asker", chat_id)
    stored = _assistant(harness, sid)
    assert stored.startswith("asker got:") and "fine by me" in stored
    assert _text(answer) == stored
    assert harness.client.session(sid).status == "completed"


def test_an_approval_from_a_signed_in_approver_lets_the_tool_run(
    node: Node, serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    server = serve(authenticate=approver)
    chat_id = _chat_id()
    done = _talk(node, server, "closer", chat_id, text="close it", approve=True, responses=2)
    assert done["status"] == "ready", done
    requests = [c for c in done["chunks"] if c["type"] == "tool-approval-request"]
    assert len(requests) == 1, "one request; the second response continues after it"
    answer = done["messages"][-1]
    [tool] = [p for p in answer["parts"] if p["type"] == "tool-close_account"]
    assert tool["state"] == "output-available"
    assert tool["output"] == {"closed": "acc-1"}
    sid = _sid(server, "closer", chat_id)
    assert _text(answer) == _assistant(harness, sid)
    assert "acc-1" in _assistant(harness, sid)
    [decided] = harness.client.pending(session_id=sid, include_resolved=True)
    assert isinstance(decided.submission, dict)
    assert decided.submission["decided_by"] == "alice-the-approver"


def test_an_approval_from_a_token_is_refused_and_changes_nothing(
    node: Node, server: LiveServer, worker: WorkerProcess, harness: CrashHarness
) -> None:
    chat_id = _chat_id()
    done = _talk(node, server, "closer", chat_id, text="close it", approve=True, responses=2)
    assert done["status"] == "error", done
    assert "403" in (done["error"] or "") or "approvals need" in (done["error"] or "")
    sid = _sid(server, "closer", chat_id)
    [waiting] = harness.client.pending(session_id=sid)
    assert waiting.kind == "approval" and waiting.status == "waiting"
    assert harness.client.session(sid).status == "running"
    types = [c["type"] for c in done["chunks"]]
    assert "tool-approval-request" in types
    assert done["chunks"][-1] == {"type": "finish", "finishReason": "tool-calls"}


def test_an_output_for_an_unknown_tool_call_is_an_error_part_and_changes_nothing(
    node: Node, server: LiveServer, worker: WorkerProcess, harness: CrashHarness
) -> None:
    chat_id = _chat_id()
    asked = _talk(node, server, "asker", chat_id, text="sure?")  # the page does not answer
    assert asked["status"] == "ready", asked
    sid = _sid(server, "asker", chat_id)
    [waiting] = harness.client.pending(session_id=sid)
    messages = asked["messages"]
    [tool] = [p for p in messages[-1]["parts"] if p["type"] == "tool-confirm"]
    assert tool["toolCallId"] == waiting.tool_call_id and tool["state"] == "input-available"
    tool.update(state="output-available", toolCallId="call_not_yours", output={"ok": True})
    done = _talk(node, server, "asker", chat_id, token=asked["token"], messages=messages)
    assert done["status"] == "error", done
    assert "call_not_yours" in (done["error"] or "")
    errors = [c for c in done["chunks"] if c["type"] == "error"]
    assert len(errors) == 1 and "no open wait" in errors[0]["errorText"]
    [still] = harness.client.pending(session_id=sid)
    assert still.tool_call_id == waiting.tool_call_id and still.status == "waiting"


def _post(server: LiveServer, agent: str, body: object) -> httpx.Response:
    return httpx.post(f"{server.url}/ai-sdk/{agent}", json=body, timeout=30)


def _user(text: str) -> dict[str, Any]:
    return {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "messages"),
        ({"id": "c1", "messages": [], "trigger": "submit-message"}, "messages"),
        ({"id": "c1", "messages": [_user("x")]}, "trigger"),
        ({"id": "c1", "messages": [_user("x")], "trigger": "resume"}, "trigger"),
        ({"id": "c/1", "messages": [_user("x")], "trigger": "submit-message"}, "id"),
        ({"id": "c1", "messages": [_user("x")], "trigger": "regenerate-message"}, "trigger"),
        (
            {"id": "c1", "messages": [{"id": "m", "role": "user"}], "trigger": "submit-message"},
            "parts",
        ),
        (
            {
                "id": "c1",
                "messages": [
                    {"id": "m", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}
                ],
                "trigger": "submit-message",
            },
            "messages[0]",
        ),
        ({"id": "c1", "messages": [_user("  ")], "trigger": "submit-message"}, "messages[0].parts"),
    ],
)
def test_a_malformed_body_is_400_naming_the_field(
    server: LiveServer, body: object, field: str
) -> None:
    r = _post(server, "talker", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "INVALID_REQUEST"
    assert field in r.json()["message"], r.json()


def test_the_stream_speaks_the_ui_message_stream_protocol(
    server: LiveServer, worker: WorkerProcess
) -> None:
    body = {"id": _chat_id(), "messages": [_user("raw")], "trigger": "submit-message"}
    with httpx.stream("POST", f"{server.url}/ai-sdk/talker", json=body, timeout=30) as r:
        assert r.status_code == 200
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert r.headers["content-type"].startswith("text/event-stream")
        token = r.headers["x-dbos-agents-token"]
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    parts = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert parts[0]["type"] == "start" and parts[-1]["type"] == "finish"
    assert {"type": "data-session", "data": {"token": token}, "transient": True} in parts


def test_resume_answers_204_when_no_run_is_active(
    server: LiveServer, worker: WorkerProcess
) -> None:
    r = httpx.get(f"{server.url}/ai-sdk/talker/{_chat_id()}/stream", timeout=10)
    assert r.status_code == 204


class _Lines:
    """A Node process's stdout lines, read in a thread (with a timeout per line)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.proc = proc
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.q.put(line)

    def next(self, timeout: float = 60) -> dict[str, Any]:
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no line from node in time") from None
        parsed: dict[str, Any] = json.loads(line)
        return parsed


def test_a_durable_tool_asks_for_an_approval_then_the_page_mid_call(
    node: Node, serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    """A durable tool asks a human (an approval part) and then the page (a client tool part)
    in the middle of its work: each is a tool part of its own, answered as any other, and
    the tool finishes with both answers."""
    server = serve(authenticate=approver)
    chat_id = _chat_id()
    output = {"ok": True, "note": "closing now"}
    done = _talk(
        node,
        server,
        "keeper",
        chat_id,
        text="close it",
        approve=True,
        toolOutput=output,
        responses=3,
    )
    assert done["status"] == "ready", done
    assert done["finishes"] == 3, done
    requests = [c for c in done["chunks"] if c["type"] == "tool-approval-request"]
    # the approval is requested on the durable call's own part, under the wait's id
    assert len(requests) == 1 and requests[0]["approvalId"] == requests[0]["toolCallId"] + ".ask2"
    notes = [c for c in done["chunks"] if c["type"] == "data-progress"]
    assert [n["data"]["note"] for n in notes][:2] == ["asking for approval", "waiting for approval"]
    answer = done["messages"][-1]
    [asked] = [p for p in answer["parts"] if p["type"] == "tool-confirm"]
    assert asked["state"] == "output-available" and asked["output"] == output
    assert asked["input"] == {"question": "close acc-7?"}
    assert asked["toolCallId"].endswith(".ask3")
    sid = _sid(server, "keeper", chat_id)
    stored = _assistant(harness, sid)
    assert stored.startswith("keeper got:") and "closing now" in stored
    assert "alice-the-approver" in stored
    assert _text(answer) == stored
    assert harness.client.session(sid).status == "completed"


def test_a_page_resumes_a_stream_cut_by_a_worker_sigkill(
    server: LiveServer, worker: WorkerProcess, harness: CrashHarness
) -> None:
    """Last in the module: it replaces the module's worker."""
    exe = shutil.which("node")
    assert exe is not None
    chat_id = _chat_id()
    cfg = {"url": server.url, "agent": "slow", "chatId": chat_id, "text": "go", "afterChars": 40}
    proc = subprocess.Popen(
        [exe, str(JS / "ai-sdk/resume.mjs"), json.dumps(cfg)],
        cwd=JS,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    lines = _Lines(proc)
    restarted: WorkerProcess | None = None
    try:
        partial = lines.next()
        assert partial["event"] == "partial" and len(partial["text"]) >= 40
        worker.kill()  # mid-answer: the reply streams for about 7 s
        sid = _sid(server, "slow", chat_id)
        assert harness.client.session(sid).status == "running"
        proc.stdin.write("killed\n")
        proc.stdin.flush()
        stopped = lines.next()
        assert stopped["event"] == "stopped"
        assert SLOW_REPLY.startswith(stopped["text"]) and len(stopped["text"]) < len(SLOW_REPLY)
        assert lines.next()["event"] == "resuming"
        time.sleep(0.5)  # the page reconnects while no worker runs
        restarted = harness.start_worker()
        done = lines.next(timeout=90)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        if restarted is not None:
            restarted.stop()
    assert done["event"] == "done" and done["status"] == "ready", done
    stored = _assistant(harness, sid)
    assert stored == SLOW_REPLY
    [_user_message, answer] = done["messages"]
    assert answer["id"] == stopped["messages"][-1]["id"], "the partial message was replaced"
    assert _text(answer) == stored
    replayed = "".join(c["delta"] for c in done["chunks"] if c["type"] == "text-delta")
    assert replayed == stored, "the resumed stream sends every piece once"
