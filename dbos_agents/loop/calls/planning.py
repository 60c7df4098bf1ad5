"""Which kind each call of a turn is, and the turn's plan: the pure checks (each call's
arguments validated once), then the waits the kinds open and the dispatch marks of the
calls that may act elsewhere (``openings``), written in the model turn's transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from ...agent import Agent
from ...mcp.tool import MCPTool
from ...messages import ToolCall
from ...results import ToolResult
from ...store.calls import CallKind
from ..ledger import WaitSpec
from .approval import ApprovalKind
from .base import Kind, Planned, SubAgentTask
from .client import ClientKind
from .durable import DurableKind
from .mcp import MCPKind
from .server import ServerKind
from .subagent import SubAgentKind

SERVER, CLIENT, APPROVAL, SUBAGENT = ServerKind(), ClientKind(), ApprovalKind(), SubAgentKind()
DURABLE, MCP = DurableKind(), MCPKind()


def kind_of(agent: Agent, call: ToolCall) -> Kind:
    """The kind of a call whose tool exists (checked before)."""
    if call.name in agent.sub_agents:
        return SUBAGENT
    if call.name in agent.client_tools:
        return CLIENT
    tool = agent.tools[call.name]
    if isinstance(tool, MCPTool):
        return MCP
    if tool.durable:
        return DURABLE
    return APPROVAL if tool.requires_approval else SERVER


def ledger_kind(agent: Agent, call: ToolCall) -> CallKind:
    """The ledger's kind column; an unknown tool is recorded as a server call."""
    known = call.name in agent.tools or call.name in agent.client_tools
    return kind_of(agent, call).name if known or call.name in agent.sub_agents else "server"


@dataclass(frozen=True)
class Plan:
    """A turn's calls after the pure checks: the results of those that failed them, by
    call id, and the others with their validated arguments and kind, in call order."""

    failed: dict[str, ToolResult]
    planned: list[Planned]


def _check(agent: Agent, call: ToolCall) -> ToolResult | Planned:
    """The pure checks before dispatch: an unknown tool or bad arguments become results."""
    tool = agent.tools.get(call.name) or agent.client_tools.get(call.name)
    if tool is None and call.name not in agent.sub_agents:
        return ToolResult.failure(
            call.id,
            call.name,
            "unknown-tool",
            f"there is no tool named {call.name!r}; available: "
            f"{', '.join(agent.tool_names()) or '-'}"
            + "".join(f". {note}" for note in agent.unavailable),
        )
    try:
        raw = call.parsed_arguments()
        if tool is not None:
            return Planned(call, tool.validate_arguments(raw), kind_of(agent, call))
        if not isinstance(raw.get("message"), str) or set(raw) != {"message"}:
            raise ValueError('sub-agent tools take exactly {"message": "<task>"}')
        return Planned(call, SubAgentTask.model_validate(raw), SUBAGENT)
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


def plan(agent: Agent, calls: list[ToolCall]) -> Plan:
    failed: dict[str, ToolResult] = {}
    planned: list[Planned] = []
    for call in calls:
        checked = _check(agent, call)
        if isinstance(checked, ToolResult):
            failed[call.id] = checked
        else:
            planned.append(checked)
    return Plan(failed, planned)


def openings(agent: Agent, turn_plan: Plan) -> tuple[list[WaitSpec], list[str]]:
    """The waits a turn opens and the calls it marks dispatched as they open."""
    waits = [w for p in turn_plan.planned if (w := p.kind.wait(agent, p)) is not None]
    return waits, [p.call.id for p in turn_plan.planned if p.kind.dispatched_on_open]
