"""Hostile input: refused at the door with a typed error; what the runtime itself produces
is stored whatever characters it holds, and never fails a run (issue: NUL, lone
surrogates, NaN, Infinity, 1e400)."""

from __future__ import annotations

import asyncio
import math

import pytest
import sqlalchemy as sa

from dbos_agents import AgentClient, AgentRuntime, InvalidRequestError

from .agents import EFFECTS, UGLY
from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

HOSTILE = ["a\x00b", "lone \ud800", "x" * 300]
HOSTILE_NUMBERS = [math.nan, math.inf, -math.inf, 10**400]


def _fingerprint(client: AgentClient) -> tuple[int, ...]:
    with client.engine.connect() as conn:
        return tuple(
            int(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one())
            for t in (
                "dbos_agents.sessions",
                "dbos_agents.messages",
                "dbos_agents.tool_calls",
                "dbos_agents.pending_calls",
                "dbos.workflow_status",
                "dbos.notifications",
            )
        )


async def test_a_tool_and_a_model_producing_unstorable_text_do_not_fail_the_run(
    runtime: AgentRuntime,
) -> None:
    h = await runtime.start("ugly", "go")
    out = await h.result()
    assert out.status == "completed", out.error
    assert out.output is not None and "\x00" not in out.output and "\ufffd" in out.output
    (call,) = await h.tool_calls()
    assert call.status == "completed" and EFFECTS[call.idempotency_key] == 1
    assert call.result is not None and "\ufffd" in call.result["output"]["note"]
    tool_msg = next(m for m in await h.history() if m.role == "tool")
    assert tool_msg.content is not None and "\ufffd" in tool_msg.content
    assert UGLY not in (tool_msg.content or "")


@pytest.mark.parametrize("bad", HOSTILE)
async def test_a_start_with_a_hostile_string_is_refused_and_changes_nothing(
    runtime: AgentRuntime, client: AgentClient, bad: str
) -> None:
    before = await asyncio.to_thread(_fingerprint, client)
    long_text = len(bad) >= 300  # a long message is fine; long ids are not
    refused = [{"message": "hi", "user_id": bad}] + ([] if long_text else [{"message": bad}])
    for kwargs in refused:
        with pytest.raises(InvalidRequestError) as err:
            await asyncio.to_thread(client.start, "chat", **kwargs)  # type: ignore[arg-type]
        assert next(iter(kwargs.keys() - {"message"}), "message") in str(err.value)
    if not long_text:
        with pytest.raises(InvalidRequestError):
            await runtime.start("chat", bad)
    with pytest.raises(InvalidRequestError):
        await asyncio.to_thread(client.start, bad, "hi")
    assert await asyncio.to_thread(_fingerprint, client) == before


async def test_a_submit_with_hostile_values_is_refused_and_changes_nothing(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    h = await runtime.start("asker", "ship it?")
    (p,) = await _pending(client, h.session_id)
    before = await asyncio.to_thread(_fingerprint, client)
    attempts: list[dict[str, object]] = [
        *({"result": {"ok": True, "note": s}} for s in HOSTILE[:2]),
        *({"result": {"ok": True, "n": x}} for x in HOSTILE_NUMBERS),
        *({"error": s} for s in HOSTILE[:2]),
    ]
    for kwargs in attempts:
        with pytest.raises(InvalidRequestError) as err:
            await asyncio.to_thread(
                client.submit_tool_result, h.session_id, p.tool_call_id, **kwargs
            )
        assert ("result." if "result" in kwargs else "error") in str(err.value)
    for bad_id in HOSTILE:
        with pytest.raises(InvalidRequestError):
            await asyncio.to_thread(client.submit_tool_result, h.session_id, bad_id, result={})
    assert await asyncio.to_thread(_fingerprint, client) == before
    ok = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={"ok": True}
    )
    assert ok.status == "accepted" and (await h.result()).status == "completed"


async def test_results_are_validated_as_declared_formats_at_submit_model_in_the_worker(
    runtime: AgentRuntime, client: AgentClient
) -> None:
    from dbos_agents import InvalidResultError

    h = await runtime.start("booker", "a table")
    (p,) = await _pending(client, h.session_id)
    with pytest.raises(InvalidResultError) as err:
        await asyncio.to_thread(
            client.submit_tool_result,
            h.session_id,
            p.tool_call_id,
            result={"when": "not a date", "id": "not-a-uuid", "seats": 2},
        )
    assert {e["path"] for e in err.value.errors} == {"when", "id"}
    # Schema-valid, but the output model's own rule refuses it: the model reads an error.
    good_shape = {"when": "2026-11-22T10:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000"}
    out = await asyncio.to_thread(
        client.submit_tool_result, h.session_id, p.tool_call_id, result={**good_shape, "seats": 3}
    )
    assert out.status == "accepted"
    res = await h.result()
    assert res.status == "completed"
    assert res.output is not None and "client-error" in res.output and "pairs" in res.output
