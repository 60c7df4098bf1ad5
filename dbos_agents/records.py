"""Public records that reads and submits return: plain pydantic models, no database types."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal, TypedDict, cast

from pydantic import BaseModel, ConfigDict

from .delivery import WaitKind
from .messages import JSONValue, Message
from .outcome import RunSpec, SessionStatus

SubmitStatus = Literal[
    "accepted", "already_completed", "unknown_tool_call", "late_answer_after_timeout"
]
UnknownReason = Literal["no_session", "no_pending_call", "interrupted", "run_ended"]
PendingKind = WaitKind


class SubmitOutcome(BaseModel):
    """What happened to a submit. Only ``accepted`` woke the waiting workflow."""

    status: SubmitStatus
    session_id: str
    tool_call_id: str
    reason: UnknownReason | None = None
    """For ``unknown_tool_call``: ``no_session``, ``no_pending_call``, ``interrupted`` or
    ``run_ended`` (the run that waited ended without reading an answer)."""


class PendingCall(BaseModel):
    """A pending (or, with ``include_resolved``, settled) client-tool call or approval."""

    root_session_id: str
    tool_call_id: str
    owner_session_id: str
    owner_workflow_id: str
    kind: WaitKind
    tool: str
    arguments: JSONValue
    deadline: datetime
    output_schema: dict[str, JSONValue] | None
    status: str
    submitted_at: datetime | None
    resolved_at: datetime | None
    user_id: str | None
    tenant_id: str | None
    created_at: datetime
    submission: JSONValue = None
    """What was submitted, once it was: for an approval the decision, its reason and who
    decided (``decided_by``)."""


class InterruptOutcome(BaseModel):
    session_id: str
    interrupted_sessions: list[str]
    cancelled_calls: list[str]


class HistoryEntry(Message):
    """A stored transcript message with its position and time."""

    seq: int
    run_seq: int
    created_at: datetime


class ToolCallRecord(BaseModel):
    """A row of the tool-call ledger."""

    session_id: str
    tool_call_id: str
    run_seq: int
    turn: int
    tool: str
    kind: str = "server"
    arguments: str
    idempotency_key: str
    safe_to_retry: bool
    status: str
    attempts: int
    result: JSONValue = None
    error_kind: str | None = None


class TurnUsage(BaseModel):
    """One recorded model turn's usage (``AgentClient.usage``): which model answered it, as
    its provider names it, and what it cost. ``provider`` is None for turns recorded before
    it was kept, and for a model that names none."""

    run_seq: int
    turn: int
    """The session's turn number, counted across its runs (``history(at_turn=)``'s)."""
    model: str | None
    provider: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float


class StatusEvent(BaseModel):
    """Where a session's current run stands (the data of an SSE ``status`` event)."""

    event: ClassVar[str] = "status"
    status: SessionStatus
    run_seq: int
    final_output: str | None
    error: str | None


class SessionEvents(BaseModel):
    """One read of a session's event log (``AgentClient.events``): its status, then the
    messages after a sequence number, read in that order, so a terminal status is never
    seen before the messages of the run it ends."""

    status: StatusEvent | None
    """``None`` when there is no such session."""
    messages: list[HistoryEntry]
    """At most ``limit`` messages, oldest first: a full batch means more may follow."""
    token_generation: int | None = None
    """The generation a session token must carry (the HTTP server ends streams whose token
    was revoked)."""


class QueuedRuns(BaseModel):
    """Runs of one agent waiting on its queue for a worker to take them."""

    agent: str
    runs: int
    oldest_age_sec: float
    """How long the one waiting longest has waited (since it was enqueued or recovered)."""
    served: bool
    """Whether a live worker runs the agent (False: they wait until one comes up)."""


# --- what a page posts with a run (AG-UI's RunAgentInput) ---------------------------------


class DeclaredTool(TypedDict):
    """A tool the page declares for one run (a frontend tool): its JSON schema is the
    input schema; its output is whatever JSON the page posts back."""

    name: str
    description: str
    parameters: dict[str, JSONValue]


class PageInput(TypedDict, total=False):
    """What a chat page sends with a run beyond its message, carried in the run's input
    (``RunSpec``) so a recovered execution sees the same: the frontend tools it declares,
    its context (for the instructions), its forwarded properties (for tools) and a state
    to commit before the run (``state`` on top of version ``state_base``)."""

    tools: list[DeclaredTool]
    context: list[dict[str, str]]
    forwarded_props: JSONValue
    state: dict[str, JSONValue]
    state_base: int


PAGE_KEY = "page"
"""The run input's key for a ``PageInput`` (absent: the run has none)."""


def page_of(spec: RunSpec) -> PageInput | None:
    """The page's input a run was started with (None: none, e.g. a run started by code)."""
    page = cast(dict[str, Any], spec).get(PAGE_KEY)
    return cast(PageInput, page) if isinstance(page, dict) else None


def forwarded_props_of(spec: RunSpec) -> JSONValue | None:
    """What the page forwarded with the run (``ToolContext.forwarded_props``), or None."""
    page = page_of(spec)
    return None if page is None else page.get("forwarded_props")


def with_page(spec: RunSpec, page: PageInput | None) -> RunSpec:
    """``spec`` carrying ``page`` (or none: a persistent session's next run drops the
    previous run's)."""
    out = cast(dict[str, Any], dict(spec))
    out.pop(PAGE_KEY, None)
    if page:
        out[PAGE_KEY] = dict(page)
    return cast(RunSpec, out)


class TimelineEvent(BaseModel):
    """One run, model turn (``turn``: its usage row, written as the turn was recorded, so
    ``began`` is that time too), tool call or wait."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["run", "turn", "tool", "wait"]
    session_id: str
    depth: int
    """0 for the session's own events, 1 for its sub-agents', and so on."""
    run_seq: int | None
    turn: int | None
    label: str
    began: datetime
    ended: datetime | None
    status: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
