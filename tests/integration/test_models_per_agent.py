"""A model per agent in one worker: the planner's turns go to its model, its sub-agent's
to another (that one streams, the planner's does not), and the runtime's model answers
neither; each turn's model is recorded with its usage."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from dbos_agents import Agent, AgentClient, AgentRuntime, ConfigurationError, DefinitionError

from .agents import HELPER_MODEL, OVERLOADED

pytestmark = pytest.mark.integration


@pytest.mark.asyncio(loop_scope="session")
async def test_each_agent_s_turns_go_to_its_own_model(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    handle = await runtime.start("planner", "pack the order")
    out = await handle.result()
    assert out.output == "planner says: helper did: count the boxes", out
    sid = handle.session_id
    with client.engine.connect() as conn:
        turns = conn.execute(
            sa.text(
                "SELECT s.agent, u.model, (SELECT count(*) FROM dbos_agents.deltas d"
                " WHERE d.session_id = u.session_id AND d.turn = u.turn) AS pieces"
                " FROM dbos_agents.usage u JOIN dbos_agents.sessions s ON s.id = u.session_id"
                " WHERE s.root_session_id = :s ORDER BY u.created_at"
            ),
            {"s": sid},
        ).all()
    assert [(t.agent, t.model) for t in turns] == [
        ("planner", "planner-model"),
        ("helper", "helper-model"),
        ("planner", "planner-model"),
    ]
    streamed = {t.agent for t in turns if t.pieces}
    assert streamed == {"helper"}, turns  # the helper's model streams, the planner's not


def test_a_model_per_agent_is_checked_at_definition_and_launch() -> None:
    with pytest.raises(DefinitionError, match="does not implement the Model protocol"):
        Agent("a", model=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="agents b have no model of their own"):
        AgentRuntime([Agent("a", model=HELPER_MODEL), Agent("b")])
    AgentRuntime([Agent("a", model=HELPER_MODEL)])  # every agent has one: no default needed


@pytest.mark.asyncio(loop_scope="session")
async def test_an_overloaded_provider_falls_back_and_the_answering_model_is_recorded(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    before = OVERLOADED.calls
    handle = await runtime.start("resilient", "where is my order?")
    out = await handle.result()
    assert out.status == "completed" and out.output == "backup answered: where is my order?"
    assert OVERLOADED.calls == before + 1  # asked once, then the turn went on
    with client.engine.connect() as conn:
        models = (
            conn.execute(
                sa.text("SELECT model FROM dbos_agents.usage WHERE session_id = :s"),
                {"s": handle.session_id},
            )
            .scalars()
            .all()
        )
    assert models == ["backup"]


@pytest.mark.asyncio(loop_scope="session")
async def test_a_failure_that_is_the_request_s_is_not_hidden_by_a_fallback(
    runtime: AgentRuntime,
) -> None:
    handle = await runtime.start("strict", "a very long question")
    out = await handle.result()
    assert out.status == "failed" and "400 context too long" in (out.error or ""), out
    assert (out.error or "").startswith("agent 'strict': "), out  # which agent failed
