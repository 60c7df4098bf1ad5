"""``MCPServer``: an MCP server's tools as a toolset of an agent (``Agent(tools=[...])``).

Plain data, like ``Agent``: where the server is, which of its tools to offer, and the
retry policy of each. Whether a tool may run again after a crash is decided here
(``MCPServer.policy``): at most once unless the user says so per tool, or the tool says it
only reads or is idempotent and the user trusts the server's hints (hints of an untrusted
server are ignored, as the protocol says they must be).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import DefinitionError
from ..messages import JSONValue
from ..names import check_name

Verify = Callable[[dict[str, JSONValue]], Awaitable[JSONValue | None]]
"""Settles an unknown outcome: gets the call's arguments, returns the tool's result if the
effect happened, or ``None`` if it did not (the call is then made again)."""

IDEMPOTENCY_META = "io.dbos-agents/idempotency-key"
"""The ``_meta`` key of every ``tools/call`` we send: stable per tool call, across crashes."""


class Hints(BaseModel):
    """A tool's annotations as the server gave them (each may be absent)."""

    model_config = ConfigDict(frozen=True)

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


class ListedTool(BaseModel):
    """One tool of a server's list, as recorded for a run."""

    model_config = ConfigDict(frozen=True)

    name: str
    """The server's name for it (what ``tools/call`` sends)."""
    description: str = ""
    input_schema: dict[str, JSONValue]
    hints: Hints = Hints()


class Listing(BaseModel):
    """A server's tool list as one run saw it (recorded: a replay sees the same)."""

    model_config = ConfigDict(frozen=True)

    server: str
    tools: list[ListedTool] = []
    skipped: dict[str, str] = {}
    """Tools not offered to the model, with the reason (a schema we cannot offer)."""
    error: str | None = None
    """Why the list could not be read (the server's tools are then absent from the run)."""


@dataclass(frozen=True)
class Policy:
    """What a crash mid-call does to a call of this tool."""

    retry: bool
    """True: run the call again. False: at most once (an unknown outcome is reported)."""
    reason: str


Transport = Literal["http", "stdio"]


class MCPServer:
    """An MCP server whose tools an agent may call, spoken to with the official ``mcp`` SDK.

    ``target`` is a streamable-HTTP URL (``"https://crm.example.com/mcp"``) or a command
    to run over stdio (``["npx", "-y", "@modelcontextprotocol/server-everything"]``).
    ``name`` names the server in logs, errors and, where two tools would share a name, as
    the prefix of its tools' names (``crm_search``). ``include``/``exclude`` pick tools by
    the server's names. ``timeout`` bounds each request.

    Every call runs at most once per tool call, even across crashes, unless the tool is in
    ``safe_to_retry`` or (with ``trust_hints=True``) the server marks it read-only or
    idempotent. ``verify`` maps a tool to a hook that settles an unknown outcome.
    """

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        name: str,
        trust_hints: bool = False,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        include: Collection[str] | None = None,
        exclude: Collection[str] = (),
        safe_to_retry: Collection[str] = (),
        verify: Mapping[str, Verify] | None = None,
        timeout: timedelta = timedelta(seconds=60),
    ) -> None:
        problems = check_name("MCP server", name)
        transport: Transport = "http"
        if isinstance(target, str):
            if not target.startswith(("http://", "https://")):
                problems.append(
                    f"target {target!r}: a URL (http:// or https://), or a command as a list"
                    ' of strings (["npx", "-y", "some-server"])'
                )
        elif (
            isinstance(target, Sequence)
            and target
            and all(isinstance(part, str) and part for part in target)
        ):
            transport = "stdio"
        else:
            problems.append(f"target {target!r}: a URL or a non-empty list of strings")
        if headers and transport == "stdio":
            problems.append("headers are for an HTTP server; a command gets env instead")
        if env and transport == "http":
            problems.append("env is for a command; an HTTP server gets headers instead")
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            problems.append(f"timeout must be a positive timedelta, got {timeout!r}")
        for hook_tool, hook in (verify or {}).items():
            if not callable(hook):
                problems.append(f"verify[{hook_tool!r}] is not callable")
            if hook_tool in safe_to_retry:
                problems.append(f"verify[{hook_tool!r}]: a safe_to_retry tool needs no verify")
        if importlib.util.find_spec("mcp") is None:
            problems.append("the mcp SDK is not installed: pip install 'dbos-agents[mcp]'")
        if problems:
            raise DefinitionError(f"MCP server {name!r}", problems)
        self.name = name
        self.transport: Transport = transport
        self.url: str | None = target if isinstance(target, str) else None
        self.command: tuple[str, ...] = () if isinstance(target, str) else tuple(target)
        self.trust_hints = trust_hints
        self.headers = dict(headers or {})
        self.env = dict(env) if env is not None else None
        self.include = None if include is None else frozenset(include)
        self.exclude = frozenset(exclude)
        self.safe_to_retry = frozenset(safe_to_retry)
        self.verify = dict(verify or {})
        self.timeout = timeout

    def __repr__(self) -> str:
        where = self.url if self.url is not None else " ".join(self.command)
        return f"MCPServer({where!r}, name={self.name!r})"

    def offers(self, tool: str) -> bool:
        """Whether ``include``/``exclude`` let the model see this tool."""
        return tool not in self.exclude and (self.include is None or tool in self.include)

    def policy(self, tool: ListedTool) -> Policy:
        """Whether a call of ``tool`` runs again after a crash mid-call (module doc)."""
        if tool.name in self.safe_to_retry:
            return Policy(True, "in safe_to_retry")
        h = tool.hints
        if h.read_only or h.idempotent:
            said = "readOnlyHint" if h.read_only else "idempotentHint"
            if self.trust_hints:
                return Policy(True, f"{said} of a trusted server")
            return Policy(False, f"{said} ignored: trust_hints=False")
        return Policy(False, "neither readOnlyHint nor idempotentHint")
