"""Which model answered each turn, read back per turn (``AgentClient.usage``): its name and
provider, tokens and cost, for a session's own turns; a fallback turn names the model that
answered; a fork keeps what its copied turns recorded; a scoped client reads only its own."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from dbos_agents import (
    AccessDeniedError,
    AgentClient,
    AgentRuntime,
    AsyncAgentClient,
    SessionNotFoundError,
    TurnUsage,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _children(client: AgentClient, root: str) -> list[str]:
    with client.engine.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT id FROM dbos_agents.sessions WHERE root_session_id = :s AND id <> :s"
                ),
                {"s": root},
            ).scalars()
        )


def _answered_by(turns: list[TurnUsage]) -> list[tuple[int, int, str | None, str | None]]:
    return [(t.run_seq, t.turn, t.model, t.provider) for t in turns]


async def test_each_turn_reads_back_with_the_model_and_provider_that_answered_it(
    runtime: AgentRuntime, client: AgentClient, aclient: AsyncAgentClient
) -> None:
    handle = await runtime.start("planner", "pack the order")
    assert (await handle.result()).status == "completed"
    sid = handle.session_id
    turns = await asyncio.to_thread(client.usage, sid)
    # The planner's own turns only: the sub-agent's turn lives under its own session.
    assert _answered_by(turns) == [
        (1, 1, "planner-model", "scripted"),
        (1, 2, "planner-model", "scripted"),
    ]
    (child,) = _children(client, sid)
    assert _answered_by(await aclient.usage(child)) == [(1, 1, "helper-model", "scripted")]
    # Tokens and dollars are the turn's, and the session's totals are their sum.
    info = await aclient.session(sid)
    assert all(t.input_tokens > 0 and t.output_tokens > 0 for t in turns)
    assert sum(t.input_tokens for t in turns) == info.usage.input_tokens
    assert sum(t.output_tokens for t in turns) == info.usage.output_tokens
    assert sum(t.cost_usd for t in turns) == pytest.approx(info.usage.cost_usd)
    assert await aclient.usage(sid) == turns


async def test_a_fallback_turn_records_the_model_that_answered_and_its_provider(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    handle = await runtime.start("resilient", "where is my parcel?")
    assert (await handle.result()).status == "completed"
    turns = await asyncio.to_thread(client.usage, handle.session_id)
    assert _answered_by(turns) == [(1, 1, "backup", "scripted")]


async def test_a_fork_keeps_the_recorded_model_and_provider_of_its_copied_turns(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    handle = await runtime.start("support", "Refund order 7 (usage)")
    assert (await handle.result()).status == "completed"
    sid = handle.session_id
    source = await asyncio.to_thread(client.usage, sid)
    assert [t.turn for t in source] == [1, 2, 3]
    assert {t.provider for t in source} == {"scripted"}
    other = await asyncio.to_thread(client.fork, sid, at_turn=2, message="refund only half")
    assert (await AsyncAgentClient(client).wait(other, timeout=30)).status == "completed"
    forked = await asyncio.to_thread(client.usage, other)
    assert forked[:2] == source[:2]  # copied as recorded, provider included
    assert [(t.run_seq, t.turn, t.provider) for t in forked[2:]] == [(2, 3, "scripted")]


async def test_a_session_of_another_user_is_refused_as_history_refuses_it(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    handle = await runtime.start("chat", "hello (usage)", user_id="alice-u", tenant_id="t1")
    assert (await handle.result()).status == "completed"
    sid = handle.session_id
    alice = client.for_identity("alice-u", "t1")
    bob = client.for_identity("bob-u", "t1")
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(bob.history, sid)
    with pytest.raises(AccessDeniedError):
        await asyncio.to_thread(bob.usage, sid)
    with pytest.raises(AccessDeniedError):
        await AsyncAgentClient(bob).usage(sid)
    with pytest.raises(SessionNotFoundError):
        await asyncio.to_thread(alice.usage, "ses_nope")
    assert len(await asyncio.to_thread(alice.usage, sid)) == 1
