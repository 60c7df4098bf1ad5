"""The model turn: one call of the model, recorded with everything the turn produced.

It is a plain operation, not a DBOS step: its checkpoint is the turn's own rows. It calls
the model (retrying transient provider errors) and then, in one transaction, records
everything the turn produced: the previous turn's tool results, late-answer notices, the
assistant message, one ledger row per call, the waits its calls open, usage, and the
turn's own output.

If the worker dies after that transaction, the turn runs again, finds the recorded turn
and returns it: the model is not asked twice. If it dies before the transaction, nothing
of the turn was recorded and the model is asked again. The transaction is fenced on the run (``sessions.lock_running_stmt``): an
interrupted run records no turn, and the workflow stops as ``interrupted``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from dbos import DBOS

from .. import _dbos, storable
from ..agent import Agent
from ..errors import ModelError, TransientModelError
from ..ids import idempotency_key
from ..messages import Message, ModelResponse, ToolCall
from ..models.base import ModelRequest
from ..outcome import RunSpec
from ..store.sessions import RunFenced
from . import drain, execution
from .context import get_context
from .crashpoints import crash_point
from .kinds import kind_of, turn_openings
from .ledger import LedgerCall, Opened
from .steps import RunInterrupted

log = logging.getLogger("dbos_agents")


def unique_ids(calls: list[ToolCall], used: set[str], turn: int, namespace: str) -> list[ToolCall]:
    """Give every call an id unique in the session, and in a sub-agent unique under the
    root too: the ledger keys on (session, id) and pending calls on (root session, id)."""
    out = []
    for i, c in enumerate(calls):
        cid = (c.id or f"call_{turn}_{i + 1}") + namespace
        if cid in used:
            cid = f"{cid}_{turn}_{i + 1}"
        used.add(cid)
        # Ids, names and argument text are keys and columns: made storable here, at the
        # source, so every table and every later lookup sees the same value.
        out.append(
            c.model_copy(
                update={
                    "id": storable.text(cid),
                    "name": storable.text(c.name),
                    "arguments": storable.text(c.arguments),
                }
            )
        )
    return out


def ledger_kind(agent: Agent, call: ToolCall) -> str:
    """The ledger's kind column; an unknown tool is recorded as a server call."""
    known = call.name in agent.tools or call.name in agent.client_tools
    return kind_of(agent, call).name if known or call.name in agent.sub_agents else "server"


async def _complete(req: ModelRequest) -> ModelResponse:
    ctx = get_context()
    attempts = max(1, ctx.settings.model_max_attempts)
    delay = ctx.settings.model_backoff_initial_sec
    for attempt in range(1, attempts + 1):
        try:
            return await ctx.model.complete(req)
        except TransientModelError as exc:
            if attempt == attempts:
                raise ModelError(
                    f"model {ctx.model.name!r} failed {attempts} times; last error: {exc}"
                ) from exc
            log.warning(
                "model call failed, retrying",
                extra={"event": "model_retry", "attempt": attempt, "error": str(exc)},
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, ctx.settings.model_backoff_max_sec)
    raise AssertionError("unreachable")


async def model_turn(
    spec: RunSpec,
    turn: int,
    request: ModelRequest,
    previous: list[dict[str, Any]],
    used_ids: list[str],
    namespace: str,
    late_possible: bool,
) -> dict[str, Any]:
    """One model turn, recorded (see the module doc). Returns ``{"response": ModelResponse
    (call ids made unique), "notices": [late-answer messages delivered before it]}``;
    raises ``RunInterrupted`` when the run was fenced off before its turn was recorded.

    The first read is skipped when it can find nothing: no earlier execution can have
    recorded this turn (``execution``: a step of this execution ran, or its begin read the
    run's recorded turns and this one is past them) and no wait of this run timed out, so
    no late answer can be waiting (``late_possible``; a late answer to an earlier run's
    call is noticed by the next run's ``begin_run``)."""
    async with drain.step():
        ctx = get_context()
        ledger = ctx.ledger
        notices: list[Message] = []
        if (ahead := execution.recorded_turn(spec["run_seq"], turn)) is not None:
            return ahead  # recorded, and read by this resumed run's begin
        new = execution.later_steps_are_new() or execution.turn_is_new(spec["run_seq"], turn)
        if late_possible or not new:
            recorded, notices = await ledger.turn_state(spec, turn)
            if recorded is not None:
                return recorded
        execution.step_ran()
        req = request  # a step's arguments are not checkpointed: no need to dump them
        if notices:
            req = req.model_copy(update={"messages": [*req.messages, *notices]})
        # Outside the workflow's DBOS context, as a tool handler: an adapter's DBOS calls
        # cannot shift the workflow's operation ids.
        response = await _dbos.outside_workflow(_complete(req))
        crash_point("model_answered")
        agent = ctx.agent(spec["agent"])
        calls = unique_ids(response.tool_calls, set(used_ids), turn, namespace)
        # The model's text is stored and shown as it is, minus what Postgres cannot hold.
        response = response.model_copy(
            update={"tool_calls": calls, "text": storable.optional_text(response.text)}
        )
        ledger_calls = [
            LedgerCall(
                tool_call_id=c.id,
                tool=c.name,
                kind=ledger_kind(agent, c),
                arguments=c.arguments,
                idempotency_key=idempotency_key(spec["session_id"], c.id),
                safe_to_retry=c.name not in agent.tools or agent.tools[c.name].safe_to_retry,
            )
            for c in calls
        ]
        waits, dispatched = turn_openings(agent, calls)  # they open with the turn's rows
        now = time.time()  # recorded with the turn, never re-read
        owner = DBOS.workflow_id
        assert owner is not None
        opened = Opened(
            owner_workflow_id=owner,
            waits=waits,
            deadlines={w["tool_call_id"]: now + w["timeout_sec"] for w in waits},
            dispatched=dispatched,
        )
        try:
            output = await ledger.record_turn(
                spec,
                turn,
                previous,
                Message(role="assistant", content=response.text, tool_calls=calls),
                ledger_calls,
                response.usage,
                response.model,
                response.model_dump(mode="json"),
                expect_notices=bool(notices),
                opened=opened,
            )
        except RunFenced:
            raise RunInterrupted(f"turn {turn}") from None
        crash_point("model_call")
        return output
