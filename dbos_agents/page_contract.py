"""What a chat page may send an agent, published by the workers that run it, so a page's
bad input is refused before anything is stored.

The server does not load agent definitions; the worker does, and it is the authority (it
checks the page's input again as the run begins: ``loop/frontend.py``). But a refusal
there comes after the user's message was stored with a run that then fails. So every
worker publishes, per agent, the names of its own tools, which tools a page may declare
(``Agent(frontend_tools=...)``) and its state's JSON schema (``store/workers.register``),
and a start with a page's input is checked against the newest live worker's contract
first (``AgentClient.start`` / ``send``): a declared tool named like the agent's own, or a
posted state its schema refuses, is ``InvalidRequestError`` naming the field, and nothing
is stored. No contract published (an earlier release, a role that may not read the
fleet's table): the worker's check alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import jsonschema

from .errors import InvalidRequestError
from .messages import JSONValue
from .records import PageInput

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["PageContract", "contract_of", "refusal"]


class PageContract(TypedDict):
    tools: list[str]
    """The agent's own tool names (client tools and sub-agents included)."""
    frontend_tools: bool | list[str]
    """Which tools a page may declare: any (True), none (False), or these names."""
    state_schema: dict[str, JSONValue] | None
    """The JSON schema of ``Agent(state=...)``'s model; None: the agent has no state."""


def contract_of(agent: Agent) -> PageContract:
    allowed = agent.frontend_tools
    schema = agent.state_schema
    return PageContract(
        tools=sorted(agent.tool_names()),
        frontend_tools=allowed if isinstance(allowed, bool) else sorted(allowed),
        state_schema=None if schema is None else schema.model.model_json_schema(),
    )


def _allows(contract: PageContract, name: str) -> bool:
    allowed = contract["frontend_tools"]
    return allowed if isinstance(allowed, bool) else name in allowed


def refusal(agent: str, contract: PageContract, page: PageInput) -> InvalidRequestError | None:
    """Why the agent's workers would refuse ``page`` (the first problem), or None."""
    own = set(contract["tools"])
    for i, tool in enumerate(page.get("tools") or []):
        name = tool["name"]
        if name in own and _allows(contract, name):
            return InvalidRequestError(
                f"tools[{i}].name: agent {agent!r} has a tool named {name!r} of its own:"
                " rename the page's tool"
            )
    schema = contract["state_schema"]
    state = page.get("state")
    if state is not None and schema is not None:
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(state))
        if error is not None:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
            return InvalidRequestError(f"state{where}: {error.message}")
    return None
