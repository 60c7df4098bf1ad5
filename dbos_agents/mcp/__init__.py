"""MCP servers' tools in an agent (``Agent(tools=[MCPServer(...)])``), with the promises of
our own tools: the list read once per run and recorded, every call at most once unless the
server's trusted hints or the user say it may run again, and a server's questions answered
through durable waits. Needs the ``mcp`` extra: ``pip install 'dbos-agents[mcp]'``."""

from __future__ import annotations

from .server import Hints, ListedTool, Listing, MCPServer, Policy, Verify

__all__ = ["Hints", "ListedTool", "Listing", "MCPServer", "Policy", "Verify"]
