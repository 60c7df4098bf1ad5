"""A session for an agent no live worker serves is refused at once (issue 29, item 9b):
workers publish their agents on their presence rows; ``POST /sessions`` answers 404
UNKNOWN_AGENT and ``AgentClient.start`` raises ``UnknownAgentError`` naming the known ones,
instead of a 201 and a session that then fails in the worker. With no live worker the
session is accepted, queued for a worker to come."""

from __future__ import annotations

import httpx
import pytest
import sqlalchemy as sa

from dbos_agents import UnknownAgentError
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.store.workers import KnownAgents, known_agents
from dbos_agents.testing import CrashHarness

from .conftest import LiveServer

pytestmark = [pytest.mark.integration, pytest.mark.crash]
SERVED = ["asker", "chat", "closer", "impatient"]


def test_unknown_agents_are_refused_while_a_worker_serves_and_queued_when_none_does(
    harness: CrashHarness, fresh_database_url: str, http: httpx.Client
) -> None:
    client = harness.client
    assert known_agents(client.engine) is None  # nobody has published yet
    worker = harness.start_worker(executor_id="known-agents")
    live = LiveServer(
        create_app(ServerSettings(database_url=fresh_database_url, allow_unauthenticated=True))
    ).start()
    try:
        _until_published(harness)
        assert known_agents(client.engine) == SERVED

        r = http.post(f"{live.url}/sessions", json={"agent": "nope", "message": "hi"})
        assert r.status_code == 404 and r.json()["error"] == "UNKNOWN_AGENT", r.text
        with pytest.raises(UnknownAgentError) as caught:
            client.start("nope", "hi")
        assert caught.value.known == SERVED
        assert client.sessions(agent="nope") == []  # nothing was written
        ok = http.post(f"{live.url}/sessions", json={"agent": "chat", "message": "hi"})
        assert ok.status_code == 201, ok.text
        _remembered_while_it_lets_in(client.engine)
    finally:
        live.stop()
        assert worker.stop() == 0
    assert known_agents(client.engine) is None  # it stopped: no live worker
    sid = client.start("nope", "queued for a worker to come")
    assert client.session(sid).status == "queued"


def _until_published(harness: CrashHarness, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while known_agents(harness.client.engine) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the worker never published its agents")
        time.sleep(0.05)


def _remembered_while_it_lets_in(engine: sa.Engine) -> None:
    """``AgentClient.start``'s check reads the fleet once a second while it admits; a
    refusal is read fresh. The fleet changes under it (the worker now serves only
    ``other``): a remembered answer still admits ``chat`` until it is read again."""
    now = [0.0]
    fleet = KnownAgents(engine, 30.0, ttl_sec=1.0, clock=lambda: now[0])
    assert fleet.refusing("chat") is None
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE dbos_agents.workers SET agents = '{other}' WHERE executor_id = :e"),
            {"e": "known-agents"},
        )
    try:
        assert fleet.refusing("chat") is None, "within the second: remembered"
        assert fleet.refusing("nope") == ["other"], "a refusal is read fresh"
        assert fleet.refusing("chat") == ["other"], "and what it read is remembered"
        now[0] = 1.5
        assert fleet.refusing("other") is None
    finally:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE dbos_agents.workers SET agents = :a WHERE executor_id = :e"),
                {"a": SERVED, "e": "known-agents"},
            )
