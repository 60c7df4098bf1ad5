"""Which agents are MCP tools, and what each tool looks like.

A tool per agent: its name is the agent's, its description the agent's (when the server
knows it: ``mcp_agents`` entries that name an ``Agent`` as ``module:attr``), its input a
``{"message": string}`` object. ``_meta["io.dbos-agents/session-id"]`` continues a session.
With ``mcp_agents`` unset the tools are the agents the workers publish, read at each
``tools/list`` (no cache: every server process answers the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, ValidationError

from ... import storable
from ...agent import Agent
from ...client import AsyncAgentClient
from ...errors import ConfigurationError, InvalidRequestError, UnknownAgentError
from ...imports import import_object
from ..settings import ServerSettings

SESSION_META = "io.dbos-agents/session-id"
"""``_meta`` key naming the session: on a call, the one to continue; on a result, the one
that ran."""
TOKEN_META = "io.dbos-agents/session-token"
"""``_meta`` key of a result that started a session on a server with a ``secret``: the
session's bearer token (the REST API's), for continuing it without the hook."""

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The message to the agent: its task."}
    },
    "required": ["message"],
    "additionalProperties": False,
}


class ToolInput(BaseModel):
    """A call's arguments."""

    model_config = ConfigDict(extra="forbid")
    message: str


def tool_input(arguments: Mapping[str, Any] | None) -> ToolInput:
    """The arguments, checked; ``InvalidRequestError`` names what is wrong."""
    try:
        return ToolInput.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequestError(f"invalid arguments: {problems}") from None


def session_meta(meta: Mapping[str, Any] | None) -> str | None:
    """The session a call's ``_meta`` names, checked."""
    value = (meta or {}).get(SESSION_META)
    return None if value is None else storable.check_id(value, SESSION_META)


def default_description(agent: str) -> str:
    return (
        f"Ask the {agent} agent. It runs as a durable session; the result is its final answer"
        f" (the session id is in the result's _meta[{SESSION_META!r}])."
    )


@dataclass(frozen=True)
class Catalogue:
    """The tools a server offers (see the module doc)."""

    fixed: Mapping[str, str] | None
    """Name to description, from ``mcp_agents``; None: the fleet's agents."""
    allowed: frozenset[str] | None
    """``ServerSettings.agents``: no tool outside it."""

    @classmethod
    def of(cls, settings: ServerSettings) -> Catalogue:
        """From the settings; ``ConfigurationError`` for an entry that names no agent."""
        allowed = None if settings.agents is None else frozenset(settings.agents)
        if settings.mcp_agents is None:
            return cls(None, allowed)
        fixed: dict[str, str] = {}
        for entry in settings.mcp_agents:
            fixed.update(_entry(entry))
        if allowed is not None:
            outside = sorted(set(fixed) - allowed)
            if outside:
                raise ConfigurationError(
                    f"mcp_agents names agents that agents does not allow: {outside}"
                )
        return cls(fixed, allowed)

    def check(self, name: str) -> None:
        """``UnknownAgentError`` for a tool this server does not offer (an agent no worker
        runs is found out by the start itself)."""
        if self.fixed is not None and name not in self.fixed:
            raise UnknownAgentError(name, sorted(self.fixed))
        if self.allowed is not None and name not in self.allowed:
            raise UnknownAgentError(name, sorted(self.allowed))

    async def tools(self, client: AsyncAgentClient) -> list[types.Tool]:
        if self.fixed is not None:
            described = dict(self.fixed)
        else:
            fleet = await client.served_agents()
            names = sorted(fleet.ever) if fleet is not None else []
            described = {n: default_description(n) for n in names}
        return [
            types.Tool(name=name, description=text, input_schema=INPUT_SCHEMA)
            for name, text in described.items()
            if self.allowed is None or name in self.allowed
        ]


def _entry(entry: str) -> dict[str, str]:
    if ":" not in entry:
        storable.check_id(entry, "mcp_agents")
        return {entry: default_description(entry)}
    found = import_object(entry, "an MCP agent (mcp_agents)")
    found_all: list[object] = list(found) if isinstance(found, list | tuple) else [found]
    agents = [a for a in found_all if isinstance(a, Agent)]
    if not agents or len(agents) != len(found_all):
        raise ConfigurationError(f"{entry!r} (mcp_agents) is not an Agent or a list of them")
    return {a.name: a.description or default_description(a.name) for a in agents}
