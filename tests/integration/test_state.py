"""Typed session state end to end, in-process, against real Postgres and real DBOS: tools
read and change it, the change commits with the call's result, the model's instructions
see it, and readers get it back typed."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime, StateValidationError
from dbos_agents.errors import SessionNotFoundError

from .state_agents import INSTRUCTIONS, Cart, Tally

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _versions(client: AgentClient, session_id: str) -> list[Any]:
    with client.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT s.version, s.run_seq, s.turn, s.tool_call_id, s.state,"
                    " s.xmin::text AS sx, t.xmin::text AS tx, t.status"
                    " FROM dbos_agents.session_states s JOIN dbos_agents.tool_calls t"
                    " ON t.session_id = s.session_id AND t.tool_call_id = s.tool_call_id"
                    " WHERE s.session_id = :s ORDER BY s.version"
                ),
                {"s": session_id},
            )
        )


def _tool_messages(history: list[Any]) -> list[str]:
    return [m.content or "" for m in history if m.role == "tool"]


async def test_tools_change_the_state_and_the_next_turn_sees_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("cart", "shop")
    out = await h.result()
    assert out.status == "completed", out
    # turn 1 adds apple; turn 2 runs three adds side by side, each folded onto the latest
    # committed state under the session's lock: none is lost.
    cart = client.state(h.session_id, Cart)
    assert sorted(cart.items) == ["apple", "fig", "kiwi", "pear"]
    assert cart.items[0] == "apple"
    assert cart.total_cents == 1000
    tools = _tool_messages(await h.history())
    assert tools[0] == "added apple (saw 0)"
    # the three side-by-side calls all read the state as turn 1 left it
    assert sorted(tools[1:4]) == ["added fig (saw 1)", "added kiwi (saw 1)", "added pear (saw 1)"]
    assert json.loads(tools[4]) == cart.model_dump()  # show_cart read the committed state
    assert out.output == f"cart: {tools[4]}"
    # instructions(state): each model turn saw the state as of that turn
    assert INSTRUCTIONS["shop"] == [
        "The cart holds 0 items worth 0 cents.",
        "The cart holds 1 items worth 100 cents.",
        "The cart holds 4 items worth 1000 cents.",
        "The cart holds 4 items worth 1000 cents.",
    ]
    # one version per change, each committed in its call's result transaction
    rows = _versions(client, h.session_id)
    assert [r.version for r in rows] == [1, 2, 3, 4]
    assert all(r.sx == r.tx and r.status == "completed" for r in rows)
    assert [r.turn for r in rows] == [1, 2, 2, 2]
    assert rows[-1].state == cart.model_dump(mode="json")
    # readers: the JSON without a model, the model with one, the async client alike
    assert client.state(h.session_id) == cart.model_dump(mode="json")
    assert client.state(h.session_id, at_turn=1) == {"items": ["apple"], "total_cents": 100}
    version = client.state_version(h.session_id)
    assert version is not None and version.version == 4 and version.turn == 2


async def test_a_session_never_changed_reads_as_the_defaults(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("chat", "hi")
    await h.result()
    assert client.state(h.session_id) is None
    assert client.state(h.session_id, Cart) == Cart()
    with pytest.raises(SessionNotFoundError):
        client.state("no-such-session")


async def test_an_invalid_replacement_is_a_tool_error_and_nothing_is_stored(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("cart", "total -5")
    out = await h.result()
    assert out.status == "completed"
    (tool_msg,) = _tool_messages(await h.history())
    error = json.loads(tool_msg)["error"]
    assert error["kind"] == "tool-error"
    assert "StateValidationError" in error["message"] and "total_cents" in error["message"]
    assert _versions(client, h.session_id) == []
    (ledger,) = await h.tool_calls()
    assert ledger.status == "failed"


async def test_a_change_that_fails_at_the_commit_is_a_tool_error_and_stores_nothing(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """Two side-by-side calls each take 60 from a total of 100: each passes on its own
    view, the second fails once folded onto the first's committed state."""
    h = await runtime.start("cart", "total 100")
    assert (await h.result()).status == "completed"
    h = await runtime.send(h.session_id, "sneaky -60")
    assert (await h.result()).status == "completed"
    results = _tool_messages(await h.history())[1:]
    oks = [r for r in results if not r.startswith("{")]
    errors = [json.loads(r)["error"] for r in results if r.startswith("{")]
    assert oks == ["total moved by -60"]
    assert len(errors) == 1 and "total_cents" in errors[0]["message"]
    assert client.state(h.session_id, Cart).total_cents == 40
    assert [r.version for r in _versions(client, h.session_id)] == [1, 2]


async def test_the_async_client_reads_the_state(runtime: AgentRuntime, client: AgentClient) -> None:
    from dbos_agents import AsyncAgentClient

    h = await runtime.start("tally", "3")
    assert (await h.result()).status == "completed"
    aclient = AsyncAgentClient(client)
    assert await aclient.state(h.session_id) == {"points": [3]}
    assert await aclient.state(h.session_id, Tally) == Tally(points=[3])


