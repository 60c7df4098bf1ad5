"""A session for an agent no worker serves or has served is refused at once (issue 29,
item 9b): workers publish their agents on their presence rows; ``POST /sessions`` answers
404 UNKNOWN_AGENT and ``AgentClient.start`` raises ``UnknownAgentError`` naming the known
ones. An agent whose workers are all down is accepted, queued for one to come back (issue
43), or refused with AGENT_UNAVAILABLE under ``start_when_no_worker = "refuse"``; before
any worker published, everything is accepted."""

from __future__ import annotations

import httpx
import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentUnavailableError, Settings, UnknownAgentError
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.store.workers import Fleet, KnownAgents, known_agents
from dbos_agents.testing import CrashHarness

from .conftest import LiveServer

pytestmark = [pytest.mark.integration, pytest.mark.crash]
SERVED = ["asker", "chat", "closer", "impatient"]


def test_unknown_agents_are_refused_while_a_worker_serves_and_queued_when_none_does(
    harness: CrashHarness, fresh_database_url: str, http: httpx.Client
) -> None:
    client = harness.client
    assert known_agents(client.engine) == Fleet(frozenset(), frozenset())  # nobody published
    worker = harness.start_worker(executor_id="known-agents")
    live = LiveServer(
        create_app(ServerSettings(database_url=fresh_database_url, allow_unauthenticated=True))
    ).start()
    try:
        _until_published(harness)
        assert known_agents(client.engine) == Fleet(frozenset(SERVED), frozenset(SERVED))

        r = http.post(f"{live.url}/sessions", json={"agent": "nope", "message": "hi"})
        assert r.status_code == 404 and r.json()["error"] == "UNKNOWN_AGENT", r.text
        with pytest.raises(UnknownAgentError) as caught:
            client.start("nope", "hi")
        assert caught.value.known == SERVED
        assert client.sessions(agent="nope") == []  # nothing was written
        ok = http.post(f"{live.url}/sessions", json={"agent": "chat", "message": "hi"})
        assert ok.status_code == 201, ok.text
        _remembered_while_it_lets_in(client.engine)
        # Ended before the worker stops: only the run started below then waits in the queue.
        assert client.wait(ok.json()["session_id"], timeout=60).status == "completed"
    finally:
        live.stop()
        assert worker.stop() == 0
    assert known_agents(client.engine) == Fleet(frozenset(), frozenset(SERVED))  # it stopped
    sid = client.start("chat", "queued for a worker to come back")
    assert client.session(sid).status == "queued"
    with pytest.raises(UnknownAgentError):
        client.start("nope", "no worker ever ran it")
    refusing = AgentClient(fresh_database_url, settings=Settings(start_when_no_worker="refuse"))
    live = LiveServer(
        create_app(
            ServerSettings(database_url=fresh_database_url, allow_unauthenticated=True),
            client=refusing,
        )
    ).start()
    try:
        r = http.post(f"{live.url}/sessions", json={"agent": "chat", "message": "hi"})
        assert r.status_code == 503 and r.json()["error"] == "AGENT_UNAVAILABLE", r.text
        metrics = http.get(f"{live.url}/metrics").text  # the queued run, visible per agent
        assert 'dbos_agents_queued_runs{agent="chat"} 1.0' in metrics, metrics
        assert 'dbos_agents_queued_oldest_age_seconds{agent="chat"}' in metrics
        with pytest.raises(AgentUnavailableError):
            refusing.start("chat", "refused by the setting")
    finally:
        live.stop()
        refusing.close()


def _until_published(harness: CrashHarness, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not _live(harness):
        if time.monotonic() > deadline:
            raise TimeoutError("the worker never published its agents")
        time.sleep(0.05)


def _live(harness: CrashHarness) -> frozenset[str]:
    fleet = known_agents(harness.client.engine)
    return frozenset() if fleet is None else fleet.live


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
        refused = fleet.refusing("nope")
        assert isinstance(refused, UnknownAgentError), "a refusal is read fresh"
        assert refused.known == ["other"]
        refused = fleet.refusing("chat")
        assert isinstance(refused, UnknownAgentError), "and what it read is remembered"
        now[0] = 1.5
        assert fleet.refusing("other") is None
    finally:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE dbos_agents.workers SET agents = :a WHERE executor_id = :e"),
                {"a": SERVED, "e": "known-agents"},
            )
