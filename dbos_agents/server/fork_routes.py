"""History by turn and forks over HTTP: ``POST /sessions/{id}/fork`` and
``GET /sessions/{id}/history?at_turn=n`` (``AgentClient.fork`` / ``history``).

A fork is authorized like ``POST /sessions/{id}/messages`` (operation ``send_message``):
a token of the session, or a principal that may act on it; the new session keeps the
source's user and tenant and, on a server with a secret, gets a token of its own (as
``POST /sessions`` gives one).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from ..records import HistoryEntry
from .errors import error_responses
from .routes import ctx_of
from .schemas import SessionToken

router = APIRouter()


class ForkSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    at_turn: int = Field(description="the turn to fork at (the n-th assistant message)")
    message: str = Field(description="the new session's next user message")


class HistoryView(BaseModel):
    history: list[HistoryEntry]


@router.post(
    "/sessions/{session_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=SessionToken,
    responses=error_responses(400, 401, 403, 404, 411, 413),
    tags=["sessions"],
)
async def fork_session(request: Request, session_id: str, body: ForkSession) -> SessionToken:
    """A new session holding this one (its root, for a sub-agent) as it was after turn
    ``at_turn``, continued with ``message``; nothing before the turn runs again
    (404 ``TURN_NOT_FOUND`` for a turn the session does not have: nothing is created)."""
    ctx = ctx_of(request)
    access = await ctx.authorize(request, "send_message", session_id)
    client = ctx.acting(access)
    sid = await client.fork(session_id, at_turn=body.at_turn, message=body.message)
    return ctx.new_session_token(sid)


@router.get(
    "/sessions/{session_id}/history",
    response_model=HistoryView,
    responses=error_responses(400, 401, 403, 404),
    tags=["sessions"],
)
async def get_history(
    request: Request, session_id: str, at_turn: Annotated[int | None, Query()] = None
) -> HistoryView:
    """The session's transcript; with ``at_turn``, as it was after that turn."""
    ctx = ctx_of(request)
    access = await ctx.authorize(request, "read_session", session_id)
    history = await ctx.acting(access).history(session_id, at_turn=at_turn)
    return HistoryView(history=history)
