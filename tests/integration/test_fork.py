"""History by turn and forks (issue 30): a fork copies the rows up to a turn and runs
nothing before it again. The witness: the side effects of ``refund`` (``EFFECTS``, keyed by
idempotency key) and every model request (``ASKED``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa

from dbos_agents import (
    AccessDeniedError,
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    SessionInfo,
    SessionNotFoundError,
)
from dbos_agents.errors import TurnNotFoundError

from .agents import EFFECTS, GATES
from .streaming_model import ASKED

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _asked(first_message: str) -> int:
    """Model requests of every session whose transcript starts with ``first_message``
    (the original and its forks: a fork's transcript starts with the original's)."""
    return sum(
        1
        for r in ASKED
        if r.agent in ("support", "holder")
        and r.messages
        and r.messages[0].content == first_message
    )


async def _done(client: AgentClient, session_id: str) -> SessionInfo:
    return await AsyncAgentClient(client).wait(session_id, timeout=30)


async def _support_session(runtime: AgentRuntime, text: str, **who: str) -> str:
    h = await runtime.start("support", text, **who)
    assert (await h.result()).status == "completed"
    return h.session_id


def _rows(client: AgentClient, session_id: str) -> tuple[object, ...]:
    with client.engine.connect() as conn:
        return tuple(
            tuple(
                conn.execute(
                    sa.text(
                        f"SELECT * FROM dbos_agents.{t} WHERE session_id = :s ORDER BY 1, 2, 3"
                    ),
                    {"s": session_id},
                ).all()
            )
            for t in ("messages", "tool_calls", "usage", "runs")
        )


def _counts(client: AgentClient) -> tuple[int, int]:
    with client.engine.connect() as conn:
        return (
            conn.execute(sa.text("SELECT count(*) FROM dbos_agents.sessions")).scalar_one(),
            conn.execute(sa.text("SELECT count(*) FROM dbos.workflow_status")).scalar_one(),
        )


async def test_a_fork_repeats_no_effect_and_no_model_call(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    first = f"refund order 42 ({uuid.uuid4().hex[:8]})"
    sid = await _support_session(runtime, first)
    assert _asked(first) == 3
    ledger = await asyncio.to_thread(client.tool_calls, sid)
    refund_key = ledger[1].idempotency_key
    assert EFFECTS[refund_key] == 1
    before = _rows(client, sid)
    history = await asyncio.to_thread(client.history, sid)

    # Turn 2 requested the refund; its result is part of the turn. Nothing runs again.
    at2 = await asyncio.to_thread(client.fork, sid, at_turn=2, message="and then?")
    info = await _done(client, at2)
    assert (info.status, info.final_output) == ("completed", "refunded; said: and then?")
    assert (info.forked_from, info.forked_at_turn, info.root_session_id) == (sid, 2, at2)
    assert _asked(first) == 3 + 1  # only turn 3 of the fork asked the model
    assert EFFECTS[refund_key] == 1
    forked = await asyncio.to_thread(client.history, at2)
    assert [(m.role, m.content, m.tool_call_id) for m in forked[:5]] == [
        (m.role, m.content, m.tool_call_id) for m in history[:5]
    ]
    assert [(m.role, m.content) for m in forked[5:]] == [
        ("user", "and then?"),
        ("assistant", "refunded; said: and then?"),
    ]
    copied = await asyncio.to_thread(client.tool_calls, at2)
    assert [c.model_dump(exclude={"session_id"}) for c in copied] == [
        c.model_dump(exclude={"session_id"}) for c in ledger
    ]
    assert not [k for k in EFFECTS if k in {c.idempotency_key for c in copied} - {refund_key}]

    # Turn 1 looked the order up: the fork's own turn 2 refunds once, under its own key.
    at1 = await asyncio.to_thread(client.fork, sid, at_turn=1, message="refund it after all")
    info1 = await _done(client, at1)
    assert info1.final_output == "refunded; said: refund it after all"
    assert _asked(first) == 4 + 2  # turns 2 and 3 of this fork
    calls1 = await asyncio.to_thread(client.tool_calls, at1)
    assert [c.tool for c in calls1] == ["get_order", "refund"]
    assert calls1[0].model_dump(exclude={"session_id"}) == ledger[0].model_dump(
        exclude={"session_id"}
    )
    assert calls1[1].idempotency_key != refund_key and EFFECTS[calls1[1].idempotency_key] == 1
    assert EFFECTS[refund_key] == 1

    # The original is untouched, and it and its forks go on independently.
    assert _rows(client, sid) == before
    await asyncio.to_thread(client.send, sid, "original again")
    await asyncio.to_thread(client.send, at2, "fork again")
    assert (await _done(client, sid)).final_output == "refunded; said: original again"
    assert (await _done(client, at2)).final_output == "refunded; said: fork again"
    assert [m.content for m in await asyncio.to_thread(client.history, sid)][-2:] == [
        "original again",
        "refunded; said: original again",
    ]
    assert "original again" not in [m.content for m in await asyncio.to_thread(client.history, at2)]
    assert EFFECTS[refund_key] == 1
    assert _asked(first) == 6 + 2


async def test_history_at_a_turn(runtime: AgentRuntime, client: AgentClient) -> None:
    sid = await _support_session(runtime, "history please")
    whole = await asyncio.to_thread(client.history, sid)
    assert [m.role for m in whole] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert await asyncio.to_thread(client.history, sid, at_turn=1) == whole[:3]
    assert await asyncio.to_thread(client.history, sid, at_turn=2) == whole[:5]
    assert await asyncio.to_thread(client.history, sid, at_turn=3) == whole
    await asyncio.to_thread(client.send, sid, "more")
    await _done(client, sid)
    # The next run's user message is not part of turn 3.
    assert await asyncio.to_thread(client.history, sid, at_turn=3) == whole
    for missing in (0, -1, 5):
        with pytest.raises(TurnNotFoundError) as caught:
            await asyncio.to_thread(client.history, sid, at_turn=missing)
        assert (caught.value.turn, caught.value.turns, caught.value.code) == (
            missing,
            4,
            "TURN_NOT_FOUND",
        )


async def test_a_refused_fork_creates_nothing(runtime: AgentRuntime, client: AgentClient) -> None:
    sid = await _support_session(runtime, "refuse forks", user_id="alice-f", tenant_id="t1")
    alice = client.for_identity("alice-f", "t1")
    bob = client.for_identity("bob-f", "t1")
    before = _counts(client)
    for turn in (0, 4, 100):
        with pytest.raises(TurnNotFoundError):
            await asyncio.to_thread(alice.fork, sid, at_turn=turn, message="x")
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(bob.fork, sid, at_turn=1, message="hijack")
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(bob.history, sid, at_turn=1)
    with pytest.raises(SessionNotFoundError):
        await asyncio.to_thread(alice.fork, "ses_nope", at_turn=1, message="x")
    assert _counts(client) == before
    # Alice may: the fork is hers, same user and tenant.
    mine = await asyncio.to_thread(alice.fork, sid, at_turn=3, message="mine")
    info = await _done(client, mine)
    assert (info.user_id, info.tenant_id, info.status) == ("alice-f", "t1", "completed")
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(bob.session, mine)


async def test_a_fork_of_a_running_call_does_not_run_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """Turn 1's side-effecting call is still running in the original: the fork gets an
    ``interrupted`` result for it (as an interrupted run's calls do), never a second run."""
    first = f"hold ({uuid.uuid4().hex[:8]})"
    h = await runtime.start("holder", first)
    for _ in range(200):
        if EFFECTS[f"held:{h.session_id}"]:
            break
        await asyncio.sleep(0.05)
    assert EFFECTS[f"held:{h.session_id}"] == 1
    fork_id = await asyncio.to_thread(client.fork, h.session_id, at_turn=1, message="go on")
    info = await _done(client, fork_id)
    assert info.status == "completed"
    assert info.final_output is not None and "interrupted" in info.final_output
    assert EFFECTS[f"held:{fork_id}"] == 0
    GATES[h.session_id].set()
    assert (await h.result()).status == "completed"
    assert EFFECTS[f"held:{h.session_id}"] == 1
    assert _asked(first) == 2 + 1


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_the_fork_command(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    sid = await _support_session(runtime, "fork me on the command line")
    url = ("--database-url", integration_database_url)
    r = await asyncio.to_thread(
        _cli, "fork", sid, "--at-turn", "2", "from the shell", *url, "--json"
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["event"], doc["forked_from"], doc["at_turn"], doc["agent"]) == (
        "forked",
        sid,
        2,
        "support",
    )
    info = await _done(client, doc["session_id"])
    assert info.final_output == "refunded; said: from the shell"
    r = await asyncio.to_thread(_cli, "fork", sid, "--at-turn", "2", "plain", *url)
    assert r.returncode == 0 and "forked session ses_" in r.stdout, r.stderr
    await _done(client, r.stdout.split()[2])
    before = _counts(client)
    r = await asyncio.to_thread(_cli, "fork", sid, "--at-turn", "9", "nope", *url, "--json")
    assert r.returncode == 15, r.stderr
    assert json.loads(r.stdout)["error"] == "TURN_NOT_FOUND"
    assert _counts(client) == before


async def test_a_fork_copies_the_state_versions_up_to_its_turn(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    """State versions (migration 0015) as committed by the calls of turns up to n; written
    here by hand, one per turn, as tools of each turn would have."""
    sid = await _support_session(runtime, "stateful")
    with client.engine.begin() as conn:
        for v in (1, 2, 3):
            conn.execute(
                sa.text(
                    "INSERT INTO dbos_agents.session_states (session_id, version, run_seq, turn,"
                    " tool_call_id, state) VALUES (:s, :v, 1, :v, :c, CAST(:st AS jsonb))"
                ),
                {"s": sid, "v": v, "c": f"call_{v}_1", "st": json.dumps({"step": v})},
            )
    fork_id = await asyncio.to_thread(client.fork, sid, at_turn=2, message="go")
    await _done(client, fork_id)
    with client.engine.connect() as conn:
        copied = conn.execute(
            sa.text(
                "SELECT version, turn, tool_call_id, state FROM dbos_agents.session_states"
                " WHERE session_id = :s ORDER BY version"
            ),
            {"s": fork_id},
        ).all()
    assert [tuple(r) for r in copied] == [
        (1, 1, "call_1_1", {"step": 1}),
        (2, 2, "call_2_1", {"step": 2}),
    ]
