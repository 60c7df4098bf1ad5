"""Request and response bodies of the HTTP API (they make the OpenAPI document)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool

from ..delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from ..outcome import SessionInfo
from ..records import HistoryEntry, PendingCall
from ..records import StatusEvent as StatusEvent

_Strict = ConfigDict(extra="forbid")


class CreateSession(BaseModel):
    model_config = _Strict

    agent: str = Field(min_length=1, max_length=200)
    message: str
    user_id: str | None = Field(default=None, max_length=200)
    tenant_id: str | None = Field(default=None, max_length=200)


class SessionToken(BaseModel):
    session_id: str
    token: str | None
    """Send as ``Authorization: Bearer <token>``; None when the server has no secret."""
    expires_at: datetime | None


class SendMessage(BaseModel):
    model_config = _Strict

    message: str


class MessageAccepted(BaseModel):
    session_id: str
    status: Literal["queued"] = "queued"


class SessionView(BaseModel):
    session: SessionInfo
    history: list[HistoryEntry]


class SessionList(BaseModel):
    sessions: list[SessionInfo]


class PendingList(BaseModel):
    pending: list[PendingCall]


class ClientToolResult(BaseModel):
    """The result of a client tool; validated against the tool's output schema."""

    model_config = _Strict

    kind: Literal["client-tool-result"]
    tool_call_id: str = Field(min_length=1)
    result: JsonValue

    def delivery(self) -> Delivery:
        return ResultDelivery(result=self.result)


class ClientToolError(BaseModel):
    """The client tool failed; the model reads ``error``. Not schema-validated."""

    model_config = _Strict

    kind: Literal["client-tool-error"]
    tool_call_id: str = Field(min_length=1)
    error: str = Field(min_length=1)

    def delivery(self) -> Delivery:
        return ErrorDelivery(error=self.error)


class Approval(BaseModel):
    """Approve or deny an approval-gated tool call."""

    model_config = _Strict

    kind: Literal["approval"]
    tool_call_id: str = Field(min_length=1)
    approved: StrictBool
    reason: str | None = None

    def delivery(self, decided_by: str | None = None) -> Delivery:
        return ApprovalDelivery(approved=self.approved, reason=self.reason, decided_by=decided_by)


Submission = Annotated[ClientToolResult | ClientToolError | Approval, Field(discriminator="kind")]


class TokensRevoked(BaseModel):
    session_id: str
    token_generation: int
    """Tokens of an earlier generation no longer work."""


class SubmitAccepted(BaseModel):
    status: Literal["accepted", "already_completed", "late_answer_after_timeout"]


class InterruptResult(BaseModel):
    session_id: str
    interrupted_sessions: list[str]
    cancelled_calls: list[str]


class ErrorBody(BaseModel):
    """Every error response, one shape: a stable UPPER_CASE ``error`` code, a sentence, and
    for some codes ``details``. Clients branch on ``error``, never on ``message``."""

    error: str
    message: str
    details: list[dict[str, JsonValue]] | None = None
    """``INVALID_RESULT``: schema violations (path, message); ``INVALID_REQUEST`` from a
    malformed body: the validation errors (loc, msg, type); ``UNKNOWN_TOOL_CALL``: one
    ``{"reason": ...}`` (no_session, no_pending_call, interrupted or run_ended)."""


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    database: str
