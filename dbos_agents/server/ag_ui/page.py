"""What a ``RunAgentInput`` carries beyond the thread: the page's frontend tools, its state,
context and forwarded properties, checked and carried with the run it starts
(``records.PageInput``, applied by the worker in ``loop/frontend.py``).

- ``tools``: each a name and a JSON schema for its input; a bad one is 400 naming
  ``tools[i].name`` or ``tools[i].parameters``. The worker keeps those the agent allows
  (``Agent(frontend_tools=...)``).
- ``state``: an object; the server adds the session's state version to every state it
  sends the page (``VERSION_KEY``), so the state the page posts back names the version it
  is based on. A posted state equal to the session's is nothing to commit; one that
  differs is committed before the run, unless the session's state moved on since its
  version: 409, nothing changed. The worker validates it against ``Agent(state=...)``.
"""

from __future__ import annotations

from typing import Any, cast

from ag_ui.core import RunAgentInput
from fastapi import HTTPException

from ...client_tools import schema_problem
from ...errors import InvalidRequestError
from ...messages import JSONValue
from ...names import check_name
from ...records import DeclaredTool, PageInput

__all__ = ["VERSION_KEY", "held_state", "page_input"]

VERSION_KEY = "_version"
"""The key of the state version in the state the page holds (no pydantic field can be
named so: a leading underscore is private)."""


def _tools(body: RunAgentInput) -> list[DeclaredTool]:
    out: list[DeclaredTool] = []
    seen: set[str] = set()
    for i, t in enumerate(body.tools or []):
        problems = check_name("tool", t.name)
        if problems:
            raise InvalidRequestError(f"tools[{i}].name: {problems[0]}")
        if t.name in seen:
            raise InvalidRequestError(f"tools[{i}].name: two tools are named {t.name!r}")
        seen.add(t.name)
        problem = schema_problem(t.parameters)
        if problem is not None:
            raise InvalidRequestError(f"tools[{i}].parameters: {problem}")
        parameters = cast(dict[str, JSONValue], t.parameters)  # an object: checked above
        out.append(DeclaredTool(name=t.name, description=t.description, parameters=parameters))
    return out


def held_state(body: RunAgentInput) -> tuple[dict[str, JSONValue] | None, int]:
    """The state the page holds, without the version, and that version (0: none named).
    None: the page holds none (no state, or an empty object)."""
    state: Any = body.state
    if state is None or state == {}:
        return None, 0
    if not isinstance(state, dict):
        raise InvalidRequestError("state: a JSON object")
    version = state.get(VERSION_KEY, 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise InvalidRequestError(f"state.{VERSION_KEY}: a version number (an int >= 0)")
    rest = {k: v for k, v in state.items() if k != VERSION_KEY}
    return (rest or None), version


def page_input(
    body: RunAgentInput, current: JSONValue | None, latest: int, *, starts_run: bool
) -> PageInput:
    """The page's input for the run a message starts (``starts_run``), or for nothing (an
    answer, a rerun: its tools are checked, its state is not read). ``current``/``latest``: the session's state and
    its version (None/0: none yet). Raises ``InvalidRequestError`` (400) and
    ``HTTPException`` 409 (the state moved on since the page's version)."""
    page = PageInput()
    tools = _tools(body)
    if tools:
        page["tools"] = tools
    if body.context:
        page["context"] = [{"description": c.description, "value": c.value} for c in body.context]
    if body.forwarded_props is not None:
        page["forwarded_props"] = body.forwarded_props
    state, base = held_state(body)
    if starts_run and state is not None and state != current:
        if base != latest:
            raise HTTPException(
                409,
                f"state: the page's state is version {base}, the session's is {latest}:"
                " take the session's state and apply the change again (nothing was changed)",
            )
        page["state"] = state
        page["state_base"] = base
    return page
