"""The app the AG-UI page-tools tests run in a worker subprocess
(``tests.chat.page_app:runtime``): agents for a page that declares its own tools and shares
state. Replies stream in pieces of 4 characters.

- ``painter`` (``frontend_tools=True``, state ``Board``): asks the page's ``pick_color``
  (a tool only the page declares), then paints the board with its own ``paint`` tool (a
  state change, with the page's forwarded props in its result), then answers quoting both
  results and its instructions (the board as of that turn, and the page's context).
- ``keeper``: ``painter`` as a persistent agent (its next runs arrive on its inbox) that
  lets pages declare ``pick_color`` only.
- ``plain``: does not let pages declare tools; calls ``pick_color`` all the same (an
  unknown tool), then reports what it got.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls


class Board(BaseModel):
    color: str = "none"
    moves: list[str] = []
    owner: str = "nobody"


@tool
async def paint(ctx: ToolContext, color: str) -> dict[str, object]:
    """Paint the board (a change of the session's state)."""
    board: Board = ctx.state
    ctx.state = board.model_copy(update={"color": color, "moves": [*board.moves, color]})
    return {"painted": color, "props": ctx.forwarded_props}


def _board(state: Board) -> str:
    return f"Paint for {state.owner}; the board is {state.color}."


def respond(request: ModelRequest) -> str | ModelResponse:
    last = request.messages[-1]
    if request.agent == "plain":
        if last.role == "user":
            return calls(call("pick_color", {"prompt": last.content or ""}))
        return f"plain got: {last.content}"
    assert request.agent in ("painter", "keeper")
    if last.role == "user":
        return calls(call("pick_color", {"prompt": last.content or ""}))
    if last.role == "tool" and last.name == "pick_color":
        picked = json.loads(last.content or "{}")
        return calls(call("paint", {"color": picked.get("color", "grey")}))
    picked = [m.content for m in request.messages if m.name == "pick_color"][-1]
    said = request.instructions.replace("\n", " / ")
    offered = ",".join(sorted(t.name for t in request.tools))
    return f"{request.agent} got: {picked} then {last.content} | {said} | tools: {offered}"


def runtime() -> AgentRuntime:
    agents = [
        Agent("painter", _board, tools=[paint], state=Board, frontend_tools=True),
        Agent("plain", "does not take the page's tools"),
        Agent(
            "keeper",
            _board,
            tools=[paint],
            state=Board,
            frontend_tools=["pick_color"],
            persistent=True,
        ),
    ]
    return AgentRuntime(agents, ScriptedModel(respond=respond, chunk_chars=4, pace_sec=0.01))
