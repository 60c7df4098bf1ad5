"""A run's MCP tools: each of the agent's servers listed once per run, the lists recorded
with the run's first model turn (``TurnRecord.tools``), so they cost no write of their own.

The lists matter once a model turn has seen them: a replay of a run whose first turn was
recorded takes the lists from that record (even if a server changed or is down now); a
run whose first turn was not recorded lists again, and no model turn has seen the lists
it drops. No worker keeps a list from one run to the next.

A server that cannot be listed is recorded as such: its tools are missing from the run,
and the model is told why (``Agent.with_run_tools``), so the run goes on without them.
"""

from __future__ import annotations

import asyncio
import logging

from .. import _dbos
from ..agent import Agent
from ..errors import MCPServerError
from ..mcp import wire
from ..mcp.server import Listing, MCPServer
from ..mcp.toolset import run_tools
from ..outcome import RunSpec
from . import drain, execution
from .context import get_context

log = logging.getLogger("dbos_agents")


async def _listing(server: MCPServer) -> Listing:
    try:
        return await wire.list_tools(server)
    except MCPServerError as exc:
        log.warning(
            "MCP server unavailable for a run",
            extra={"event": "mcp_unavailable", "server": server.name, "error": exc.detail},
        )
        return Listing(server=server.name, error=exc.detail)


async def _recorded(spec: RunSpec, turn: int) -> list[Listing] | None:
    """The lists the run's first turn recorded, if an earlier execution recorded it."""
    if execution.later_steps_are_new() or execution.turn_is_new(spec["run_seq"], turn):
        return None  # nobody recorded this turn: skip the read
    record = execution.peek_turn(spec["run_seq"], turn)
    if record is None:
        record, _ = await get_context().ledger.turn_state(spec, turn)
    return None if record is None else record.tools


def view(agent: Agent, listings: list[Listing]) -> Agent:
    """The agent with these lists' tools (and notes for the servers that failed)."""
    tools, notes = run_tools(agent.tool_names(), list(agent.mcp_servers.values()), listings)
    return agent.with_run_tools(tools, notes)


async def for_run(
    spec: RunSpec, agent: Agent, first_turn: int
) -> tuple[Agent, list[Listing] | None]:
    """The agent as this run sees it, and the lists for its first turn to record (None
    when they come from the record, or the agent has no MCP server)."""
    if not agent.mcp_servers:
        return agent, None
    async with drain.step():
        recorded = await _recorded(spec, first_turn)
        if recorded is not None:
            return view(agent, recorded), None
        # Servers listed side by side; outside the workflow's DBOS context, as the
        # connections outlive this run.
        fresh = await _dbos.outside_workflow(_all(list(agent.mcp_servers.values())))
    return view(agent, fresh), fresh


async def _all(servers: list[MCPServer]) -> list[Listing]:
    return list(await asyncio.gather(*(_listing(s) for s in servers)))
