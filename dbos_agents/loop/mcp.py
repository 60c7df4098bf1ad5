"""A run's MCP tools: each of the agent's servers listed once per run, as a DBOS step, so a
replay after a crash sees the list the run saw (even if the server changed or is down),
and no worker keeps a list from one run to the next.

A server that cannot be listed is recorded as such: its tools are missing from the run,
and the model is told why (``Agent.with_run_tools``), so the run goes on without them.
"""

from __future__ import annotations

import logging

from dbos import DBOS

from .. import _dbos
from ..agent import Agent
from ..errors import MCPServerError
from ..mcp import wire
from ..mcp.server import Listing
from ..mcp.toolset import run_tools
from ..messages import JSONValue
from . import drain
from .context import get_context

log = logging.getLogger("dbos_agents")

LIST_STEP = "dbos_agents.mcp.tools.v1"


@DBOS.step(name=LIST_STEP)
async def _list_step(agent: str, server: str) -> dict[str, JSONValue]:
    """The server's list as JSON (what DBOS records and replays)."""
    s = get_context().agent(agent).mcp_servers[server]
    try:  # connections outlive the step: opened where DBOS sees no workflow
        listing = await _dbos.outside_workflow(wire.list_tools(s))
    except MCPServerError as exc:
        log.warning(
            "MCP server unavailable for a run",
            extra={"event": "mcp_unavailable", "server": server, "error": exc.detail},
        )
        listing = Listing(server=server, error=exc.detail)
    return listing.model_dump(mode="json")


async def for_run(agent: Agent) -> Agent:
    """The agent with its MCP servers' tools for this run (itself when it has none)."""
    if not agent.mcp_servers:
        return agent
    listings = []
    for name in agent.mcp_servers:
        async with drain.step():
            listings.append(Listing.model_validate(await _list_step(agent.name, name)))
    tools, notes = run_tools(agent.tool_names(), list(agent.mcp_servers.values()), listings)
    return agent.with_run_tools(tools, notes)
