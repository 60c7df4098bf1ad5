"""What a browser front end needs of the API: CORS for configured origins, ``GET /sessions``
(the caller's own sessions) and a token in the query for ``EventSource`` (GET only)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import Request
from pydantic import SecretStr

from dbos_agents.server import Operation, Principal, ServerSettings, create_app
from dbos_agents.testing import WorkerProcess

from .conftest import SECRET, LiveServer, auth

pytestmark = pytest.mark.integration

ORIGIN = "http://app.example"


async def hook(request: Request, operation: Operation, session_id: str | None) -> Principal | None:
    """``X-User: <name>`` signs a user in (tenant t1); ``admin`` names nobody in particular."""
    user = request.headers.get("x-user")
    if user == "admin":
        return Principal(subject="admin")
    if user is not None:
        return Principal(subject=user, user_id=user, tenant_id="t1")
    return None


@pytest.fixture(scope="module")
def servers(fresh_database_url: str, worker: WorkerProcess) -> Iterator[dict[str, LiveServer]]:
    made = {
        "hook": LiveServer(
            create_app(
                ServerSettings(
                    database_url=fresh_database_url,
                    secret=SecretStr(SECRET),
                    cors_origins=[ORIGIN],
                ),
                authenticate=hook,
            )
        ).start(),
        "tokens": LiveServer(
            create_app(
                ServerSettings(
                    database_url=fresh_database_url,
                    secret=SecretStr(SECRET),
                    allow_unauthenticated=True,
                    events_poll_interval_sec=0.05,
                )
            )
        ).start(),
    }
    yield made
    for s in made.values():
        s.stop()


def _start(http: httpx.Client, server: LiveServer, user: str | None) -> dict[str, str]:
    r = http.post(
        f"{server.url}/sessions",
        json={"agent": "chat", "message": "hi"},
        headers={"x-user": user} if user else {},
    )
    assert r.status_code == 201, r.text
    body: dict[str, str] = r.json()
    return body


def test_cors_preflight_and_simple_requests(
    http: httpx.Client, servers: dict[str, LiveServer]
) -> None:
    url = servers["hook"].url
    pre = http.options(
        f"{url}/sessions",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert pre.status_code == 200, pre.text
    assert pre.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in pre.headers["access-control-allow-headers"].lower()
    r = http.get(f"{url}/healthz", headers={"Origin": ORIGIN})
    assert r.headers["access-control-allow-origin"] == ORIGIN
    # The token header of a new chat is readable by the page.
    assert "x-dbos-agents-token" in r.headers["access-control-expose-headers"].lower()
    other = http.get(f"{url}/healthz", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in other.headers
    refused = http.options(
        f"{url}/sessions",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert refused.status_code == 400
    # Without configured origins no CORS header is sent at all.
    plain = http.get(f"{servers['tokens'].url}/healthz", headers={"Origin": ORIGIN})
    assert "access-control-allow-origin" not in plain.headers


def test_cors_origins_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBOS_AGENTS_SERVER_CORS_ORIGINS", "http://a.example, http://b.example")
    assert ServerSettings().cors_origins == ["http://a.example", "http://b.example"]
    monkeypatch.setenv("DBOS_AGENTS_SERVER_CORS_ORIGINS", '["http://c.example"]')
    assert ServerSettings().cors_origins == ["http://c.example"]


def test_list_sessions_shows_the_callers_own(
    http: httpx.Client, servers: dict[str, LiveServer]
) -> None:
    url = servers["hook"].url
    mine = {_start(http, servers["hook"], "lister-a")["session_id"] for _ in range(2)}
    theirs = _start(http, servers["hook"], "lister-b")["session_id"]
    r = http.get(f"{url}/sessions", headers={"x-user": "lister-a"})
    assert r.status_code == 200, r.text
    listed = {s["id"] for s in r.json()["sessions"]}
    assert listed == mine
    assert all(s["user_id"] == "lister-a" for s in r.json()["sessions"])
    # An admin sees everybody's; filters and limits apply.
    r = http.get(f"{url}/sessions", headers={"x-user": "admin"}, params={"limit": 500})
    assert mine | {theirs} <= {s["id"] for s in r.json()["sessions"]}
    r = http.get(f"{url}/sessions", headers={"x-user": "admin"}, params={"limit": 1})
    assert len(r.json()["sessions"]) == 1
    for bad in ({"limit": 0}, {"limit": 1001}, {"status": "sleeping"}):
        r = http.get(f"{url}/sessions", headers={"x-user": "admin"}, params=bad)
        assert r.status_code == 400, (bad, r.text)
    # Nobody signed in and no token: 401.
    assert http.get(f"{url}/sessions").status_code == 401


def test_list_sessions_with_a_session_token_is_that_session(
    http: httpx.Client, servers: dict[str, LiveServer]
) -> None:
    url = servers["tokens"].url
    one = _start(http, servers["tokens"], None)
    _start(http, servers["tokens"], None)
    r = http.get(f"{url}/sessions", headers=auth(one["token"]))
    assert r.status_code == 200, r.text
    assert [s["id"] for s in r.json()["sessions"]] == [one["session_id"]]
    # Anonymous callers of a server that issues tokens list nothing without one.
    assert http.get(f"{url}/sessions").status_code == 401


def test_event_stream_takes_a_token_in_the_query(
    http: httpx.Client, servers: dict[str, LiveServer]
) -> None:
    url = servers["tokens"].url
    s = _start(http, servers["tokens"], None)
    sid, token = s["session_id"], s["token"]
    r = http.get(f"{url}/sessions/{sid}/events", params={"follow": "false", "access_token": token})
    assert r.status_code == 200, r.text
    assert "event: status" in r.text
    assert http.get(f"{url}/sessions/{sid}/events", params={"follow": "false"}).status_code == 401
    bogus = http.get(
        f"{url}/sessions/{sid}/events", params={"follow": "false", "access_token": "v2.nope"}
    )
    assert bogus.status_code == 401
    # Only reads take it: a token in a POST's URL is refused (it would end up in logs
    # for nothing; a page that can POST can send a header).
    r = http.post(f"{url}/sessions/{sid}/interrupt", params={"access_token": token})
    assert r.status_code == 401
