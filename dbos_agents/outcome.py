"""Session status and run outcomes, as callers see them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypedDict

from pydantic import BaseModel

from .messages import Usage

RunStatus = Literal["completed", "max_turns", "budget_exhausted", "failed", "interrupted"]
SessionStatus = Literal[
    "queued", "running", "completed", "max_turns", "budget_exhausted", "failed", "interrupted"
]
TERMINAL: frozenset[str] = frozenset(
    {"completed", "max_turns", "budget_exhausted", "failed", "interrupted"}
)


class RunOutcome(BaseModel):
    """How one run (the work caused by one user message) ended."""

    session_id: str
    run_seq: int
    status: RunStatus
    output: str | None = None
    """The final answer, when status is ``completed``."""
    error: str | None = None
    turns: int = 0
    usage: Usage = Usage()


class SessionInfo(BaseModel):
    """A session row: what it is, where it stands, what it has cost so far."""

    id: str
    root_session_id: str
    parent_session_id: str | None
    agent: str
    status: SessionStatus
    user_id: str | None
    tenant_id: str | None
    run_seq: int
    workflow_id: str
    turns: int
    usage: Usage
    final_output: str | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    forked_from: str | None = None
    """A fork's source (root) session (``AgentClient.fork``); None for any other session."""
    forked_at_turn: int | None = None
    """The source's turn the fork was copied at."""


class RunSpec(TypedDict):
    """The session workflow's input: everything a run needs, fixed when it is started."""

    session_id: str
    root_session_id: str
    parent_session_id: str | None
    agent: str
    run_seq: int
    message: str
    user_id: str | None
    tenant_id: str | None
