"""``GET /sessions/{id}/events`` end to end: the live log over SSE (real uvicorn, a real
worker subprocess, real Postgres): deltas with ``N.D`` ids, resuming with Last-Event-ID or
``?offset=`` without a gap or a repeat, pending waits, a tool's progress notes, bogus
cursors refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dbos_agents import AgentClient

from .conftest import auth, report_progress
from .test_api import Api, api, server, sse_events

pytestmark = pytest.mark.integration

__all__ = ["api", "server"]  # the fixtures, shared with test_api.py


def _messages(events: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in events if e["event"] == "message"]


def test_events_resume_from_an_offset(api: Api) -> None:
    sid, token = api.create("chat", "one")
    api.wait(sid, token)
    r = api.get(sid, token, "/events", params={"follow": "false"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    first = sse_events(r.text)
    kinds = [e["event"] for e in first]
    assert kinds[0] == "message" and kinds[-2:] == ["message", "status"]
    assert set(kinds[1:-2]) == {"delta"}  # the reply as it was written
    assert first[0]["id"] == "1"
    reply = first[-2]
    assert reply["id"].startswith("2.") and reply["id"] == f"2.{first[-3]['id'].split('.')[1]}"
    msg = json.loads(reply["data"])
    assert (msg["role"], msg["content"], msg["run_seq"]) == ("assistant", "echo 0: one", 1)
    assert set(msg) >= {"seq", "role", "content", "tool_calls", "tool_call_id", "name", "run_seq"}
    assert "".join(json.loads(e["data"])["text"] for e in first[1:-2]) == "echo 0: one"
    assert json.loads(first[-1]["data"])["status"] == "completed" and "id" not in first[-1]
    assert api.post(sid, token, "/messages", {"message": "two"}).status_code == 202
    api.wait(sid, token)
    # Reconnect as EventSource does: Last-Event-ID wins over the URL's offset.
    r = api.http.get(
        f"{api.url}/sessions/{sid}/events",
        params={"follow": "false", "offset": 0},
        headers={**auth(token), "Last-Event-ID": reply["id"]},
    )
    later = sse_events(r.text)
    assert [m["content"] for m in _messages(later)] == ["two", "echo 1: two"]
    assert [m["seq"] for m in _messages(later)] == [3, 4]
    # An offset that is a message seq: the deltas before that message are not sent again.
    r = api.get(sid, token, "/events", params={"follow": "false", "offset": 3})
    rest = sse_events(r.text)
    assert [e["event"] for e in rest][-2:] == ["message", "status"]
    assert "".join(json.loads(e["data"])["text"] for e in rest if e["event"] == "delta") == (
        "echo 1: two"
    )
    for bogus in ("x", "-1", "1.x", "1.2.3"):
        r = api.http.get(
            f"{api.url}/sessions/{sid}/events",
            headers={**auth(token), "Last-Event-ID": bogus},
        )
        assert r.status_code == 400 and r.json()["error"] == "INVALID_REQUEST", bogus
    r = api.get(sid, token, "/events", params={"offset": "-3"})
    assert r.status_code == 400


def test_events_reconnect_mid_stream_with_the_last_event_id(api: Api) -> None:
    """Read part of a streamed reply, drop the connection, reconnect with the last
    ``N.D`` id: exactly the rest arrives, nothing twice."""
    long = "a reply long enough to arrive in many pieces over the stream"
    sid, token = api.create("chat", long)
    api.wait(sid, token)
    r = api.get(sid, token, "/events", params={"follow": "false"})
    whole = [e for e in sse_events(r.text) if "id" in e]
    deltas = [e for e in whole if e["event"] == "delta"]
    assert len(deltas) > 4 and all("." in e["id"] for e in deltas)
    cut = whole.index(deltas[len(deltas) // 2])
    seen: list[dict[str, str]] = []
    buffer = ""
    with api.http.stream(
        "GET", f"{api.url}/sessions/{sid}/events", headers=auth(token), timeout=30.0
    ) as live:
        for chunk in live.iter_text():
            buffer += chunk
            *blocks, buffer = buffer.split("\n\n")
            seen += [e for e in sse_events("\n\n".join(blocks) + "\n\n") if "id" in e]
            if len(seen) > cut:
                break  # drop the connection mid-reply
    last_id = seen[cut]["id"]
    r = api.http.get(
        f"{api.url}/sessions/{sid}/events",
        params={"follow": "false"},
        headers={**auth(token), "Last-Event-ID": last_id},
    )
    rest = sse_events(r.text)
    assert rest[-1]["event"] == "status"
    assert seen[: cut + 1] + rest[:-1] == whole
    text = "".join(
        json.loads(e["data"])["text"] for e in seen[: cut + 1] + rest if e["event"] == "delta"
    )
    assert text == f"echo 0: {long}"


def test_events_follow_a_running_session(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("asker", "live?")
    seen: list[dict[str, str]] = []
    buffer = ""
    with api.http.stream(
        "GET", f"{api.url}/sessions/{sid}/events", headers=auth(token), timeout=30.0
    ) as r:
        assert r.status_code == 200
        submitted = False
        for chunk in r.iter_text():
            buffer += chunk
            *blocks, buffer = buffer.split("\n\n")
            seen += sse_events("\n\n".join(blocks) + "\n\n")
            pending = [json.loads(e["data"]) for e in seen if e["event"] == "pending"]
            if not submitted and pending:
                body = {
                    "kind": "client-tool-result",
                    "tool_call_id": pending[0]["tool_call_id"],
                    "result": {"ok": True},
                }
                assert api.submit(sid, token, body).json()["status"] == "accepted"
                submitted = True
            if any(e["event"] == "status" for e in seen):
                break
    kinds = [e["event"] for e in seen if e["event"] != "delta"]
    assert kinds == ["message", "message", "pending", "message", "message", "status"]
    (p,) = [json.loads(e["data"]) for e in seen if e["event"] == "pending"]
    asked = _messages(seen)[1]
    assert p["tool_call_id"] == asked["tool_calls"][0]["id"] and p["tool"] == "confirm"
    assert [m["role"] for m in _messages(seen)] == ["user", "assistant", "tool", "assistant"]
    ids = [e["id"].split(".")[0] for e in seen if e["event"] == "message"]
    assert ids == ["1", "2", "3", "4"]
    assert json.loads(seen[-1]["data"])["status"] == "completed"


def test_events_send_a_tools_progress_notes_once(api: Api, agent_client: AgentClient) -> None:
    """``event: progress`` (written as a durable tool's ``ctx.progress`` will) arrives live
    between the call's message and its result, with an ``N.D`` id to resume after."""
    sid, token = api.create("asker", "progress?")
    seen: list[dict[str, str]] = []
    buffer = ""
    reported = submitted = False
    with api.http.stream(
        "GET", f"{api.url}/sessions/{sid}/events", headers=auth(token), timeout=30.0
    ) as r:
        for chunk in r.iter_text():
            buffer += chunk
            *blocks, buffer = buffer.split("\n\n")
            seen += sse_events("\n\n".join(blocks) + "\n\n")
            pending = [json.loads(e["data"]) for e in seen if e["event"] == "pending"]
            if pending and not reported:
                call_id = pending[0]["tool_call_id"]
                report_progress(agent_client, sid, call_id, 1, 0.5)
                report_progress(agent_client, sid, call_id, 2, deltas_only=True)
                report_progress(agent_client, sid, call_id, 1, 0.5)  # reported again
                reported = True
            notes = [e for e in seen if e["event"] == "progress"]
            if len(notes) == 2 and not submitted:
                result = {"ok": True}
                body = {"kind": "client-tool-result", "tool_call_id": call_id, "result": result}
                assert api.submit(sid, token, body).json()["status"] == "accepted"
                submitted = True
            if any(e["event"] == "status" for e in seen):
                break
    kinds = [e["event"] for e in seen if e["event"] != "delta"]
    assert kinds == [
        "message", "message", "pending", "progress", "progress", "message", "message", "status",
    ]  # fmt: skip
    notes = [e for e in seen if e["event"] == "progress"]
    assert [json.loads(e["data"]) for e in notes] == [
        {"run": 1, "turn": 1, "tool_call_id": call_id, "tool": "confirm", "part": 1,
         "note": "step 1", "fraction": 0.5},
        {"run": 1, "turn": 1, "tool_call_id": call_id, "tool": "confirm", "part": 2,
         "note": "step 2", "fraction": None},
    ]  # fmt: skip
    assert all(e["id"].startswith("2.") for e in notes)
    # Resume after the first note: the second, then the rest, never the first again.
    r = api.http.get(
        f"{api.url}/sessions/{sid}/events",
        params={"follow": "false"},
        headers={**auth(token), "Last-Event-ID": notes[0]["id"]},
    )
    rest = [e for e in sse_events(r.text) if e["event"] != "delta"]
    assert [e["event"] for e in rest] == ["progress", "message", "message", "status"]
    assert rest[0] == notes[1]
