"""``Agent``: a named set of instructions, tools and limits. Plain data, no database."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from .client_tools import DEFAULT_TIMEOUT, ClientTool
from .errors import DefinitionError
from .mcp.server import MCPServer
from .messages import JSONValue
from .models.base import Model
from .models.resolve import model_from
from .names import check_name
from .state import MigrateState, StateSchema, check_model
from .tools import Tool

Instructions = str | Callable[[Any], str]
"""The system prompt, or a function of the session's state (``Agent(state=...)``) that
returns it, evaluated at every model turn with the state as of that turn."""

SUBAGENT_PREFIX = "subagent__"
SUBAGENT_PARAMETERS: dict[str, JSONValue] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "The task for the sub-agent"}},
    "required": ["message"],
    "additionalProperties": False,
}


class Agent:
    """An agent definition.

    ``max_turns`` bounds model calls per run (one user message); ``budget_tokens`` and
    ``budget_usd`` bound what one run may spend. When a limit is reached the run stops with
    status ``max_turns`` or ``budget_exhausted`` after the tools of the last turn have run,
    so every requested tool call still gets exactly one result.

    ``sub_agents`` are exposed to the model as tools named ``subagent__<name>``; each call
    runs the sub-agent as a child workflow. ``tool_timeout`` is the agent's default for
    client-tool and approval waits. A ``persistent`` agent keeps one workflow per session:
    after a run it waits up to ``idle_ttl`` on its inbox for the next message instead of
    ending, so a follow-up costs no new workflow.

    ``model`` answers this agent's turns (a sub-agent's too may have its own; a
    ``"provider:model"`` string names an adapter, built now); without one, the runtime's
    model does.

    ``state`` is a pydantic model with defaults: each session's typed state, read and
    changed by tools (``ToolContext.state``) and committed with their results;
    ``migrate_state`` upgrades a stored state the model no longer accepts (dict -> dict).
    ``instructions`` may then be a function of the state.

    ``frontend_tools`` lets a chat page declare tools for a run (AG-UI's
    ``RunAgentInput.tools``): True for any, or the names allowed (others it declares are
    ignored). They become client tools of that run; one named like a tool of the agent
    fails the run with an error naming it.
    """

    name: str

    def __init__(
        self,
        name: str,
        instructions: Instructions = "",
        *,
        tools: Sequence[Tool | ClientTool | MCPServer] = (),
        sub_agents: Sequence[Agent] = (),
        max_turns: int = 20,
        budget_tokens: int | None = None,
        budget_usd: float | None = None,
        model_settings: dict[str, object] | None = None,
        tool_timeout: timedelta | None = None,
        description: str = "",
        persistent: bool = False,
        idle_ttl: timedelta = timedelta(hours=1),
        state: type[BaseModel] | None = None,
        migrate_state: MigrateState | None = None,
        model: Model | str | None = None,
        frontend_tools: bool | Sequence[str] = False,
    ) -> None:
        problems = check_name("agent", name)
        if not isinstance(instructions, str) and not callable(instructions):
            problems.append("instructions must be a string or a function of the state")
        problems += check_model(state, migrate_state)
        if isinstance(model, str):
            try:  # unknown, no extra, no API key: named with this agent
                model = model_from(model)
            except DefinitionError as exc:
                problems += [f"model {model!r}: {p}" for p in exc.problems]
                model = None
        if model is not None and not isinstance(model, Model):
            problems.append(f"model {model!r} does not implement the Model protocol")
        seen: set[str] = set()
        servers: set[str] = set()
        for t in tools:
            if isinstance(t, MCPServer):
                if t.name in servers:
                    problems.append(f"tools: two MCP servers are named {t.name!r}")
                servers.add(t.name)
                continue
            if not isinstance(t, Tool | ClientTool):
                problems.append(
                    f"tools: {t!r} is not a Tool (use @tool, client_tool or an MCPServer)"
                )
                continue
            if t.name in seen:
                problems.append(f"tools: two tools are named {t.name!r}")
            seen.add(t.name)
        problems += _frontend_problems(frontend_tools, seen, sub_agents)
        for sub in sub_agents:
            if not isinstance(sub, Agent):
                problems.append(f"sub_agents: {sub!r} is not an Agent")
            elif sub.name == name:
                problems.append("sub_agents: an agent cannot be its own sub-agent")
        if tool_timeout is not None and (
            not isinstance(tool_timeout, timedelta) or tool_timeout <= timedelta(0)
        ):
            problems.append(f"tool_timeout must be a positive timedelta, got {tool_timeout!r}")
        if not isinstance(idle_ttl, timedelta) or idle_ttl <= timedelta(0):
            problems.append(f"idle_ttl must be a positive timedelta, got {idle_ttl!r}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            problems.append(f"max_turns must be an int >= 1, got {max_turns!r}")
        if budget_tokens is not None and (
            isinstance(budget_tokens, bool)
            or not isinstance(budget_tokens, int)
            or budget_tokens < 1
        ):
            problems.append(f"budget_tokens must be a positive int, got {budget_tokens!r}")
        if budget_usd is not None and (
            isinstance(budget_usd, bool)
            or not isinstance(budget_usd, int | float)
            or not math.isfinite(budget_usd)
            or budget_usd <= 0
        ):
            problems.append(f"budget_usd must be a positive number, got {budget_usd!r}")
        if problems:
            raise DefinitionError(f"agent {name!r}", problems)
        self.name = name
        fixed = instructions if isinstance(instructions, str) else ""
        self.instructions: str = fixed
        """The fixed instructions ("" when they are a function of the state)."""
        self.instructions_fn: Callable[[Any], str] | None = (
            None if isinstance(instructions, str) else instructions
        )
        self.description = description or fixed.split("\n\n")[0][:200]
        self.state_schema: StateSchema | None = (
            StateSchema(state, migrate_state) if state is not None else None
        )
        self.tools: dict[str, Tool] = {t.name: t for t in tools if isinstance(t, Tool)}
        self.client_tools: dict[str, ClientTool] = {
            t.name: t for t in tools if isinstance(t, ClientTool)
        }
        self.mcp_servers: dict[str, MCPServer] = {
            t.name: t for t in tools if isinstance(t, MCPServer)
        }
        """MCP servers whose tools each run lists anew (``with_run_tools``)."""
        self.unavailable: list[str] = []
        """Why servers' tools are missing from this run (a run's view only)."""
        self.sub_agents: dict[str, Agent] = {f"{SUBAGENT_PREFIX}{a.name}": a for a in sub_agents}
        self.tool_timeout = tool_timeout
        self.persistent = persistent
        self.idle_ttl = idle_ttl
        self.max_turns = max_turns
        self.budget_tokens = budget_tokens
        self.budget_usd = float(budget_usd) if budget_usd is not None else None
        self.model_settings = dict(model_settings or {})
        self.model = model
        """This agent's model (None: the runtime's, ``AgentRuntime(agents, model)``)."""
        self.frontend_tools: bool | frozenset[str] = (
            frontend_tools if isinstance(frontend_tools, bool) else frozenset(frontend_tools)
        )
        """Which tools a chat page may declare for a run (True: any; a set: those names)."""

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={self.tool_names()})"

    def with_run_tools(self, tools: Sequence[Tool], unavailable: Sequence[str]) -> Agent:
        """This agent as one run sees it: its own tools plus the tools its MCP servers
        listed for the run, and, in the instructions, which servers could not be reached."""
        view = copy.copy(self)
        view.tools = {**self.tools, **{t.name: t for t in tools}}
        view.unavailable = list(unavailable)
        if unavailable:
            note = "\n".join(unavailable)
            view.instructions = f"{self.instructions}\n\n{note}" if self.instructions else note
            fn = self.instructions_fn
            if fn is not None:
                view.instructions_fn = lambda state: f"{fn(state)}\n\n{note}"
        return view

    def with_page_tools(self, tools: Sequence[ClientTool], context: str) -> Agent:
        """This agent as one run sees it with what its chat page sent: the frontend tools
        the page declared (client tools of this run) and its context, after the
        instructions."""
        view = copy.copy(self)
        view.client_tools = {**self.client_tools, **{t.name: t for t in tools}}
        if context:
            view.instructions = (
                f"{self.instructions}\n\n{context}" if self.instructions else context
            )
            fn = self.instructions_fn
            if fn is not None:
                view.instructions_fn = lambda state: f"{fn(state)}\n\n{context}"
        return view

    def allows_frontend_tool(self, name: str) -> bool:
        """Whether a chat page may declare a tool of this name (``frontend_tools``)."""
        allowed = self.frontend_tools
        return allowed if isinstance(allowed, bool) else name in allowed

    def tool_names(self) -> list[str]:
        return [*self.tools, *self.client_tools, *self.sub_agents]

    def wait_timeout(self, tool_name: str) -> timedelta:
        """The timeout chain for a human wait: per tool, then per agent, then 5 minutes."""
        own: timedelta | None = None
        if tool_name in self.client_tools:
            own = self.client_tools[tool_name].timeout
        elif tool_name in self.tools:
            own = self.tools[tool_name].approval_timeout
        return own or self.tool_timeout or DEFAULT_TIMEOUT

    def tool_specs(self) -> list[tuple[str, str, dict[str, JSONValue]]]:
        """(name, description, JSON schema) of every tool the model may call."""
        specs: list[tuple[str, str, dict[str, JSONValue]]] = [
            (t.name, t.description, t.input_schema) for t in self.tools.values()
        ]
        specs += [(t.name, t.description, t.input_schema) for t in self.client_tools.values()]
        specs += [
            (n, a.description or f"Delegate a task to the {a.name} agent", SUBAGENT_PARAMETERS)
            for n, a in self.sub_agents.items()
        ]
        return specs

    def family(self) -> list[Agent]:
        """This agent and every sub-agent below it, each once."""
        out: dict[str, Agent] = {}
        stack: list[Agent] = [self]
        while stack:
            a = stack.pop()
            if a.name not in out:
                out[a.name] = a
                stack.extend(a.sub_agents.values())
        return list(out.values())


def _frontend_problems(
    frontend_tools: object, own: set[str], sub_agents: Sequence[object]
) -> list[str]:
    """``frontend_tools`` is True/False or names, none of them one of the agent's own."""
    if isinstance(frontend_tools, bool):
        return []
    if isinstance(frontend_tools, str) or not isinstance(frontend_tools, Sequence):
        return [f"frontend_tools must be True, False or a list of names, got {frontend_tools!r}"]
    problems: list[str] = []
    subs = {f"{SUBAGENT_PREFIX}{a.name}" for a in sub_agents if isinstance(a, Agent)}
    for n in frontend_tools:
        problems += check_name("frontend tool", n)
    clash = sorted({n for n in frontend_tools if n in own or n in subs})
    if clash:
        problems.append(f"frontend_tools: {', '.join(clash)} are the agent's own tools")
    return problems
