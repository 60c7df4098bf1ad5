"""A run's MCP tools: the recorded lists of an agent's servers, under the names the model
sees. A tool keeps the server's name where it is a valid, unique tool name; where two
tools would share one, the server's name prefixes it (``crm_search``). The names depend
only on the recorded lists and the agent, so a replay names every tool the same."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence

from ..names import NAME_PATTERN, RESERVED_PREFIXES
from .server import Listing, MCPServer
from .tool import MCPTool

_BAD = re.compile(r"[^A-Za-z0-9_-]")


def _clean(name: str) -> str:
    out = _BAD.sub("_", name)
    return out if out[:1].isalpha() else f"t_{out}"


def run_tools(
    taken: Collection[str], servers: Sequence[MCPServer], listings: Sequence[Listing]
) -> tuple[list[MCPTool], list[str]]:
    """The run's MCP tools, and a note for the model per server whose tools are missing."""
    by_name = {s.name: s for s in servers}
    counts = Counter(_clean(t.name) for li in listings for t in li.tools)
    used = set(taken)
    tools: list[MCPTool] = []
    notes: list[str] = []
    for listing in listings:
        server = by_name[listing.server]
        if listing.error is not None:
            notes.append(
                f"The tools of MCP server {server.name!r} are unavailable in this run:"
                f" {listing.error}"
            )
        for listed in listing.tools:
            plain = _clean(listed.name)
            name = plain
            if counts[plain] > 1 or plain in used or plain.startswith(RESERVED_PREFIXES):
                name = f"{server.name}_{plain}"
            name = name[:64]
            n = 2
            while name in used or not NAME_PATTERN.fullmatch(name):
                suffix = f"_{n}"
                name = f"{name[: 64 - len(suffix)]}{suffix}"
                n += 1
            used.add(name)
            tools.append(MCPTool(server, listed, name))
    return tools, notes
