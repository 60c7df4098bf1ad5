"""The model turn: one call of the model, recorded with everything the turn produced.

It is a plain operation, not a DBOS step: its checkpoint is the turn's own rows. It calls
the model (retrying transient provider errors; streaming the reply to readers when the
model can, ``respond``) and then, in one transaction, records
everything the turn produced: the previous turn's tool results, late-answer notices, the
assistant message, one ledger row per call, the waits its calls open, usage, and the
turn's ``TurnRecord``.

If the worker dies after that transaction, the turn runs again, finds the recorded turn
and returns it: the model is not asked twice. If it dies before the transaction, nothing
of the turn was recorded and the model is asked again. The transaction is fenced on the
run (``sessions.lock_running_stmt``): an interrupted run records no turn, and the workflow
stops as ``interrupted``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import psycopg
from dbos import DBOS
from dbos import error as dbos_errors

from .. import _dbos, storable
from ..agent import Agent
from ..ids import idempotency_key
from ..mcp.server import Listing
from ..messages import Message, ModelResponse, ToolCall
from ..models.base import ModelRequest
from ..outcome import RunSpec
from ..store import fence
from ..store import state as state_rows
from ..store.calls import Requested
from ..store.sessions import RunFenced
from . import drain, execution, spans
from .calls.base import RunInterrupted
from .calls.planning import Plan, ledger_kind, openings, plan
from .context import get_context
from .crashpoints import crash_point
from .ledger import CallResult, Opened, TurnRecord
from .respond import Reply, respond, streams

log = logging.getLogger("dbos_agents")


async def _stale_ends(reply: Coroutine[Any, Any, Reply]) -> Reply:
    """The reply, asked outside the workflow's DBOS context (as a tool handler: an
    adapter's DBOS calls cannot shift the workflow's operation ids); an execution whose
    pieces Postgres refused ends as DBOS ends one that lost its workflow."""
    try:
        return await _dbos.outside_workflow(reply)
    except fence.StaleWriter:
        raise _lost() from None


def _lost() -> BaseException:
    """This execution no longer owns its workflow (adopted while alive): DBOS's own signal
    for that, which ends the execution recording nothing (DBOS then waits for the owner's
    outcome)."""
    wf = DBOS.workflow_id
    assert wf is not None
    log.warning(
        "this execution lost its run to another worker; it stops and records nothing",
        extra={"event": "stale_execution", "workflow_id": wf},
    )
    return dbos_errors.DBOSWorkflowConflictIDError(wf)


@dataclass(frozen=True)
class Turned:
    """A model turn's outcome: its record, and the plan of its calls when this execution
    made it (a replayed turn's calls are planned by the workflow)."""

    record: TurnRecord
    plan: Plan | None = None


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


def _provider(response: ModelResponse, agent: Agent) -> str | None:
    """Who answered: the adapter's word, else the agent's model's optional ``provider``
    attribute (``Model`` does not require one, so adapters written before it still fit)."""
    if response.provider is not None:
        return storable.text(response.provider)
    provider = getattr(get_context().model_for(agent.name), "provider", None)
    return storable.text(provider) if isinstance(provider, str) else None


async def _instructions(spec: RunSpec, agent: Agent) -> str:
    """The agent's instructions for this turn: its function of the session's latest state
    (one read; every tool of the previous turn has committed its change by now)."""
    assert agent.instructions_fn is not None
    value = None
    if agent.state_schema is not None:
        raw = await state_rows.latest(get_context().ledger.ds.engine, spec["session_id"])
        value = agent.state_schema.load(spec["session_id"], raw)
    return storable.text(str(agent.instructions_fn(value)))


async def model_turn(
    spec: RunSpec,
    agent: Agent,
    turn: int,
    request: ModelRequest,
    previous: list[CallResult],
    used_ids: set[str],
    namespace: str,
    late_possible: bool,
    tools: list[Listing] | None = None,
) -> Turned:
    """One model turn, recorded (see the module doc); raises ``RunInterrupted`` when the
    run was fenced off before its turn was recorded.

    The first read is skipped when it can find nothing: no earlier execution can have
    recorded this turn (``execution``: a step of this execution ran, or its begin read the
    run's recorded turns and this one is past them) and no wait of this run timed out, so
    no late answer can be waiting (``late_possible``; a late answer to an earlier run's
    call is noticed by the next run's begin)."""
    async with drain.step():
        ledger = get_context().ledger
        if (ahead := execution.recorded_turn(spec["run_seq"], turn)) is not None:
            return Turned(ahead)  # recorded, and read by this resumed run's begin
        notices: list[Message] = []
        new = execution.later_steps_are_new() or execution.turn_is_new(spec["run_seq"], turn)
        if late_possible or not new:
            recorded, notices = await ledger.turn_state(spec, turn)
            if recorded is not None:
                return Turned(recorded)
        execution.step_ran()
        req = request
        if agent.instructions_fn is not None:  # a function of the state as of this turn
            req = req.model_copy(update={"instructions": await _instructions(spec, agent)})
        if notices:
            req = req.model_copy(update={"messages": [*req.messages, *notices]})
        # Outside the workflow's DBOS context, as a tool handler: an adapter's DBOS calls
        # cannot shift the workflow's operation ids.
        logged = None
        staged = False
        if streams(agent.name) and previous:  # shown before the reply that reads them
            if new:  # with the reply's first batch, or its record
                ledger.stage_results(spec, previous)
                staged = True
            else:
                try:
                    await ledger.record_results(spec, previous)
                except RunFenced:
                    raise RunInterrupted(f"turn {turn}") from None
                previous = []
        if streams(agent.name) and not new:  # an earlier execution may have streamed part of it
            logged = await ledger.logged_deltas(spec, turn)
        with spans.chat(spec, agent, turn, req) as chat_span:  # a no-op unless traced
            writer = execution.writer() if streams(agent.name) else None  # fenced pieces
            reply = await _stale_ends(respond(spec, turn, req, logged, writer))
            spans.chat_ended(chat_span, reply.response)
        if staged and not reply.staged:
            previous = []  # written with a batch of the reply's deltas
        response = reply.response
        crash_point("model_answered")
        calls = unique_ids(response.tool_calls, set(used_ids), turn, namespace)
        # The model's text is stored and shown as it is, minus what Postgres cannot hold.
        response = response.model_copy(
            update={
                "tool_calls": calls,
                "text": storable.optional_text(response.text),
                "provider": _provider(response, agent),
            }
        )
        turn_plan = plan(agent, calls)
        waits, dispatched = openings(agent, turn_plan)  # they open with the turn's rows
        now = time.time()  # recorded with the turn, never re-read
        owner = DBOS.workflow_id
        assert owner is not None
        opened = Opened(
            owner_workflow_id=owner,
            waits=waits,
            deadlines={w.tool_call_id: now + w.timeout_sec for w in waits},
            dispatched=dispatched,
        )
        requested = [
            Requested(
                tool_call_id=c.id,
                tool=c.name,
                kind=ledger_kind(agent, c),
                arguments=c.arguments,
                idempotency_key=idempotency_key(spec["session_id"], c.id),
                safe_to_retry=c.name not in agent.tools or agent.tools[c.name].safe_to_retry,
            )
            for c in calls
        ]
        try:
            record = await ledger.record_turn(
                spec,
                turn,
                previous,
                response,
                requested,
                opened,
                expect_notices=bool(notices),
                deltas=reply.rows,
                tools=tools,
            )
        except RunFenced:
            if reply.stream is not None:
                reply.stream.withdraw()
            raise RunInterrupted(f"turn {turn}") from None
        except psycopg.Error as exc:
            if not fence.is_stale(exc):
                raise
            raise _lost() from None
        crash_point("model_call")
        # Another execution's record (a unique violation) has its own calls: plan them anew.
        return Turned(record, turn_plan if record.response is response else None)
