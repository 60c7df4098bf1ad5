"""What a chat page sent with a run (``records.PageInput``), as the run uses it.

The page's input travels in the run's input (``RunSpec``), so every execution of the run,
a recovered one too, sees the same: the frontend tools it declared become client tools of
the run (its model is offered the same set on a replay), its context follows the
instructions, its forwarded properties reach tools (``ToolContext.forwarded_props``), and
a state it posted is committed before the run's first turn, once, if the session's state
did not move on since the version the page saw.
"""

from __future__ import annotations

from ..agent import Agent
from ..client_tools import FrontendTool
from ..errors import DefinitionError, InvalidRequestError
from ..models.base import ToolSpec
from ..outcome import RunSpec
from ..records import PageInput, page_of
from ..state import dump
from ..store import state as state_rows
from . import drain
from .context import get_context

__all__ = ["commit_state", "specs", "view"]


def _context(page: PageInput) -> str:
    items = page.get("context") or []
    lines = [f"- {c.get('description', '')}: {c.get('value', '')}" for c in items]
    return "Context from the user's page:\n" + "\n".join(lines) if lines else ""


def view(spec: RunSpec, agent: Agent) -> Agent:
    """The agent with the page's tools (those ``Agent(frontend_tools=...)`` allows) and
    context. A declared tool named like one of the agent's own fails the run (raises
    ``InvalidRequestError`` naming them): the model must never see two tools of one name."""
    page = page_of(spec)
    if page is None:
        return agent
    declared = [t for t in page.get("tools") or [] if agent.allows_frontend_tool(t["name"])]
    own = set(agent.tool_names())
    clash = sorted({t["name"] for t in declared if t["name"] in own})
    if clash:
        raise InvalidRequestError(
            f"tools: the page declares {', '.join(clash)}, which agent {agent.name!r}"
            " defines itself: rename the page's tools"
        )
    try:
        tools = [
            FrontendTool(
                t["name"],
                parameters=dict(t["parameters"]),
                description=t.get("description", ""),
                timeout=agent.tool_timeout,
            )
            for t in declared
        ]
    except DefinitionError as exc:
        raise InvalidRequestError(f"tools: {exc}") from None
    context = _context(page)
    if not tools and not context:
        return agent
    return agent.with_page_tools(tools, context)


def specs(agent: Agent) -> list[ToolSpec]:
    """The tool specs of a run's own view (not cached: the view lives for one run)."""
    return [ToolSpec(name=n, description=d, parameters=p) for n, d, p in agent.tool_specs()]


async def commit_state(spec: RunSpec, agent: Agent) -> None:
    """Commit the state the page posted, validated against ``Agent(state=...)``, before
    the run's first turn. Raises ``StateValidationError`` (naming the field) or
    ``InvalidRequestError`` (the session's state moved on since the page's version)."""
    page = page_of(spec)
    if page is None or "state" not in page or agent.state_schema is None:
        return
    sid = spec["session_id"]
    state = dump(agent.state_schema.coerce(sid, page["state"]))
    base = int(page.get("state_base", 0))
    async with drain.step():
        engine = get_context().ledger.ds.engine
        version, latest = await state_rows.commit_posted(engine, sid, spec["run_seq"], state, base)
    if version is None:
        raise InvalidRequestError(
            f"state: the page's state is version {base}, the session's is now {latest};"
            " reload the state (the page's change was not applied)"
        )
