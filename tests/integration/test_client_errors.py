"""A database that does not answer is ``DatabaseUnavailableError`` from the client itself,
sync and async (not only from the HTTP server's handlers): a closed port, and a private
cluster stopped under a connected client, then started again."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import psycopg
import pytest
import sqlalchemy as sa

from dbos_agents import (
    AgentClient,
    AsyncAgentClient,
    DatabaseUnavailableError,
    InterruptFailedError,
)
from dbos_agents.testing import PrivateCluster, create_fresh_database

pytestmark = pytest.mark.integration

CLOSED = "postgresql://postgres@127.0.0.1:1/nowhere"
_names = itertools.count()


def test_a_closed_port_is_database_unavailable() -> None:
    with pytest.raises(DatabaseUnavailableError, match=r"127\.0\.0\.1:1/nowhere"):
        AgentClient(CLOSED)


@pytest.mark.asyncio(loop_scope="session")
async def test_a_closed_port_is_database_unavailable_async() -> None:
    with pytest.raises(DatabaseUnavailableError, match=r"127\.0\.0\.1:1/nowhere"):
        await AsyncAgentClient.connect(CLOSED)


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    with PrivateCluster() as pg:
        yield pg


@pytest.fixture
def outage(cluster: PrivateCluster) -> Iterator[tuple[AgentClient, str]]:
    """A connected client with a session, then the cluster stopped under it."""
    if not cluster.is_running():
        cluster.start()
    url = create_fresh_database(cluster.url, f"client_errors_{next(_names)}")
    client = AgentClient(url)
    sid = client.start("chat", "before the outage")
    client.history(sid)  # the pool holds live connections now
    cluster.stop()
    try:
        yield client, sid
    finally:
        if not cluster.is_running():
            cluster.start()
        client.close()


CALLS: dict[str, Callable[[AgentClient, str], object]] = {
    "ping": lambda c, sid: c.ping(),
    "start": lambda c, sid: c.start("chat", "during the outage"),
    "send": lambda c, sid: c.send(sid, "more"),
    "session": lambda c, sid: c.session(sid),
    "sessions": lambda c, sid: c.sessions(),
    "events": lambda c, sid: c.events(sid),
    "history": lambda c, sid: c.history(sid),
    "tool_calls": lambda c, sid: c.tool_calls(sid),
    "pending": lambda c, sid: c.pending(session_id=sid),
    "submit": lambda c, sid: c.submit_tool_result(sid, "call_1", result={"ok": True}),
    "approve": lambda c, sid: c.submit_approval(sid, "call_1", True),
    "fail": lambda c, sid: c.fail(sid, "call_1", "no"),
    "token_generation": lambda c, sid: c.token_generation(sid),
    "revoke_tokens": lambda c, sid: c.revoke_tokens(sid),
    "reap_tombstones": lambda c, sid: c.reap_tombstones(),
    "scoped": lambda c, sid: c.for_identity("u1").sessions(),
}


def test_every_sync_method_says_database_unavailable(
    outage: tuple[AgentClient, str], cluster: PrivateCluster
) -> None:
    client, sid = outage
    for name, call in CALLS.items():
        with pytest.raises(DatabaseUnavailableError) as info:
            call(client, sid)
        assert f"127.0.0.1:{cluster.port}" in str(info.value), name
        assert isinstance(info.value.__cause__, sa.exc.DBAPIError | psycopg.Error), name
    # An interrupt is all or nothing and says so with its own error (its cause kept).
    with pytest.raises(InterruptFailedError, match="nothing changed"):
        client.interrupt(sid)
    cluster.start()
    assert client.session(sid).id == sid  # the same client works again


@pytest.mark.asyncio(loop_scope="session")
async def test_async_methods_say_database_unavailable(
    outage: tuple[AgentClient, str], cluster: PrivateCluster
) -> None:
    client, sid = outage
    aclient = AsyncAgentClient(client)
    for pending in (
        aclient.ping(),
        aclient.session(sid),
        aclient.sessions(),
        aclient.events(sid),
        aclient.start("chat", "x"),
        aclient.submit_tool_result(sid, "call_1", result={"ok": True}),
        aclient.for_identity("u1").history(sid),
    ):
        with pytest.raises(DatabaseUnavailableError, match=re.escape(f"127.0.0.1:{cluster.port}")):
            await pending
