"""Tokens, the authenticate hook, body limits and error bodies, over real HTTP.

No worker runs here: sessions stay ``queued``, which is all these tests need.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
from fastapi import HTTPException, Request
from pydantic import SecretStr

from dbos_agents.server import Operation, Principal, ServerSettings, create_app
from dbos_agents.server.chats import session_of_chat

from .conftest import SECRET, LiveServer, auth

pytestmark = pytest.mark.integration
TTL = 60
MAX_LIFETIME = 150
MAX_BODY = 4096


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


OPERATIONS: list[str] = []


async def hook(request: Request, operation: Operation, session_id: str | None) -> Principal | None:
    """Users log in with ``X-User``; ``admin`` and ``tenant:<t>`` callers skip tokens."""
    user = request.headers.get("x-user")
    OPERATIONS.append(operation)
    if operation == "create_session":
        if user is None:
            raise HTTPException(401, "log in first")
        return Principal(subject=user, user_id=user, tenant_id="t1")
    if user == "admin":
        return Principal(subject="admin")
    if user is not None and user.startswith("user:"):  # a signed-in end user
        return Principal(subject=user, user_id=user.removeprefix("user:"), tenant_id="t1")
    if user is not None and user.startswith("tenant:"):
        return Principal(subject=user, tenant_id=user.removeprefix("tenant:"))
    return None  # the session token decides


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def server(fresh_database_url: str, clock: FakeClock) -> Iterator[LiveServer]:
    settings = ServerSettings(
        database_url=fresh_database_url,
        secret=SecretStr(SECRET),
        token_ttl_sec=TTL,
        token_max_lifetime_sec=MAX_LIFETIME,
        max_body_bytes=MAX_BODY,
    )
    live = LiveServer(create_app(settings, authenticate=hook, clock=clock)).start()
    yield live
    live.stop()


def _create(http: httpx.Client, server: LiveServer, user: str = "alice") -> dict[str, str]:
    r = http.post(
        f"{server.url}/sessions", json={"agent": "chat", "message": "hi"}, headers={"x-user": user}
    )
    assert r.status_code == 201, r.text
    body: dict[str, str] = r.json()
    return body


def test_create_needs_the_hook_and_binds_the_principal(
    http: httpx.Client, server: LiveServer, clock: FakeClock
) -> None:
    r = http.post(f"{server.url}/sessions", json={"agent": "chat", "message": "hi"})
    assert r.status_code == 401
    assert r.json() == {"error": "UNAUTHORIZED", "message": "log in first"}
    created = _create(http, server)
    assert created["session_id"].startswith("ses_")
    assert datetime.fromisoformat(created["expires_at"]).timestamp() == clock.now + TTL
    r = http.get(f"{server.url}/sessions/{created['session_id']}", headers=auth(created["token"]))
    assert r.status_code == 200
    info = r.json()["session"]
    assert (info["user_id"], info["tenant_id"], info["status"]) == ("alice", "t1", "queued")
    # The body cannot claim another user than the authenticated one.
    r = http.post(
        f"{server.url}/sessions",
        json={"agent": "chat", "message": "hi", "user_id": "mallory"},
        headers={"x-user": "alice"},
    )
    assert r.status_code == 403 and r.json()["error"] == "FORBIDDEN"


def test_missing_and_malformed_tokens_are_401(http: httpx.Client, server: LiveServer) -> None:
    sid = _create(http, server)["session_id"]
    for headers in (
        {},
        {"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer a b"},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Bearer v1.x.y.z"},
    ):
        r = http.get(f"{server.url}/sessions/{sid}", headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"] == "UNAUTHORIZED"
        assert r.headers["www-authenticate"] == "Bearer"


def test_tampered_tokens_are_401_and_other_sessions_are_403(
    http: httpx.Client, server: LiveServer
) -> None:
    a, b = _create(http, server), _create(http, server)
    url_a = f"{server.url}/sessions/{a['session_id']}"
    version, sid_part, expiry, born, gen, signature = a["token"].split(".")
    for i in (0, len(signature) // 2, len(signature) - 1):  # flip a byte of the signature
        flipped = signature[:i] + ("A" if signature[i] != "A" else "B") + signature[i + 1 :]
        r = http.get(url_a, headers=auth(f"{version}.{sid_part}.{expiry}.{born}.{gen}.{flipped}"))
        assert r.status_code == 401 and "signature" in r.json()["message"]
    # Swap the session id inside A's token for B's: the signature no longer matches.
    b_part = base64.urlsafe_b64encode(b["session_id"].encode()).rstrip(b"=").decode()
    swapped = f"{version}.{b_part}.{expiry}.{born}.{gen}.{signature}"
    r = http.get(f"{server.url}/sessions/{b['session_id']}", headers=auth(swapped))
    assert r.status_code == 401
    # Extend the expiry: same.
    r = http.get(
        url_a, headers=auth(f"{version}.{sid_part}.{int(expiry) + 9999}.{born}.{gen}.{signature}")
    )
    assert r.status_code == 401
    # Move the birth later (to refresh past the max lifetime): same.
    r = http.get(
        url_a, headers=auth(f"{version}.{sid_part}.{expiry}.{int(born) + 9999}.{gen}.{signature}")
    )
    assert r.status_code == 401
    # A valid token used on another session's routes: 403, on every route.
    for method, path, body in (
        ("GET", "", None),
        ("GET", "/pending", None),
        ("GET", "/events?follow=false", None),
        ("POST", "/messages", {"message": "x"}),
        ("POST", "/interrupt", None),
        ("POST", "/token", None),
        (
            "POST",
            "/submit-tool-result",
            {"kind": "approval", "tool_call_id": "c", "approved": True},
        ),
    ):
        r = http.request(
            method,
            f"{server.url}/sessions/{b['session_id']}{path}",
            json=body,
            headers=auth(a["token"]),
        )
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"] == "FORBIDDEN"


def test_tokens_expire_and_can_be_refreshed_before(
    http: httpx.Client, server: LiveServer, clock: FakeClock
) -> None:
    created = _create(http, server)
    url = f"{server.url}/sessions/{created['session_id']}"
    clock.now += TTL - 1
    r = http.post(f"{url}/token", headers=auth(created["token"]))
    assert r.status_code == 200
    fresh = r.json()
    assert fresh["expires_at"] > created["expires_at"]
    clock.now += 1
    r = http.get(url, headers=auth(created["token"]))
    assert r.status_code == 401 and r.json()["message"] == "token expired"
    assert http.post(f"{url}/token", headers=auth(created["token"])).status_code == 401
    assert http.get(url, headers=auth(fresh["token"])).status_code == 200


def test_the_hook_can_replace_tokens_and_scopes_by_tenant(
    http: httpx.Client, server: LiveServer
) -> None:
    sid = _create(http, server)["session_id"]  # tenant t1
    url = f"{server.url}/sessions/{sid}"
    assert http.get(url, headers={"x-user": "admin"}).status_code == 200
    assert http.get(url, headers={"x-user": "tenant:t1"}).status_code == 200
    r = http.get(url, headers={"x-user": "tenant:t2"})
    assert r.status_code == 403 and r.json()["error"] == "ACCESS_DENIED"
    r = http.get(f"{server.url}/sessions/ses_missing", headers={"x-user": "admin"})
    assert r.status_code == 404
    assert r.json() == {"error": "SESSION_NOT_FOUND", "message": "no session 'ses_missing'"}


def test_a_post_without_content_length_has_an_empty_body(
    http: httpx.Client, server: LiveServer
) -> None:
    """HTTP/1.1: no Content-Length and no Transfer-Encoding is a body of 0 bytes, as
    `curl -X POST .../interrupt` sends it (it answered 411 unless `-d ''`)."""
    sid = _create(http, server)["session_id"]
    raw = server.raw(
        f"POST /sessions/{sid}/interrupt HTTP/1.1\r\nHost: t\r\nX-User: admin\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    assert raw.startswith(b"HTTP/1.1 200"), raw
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["interrupted_sessions"] == [sid]
    # A route that needs a body gets an empty one: a 400 that says what is missing.
    raw = server.raw(
        b"POST /sessions HTTP/1.1\r\nHost: t\r\nX-User: alice\r\nConnection: close\r\n\r\n"
    )
    assert raw.startswith(b"HTTP/1.1 400"), raw
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"] == "INVALID_REQUEST"


def test_chunked_body_is_411(http: httpx.Client, server: LiveServer) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"agent": "chat", '
        yield b'"message": "hi"}'

    r = http.post(
        f"{server.url}/sessions",
        content=chunks(),
        headers={"x-user": "alice", "content-type": "application/json"},
    )
    assert r.request.headers["transfer-encoding"] == "chunked"
    assert r.status_code == 411 and r.json()["error"] == "LENGTH_REQUIRED"


def test_body_over_the_limit_is_413_before_it_is_read(
    http: httpx.Client, server: LiveServer
) -> None:
    # Headers only, announcing 1 GB: the answer comes without the server waiting for a byte.
    raw = server.raw(
        b"POST /sessions HTTP/1.1\r\nHost: t\r\nX-User: alice\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    )
    assert raw.startswith(b"HTTP/1.1 413")
    assert json.loads(raw.partition(b"\r\n\r\n")[2])["error"] == "PAYLOAD_TOO_LARGE"
    big = json.dumps({"agent": "chat", "message": "x" * MAX_BODY}).encode()
    r = http.post(
        f"{server.url}/sessions",
        content=big,
        headers={"x-user": "alice", "content-type": "application/json"},
    )
    assert r.status_code == 413
    ok = json.dumps({"agent": "chat", "message": "x" * (MAX_BODY - 100)}).encode()
    r = http.post(
        f"{server.url}/sessions",
        content=ok,
        headers={"x-user": "alice", "content-type": "application/json"},
    )
    assert r.status_code == 201


def test_malformed_bodies_are_400_not_422(http: httpx.Client, server: LiveServer) -> None:
    created = _create(http, server)
    submit = f"{server.url}/sessions/{created['session_id']}/submit-tool-result"
    cases: list[tuple[str, dict[str, str], bytes]] = [
        (f"{server.url}/sessions", {"x-user": "alice"}, b"{not json"),
        (f"{server.url}/sessions", {"x-user": "alice"}, b'{"agent": "chat"}'),
        (f"{server.url}/sessions", {"x-user": "alice"}, b'{"agent": "chat", "message": 1}'),
        (submit, auth(created["token"]), b'{"kind": "nope", "tool_call_id": "c"}'),
        (submit, auth(created["token"]), b'{"kind": "approval", "tool_call_id": "c"}'),
        (
            submit,
            auth(created["token"]),
            b'{"kind": "approval", "tool_call_id": "c", "approved": "yes"}',
        ),
        (submit, auth(created["token"]), b'{"kind": "client-tool-result", "tool_call_id": "c"}'),
        (submit, auth(created["token"]), b""),
    ]
    for url, headers, body in cases:
        r = http.post(url, content=body, headers={**headers, "content-type": "application/json"})
        assert r.status_code == 400, (body, r.text)
        err = r.json()
        assert err["error"] == "INVALID_REQUEST" and err["message"] and err["details"], err


def test_unknown_routes_healthz_and_metrics(http: httpx.Client, server: LiveServer) -> None:
    r = http.get(f"{server.url}/nope")
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    r = http.get(f"{server.url}/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "database": "ok"}
    metrics = http.get(f"{server.url}/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert 'dbos_agents_http_requests_total{method="POST",route="/sessions",status="201"}' in text
    assert 'route="/sessions/{session_id}",status="401"' in text
    assert 'route="unmatched",status="411"' in text  # refused before routing
    assert "ses_" not in text  # ids never become labels


def test_junk_methods_collapse_into_one_metrics_label(
    http: httpx.Client, server: LiveServer
) -> None:
    statuses = {
        http.request(f"JUNK{i}", f"{server.url}/sessions/x{i}").status_code for i in range(30)
    }
    text = http.get(f"{server.url}/metrics").text
    assert "JUNK" not in text
    # httptools (uvicorn's parser when installed) refuses an unknown method before the app;
    # h11 lets it through, and the app counts it as ``other``.
    assert statuses == {400} or 'method="other"' in text, statuses


def test_refreshes_cannot_extend_a_token_past_its_max_lifetime(
    http: httpx.Client, server: LiveServer, clock: FakeClock
) -> None:
    created = _create(http, server)
    sid, token, t0 = created["session_id"], created["token"], clock.now
    expiries = []
    for _ in range(3):
        clock.now += 45
        r = http.post(f"{server.url}/sessions/{sid}/token", headers=auth(token))
        assert r.status_code == 200, r.text
        token = r.json()["token"]
        expiries.append(datetime.fromisoformat(r.json()["expires_at"]).timestamp() - t0)
    assert expiries == [105, MAX_LIFETIME, MAX_LIFETIME]  # capped at birth + max lifetime
    clock.now = t0 + MAX_LIFETIME
    r = http.post(f"{server.url}/sessions/{sid}/token", headers=auth(token))
    assert r.status_code == 401


def test_an_event_stream_closes_when_its_token_expires(
    http: httpx.Client, server: LiveServer, clock: FakeClock
) -> None:
    created = _create(http, server)

    def expire_soon() -> None:
        time.sleep(0.5)
        clock.now += TTL

    threading.Thread(target=expire_soon, daemon=True).start()
    url = f"{server.url}/sessions/{created['session_id']}/events"
    with http.stream("GET", url, headers=auth(created["token"]), timeout=20) as r:
        assert r.status_code == 200
        lines = list(r.iter_lines())  # ends only because the server closes the stream
    assert "event: expired" in lines


def test_the_hook_tells_results_from_approvals(http: httpx.Client, server: LiveServer) -> None:
    created = _create(http, server)
    url = f"{server.url}/sessions/{created['session_id']}/submit-tool-result"
    bodies = {
        "submit_result": {"kind": "client-tool-result", "tool_call_id": "c", "result": {}},
        "decide_approval": {"kind": "approval", "tool_call_id": "c", "approved": True},
    }
    for operation, body in bodies.items():
        OPERATIONS.clear()
        r = http.post(url, json=body, headers={"x-user": "admin"})
        assert r.status_code == 404  # no such wait: but the hook was asked the right thing
        assert [operation] == OPERATIONS
    # The session's own token may answer client tools but not approve.
    r = http.post(url, json=bodies["decide_approval"], headers=auth(created["token"]))
    assert r.status_code == 403 and "approver" in r.json()["message"]
    r = http.post(url, json=bodies["submit_result"], headers=auth(created["token"]))
    assert r.status_code == 404


def test_revoked_tokens_stop_working_and_their_streams_close(
    http: httpx.Client, server: LiveServer
) -> None:
    created = _create(http, server)
    sid, token = created["session_id"], created["token"]
    url = f"{server.url}/sessions/{sid}"
    lines: list[str] = []

    def follow() -> None:
        with http.stream("GET", f"{url}/events", headers=auth(token), timeout=20) as r:
            assert r.status_code == 200
            lines.extend(r.iter_lines())  # ends only because the server closes it

    reader = threading.Thread(target=follow)
    reader.start()
    time.sleep(0.5)
    r = http.post(f"{url}/revoke-tokens", headers=auth(token))
    assert r.status_code == 200 and r.json() == {"session_id": sid, "token_generation": 1}
    reader.join(15)
    assert not reader.is_alive() and "event: expired" in lines
    for method, path in (("GET", ""), ("POST", "/token"), ("POST", "/revoke-tokens")):
        r = http.request(method, f"{url}{path}", headers=auth(token))
        assert r.status_code == 401 and "revoked" in r.json()["message"], (path, r.text)
    # A signed-in user (the hook) gets a token of the new generation, which works.
    r = http.post(f"{url}/token", headers={"x-user": "admin"})
    assert r.status_code == 200
    assert http.get(url, headers=auth(r.json()["token"])).status_code == 200


def test_a_signed_in_user_acts_only_on_their_own_sessions(
    http: httpx.Client, server: LiveServer
) -> None:
    mine = _create(http, server, user="carol")["session_id"]
    url = f"{server.url}/sessions/{mine}"
    assert http.get(url, headers={"x-user": "user:carol"}).status_code == 200
    for path, method in (("", "GET"), ("/pending", "GET"), ("/interrupt", "POST")):
        r = http.request(method, f"{url}{path}", headers={"x-user": "user:dave"})
        assert r.status_code == 403, (path, r.text)
    assert http.get(url, headers={"x-user": "user:carol"}).json()["session"]["status"] == "queued"


def test_tokens_may_approve_when_configured(
    http: httpx.Client, server: LiveServer, fresh_database_url: str
) -> None:
    settings = ServerSettings(
        database_url=fresh_database_url,
        secret=SecretStr(SECRET),
        allow_unauthenticated=True,
        tokens_may_approve=True,
    )
    other = LiveServer(create_app(settings)).start()
    try:
        r = http.post(f"{other.url}/sessions", json={"agent": "chat", "message": "hi"})
        sid, token = r.json()["session_id"], r.json()["token"]
        body = {"kind": "approval", "tool_call_id": "c", "approved": True}
        r = http.post(
            f"{other.url}/sessions/{sid}/submit-tool-result", json=body, headers=auth(token)
        )
        assert r.status_code == 404  # let through to the submit: there is no such wait
    finally:
        other.stop()


def test_chat_routes_let_in_whom_the_session_routes_let_in(
    http: httpx.Client, server: LiveServer
) -> None:
    """A chat request reads its session once and authorizes from that read: the owner check
    of a signed-in user or tenant and a token's generation hold as on the session routes."""
    chat = f"c-{time.monotonic_ns()}"
    body = {
        "id": chat,
        "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    with http.stream(
        "POST", f"{server.url}/ai-sdk/chat", json=body, headers={"x-user": "erin"}
    ) as r:
        assert r.status_code == 200
        token = r.headers["x-dbos-agents-token"]
    resume = f"{server.url}/ai-sdk/chat/{chat}/stream"

    def status(headers: dict[str, str]) -> int:
        with http.stream("GET", resume, headers=headers) as r:
            return r.status_code

    assert status({"x-user": "user:erin"}) == 200
    assert status({"x-user": "tenant:t1"}) == 200
    assert status(auth(token)) == 200
    assert status({"x-user": "user:dave"}) == 403
    assert status({"x-user": "tenant:t2"}) == 403
    sid = session_of_chat(SECRET, "chat", chat)
    r = http.post(f"{server.url}/sessions/{sid}/revoke-tokens", headers=auth(token))
    assert r.status_code == 200, r.text
    assert status(auth(token)) == 401
    follow_up = {**body, "messages": [*body["messages"], {**body["messages"][0], "id": "u2"}]}
    r = http.post(f"{server.url}/ai-sdk/chat", json=follow_up, headers=auth(token))
    assert r.status_code == 401 and "revoked" in r.json()["message"], r.text
