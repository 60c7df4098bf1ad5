"""What a session's live stream carries (``AgentClient.stream``, ``GET /sessions/{id}/events``,
``dbos-agents follow``): one ordered log of model pieces, tools' progress notes and
committed messages.

A reader holds a ``Cursor``: the last message and the last delta it saw. The log is the
session's messages (``seq``) with its deltas merged in between them, so resuming from any
event's cursor yields exactly what came after that event. Each event class names its kind
in ``event`` (a class attribute: the SSE event name and the ``"event"`` of JSON lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel

from .delivery import WaitKind
from .errors import InvalidRequestError
from .messages import JSONValue
from .records import HistoryEntry, StatusEvent

__all__ = [
    "Cursor",
    "DeltaEvent",
    "MessageEvent",
    "PendingEvent",
    "ProgressEvent",
    "RetractEvent",
    "SessionEvent",
    "StateEvent",
    "StatusEvent",
    "ToolCallPiece",
]

_CURSOR = re.compile(r"(\d{1,18})(?:\.(\d{1,18}))?")
"""Digits only (no sign), bounded so both parts fit a Postgres bigint."""


@dataclass(frozen=True, order=True)
class Cursor:
    """A resume point: ``seq``, the last message seen, and ``delta``, the last delta id
    seen. Written ``"N"`` (no delta seen) or ``"N.D"``: what SSE ``id:`` fields carry."""

    seq: int = 0
    delta: int = 0

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """``"N"`` or ``"N.D"`` (non-negative integers); anything else is refused."""
        m = _CURSOR.fullmatch(text.strip()) if isinstance(text, str) else None
        if m is None:
            raise InvalidRequestError(
                f"a cursor is N or N.D (a message seq, then a delta id): got {text!r}"
            )
        return cls(int(m.group(1)), int(m.group(2) or 0))

    def __str__(self) -> str:
        return f"{self.seq}.{self.delta}" if self.delta else str(self.seq)


class ToolCallPiece(BaseModel):
    """A piece of a tool call as the model writes it: ``arguments`` is a fragment of its
    JSON; ``id`` and ``name`` come with the pieces that carry them (usually the first)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class DeltaEvent(BaseModel):
    """A piece of a turn's reply as the model writes it. The turn's text pieces that no
    ``RetractEvent`` withdrew concatenate to its ``MessageEvent``'s content."""

    event: ClassVar[str] = "delta"
    run: int
    turn: int
    attempt: int
    text: str = ""
    tool_call: ToolCallPiece | None = None
    """Set for a piece of a tool call (``text`` is then empty)."""
    cursor: str


class RetractEvent(BaseModel):
    """Withdraws pieces shown of a turn: of one tool call (``tool_index``), or, with
    ``tool_index`` None, everything shown of the turn so far (its reply starts again)."""

    event: ClassVar[str] = "retract"
    run: int
    turn: int
    attempt: int
    tool_index: int | None = None
    tool_call_id: str | None = None
    cursor: str


class ProgressEvent(BaseModel):
    """A note a running tool reported (``ctx.progress``): note ``part`` (1, 2, ...) of
    tool call ``tool_call_id``, made in turn ``turn`` of run ``run``. It comes after the
    message that made the call and before its result; ``fraction`` is how much is done
    (0..1), if the tool said. A re-executed tool reporting a note again is not shown
    twice."""

    event: ClassVar[str] = "progress"
    run: int
    turn: int
    tool_call_id: str
    tool: str
    part: int
    note: str
    fraction: float | None = None
    cursor: str

    @property
    def note_id(self) -> str:
        """``<tool_call_id>-<part>``: the note's stable id in the chat-UI protocols (a
        note sent again replaces its first copy)."""
        return f"{self.tool_call_id}-{self.part}"


class MessageEvent(HistoryEntry):
    """A committed transcript message."""

    event: ClassVar[str] = "message"
    cursor: str


class PendingEvent(BaseModel):
    """A wait still open when read: a client tool to answer or an approval to decide
    (submit to ``root_session_id``). Opened by a tool call of the message just before it,
    by a durable tool's ask (after its note), or, in a root session's log, by a sub-agent
    anywhere in its tree (``owner_session_id`` is then that sub-agent's session)."""

    event: ClassVar[str] = "pending"
    root_session_id: str
    tool_call_id: str
    kind: WaitKind
    tool: str
    arguments: JSONValue
    output_schema: dict[str, JSONValue] | None
    deadline: datetime
    owner_session_id: str | None = None
    """The session whose run waits (None from a writer that did not say)."""


class StateEvent(BaseModel):
    """The session's typed state changed: the version committed with the result of the
    tool call whose message is just before it (``Agent(state=...)``). Like ``pending`` it
    has no cursor of its own: a reader resuming after that message has seen it."""

    event: ClassVar[str] = "state"
    version: int
    run: int | None
    turn: int | None
    tool_call_id: str | None
    state: JSONValue


SessionEvent = (
    DeltaEvent
    | RetractEvent
    | ProgressEvent
    | MessageEvent
    | PendingEvent
    | StateEvent
    | StatusEvent
)
"""One item of a session's stream; ``StatusEvent`` (a run's end, or with ``follow=False``
the status at the end of what exists), ``PendingEvent`` and ``StateEvent`` carry no
cursor."""
