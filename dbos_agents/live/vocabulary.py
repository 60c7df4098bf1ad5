"""One read of a session's live log, merged: messages and deltas in one order, with cursors.

A delta written after message ``S`` (its ``after_seq``) sorts after that message and
before message ``S + 1``; deltas among themselves by id. A tool's progress note is a
delta row too (``ProgressEvent``): it sorts, and moves the cursor, like a model piece. A read takes at most ``limit``
of each; when a list came back full, whatever sorts after its last row is held back (the
next read returns it), or a message could be sent before deltas that precede it and a
reader resuming from that message's cursor would skip them.

A delta written before the reader's last message precedes it in the log: the reader has
seen it (a cursor ``"N"`` means everything up to message N). It is passed over, moving
the cursor, so a reader resuming from a message seq is not sent every older turn again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..events import (
    Cursor,
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    StateEvent,
    ToolCallPiece,
)
from ..ids import ask_id
from ..records import HistoryEntry
from .deltas import Logged, is_wait_mark


@dataclass(frozen=True)
class Merged:
    events: list[SessionEvent]
    """In log order; no status (the caller adds it)."""
    cursor: Cursor
    """After the last event (the read's own cursor when there was none)."""
    complete: bool
    """Nothing was held back: the read reached the end of the log as of its snapshot."""


def _key(item: HistoryEntry | Logged) -> tuple[int, int, int]:
    if isinstance(item, HistoryEntry):
        return (item.seq, 0, 0)
    return (item.after_seq, 1, item.id)


def merge(
    after: Cursor,
    messages: Sequence[HistoryEntry],
    deltas: Sequence[Logged],
    *,
    limit: int,
    pending: Mapping[str, PendingEvent] | None = None,
    states: Mapping[str, StateEvent] | None = None,
) -> Merged:
    """``messages`` (``seq > after.seq``) and ``deltas`` (``id > after.delta``), each at
    most ``limit`` and in order, as events; ``pending``: the still-open waits by tool call
    id, each sent right after the message whose call opened it (a durable tool's ask: after
    the progress note it opened with, ``{call id}.ask{note}``; a sub-agent's wait: where its
    mark is, with no event of the mark's own); ``states``: the state
    versions by tool call id, each right after that call's result message."""
    items: list[HistoryEntry | Logged] = sorted([*messages, *deltas], key=_key)
    full = [rows[-1] for rows in (messages, deltas) if len(rows) >= limit]
    if full:
        cutoff = min(_key(last) for last in full)
        items = [i for i in items if _key(i) <= cutoff]
    seq, delta = after.seq, after.delta
    events: list[SessionEvent] = []
    for item in items:
        if isinstance(item, HistoryEntry):
            seq = item.seq
            cursor = str(Cursor(seq, delta))
            events.append(MessageEvent(**item.model_dump(), cursor=cursor))
            for call in item.tool_calls:
                wait = (pending or {}).get(call.id)
                if wait is not None:
                    events.append(wait)
            state = (states or {}).get(item.tool_call_id or "") if item.role == "tool" else None
            if state is not None:
                events.append(state)
        else:
            delta = item.id
            if item.after_seq < after.seq:  # it precedes a message the reader saw
                continue
            if is_wait_mark(item):  # a sub-agent's wait: shown alone, if open
                wait = (pending or {}).get(item.tool_call_id or "")
                if wait is not None:
                    events.append(wait)
                continue
            events.append(_delta_event(item, str(Cursor(seq, delta))))
            if item.kind == "progress":  # a durable tool's ask: its wait, if open
                wait = (pending or {}).get(ask_id(item.tool_call_id or "", item.part))
                if wait is not None:
                    events.append(wait)
    return Merged(events, Cursor(seq, delta), complete=not full)


def shown(after: Cursor, deltas: Sequence[Logged]) -> tuple[list[SessionEvent], Cursor]:
    """``merge`` of new deltas alone (no message, no wait, nothing held back), as a stream
    shows the rows its feed hands over: the same events and cursor, without the sorting and
    cutting a read needs (a stream shows this for every piece)."""
    seq, delta = after.seq, after.delta
    events: list[SessionEvent] = []
    for item in sorted(deltas, key=_key) if len(deltas) > 1 else deltas:
        delta = item.id
        if item.after_seq < seq or is_wait_mark(item):  # seen, or a wait (read in full)
            continue
        events.append(_delta_event(item, f"{seq}.{delta}"))
    return events, Cursor(seq, delta)


def _delta_event(d: Logged, cursor: str) -> DeltaEvent | RetractEvent | ProgressEvent:
    if d.kind == "progress":
        assert d.tool_call_id is not None and d.name is not None
        return ProgressEvent(
            run=d.run_seq,
            turn=d.turn,
            tool_call_id=d.tool_call_id,
            tool=d.name,
            part=d.part,
            note=d.text,
            fraction=d.fraction,
            cursor=cursor,
        )
    if d.kind == "retract":
        return RetractEvent(
            run=d.run_seq,
            turn=d.turn,
            attempt=d.attempt,
            tool_index=d.tool_index,
            tool_call_id=d.tool_call_id,
            cursor=cursor,
        )
    piece = None
    if d.kind == "tool_call":
        assert d.tool_index is not None
        piece = ToolCallPiece(index=d.tool_index, id=d.tool_call_id, name=d.name, arguments=d.text)
    return DeltaEvent(
        run=d.run_seq,
        turn=d.turn,
        attempt=d.attempt,
        text="" if piece else d.text,
        tool_call=piece,
        cursor=cursor,
    )
