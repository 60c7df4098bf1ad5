"""The session workflow (``dbos_agents.session.v4``): the agent loop as a DBOS workflow.

Per turn: the model turn (which records the previous turn's tool results and its own turn
in one transaction, and replays from those rows) -> the turn's calls by kind (``calls``):
server tools concurrently, each an attempt that records its own result row and replays
from it. The body is deterministic: it reads no clock, no randomness and no environment,
and all I/O is in steps or replays from our own rows (one exception, ``calls.waiting``: a
wait's timeout is its deadline less the clock, which only the ``recv``'s first execution
reads; DBOS records the end it fixes).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

import sqlalchemy as sa
from dbos import DBOS
from dbos import error as dbos_errors

from .. import _dbos, logs
from ..agent import Agent
from ..errors import ModelError
from ..ids import INBOX_TOPIC, WORKFLOW_NAME
from ..messages import JSONValue, Message, ToolCall, Usage
from ..models.base import ModelRequest, ToolSpec
from ..outcome import RunOutcome, RunSpec, RunStatus
from ..records import PAGE_KEY, with_page
from ..store.runs import run_key
from ..traces import spans as trace_spans
from ..traces.carrier import KEY as TRACE_KEY
from ..traces.carrier import of as trace_of
from . import drain, elsewhere, execution, frontend, mcp, outcomes, run_bounds
from . import spans as call_spans
from .calls.base import CallResult, RunInterrupted, Turn
from .calls.planning import Plan, plan
from .calls.waiting import TIMEOUT_KIND
from .context import get_context
from .crashpoints import crash_point
from .turn import model_turn

log = logging.getLogger("dbos_agents")


def _public_error(exc: Exception) -> str:
    """The run's error as clients see it: a database error without the SQL statement and
    parameters SQLAlchemy appends to its message (those stay in the worker's log)."""
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        lines = str(exc.orig).strip().splitlines()
        return f"database error ({type(exc.orig).__name__}): {lines[0] if lines else ''}"
    return f"{type(exc).__name__}: {exc}"


def _budget_left(agent: Agent, usage: Usage) -> bool:
    if agent.budget_tokens is not None and usage.total_tokens >= agent.budget_tokens:
        return False
    return not (agent.budget_usd is not None and usage.cost_usd >= agent.budget_usd)


_SPECS: dict[int, tuple[Agent, list[ToolSpec]]] = {}


def _tool_specs(agent: Agent) -> list[ToolSpec]:
    """The agent's tool specs, built once per agent (client tools render a JSON schema),
    and shared by every run instead of a copy per parked session; a run's own view (MCP
    tools) builds its own."""
    if agent.mcp_servers:
        return [ToolSpec(name=n, description=d, parameters=p) for n, d, p in agent.tool_specs()]
    hit = _SPECS.get(id(agent))
    if hit is None or hit[0] is not agent:
        specs = [ToolSpec(name=n, description=d, parameters=p) for n, d, p in agent.tool_specs()]
        hit = _SPECS[id(agent)] = (agent, specs)
    return hit[1]


async def _run_calls(turn: Turn, calls: list[ToolCall], turn_plan: Plan) -> list[CallResult]:
    """Run one turn's calls by kind (see ``calls``): concurrent kinds beside one sequence
    of the others, which alone draws DBOS operation ids, so every id is the same on
    replay. Results come back in call order."""
    results = {cid: CallResult(r) for cid, r in turn_plan.failed.items()}
    concurrent = [p for p in turn_plan.planned if p.kind.concurrent]
    in_sequence = [p for p in turn_plan.planned if not p.kind.concurrent]
    await call_spans.open_calls(turn, turn_plan.planned)  # no-op unless traced
    reserved = [await p.kind.prepare(turn, p) for p in concurrent]

    async def sequence() -> list[CallResult]:
        prepared = [await p.kind.prepare(turn, p) for p in in_sequence]
        return [
            await call_spans.ran(turn, p, p.kind.run(turn, p, x))
            for p, x in zip(in_sequence, prepared, strict=True)
        ]

    side = (
        call_spans.ran(turn, p, p.kind.run(turn, p, r))
        for p, r in zip(concurrent, reserved, strict=True)
    )
    # Tasks only where calls overlap: a parked session keeps this await chain alive, and
    # each gather adds a Task, a Future and a copied context to it.
    if not in_sequence:
        done = [await next(side)] if len(concurrent) == 1 else await asyncio.gather(*side)
    elif not concurrent:
        done = await sequence()
    else:
        ran, waited = await asyncio.gather(asyncio.gather(*side), sequence())
        done = [*ran, *waited]
    for res in done:
        results[res.result.tool_call_id] = res
    return [results[c.id] for c in calls]


@DBOS.workflow(name=WORKFLOW_NAME)
async def session_workflow(spec: RunSpec) -> dict[str, JSONValue]:
    """Run the agent loop for one user message; returns a ``RunOutcome`` as JSON (DBOS
    records it as the workflow's output).

    A persistent agent's workflow then waits on the ``inbox`` topic (up to ``idle_ttl``)
    and runs the next message in the same workflow; each run's outcome is recorded in
    ``runs`` as the run ends.
    """
    return await _session(spec)


async def _session(spec: RunSpec) -> dict[str, JSONValue]:
    ctx = get_context()
    agent = ctx.agents.get(spec["agent"])
    if agent is None:  # not this worker's agent: back to its queue, for a worker that has it
        await elsewhere.hand_back(spec)
    wf = DBOS.workflow_id
    # A claim's seed marks an execution that resumes a parked wait.
    resumed = wf is not None and _dbos.enter_workflow(wf)
    execution.begin_execution(resumed=resumed)
    ctx.receiver.enter_workflow()
    while True:
        logs.run_started(spec, resumed)
        unrecorded: list[CallResult] = []
        try:
            with trace_spans.run(
                agent=spec["agent"],
                session_id=spec["session_id"],
                run_seq=spec["run_seq"],
                carrier=trace_of(spec),
                resumed=resumed,
            ) as run_span:
                outcome, unrecorded = await _run_once(spec, agent)
                u = outcome.usage
                trace_spans.run_ended(
                    run_span,
                    outcome.status,
                    outcome.turns,
                    (u.input_tokens, u.output_tokens),
                    outcome.error,
                )
        except dbos_errors.DBOSException:
            raise  # DBOS's own control flow (ownership lost, ...): not ours to handle
        except Exception as exc:  # a bug or an outage: end the run visibly, never silently
            log.exception(
                "run failed",
                extra={"event": "run_failed", "session_id": spec["session_id"]},
            )
            outcome = RunOutcome(
                session_id=spec["session_id"],
                run_seq=spec["run_seq"],
                status="failed",
                error=_public_error(exc),
            )
        wait_next = agent.persistent and outcome.status != "interrupted"
        # The end and the outcome's publication are one section for a drain: a run that
        # ended is never left PENDING by a deploy, for the next worker to replay.
        async with drain.finishing(returns=not wait_next):
            await _finish(spec, outcome, wait_next, unrecorded)
        logs.run_ended(outcome)
        if not wait_next:
            return outcome.model_dump(mode="json")
        # Idle between runs: a root session's inbox wait parks like a client tool's, its
        # deadline the timeout DBOS recorded for this recv.
        message = await ctx.receiver.recv(spec, INBOX_TOPIC, agent.idle_ttl.total_seconds(), None)
        if message is None:
            if await ctx.ledger.close_inbox(spec["session_id"], spec["run_seq"]):
                return outcome.model_dump(mode="json")
            message = await DBOS.recv_async(INBOX_TOPIC, timeout_seconds=60)
            if message is None:  # cannot happen: the send committed with the run_seq bump
                return outcome.model_dump(mode="json")
        assert isinstance(message, dict)
        spec = RunSpec(**{**spec, "run_seq": message["run_seq"], "message": message["message"]})
        spec = with_page(spec, message.get(PAGE_KEY))
        spec[TRACE_KEY] = message.get(TRACE_KEY)  # type: ignore[literal-required]


async def _finish(
    spec: RunSpec,
    outcome: RunOutcome,
    open_inbox: bool = False,
    results: list[CallResult] | None = None,
) -> None:
    """The run's end (``run_bounds.end``), its outcome recorded and announced with it;
    then handed to waiters in this process, durable now."""
    ledger = get_context().ledger
    sid, root = spec["session_id"], spec["root_session_id"]
    shown = await ledger.announcer.settle(sid)  # a withdrawn reply, say
    # The end's own NOTIFY (store.runs) wakes the session's readers after every write of
    # the run: an announcement of the session still to come would only make every stream
    # of it read again.
    withdrawn = await ledger.announcer.withdraw(sid)
    try:
        await run_bounds.end(ledger.ds.engine, spec, outcome, open_inbox, results, shown)
    except BaseException:
        if withdrawn:
            ledger.announcer.announce(sid)
        raise
    if root != sid:  # the root's readers are not woken by a sub-agent's end
        ledger.announcer.announce(root)
    crash_point("after_run_end")
    outcomes.handover.resolve(run_key(spec["session_id"], spec["run_seq"]), outcome)


async def _run_once(spec: RunSpec, agent: Agent) -> tuple[RunOutcome, list[CallResult]]:
    """One run: the loop of turns caused by one user message. Returns its outcome and the
    results of its last turn of calls if no model turn recorded them (the run stopped at
    ``max_turns``, the budget or a model failure); the run's end records those."""
    ledger = get_context().ledger
    begun = await run_bounds.begin(ledger.ds.engine, spec)
    ledger.announce(spec)
    if not begun.began:  # interrupted (or overtaken) before it began: do nothing more
        out = RunOutcome(
            session_id=spec["session_id"], run_seq=spec["run_seq"], status="interrupted"
        )
        return out, []
    messages = begun.messages
    del begun  # this frame stays alive while the run waits: keep only what it needs
    used_ids = {c.id for m in messages for c in m.tool_calls}
    prior_turns = sum(1 for m in messages if m.role == "assistant")
    own = agent
    agent, listings = await mcp.for_run(spec, own, prior_turns + 1)
    paged = frontend.view(spec, agent)  # a chat page's tools and context (loop/frontend.py)
    tools = _tool_specs(agent) if paged is agent else frontend.specs(paged)
    agent = paged
    await frontend.commit_state(spec, agent)
    namespace = (
        ""
        if spec["session_id"] == spec["root_session_id"]
        else "@" + hashlib.sha256(spec["session_id"].encode()).hexdigest()[:8]
    )
    usage = Usage()
    late_possible = False  # a wait of this run timed out: a late answer may come for it
    turns = 0
    status: RunStatus = "completed"
    output: str | None = None
    error: str | None = None
    unrecorded: list[CallResult] = []  # the last results, until a model turn records them
    while True:
        if turns >= agent.max_turns:
            status = "max_turns"
            break
        if not _budget_left(agent, usage):
            status = "budget_exhausted"
            break
        turn_no = prior_turns + turns + 1
        request = ModelRequest(
            agent=agent.name,
            instructions=agent.instructions,
            messages=messages,
            tools=tools,
            settings=agent.model_settings,
        )
        try:
            turned = await model_turn(
                spec,
                agent,
                turn_no,
                request,
                unrecorded,
                used_ids,
                namespace,
                late_possible,
                listings if turns == 0 else None,
            )
        except ModelError as exc:  # named with the agent: a sub-agent's failure reaches its caller
            status, error = "failed", f"agent {agent.name!r}: {exc}"
            break
        except RunInterrupted:  # fenced off before its turn was recorded
            status = "interrupted"
            break
        except dbos_errors.DBOSException:
            raise
        except Exception as exc:  # an adapter bug: fail the run clearly, never hang it
            status, error = "failed", f"model adapter raised {type(exc).__name__}: {exc}"
            break
        crash_point("after_model_step")
        unrecorded = []
        record = turned.record
        if turns == 0 and listings is not None and record.tools not in (None, listings):
            # another execution recorded this turn first, with the lists it saw
            agent = frontend.view(spec, mcp.view(own, record.tools))
            tools = _tool_specs(agent)
        response = record.response
        messages.extend(record.notices)
        turns += 1
        usage = usage + response.usage
        calls = response.tool_calls
        used_ids.update(c.id for c in calls)
        messages.append(
            Message(
                role="assistant",
                content=response.text,
                tool_calls=calls,
                thinking=response.thinking,  # sent back next turn; not stored as a message
            )
        )
        if not calls:
            output = response.text
            break
        turn = Turn(spec, agent, record.deadlines, session_workflow, turn_no)
        turn_plan = turned.plan or plan(agent, calls)
        del turned, record, response
        try:
            results = await _run_calls(turn, calls, turn_plan)
        except RunInterrupted:
            status = "interrupted"
            break
        crash_point("after_tool_steps")
        late_possible = late_possible or any(
            r.result.error is not None and r.result.error.kind == TIMEOUT_KIND for r in results
        )
        unrecorded = results
        messages.extend(
            Message(
                role="tool",
                content=r.result.content(),
                tool_call_id=r.result.tool_call_id,
                name=r.result.tool,
            )
            for r in results
        )
    outcome = RunOutcome(
        session_id=spec["session_id"],
        run_seq=spec["run_seq"],
        status=status,
        output=output,
        error=error,
        turns=turns,
        usage=usage,
    )
    return outcome, unrecorded
