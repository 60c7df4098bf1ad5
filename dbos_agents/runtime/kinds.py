"""One small interface per tool-call kind, so a new kind touches one place.

The model turn opens the waits the kinds ask for and marks dispatched the calls that may
act elsewhere (``turn_openings``) in its own transaction. The workflow then classifies each
call of the turn (``plan``) and runs the calls: kinds with ``concurrent`` beside each other,
the others in one sequence (``prepare`` for each in call order, then ``run`` for each), so
every DBOS operation id is the same on replay.

| kind | pending row | dispatched when | runs as |
|---|---|---|---|
| server | - | its attempt begins (under the call's lock) | a tool operation, concurrently |
| client | ``client`` | the wait opens | ``recv`` on the call id |
| approval | ``approval`` | the approved tool step begins | ``recv``, then a tool step |
| subagent | - | the child is about to start | a child workflow |
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import ValidationError

from ..agent import Agent
from ..ids import idempotency_key
from ..messages import ToolCall
from ..outcome import RunSpec
from ..results import ToolResult
from ..store.calls import CallKind
from .ledger import WaitSpec
from .steps import ToolCallSpec, tool_op
from .waits import finish_sub_agent, run_approval_call, run_client_call, start_sub_agent


@dataclass
class Turn:
    """What every call of one turn shares."""

    spec: RunSpec
    agent: Agent
    deadlines: dict[str, float]


@dataclass
class Planned:
    call: ToolCall
    args: dict[str, Any]
    kind: Kind


class Kind(Protocol):
    name: ClassVar[CallKind]
    concurrent: ClassVar[bool]
    """Runs beside the other calls of the turn (it records no DBOS operation)."""
    dispatched_on_open: ClassVar[bool]
    """Marked ``dispatched`` when the turn's waits open (it may act outside the worker)."""

    def wait(self, agent: Agent, call: ToolCall) -> WaitSpec | None:
        """The pending row to open for this call, if it waits for someone."""
        ...

    async def prepare(self, turn: Turn, p: Planned) -> Any:
        """Called in call order before any call of the sequence runs."""
        ...

    async def run(self, turn: Turn, p: Planned, prepared: Any) -> ToolResult: ...


def call_spec(spec: RunSpec, agent: Agent, call: ToolCall, args: dict[str, Any]) -> ToolCallSpec:
    return ToolCallSpec(
        agent=agent.name,
        session_id=spec["session_id"],
        root_session_id=spec["root_session_id"],
        user_id=spec["user_id"],
        tenant_id=spec["tenant_id"],
        run_seq=spec["run_seq"],
        tool_call_id=call.id,
        tool=call.name,
        arguments=args,
        idempotency_key=idempotency_key(spec["session_id"], call.id),
    )


def _wait(agent: Agent, call: ToolCall, kind: str, schema: dict[str, Any] | None) -> WaitSpec:
    return WaitSpec(
        tool_call_id=call.id,
        kind=kind,
        tool=call.name,
        arguments=call.arguments,
        timeout_sec=agent.wait_timeout(call.name).total_seconds(),
        output_schema=schema,
    )


class ServerKind:
    name: ClassVar[CallKind] = "server"
    concurrent: ClassVar[bool] = True
    dispatched_on_open: ClassVar[bool] = False

    def wait(self, agent: Agent, call: ToolCall) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> Any:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: Any) -> ToolResult:
        spec = call_spec(turn.spec, turn.agent, p.call, p.args)
        return ToolResult.model_validate(await tool_op(spec))


class ClientKind:
    name: ClassVar[CallKind] = "client"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = True

    def wait(self, agent: Agent, call: ToolCall) -> WaitSpec | None:
        return _wait(agent, call, "client", agent.client_tools[call.name].output_schema)

    async def prepare(self, turn: Turn, p: Planned) -> Any:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: Any) -> ToolResult:
        timeout = turn.agent.wait_timeout(p.call.name).total_seconds()
        return await run_client_call(
            turn.spec, p.call.name, p.call.id, turn.deadlines[p.call.id], timeout
        )


class ApprovalKind:
    name: ClassVar[CallKind] = "approval"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = False

    def wait(self, agent: Agent, call: ToolCall) -> WaitSpec | None:
        return _wait(agent, call, "approval", None)

    async def prepare(self, turn: Turn, p: Planned) -> Any:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: Any) -> ToolResult:
        timeout = turn.agent.wait_timeout(p.call.name).total_seconds()
        spec = call_spec(turn.spec, turn.agent, p.call, p.args)
        return await run_approval_call(turn.spec, spec, turn.deadlines[p.call.id], timeout)


class SubAgentKind:
    name: ClassVar[CallKind] = "subagent"
    concurrent: ClassVar[bool] = False
    dispatched_on_open: ClassVar[bool] = True

    def wait(self, agent: Agent, call: ToolCall) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> Any:
        sub = turn.agent.sub_agents[p.call.name]
        return await start_sub_agent(turn.spec, sub, p.call.id, p.call.arguments)

    async def run(self, turn: Turn, p: Planned, prepared: Any) -> ToolResult:
        return await finish_sub_agent(prepared, p.call.name, p.call.id)


SERVER, CLIENT, APPROVAL, SUBAGENT = ServerKind(), ClientKind(), ApprovalKind(), SubAgentKind()


def prevalidate(agent: Agent, call: ToolCall) -> ToolResult | dict[str, Any]:
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


def plan(agent: Agent, calls: list[ToolCall]) -> tuple[dict[str, ToolResult], list[Planned]]:
    """A turn's calls after the pure checks: the results of those that fail them, by call
    id, and the others with their arguments and kind, in call order."""
    failed: dict[str, ToolResult] = {}
    planned: list[Planned] = []
    for call in calls:
        checked = prevalidate(agent, call)
        if isinstance(checked, ToolResult):
            failed[call.id] = checked
        else:
            planned.append(Planned(call, checked, kind_of(agent, call)))
    return failed, planned


def openings(agent: Agent, planned: list[Planned]) -> tuple[list[WaitSpec], list[str]]:
    """The waits a turn opens and the calls it marks dispatched as they open."""
    waits = [w for p in planned if (w := p.kind.wait(agent, p.call)) is not None]
    return waits, [p.call.id for p in planned if p.kind.dispatched_on_open]


def turn_openings(agent: Agent, calls: list[ToolCall]) -> tuple[list[WaitSpec], list[str]]:
    """``openings`` of the calls the model just made, for the model turn to write: only the
    calls of a kind that opens something are checked here (a server call opens nothing, and
    its arguments are checked once, when the turn's tools run)."""
    may_open = [
        c
        for c in calls
        if (c.name in agent.tools or c.name in agent.client_tools or c.name in agent.sub_agents)
        and kind_of(agent, c) is not SERVER
    ]
    return openings(agent, plan(agent, may_open)[1])


def kind_of(agent: Agent, call: ToolCall) -> Kind:
    """The kind of a call whose tool exists (checked before)."""
    if call.name in agent.sub_agents:
        return SUBAGENT
    if call.name in agent.client_tools:
        return CLIENT
    return APPROVAL if agent.tools[call.name].requires_approval else SERVER
