"""The session workflow (``dbos_agents.session.v1``): the agent loop as a DBOS workflow.

Per turn: model step -> write #1 (assistant message, ledger rows, usage) -> tool steps
(concurrent, step ids reserved in call order) -> write #2 (tool results). The body is
deterministic: it reads no clock, no randomness and no environment, and all I/O is in steps.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from dbos import DBOS
from pydantic import ValidationError

from ..agent import Agent
from ..errors import ModelError
from ..ids import WORKFLOW_NAME, idempotency_key
from ..messages import Message, ModelResponse, ToolCall, Usage
from ..models.base import ModelRequest, ToolSpec
from ..outcome import RunOutcome, RunSpec, RunStatus
from ..results import ToolResult
from .context import get_context
from .crashpoints import crash_point
from .ledger import LedgerCall
from .steps import ToolCallSpec, model_step, tool_step


def _budget_left(agent: Agent, usage: Usage) -> bool:
    if agent.budget_tokens is not None and usage.total_tokens >= agent.budget_tokens:
        return False
    return not (agent.budget_usd is not None and usage.cost_usd >= agent.budget_usd)


def _unique_ids(calls: list[ToolCall], used: set[str], turn: int) -> list[ToolCall]:
    """Give every call an id unique in the session: the ledger keys on (session, id)."""
    out = []
    for i, c in enumerate(calls):
        cid = c.id or f"call_{turn}_{i + 1}"
        if cid in used:
            cid = f"{cid}_{turn}_{i + 1}"
        used.add(cid)
        out.append(c.model_copy(update={"id": cid}))
    return out


def _prevalidate(agent: Agent, call: ToolCall) -> ToolResult | dict[str, Any]:
    """Pure checks before dispatch: an unknown tool or bad arguments become results."""
    tool = agent.tools.get(call.name)
    if tool is None:
        return ToolResult.failure(
            call.id,
            call.name,
            "unknown-tool",
            f"there is no tool named {call.name!r}; available: {', '.join(agent.tools) or '-'}",
        )
    try:
        args = call.parsed_arguments()
        tool.validate_arguments(args)
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
            call.id, call.name, "invalid-arguments", f"arguments are not a JSON object: {exc}"
        )
    return args


async def _run_tools(spec: RunSpec, agent: Agent, calls: list[ToolCall]) -> list[ToolResult]:
    results: dict[str, ToolResult] = {}
    runnable: list[ToolCallSpec] = []
    for call in calls:
        checked = _prevalidate(agent, call)
        if isinstance(checked, ToolResult):
            results[call.id] = checked
            continue
        runnable.append(
            ToolCallSpec(
                agent=agent.name,
                session_id=spec["session_id"],
                root_session_id=spec["root_session_id"],
                user_id=spec["user_id"],
                tenant_id=spec["tenant_id"],
                tool_call_id=call.id,
                tool=call.name,
                arguments=checked,
                idempotency_key=idempotency_key(spec["session_id"], call.id),
            )
        )
    # Reserve step ids in call order so a replay maps each call to the same checkpoint.
    reservations = [DBOS.reserve_step() for _ in runnable]
    outputs = await asyncio.gather(
        *(
            r.run_async({"name": f"dbos_agents.tool.v1:{s['tool']}"}, tool_step, s)
            for r, s in zip(reservations, runnable, strict=True)
        )
    )
    for out in outputs:
        res = ToolResult.model_validate(out)
        results[res.tool_call_id] = res
    return [results[c.id] for c in calls]


@DBOS.workflow(name=WORKFLOW_NAME)
async def session_workflow(spec: RunSpec) -> dict[str, Any]:
    """Run the agent loop for one user message; returns a ``RunOutcome`` as JSON."""
    ctx = get_context()
    agent = ctx.agent(spec["agent"])
    ledger = ctx.ledger
    raw = await ledger.begin_run(spec)
    messages = [Message.model_validate(m) for m in raw]
    used_ids = {c.id for m in messages for c in m.tool_calls}
    prior_turns = sum(1 for m in messages if m.role == "assistant")
    tools = [
        ToolSpec(name=t.name, description=t.description, parameters=t.input_schema)
        for t in agent.tools.values()
    ]
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
        crash_point("after_model_step")
        turns += 1
        usage = usage + response.usage
        turn_no = prior_turns + turns
        calls = _unique_ids(response.tool_calls, used_ids, turn_no)
        assistant = Message(role="assistant", content=response.text, tool_calls=calls)
        ledger_calls = [
            LedgerCall(
                tool_call_id=c.id,
                tool=c.name,
                arguments=c.arguments,
                idempotency_key=idempotency_key(spec["session_id"], c.id),
                safe_to_retry=bool(agent.tools[c.name].safe_to_retry)
                if c.name in agent.tools
                else True,
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
        results = await _run_tools(spec, agent, calls)
        crash_point("after_tool_steps")
        await ledger.record_results(spec, [r.model_dump(mode="json") for r in results])
        crash_point("after_results")
        messages.extend(
            Message(role="tool", content=r.content(), tool_call_id=r.tool_call_id, name=r.tool)
            for r in results
        )
    await ledger.finish_run(spec, status, output, error)
    return RunOutcome(
        session_id=spec["session_id"],
        run_seq=spec["run_seq"],
        status=status,
        output=output,
        error=error,
        turns=turns,
        usage=usage,
    ).model_dump(mode="json")
