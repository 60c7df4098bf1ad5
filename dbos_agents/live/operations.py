"""The semantic operations a run's reader is told (``reducer.RunReducer`` emits them; the
module doc there says when each comes). Each protocol's encoder maps them to its wire
format, one by one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from ..events import MessageEvent, PendingEvent, ProgressEvent, StateEvent, StatusEvent

EndReason = Literal[
    "completed",
    "max_turns",
    "budget_exhausted",
    "interrupted",
    "failed",
    "superseded",
    "waiting",
    "other",
]


@dataclass(slots=True)
class StepStart:
    turn: int | None
    seq: int | None = None
    """The message that started the step, when it was not streamed (``turn`` None)."""


@dataclass(slots=True)
class StepEnd:
    pass


@dataclass(slots=True)
class TextStart:
    part: int


@dataclass(slots=True)
class TextPiece:
    part: int
    text: str


@dataclass(slots=True)
class TextEnd:
    part: int


@dataclass(slots=True)
class ToolStart:
    call_id: str
    name: str


@dataclass(slots=True)
class ToolArgs:
    call_id: str
    delta: str


@dataclass(slots=True)
class Reset:
    tool: bool = False
    """Only a tool call's pieces were withdrawn; the step's text and other calls stay."""
    call_id: str | None = None
    """That call, if it was shown."""
    again: int = 0
    """How many operations right after it show again what the step still shows (a
    reader that can withdraw one call alone keeps what it has and passes them over)."""


@dataclass(slots=True)
class Committed:
    message: MessageEvent
    waits: tuple[PendingEvent, ...]
    """The waits its calls opened."""


@dataclass(slots=True)
class ToolCall:
    call_id: str
    name: str
    input: JsonValue
    on_client: bool
    """The reader runs it (a client tool's wait); else it runs elsewhere."""
    arguments: str = ""
    """The input as the model wrote it (JSON text)."""


@dataclass(slots=True)
class Approval:
    approval_id: str
    """The wait's id (an answer names it)."""
    call_id: str
    """The run's call it is shown on."""


@dataclass(slots=True)
class Asked:
    wait: PendingEvent
    call_id: str
    """The run's call it comes from (a durable tool's, a sub-agent call's)."""


@dataclass(slots=True)
class ToolOutput:
    call_id: str
    output: JsonValue
    message: MessageEvent
    """The result's message, as read."""


@dataclass(slots=True)
class ToolFailed:
    call_id: str
    kind: str
    text: str
    message: MessageEvent


@dataclass(slots=True)
class ToolDenied:
    call_id: str
    message: MessageEvent


@dataclass(slots=True)
class Progress:
    event: ProgressEvent


@dataclass(slots=True)
class State:
    event: StateEvent


@dataclass(slots=True)
class End:
    reason: EndReason
    error: str | None = None
    status: StatusEvent | None = None
    """The run's end as read (None: superseded, waiting, or ended by the caller)."""


Op = (
    StepStart
    | StepEnd
    | TextStart
    | TextPiece
    | TextEnd
    | ToolStart
    | ToolArgs
    | Reset
    | Committed
    | ToolCall
    | Approval
    | Asked
    | ToolOutput
    | ToolFailed
    | ToolDenied
    | Progress
    | State
    | End
)
