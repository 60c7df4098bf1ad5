"""The inbox's timeline of a session (``AgentClient.timeline``: runs, model turns, tool calls
and waits from our own records), placed on one time axis for the page: each event's offset,
duration and bar; a model turn begins where the step before it in its session ended."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from ...records import TimelineEvent


@dataclass(frozen=True)
class Row:
    event: TimelineEvent
    began: datetime
    left: float = 0.0
    """Where its bar begins and how wide it is, in percent of the session's span."""
    width: float = 0.0

    @property
    def seconds(self) -> float | None:
        ended = self.event.ended
        return None if ended is None else (ended - self.began).total_seconds()


@dataclass(frozen=True)
class Timeline:
    rows: list[Row]
    began: datetime | None
    ended: datetime | None
    input_tokens: int
    output_tokens: int
    cost_usd: float

    @property
    def seconds(self) -> float:
        if self.began is None or self.ended is None:
            return 0.0
        return (self.ended - self.began).total_seconds()


_ORDER = {"run": 0, "turn": 1, "tool": 2, "wait": 3}


def build(events: list[TimelineEvent], now: datetime) -> Timeline:
    """Rows in time order, each with its bar (``now`` ends what is still open)."""
    rows = sorted(_placed_turns(events), key=lambda r: (r.began, _ORDER[r.event.kind]))
    if not rows:
        return Timeline([], None, None, 0, 0, 0.0)
    began = rows[0].began
    ended = max(r.event.ended or now for r in rows)
    total = max((ended - began).total_seconds(), 1e-3)
    placed = []
    for r in rows:
        start = (r.began - began).total_seconds()
        stop = ((r.event.ended or now) - began).total_seconds()
        width = max(100 * (stop - start) / total, 0.4)
        placed.append(replace(r, left=round(100 * start / total, 2), width=round(width, 2)))
    runs = [r.event for r in placed if r.event.kind == "run"]
    return Timeline(
        rows=placed,
        began=began,
        ended=ended,
        input_tokens=sum(e.input_tokens or 0 for e in runs),
        output_tokens=sum(e.output_tokens or 0 for e in runs),
        cost_usd=round(sum(e.cost_usd or 0.0 for e in runs), 6),
    )


def _placed_turns(events: list[TimelineEvent]) -> list[Row]:
    """A turn began at the latest run start or call end of its session before it was
    recorded."""
    marks: dict[str, list[datetime]] = {}
    for e in events:
        mark = e.began if e.kind == "run" else e.ended if e.kind == "tool" else None
        if mark is not None:
            marks.setdefault(e.session_id, []).append(mark)
    rows = []
    for e in events:
        began = e.began
        if e.kind == "turn":
            before = [m for m in marks.get(e.session_id, []) if m <= e.began]
            began = max(before, default=e.began)
        rows.append(Row(e, began))
    return rows
