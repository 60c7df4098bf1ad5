"""The HTTP API end to end: a real uvicorn, a real worker subprocess, real Postgres."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from dbos_agents import AgentClient, InvalidRequestError
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.testing import WorkerProcess

from .conftest import SECRET, LiveServer, auth, wait_pending

pytestmark = pytest.mark.integration


class Api:
    """A session-aware view of the server for one test."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http = http
        self.url = url

    def create(self, agent: str, message: str = "hello") -> tuple[str, str]:
        r = self.http.post(f"{self.url}/sessions", json={"agent": agent, "message": message})
        assert r.status_code == 201, r.text
        return r.json()["session_id"], r.json()["token"]

    def get(self, sid: str, token: str, path: str = "", **kw: Any) -> httpx.Response:
        return self.http.get(f"{self.url}/sessions/{sid}{path}", headers=auth(token), **kw)

    def post(self, sid: str, token: str, path: str, body: object = None) -> httpx.Response:
        return self.http.post(f"{self.url}/sessions/{sid}{path}", json=body, headers=auth(token))

    def submit(self, sid: str, token: str, body: Mapping[str, object]) -> httpx.Response:
        return self.post(sid, token, "/submit-tool-result", body)

    def wait(self, sid: str, token: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view: dict[str, Any] = self.get(sid, token).json()
            if view["session"]["status"] not in ("queued", "running"):
                return view
            time.sleep(0.05)
        raise TimeoutError(f"session {sid} did not finish")


@pytest.fixture(scope="module")
def server(fresh_database_url: str, worker: WorkerProcess) -> Iterator[LiveServer]:
    settings = ServerSettings(
        database_url=fresh_database_url,
        secret=SecretStr(SECRET),
        allow_unauthenticated=True,  # anyone may start a session; tokens guard the rest
        events_poll_interval_sec=0.05,
    )
    live = LiveServer(create_app(settings)).start()
    yield live
    live.stop()


@pytest.fixture()
def api(http: httpx.Client, server: LiveServer) -> Api:
    return Api(http, server.url)


def sse_events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = fields.get(name, "") + value if name == "data" else value
        if "event" in fields:
            events.append(fields)
    return events


def test_chat_session_201_then_follow_up_202(api: Api) -> None:
    sid, token = api.create("chat", "hi there")
    view = api.wait(sid, token)
    assert view["session"]["status"] == "completed"
    assert view["session"]["final_output"] == "echo 0: hi there"
    assert [(m["seq"], m["role"]) for m in view["history"]] == [(1, "user"), (2, "assistant")]
    r = api.post(sid, token, "/messages", {"message": "again"})
    assert r.status_code == 202 and r.json() == {"session_id": sid, "status": "queued"}
    view = api.wait(sid, token)
    assert view["session"]["final_output"] == "echo 1: again"
    assert view["session"]["run_seq"] == 2


def test_client_tool_round_trip_and_duplicate(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("asker", "ship it?")
    wait_pending(agent_client, sid)
    r = api.get(sid, token, "/pending")
    assert r.status_code == 200
    (p,) = r.json()["pending"]
    assert (p["kind"], p["tool"], p["arguments"]) == ("client", "confirm", {"question": "ship it?"})
    # While the run waits, a new message is refused.
    r = api.post(sid, token, "/messages", {"message": "hurry"})
    assert r.status_code == 409 and r.json()["error"] == "SESSION_BUSY"
    # A result that fails the output schema: 400 with details; nothing changes.
    bad = {"kind": "client-tool-result", "tool_call_id": p["tool_call_id"], "result": {"ok": "?"}}
    r = api.submit(sid, token, bad)
    assert r.status_code == 400
    err = r.json()
    assert err["error"] == "INVALID_RESULT" and err["details"][0]["path"] == "ok"
    # A session token approves nothing; and an approval cannot answer a client tool.
    wrong = {"kind": "approval", "tool_call_id": p["tool_call_id"], "approved": True}
    r = api.submit(sid, token, wrong)
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"
    with pytest.raises(InvalidRequestError):
        agent_client.submit_approval(sid, p["tool_call_id"], True)
    good = {
        "kind": "client-tool-result",
        "tool_call_id": p["tool_call_id"],
        "result": {"ok": True, "note": "yes"},
    }
    r = api.submit(sid, token, good)
    assert r.status_code == 200 and r.json() == {"status": "accepted"}
    r = api.submit(sid, token, good)
    assert r.status_code == 200 and r.json() == {"status": "already_completed"}
    view = api.wait(sid, token)
    assert view["session"]["final_output"] == 'asker got: {"note":"yes","ok":true}'
    assert api.get(sid, token, "/pending").json() == {"pending": []}


def test_client_tool_error_reaches_the_model(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("asker", "q")
    p = wait_pending(agent_client, sid)
    body = {"kind": "client-tool-error", "tool_call_id": p.tool_call_id, "error": "closed tab"}
    r = api.submit(sid, token, body)
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    assert "closed tab" in api.wait(sid, token)["session"]["final_output"]


def test_a_session_token_cannot_approve_an_approver_can(
    api: Api, agent_client: AgentClient
) -> None:
    sid, token = api.create("closer", "close it")
    p = wait_pending(agent_client, sid)
    assert p.kind == "approval"
    body = {"kind": "approval", "tool_call_id": p.tool_call_id, "approved": True, "reason": "ok"}
    r = api.submit(sid, token, body)  # the end user approving their own close_account
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN", r.text
    assert wait_pending(agent_client, sid).status == "waiting"  # nothing changed
    out = agent_client.submit_approval(sid, p.tool_call_id, True, "checked", decided_by="ops-ann")
    assert out.status == "accepted"
    view = api.wait(sid, token)
    assert view["session"]["final_output"] == 'closer got: {"closed":"acc-1"}'
    (done,) = agent_client.pending(session_id=sid, include_resolved=True)
    assert done.submission == {
        "kind": "approval",
        "approved": True,
        "reason": "checked",
        "decided_by": "ops-ann",
    }


def test_unknown_tool_call_is_404(api: Api) -> None:
    sid, token = api.create("chat")
    r = api.submit(sid, token, {"kind": "client-tool-error", "tool_call_id": "nope", "error": "x"})
    assert r.status_code == 404
    assert r.json() == {
        "error": "UNKNOWN_TOOL_CALL",  # the one error shape (ErrorBody), an upper-case code
        "message": f"no open wait for tool call 'nope' in session {sid!r}",
        "details": [{"reason": "no_pending_call"}],
    }


def test_late_answer_after_timeout(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("impatient")
    p = wait_pending(agent_client, sid)
    view = api.wait(sid, token)  # the 1 s wait times out, the model answers
    assert "client_tool_timeout" in view["session"]["final_output"]
    body = {"kind": "client-tool-result", "tool_call_id": p.tool_call_id, "result": {"ok": True}}
    r = api.submit(sid, token, body)
    assert r.status_code == 200 and r.json() == {"status": "late_answer_after_timeout"}


def test_interrupt_then_late_submit_is_404(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("asker", "wait for me")
    p = wait_pending(agent_client, sid)
    r = api.post(sid, token, "/interrupt")
    assert r.status_code == 200
    out = r.json()
    assert out["interrupted_sessions"] == [sid] and out["cancelled_calls"] == [p.tool_call_id]
    body = {"kind": "client-tool-result", "tool_call_id": p.tool_call_id, "result": {"ok": True}}
    r = api.submit(sid, token, body)
    assert r.status_code == 404 and r.json()["details"] == [{"reason": "interrupted"}]
    assert api.wait(sid, token)["session"]["status"] == "interrupted"


def test_fifty_concurrent_duplicate_submits_accept_once(
    server: LiveServer, agent_client: AgentClient
) -> None:
    with httpx.Client(timeout=60.0, limits=httpx.Limits(max_connections=64)) as http:
        api = Api(http, server.url)
        sid, token = api.create("asker", "race")
        p = wait_pending(agent_client, sid)
        body = {
            "kind": "client-tool-result",
            "tool_call_id": p.tool_call_id,
            "result": {"ok": True},
        }
        barrier = threading.Barrier(50)

        def one(_: int) -> tuple[int, str]:
            barrier.wait()
            r = api.submit(sid, token, body)
            return r.status_code, r.json()["status"]

        with ThreadPoolExecutor(50) as pool:
            results = list(pool.map(one, range(50)))
        assert {code for code, _ in results} == {200}
        statuses = sorted(s for _, s in results)
        assert statuses.count("accepted") == 1
        assert statuses.count("already_completed") == 49
        view = api.wait(sid, token)
        assert len([m for m in view["history"] if m["role"] == "tool"]) == 1


def test_openapi_document(http: httpx.Client, server: LiveServer) -> None:
    doc = http.get(f"{server.url}/openapi.json").json()
    paths = doc["paths"]
    for path, method in (
        ("/sessions", "post"),
        ("/sessions/{session_id}", "get"),
        ("/sessions/{session_id}/messages", "post"),
        ("/sessions/{session_id}/pending", "get"),
        ("/sessions/{session_id}/submit-tool-result", "post"),
        ("/sessions/{session_id}/interrupt", "post"),
        ("/sessions/{session_id}/events", "get"),
        ("/healthz", "get"),
    ):
        assert method in paths[path], (path, method)
    submit = paths["/sessions/{session_id}/submit-tool-result"]["post"]
    schema = submit["requestBody"]["content"]["application/json"]["schema"]
    assert schema["discriminator"]["propertyName"] == "kind"
    assert set(schema["discriminator"]["mapping"]) == {
        "client-tool-result",
        "client-tool-error",
        "approval",
    }
    assert {"200", "400", "401", "403", "404", "411", "413"} <= set(submit["responses"])
    # Every error answer of every route has the one shape (ErrorBody), 404 of submit too
    # (the 503 of /healthz is its health report, not an error).
    errors = [
        (path, method, status, response)
        for path, ops in paths.items()
        for method, op in ops.items()
        for status, response in op["responses"].items()
        if status[0] in "45" and path != "/healthz"
    ]
    assert errors and all(
        r["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
        for _, _, _, r in errors
    ), [e[:3] for e in errors if "ErrorBody" not in json.dumps(e[3])]
    assert "UNKNOWN_TOOL_CALL" in submit["responses"]["404"]["description"]
    assert all("422" not in op["responses"] for p in paths.values() for op in p.values())
    assert "409" in paths["/sessions/{session_id}/messages"]["post"]["responses"]


def test_metrics_count_submit_outcomes(http: httpx.Client, server: LiveServer) -> None:
    text = http.get(f"{server.url}/metrics").text
    assert 'dbos_agents_submits_total{kind="client-tool-result",outcome="accepted"}' in text
    assert 'outcome="already_completed"' in text and 'outcome="INVALID_RESULT"' in text
    assert 'route="/sessions/{session_id}/submit-tool-result",status="200"' in text


HOSTILE_JSON = ['"a\\u0000b"', '"lone \\ud800"', "NaN", "Infinity", "-Infinity", "1e400"]
"""JSON as an attacker writes it: each value fails to store or is not a finite number."""


def _counts(client: AgentClient) -> tuple[int, int, int]:
    import sqlalchemy as sa

    with client.engine.connect() as conn:
        return tuple(  # type: ignore[return-value]
            int(conn.execute(sa.text(f"SELECT count(*) FROM dbos_agents.{t}")).scalar_one())
            for t in ("sessions", "messages", "pending_calls")
        )


def test_hostile_values_are_a_4xx_and_change_nothing(api: Api, agent_client: AgentClient) -> None:
    sid, token = api.create("asker", "ship it?")
    p = wait_pending(agent_client, sid)
    before = _counts(agent_client)
    headers = {**auth(token), "content-type": "application/json"}
    for v in HOSTILE_JSON:
        strings = v.startswith('"')
        bodies = [
            (f"{api.url}/sessions", f'{{"agent": "chat", "message": {v}}}'),
            (f"{api.url}/sessions", f'{{"agent": {v}, "message": "hi"}}'),
            (
                f"{api.url}/sessions/{sid}/submit-tool-result",
                f'{{"kind": "client-tool-result", "tool_call_id": "{p.tool_call_id}",'
                f' "result": {{"ok": true, "note": {v}}}}}',
            ),
            (
                f"{api.url}/sessions/{sid}/submit-tool-result",
                f'{{"kind": "client-tool-result", "tool_call_id": {v}, "result": {{}}}}',
            ),
        ]
        for url, body in bodies:
            r = api.http.post(url, content=body.encode(), headers=headers)
            assert 400 <= r.status_code < 500, (body, r.status_code, r.text)
            if strings:
                assert r.status_code in (400, 422), (body, r.text)
            assert "SELECT" not in r.text and "INSERT" not in r.text
    assert _counts(agent_client) == before
    good = {"kind": "client-tool-result", "tool_call_id": p.tool_call_id, "result": {"ok": True}}
    assert api.submit(sid, token, good).status_code == 200


def test_anonymous_callers_cannot_claim_a_user_or_tenant(api: Api) -> None:
    for claim in ({"user_id": "alice"}, {"tenant_id": "acme"}):
        r = api.http.post(f"{api.url}/sessions", json={"agent": "chat", "message": "hi", **claim})
        assert r.status_code == 400 and r.json()["error"] == "INVALID_REQUEST", r.text
