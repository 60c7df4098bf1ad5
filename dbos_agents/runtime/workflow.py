"""The session workflow (``dbos_agents.session.v1``): the agent loop as a DBOS workflow.

Per turn: model step -> write #1 (assistant message, ledger rows, usage) -> tool steps
(concurrent, step ids reserved in call order) -> write #2 (tool results). The body is
deterministic: it reads no clock, no randomness and no environment, and all I/O is in steps.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from dbos import DBOS
from dbos._error import DBOSException
from pydantic import ValidationError

from ..agent import Agent
from ..errors import ModelError, UnknownAgentError
from ..ids import INBOX_TOPIC, WORKFLOW_NAME, idempotency_key, run_event_key
from ..messages import Message, ModelResponse, ToolCall, Usage
from ..models.base import ModelRequest, ToolSpec
from ..outcome import RunOutcome, RunSpec, RunStatus
from ..results import ToolResult
from .context import get_context
from .crashpoints import crash_point
from .ledger import LedgerCall, WaitSpec
from .steps import ToolCallSpec, model_step, tool_step
from .waits import (
    RunInterrupted,
    finish_sub_agent,
    run_approval_call,
    run_client_call,
    start_sub_agent,
)


def _budget_left(agent: Agent, usage: Usage) -> bool:
    if agent.budget_tokens is not None and usage.total_tokens >= agent.budget_tokens:
        return False
    return not (agent.budget_usd is not None and usage.cost_usd >= agent.budget_usd)


def _unique_ids(calls: list[ToolCall], used: set[str], turn: int, namespace: str) -> list[ToolCall]:
    """Give every call an id unique in the session, and in a sub-agent unique under the
    root too: the ledger keys on (session, id) and pending calls on (root session, id)."""
    out = []
    for i, c in enumerate(calls):
        cid = (c.id or f"call_{turn}_{i + 1}") + namespace
        if cid in used:
            cid = f"{cid}_{turn}_{i + 1}"
        used.add(cid)
        out.append(c.model_copy(update={"id": cid}))
    return out


def _prevalidate(agent: Agent, call: ToolCall) -> ToolResult | dict[str, Any]:
    """Pure checks before dispatch: an unknown tool or bad arguments become results."""
    validator: Any = agent.tools.get(call.name) or agent.client_tools.get(call.name)
    if validator is None and call.name not in agent.sub_agents:
        return ToolResult.failure(
            call.id,
            call.name,
            "unknown-tool",
            f"there is no tool named {call.name!r}; available: "
            f"{', '.join(agent.tool_names()) or '-'}",
        )
    try:
        args = call.parsed_arguments()
        if validator is not None:
            validator.validate_arguments(args)
        elif not isinstance(args.get("message"), str) or set(args) != {"message"}:
            raise ValueError('sub-agent tools take exactly {"message": "<task>"}')
    except ValidationError as exc:
        return ToolResult.failure(
            call.id,
            call.name,
            "invalid-arguments",
            f"arguments do not match the schema of {call.name!r}",
            details=json.loads(exc.json(include_url=False, include_context=False)),
        )
    except ValueError as exc:
        return ToolResult.failure(
            call.id, call.name, "invalid-arguments", f"invalid arguments: {exc}"
        )
    return args


def _call_spec(spec: RunSpec, agent: Agent, call: ToolCall, args: dict[str, Any]) -> ToolCallSpec:
    return ToolCallSpec(
        agent=agent.name,
        session_id=spec["session_id"],
        root_session_id=spec["root_session_id"],
        user_id=spec["user_id"],
        tenant_id=spec["tenant_id"],
        tool_call_id=call.id,
        tool=call.name,
        arguments=args,
        idempotency_key=idempotency_key(spec["session_id"], call.id),
    )


async def _run_tools(spec: RunSpec, agent: Agent, calls: list[ToolCall]) -> list[ToolResult]:
    """Run one turn's calls. Server tools run concurrently on step ids reserved in call
    order; waits and sub-agents run in one sequence beside them, so every step id is the
    same on replay."""
    results: dict[str, ToolResult] = {}
    server: list[ToolCallSpec] = []
    waits: list[WaitSpec] = []
    approvals: dict[str, ToolCallSpec] = {}
    subs: list[ToolCall] = []
    for call in calls:
        checked = _prevalidate(agent, call)
        if isinstance(checked, ToolResult):
            results[call.id] = checked
        elif call.name in agent.sub_agents:
            subs.append(call)
        elif call.name in agent.client_tools:
            waits.append(_wait(agent, call, "client", agent.client_tools[call.name].output_schema))
        elif agent.tools[call.name].requires_approval:
            waits.append(_wait(agent, call, "approval", None))
            approvals[call.id] = _call_spec(spec, agent, call, checked)
        else:
            server.append(_call_spec(spec, agent, call, checked))
    deadlines: dict[str, float] = {}
    if waits:
        owner = DBOS.workflow_id
        assert owner is not None
        deadlines = await get_context().ledger.register_waits(spec, owner, waits)
    # Reserve step ids in call order so a replay maps each call to the same checkpoint.
    reservations = [DBOS.reserve_step() for _ in server]

    async def sequence() -> list[ToolResult]:
        out: list[ToolResult] = []
        handles = [
            (c, await start_sub_agent(spec, agent.sub_agents[c.name], c.id, c.arguments))
            for c in subs
        ]
        for w in waits:
            cid = w["tool_call_id"]
            if cid in approvals:
                out.append(
                    await run_approval_call(spec, approvals[cid], deadlines[cid], w["timeout_sec"])
                )
            else:
                out.append(
                    await run_client_call(spec, w["tool"], cid, deadlines[cid], w["timeout_sec"])
                )
        for c, handle in handles:
            out.append(await finish_sub_agent(handle, c.name, c.id))
        return out

    server_results, waited = await asyncio.gather(
        asyncio.gather(
            *(
                r.run_async({"name": f"dbos_agents.tool.v1:{s['tool']}"}, tool_step, s)
                for r, s in zip(reservations, server, strict=True)
            )
        ),
        sequence(),
    )
    for res in [*(ToolResult.model_validate(o) for o in server_results), *waited]:
        results[res.tool_call_id] = res
    return [results[c.id] for c in calls]


def _wait(agent: Agent, call: ToolCall, kind: str, schema: dict[str, Any] | None) -> WaitSpec:
    return WaitSpec(
        tool_call_id=call.id,
        kind=kind,
        tool=call.name,
        arguments=call.arguments,
        timeout_sec=agent.wait_timeout(call.name).total_seconds(),
        output_schema=schema,
    )


@DBOS.workflow(name=WORKFLOW_NAME)
async def session_workflow(spec: RunSpec) -> dict[str, Any]:
    """Run the agent loop for one user message; returns a ``RunOutcome`` as JSON.

    A persistent agent's workflow then waits on the ``inbox`` topic (up to ``idle_ttl``)
    and runs the next message in the same workflow; each run's outcome is published as the
    workflow event ``run:<run_seq>``.
    """
    try:
        agent = get_context().agent(spec["agent"])
    except UnknownAgentError as exc:  # a client started an agent no worker knows
        await get_context().ledger.finish_run(spec, "failed", None, str(exc))
        return RunOutcome(
            session_id=spec["session_id"], run_seq=spec["run_seq"], status="failed", error=str(exc)
        ).model_dump(mode="json")
    while True:
        try:
            outcome = await _run_once(spec, agent)
        except DBOSException:
            raise  # DBOS's own control flow (ownership lost, ...): not ours to handle
        except Exception as exc:  # a bug or an outage: end the run visibly, never silently
            outcome = RunOutcome(
                session_id=spec["session_id"],
                run_seq=spec["run_seq"],
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
            )
        wait_next = agent.persistent and outcome.status != "interrupted"
        await get_context().ledger.finish_run(
            spec, outcome.status, outcome.output, outcome.error, wait_next
        )
        if agent.persistent:
            await DBOS.set_event_async(
                run_event_key(spec["run_seq"]), outcome.model_dump(mode="json")
            )
        if not wait_next:
            return outcome.model_dump(mode="json")
        message = await DBOS.recv_async(INBOX_TOPIC, timeout_seconds=agent.idle_ttl.total_seconds())
        if message is None:
            if await get_context().ledger.close_inbox(spec["session_id"], spec["run_seq"]):
                return outcome.model_dump(mode="json")
            message = await DBOS.recv_async(INBOX_TOPIC, timeout_seconds=60)
            if message is None:  # cannot happen: the send committed with the run_seq bump
                return outcome.model_dump(mode="json")
        spec = RunSpec(**{**spec, "run_seq": message["run_seq"], "message": message["message"]})


async def _run_once(spec: RunSpec, agent: Agent) -> RunOutcome:
    """One run: the loop of turns caused by one user message."""
    ledger = get_context().ledger
    raw = await ledger.begin_run(spec)
    messages = [Message.model_validate(m) for m in raw]
    used_ids = {c.id for m in messages for c in m.tool_calls}
    prior_turns = sum(1 for m in messages if m.role == "assistant")
    tools = [ToolSpec(name=n, description=d, parameters=p) for n, d, p in agent.tool_specs()]
    namespace = (
        ""
        if spec["session_id"] == spec["root_session_id"]
        else "@" + hashlib.sha256(spec["session_id"].encode()).hexdigest()[:8]
    )
    usage = Usage()
    turns = 0
    status: RunStatus = "completed"
    output: str | None = None
    error: str | None = None
    while True:
        if turns >= agent.max_turns:
            status = "max_turns"
            break
        if not _budget_left(agent, usage):
            status = "budget_exhausted"
            break
        request = ModelRequest(
            agent=agent.name,
            instructions=agent.instructions,
            messages=messages,
            tools=tools,
            settings=agent.model_settings,
        )
        try:
            response = ModelResponse.model_validate(
                await model_step(request.model_dump(mode="json"))
            )
        except ModelError as exc:
            status, error = "failed", str(exc)
            break
        except Exception as exc:  # an adapter bug: fail the run clearly, never hang it
            status, error = "failed", f"model adapter raised {type(exc).__name__}: {exc}"
            break
        crash_point("after_model_step")
        turns += 1
        usage = usage + response.usage
        turn_no = prior_turns + turns
        calls = _unique_ids(response.tool_calls, used_ids, turn_no, namespace)
        assistant = Message(role="assistant", content=response.text, tool_calls=calls)
        ledger_calls = [
            LedgerCall(
                tool_call_id=c.id,
                tool=c.name,
                arguments=c.arguments,
                idempotency_key=idempotency_key(spec["session_id"], c.id),
                safe_to_retry=c.name not in agent.tools or agent.tools[c.name].safe_to_retry,
            )
            for c in calls
        ]
        await ledger.record_turn(
            spec,
            turn_no,
            assistant.model_dump(mode="json"),
            ledger_calls,
            response.usage.model_dump(mode="json"),
            response.model,
        )
        crash_point("after_record")
        messages.append(assistant)
        if not calls:
            output = response.text
            break
        try:
            results = await _run_tools(spec, agent, calls)
        except RunInterrupted:
            status = "interrupted"
            break
        crash_point("after_tool_steps")
        notices = await ledger.record_results(spec, [r.model_dump(mode="json") for r in results])
        crash_point("after_results")
        messages.extend(
            Message(role="tool", content=r.content(), tool_call_id=r.tool_call_id, name=r.tool)
            for r in results
        )
        messages.extend(Message.model_validate(n) for n in notices)
    return RunOutcome(
        session_id=spec["session_id"],
        run_seq=spec["run_seq"],
        status=status,
        output=output,
        error=error,
        turns=turns,
        usage=usage,
    )
