"""``GET /sessions/{id}/state``: a session's typed state for UIs (``AgentClient.state``).

Authorized like ``GET /sessions/{id}`` (operation ``read_session``). The server loads no
agents, so it answers the stored JSON as it is, with the version and the tool call that
committed it; ``version`` 0 and ``state`` null: no tool changed the state yet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from ..messages import JSONValue
from .errors import error_responses
from .routes import ctx_of

router = APIRouter()


class StateView(BaseModel):
    session_id: str
    version: int
    """0: never changed (the agent's defaults)."""
    state: JSONValue
    run_seq: int | None = None
    turn: int | None = None
    tool_call_id: str | None = None
    """The tool call whose recorded result committed this version."""
    created_at: datetime | None = None


@router.get(
    "/sessions/{session_id}/state",
    response_model=StateView,
    responses=error_responses(400, 401, 403, 404),
    tags=["sessions"],
)
async def get_state(
    request: Request,
    session_id: str,
    at_turn: Annotated[int | None, Query(ge=0, le=2**31 - 1, description="as of this turn")] = None,
) -> StateView:
    """The session's latest committed state (or as committed up to turn ``at_turn``)."""
    ctx = ctx_of(request)
    access = await ctx.authorize(request, "read_session", session_id)
    row = await ctx.acting(access).state_version(session_id, at_turn=at_turn)
    if row is None:
        return StateView(session_id=session_id, version=0, state=None)
    return StateView(
        session_id=session_id,
        version=row.version,
        state=row.state,
        run_seq=row.run_seq,
        turn=row.turn,
        tool_call_id=row.tool_call_id,
        created_at=row.created_at,
    )
