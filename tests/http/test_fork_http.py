"""``POST /sessions/{id}/fork`` and ``GET /sessions/{id}/history?at_turn=n`` end to end:
a real uvicorn, a real worker subprocess, real Postgres."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from dbos_agents import AgentClient
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.testing import WorkerProcess

from .conftest import SECRET, LiveServer, auth

pytestmark = pytest.mark.integration


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


def _wait(http: httpx.Client, url: str, sid: str, token: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        view: dict[str, Any] = http.get(f"{url}/sessions/{sid}", headers=auth(token)).json()
        if view["session"]["status"] not in ("queued", "running"):
            return view
        time.sleep(0.05)
    raise TimeoutError(sid)


def test_fork_over_http(http: httpx.Client, server: LiveServer, agent_client: AgentClient) -> None:
    url = server.url
    r = http.post(f"{url}/sessions", json={"agent": "chat", "message": "hello"})
    sid, token = r.json()["session_id"], r.json()["token"]
    _wait(http, url, sid, token)
    http.post(f"{url}/sessions/{sid}/messages", json={"message": "again"}, headers=auth(token))
    whole = _wait(http, url, sid, token)["history"]
    assert [m["content"] for m in whole] == ["hello", "echo 0: hello", "again", "echo 1: again"]

    r = http.get(f"{url}/sessions/{sid}/history", params={"at_turn": 1}, headers=auth(token))
    assert r.status_code == 200 and r.json()["history"] == whole[:2]

    r = http.post(
        f"{url}/sessions/{sid}/fork",
        json={"at_turn": 1, "message": "branch"},
        headers=auth(token),
    )
    assert r.status_code == 201, r.text
    fork, fork_token = r.json()["session_id"], r.json()["token"]
    assert fork != sid and fork_token and fork_token != token
    view = _wait(http, url, fork, fork_token)
    assert [m["content"] for m in view["history"]] == [
        "hello",
        "echo 0: hello",
        "branch",
        "echo 1: branch",
    ]
    assert (view["session"]["forked_from"], view["session"]["forked_at_turn"]) == (sid, 1)
    assert _wait(http, url, sid, token)["history"] == whole  # the original is untouched

    sessions = len(agent_client.sessions(limit=1000))
    for body, status, code in (
        ({"at_turn": 9, "message": "x"}, 404, "TURN_NOT_FOUND"),
        ({"at_turn": 0, "message": "x"}, 404, "TURN_NOT_FOUND"),
        ({"at_turn": 1}, 400, "INVALID_REQUEST"),
    ):
        r = http.post(f"{url}/sessions/{sid}/fork", json=body, headers=auth(token))
        assert (r.status_code, r.json()["error"]) == (status, code), r.text
    # Authorized like send: no token, or another session's token, forks nothing.
    assert (
        http.post(f"{url}/sessions/{sid}/fork", json={"at_turn": 1, "message": "x"}).status_code
        == 401
    )
    r = http.post(
        f"{url}/sessions/{sid}/fork",
        json={"at_turn": 1, "message": "x"},
        headers=auth(fork_token),
    )
    assert r.status_code == 403
    assert len(agent_client.sessions(limit=1000)) == sessions