def _write_old_state(client: AgentClient, session_id: str, state: dict[str, Any]) -> None:
    """A version written by an earlier release, under an older model."""
    with client.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.session_states (session_id, version, state)"
                " SELECT :s, coalesce(max(version), 0) + 1, CAST(:st AS jsonb)"
                " FROM dbos_agents.session_states WHERE session_id = :s"
            ),
            {"s": session_id, "st": json.dumps(state)},
        )


async def test_an_old_state_without_a_migration_names_the_session_and_the_field(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("tally", "1")
    assert (await h.result()).status == "completed"
    _write_old_state(client, h.session_id, {"points": "1,2"})
    with pytest.raises(StateValidationError) as caught:
        client.state(h.session_id, Tally)
    assert caught.value.session_id == h.session_id and caught.value.field == "points"
    assert client.state(h.session_id) == {"points": "1,2"}  # the JSON is still readable
    # the worker cannot read it either: the tool that needs it fails, nothing is stored
    h = await runtime.send(h.session_id, "5")
    assert (await h.result()).status == "completed"
    error = json.loads(_tool_messages(await h.history())[-1])["error"]
    assert error["kind"] == "tool-error" and "'points'" in error["message"]
    assert h.session_id in error["message"]
    assert client.state(h.session_id) == {"points": "1,2"}


async def test_an_old_state_is_upgraded_by_migrate_state(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    from .state_agents import upgrade_tally

    h = await runtime.start("tally_m", "1")
    assert (await h.result()).status == "completed"
    _write_old_state(client, h.session_id, {"points": "1,2"})
    h = await runtime.send(h.session_id, "5")
    assert (await h.result()).status == "completed"
    assert json.loads(_tool_messages(await h.history())[-1]) == [1, 2, 5]
    assert client.state(h.session_id) == {"points": [1, 2, 5]}  # stored in the new shape
    _write_old_state(client, h.session_id, {"points": "7"})
    assert client.state(h.session_id, Tally, migrate=upgrade_tally) == Tally(points=[7])


async def test_the_state_over_http(integration_database_url: str, runtime: AgentRuntime) -> None:
    """``GET /sessions/{id}/state``: authorized like ``GET /sessions/{id}``."""
    await asyncio.to_thread(_over_http, integration_database_url)


def _over_http(integration_database_url: str) -> None:
    import httpx
    from pydantic import SecretStr

    from dbos_agents.server import ServerSettings, create_app
    from tests.http.conftest import SECRET, LiveServer, auth

    settings = ServerSettings(
        database_url=integration_database_url,
        secret=SecretStr(SECRET),
        allow_unauthenticated=True,
        events_poll_interval_sec=0.05,
    )
    live = LiveServer(create_app(settings)).start()
    try:
        with httpx.Client(timeout=30) as http:
            tokens = {}
            for message in ("4", "9"):
                r = http.post(f"{live.url}/sessions", json={"agent": "tally", "message": message})
                assert r.status_code == 201, r.text
                tokens[r.json()["session_id"]] = r.json()["token"]
            (sid, token), (other, other_token) = tokens.items()
            deadline = time.monotonic() + 30
            while True:
                r = http.get(f"{live.url}/sessions/{sid}/state", headers=auth(token))
                assert r.status_code == 200, r.text
                if r.json()["version"] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            body = r.json()
            assert (body["session_id"], body["version"], body["state"]) == (sid, 1, {"points": [4]})
            assert body["turn"] == 1 and body["tool_call_id"]
            r = http.get(
                f"{live.url}/sessions/{sid}/state", params={"at_turn": 0}, headers=auth(token)
            )
            assert r.json()["version"] == 0 and r.json()["state"] is None
            assert http.get(f"{live.url}/sessions/{sid}/state").status_code == 401
            r = http.get(f"{live.url}/sessions/{sid}/state", headers=auth(other_token))
            assert r.status_code == 403, r.text
            assert other != sid
    finally:
        live.stop()


async def test_the_stream_carries_each_state_change_after_its_result(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    from dbos_agents.events import MessageEvent, StateEvent

    h = await runtime.start("cart", "shop")
    assert (await h.result()).status == "completed"
    events = list(client.stream(h.session_id, follow=False))
    states = [(i, e) for i, e in enumerate(events) if isinstance(e, StateEvent)]
    assert sorted(e.version for _, e in states) == [1, 2, 3, 4]
    for i, e in states:  # right after the result message of the call that committed it
        before = events[i - 1]
        assert isinstance(before, MessageEvent) and before.role == "tool"
        assert e.tool_call_id == before.tool_call_id and e.turn in (1, 2)
    latest = max((e for _, e in states), key=lambda e: e.version)
    assert latest.state == client.state(h.session_id)
    # resuming after a result message does not send its state again
    first_state_at = states[0][0]
    cursor = events[first_state_at - 1]
    assert isinstance(cursor, MessageEvent)
    resumed = list(client.stream(h.session_id, cursor.cursor, follow=False))
    assert [e.version for e in resumed if isinstance(e, StateEvent)] == [
        e.version for _, e in states[1:]
    ]
