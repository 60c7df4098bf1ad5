"""Asking the model for a turn's reply: complete, or streamed to readers as it is written.

Streamed, every piece goes to the delta log (``live.deltas``, through the worker's
``Announcer``) the moment the adapter yields it, tagged with its run, turn, attempt and
part. What readers were shown is then a promise: the turn's message is exactly that text.

A stream can be cut: the worker dies (the turn runs again in a new execution, which reads
what the old one logged) or the adapter raises ``TransientModelError`` mid-stream (the turn
retries with backoff). Either way the next attempt keeps the text already shown and asks a
model that ``continues`` to extend it (``ModelRequest.continue_from``); a model that cannot
is asked from the start, and the shown text is withdrawn first with a ``retract`` delta.
An interrupt mid-reply closes the model's stream at once (``run_end``) and withdraws it.
Pieces of a tool call cannot be continued: they are withdrawn, and the call comes whole
from the next attempt. Each attempt's usage counts; a cut attempt's output is estimated
from the text it wrote (four characters a token), its input is unknown.

Every piece names its writer, this execution (``fence.Writer``): when Postgres refuses
them (the run was adopted while this execution still ran), the model's stream is closed
as for an interrupt and ``StaleWriter`` raised; nothing is withdrawn or recorded. The
turn's record carries at least one piece (its last, written again: a no-op), so the
record is fenced on this execution too.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field

from .. import storable
from ..errors import ModelError, TransientModelError
from ..live import deltas
from ..live.announce import Announcer
from ..messages import ModelResponse, Usage
from ..models.base import Completed, ModelRequest, StreamingModel, TextDelta, ToolCallDelta
from ..outcome import RunSpec
from ..store.fence import StaleWriter, Writer
from .calls.base import RunInterrupted
from .context import get_context
from .run_end import Ended, unless_ended

log = logging.getLogger("dbos_agents")


@dataclass
class Reply:
    """The model's reply and the turn's deltas still to be written with its record."""

    response: ModelResponse
    rows: list[deltas.Delta] = field(default_factory=list)
    stream: TurnStream | None = None
    """The turn's stream, to withdraw it if the turn cannot be recorded."""
    staged: bool = False
    """Statements the turn staged (``Announcer.stage``) are still unwritten: its record
    writes them."""


def streams(agent: str) -> bool:
    """Whether this agent's replies stream (its model can, and the setting allows it)."""
    return get_context().streaming_model(agent) is not None


class TurnStream:
    """The turn's pieces, numbered and handed to the announcer as they come."""

    def __init__(
        self,
        spec: RunSpec,
        turn: int,
        announcer: Announcer,
        logged: list[deltas.Delta],
        writer: Writer | None = None,
    ) -> None:
        self.spec, self.turn, self.announcer, self.writer = spec, turn, announcer, writer
        shown = deltas.partial(logged)
        self.shown = shown.text
        """Text shown in earlier attempts and kept (the continuation's prefix)."""
        self.open_tools = shown.open_tools
        self.attempt = shown.attempt
        self.part = 0
        self.text = ""
        """This attempt's text."""
        self.cut_usage = Usage(output_tokens=math.ceil(len(self.shown) / 4))
        self.first_piece_at: float | None = None
        self.last: deltas.Delta | None = None
        """The last piece handed on (the record's fence when all were flushed)."""

    def live(self) -> bool:
        """Whether readers have been shown this reply for longer than a batch interval
        (a reply that is over sooner goes whole with the turn's record)."""
        first = self.first_piece_at
        return first is not None and time.monotonic() - first >= self.announcer.interval

    def next_attempt(self, continues: bool) -> None:
        """Start an attempt: withdraw what cannot be continued."""
        self.shown += self.text
        self.text = ""
        self.attempt += 1
        self.part = 0
        for index in list(self.open_tools):
            self._add("retract", tool_index=index, tool_call_id=self.open_tools.pop(index))
        if self.shown and not continues:
            self._add("retract")
            self.shown = ""

    def add_text(self, text: str) -> None:
        text = storable.text(text)  # as the message will hold it
        if text:
            self.text += text
            self._add("text", text=text)

    def add_tool_call(self, d: ToolCallDelta) -> None:
        prior = self.open_tools.get(d.index)
        self.open_tools[d.index] = d.id or prior
        self._add(
            "tool_call",
            text=storable.text(d.arguments),
            tool_index=d.index,
            tool_call_id=storable.optional_text(d.id),
            name=storable.optional_text(d.name),
        )

    def cut(self) -> None:
        """This attempt ended without a reply: its text stays shown, its usage estimated."""
        self.cut_usage += Usage(output_tokens=math.ceil(len(self.text) / 4))

    def withdraw(self) -> None:
        """Nothing of this turn will be final (the model failed for good, the run was
        fenced): readers are told so."""
        self.attempt += 1
        self.part = 0
        self._add("retract")

    def _add(
        self,
        kind: deltas.Kind,
        *,
        text: str = "",
        tool_index: int | None = None,
        tool_call_id: str | None = None,
        name: str | None = None,
    ) -> None:
        row = deltas.Delta(
            run_seq=self.spec["run_seq"],
            turn=self.turn,
            attempt=self.attempt,
            part=self.part,
            kind=kind,
            text=text,
            tool_index=tool_index,
            tool_call_id=tool_call_id,
            name=name,
            writer=self.writer,
        )
        self.last = row
        self.part += 1
        if self.first_piece_at is None:
            self.first_piece_at = time.monotonic()
        self.announcer.append(self.spec["session_id"], [row])


async def respond(
    spec: RunSpec,
    turn: int,
    req: ModelRequest,
    logged: list[deltas.Delta] | None,
    writer: Writer | None = None,
) -> Reply:
    """The reply to ``req`` (see the module doc). ``logged``: what an earlier execution of
    this turn streamed (``None`` when none can have); ``writer``: this execution, whose
    pieces are fenced on it. ``TransientModelError`` is retried with backoff (or after the
    provider's ``retry_after``, when longer: ``_retry_wait``), up to
    ``model_max_attempts``, then becomes ``ModelError``; ``StaleWriter`` when the
    execution lost the run."""
    announcer = get_context().ledger.announcer
    if writer is None or get_context().streaming_model(req.agent) is None:
        return await _respond(spec, turn, req, logged, writer, None)
    stale = announcer.refusal(writer)
    try:
        return await _respond(spec, turn, req, logged, writer, stale)
    finally:
        announcer.release(writer)


async def _respond(
    spec: RunSpec,
    turn: int,
    req: ModelRequest,
    logged: list[deltas.Delta] | None,
    writer: Writer | None,
    stale: asyncio.Future[None] | None,
) -> Reply:
    ctx = get_context()
    model = ctx.model_for(req.agent)
    streaming = ctx.streaming_model(req.agent)
    stream: TurnStream | None = None
    if streaming is not None:
        stream = TurnStream(spec, turn, ctx.ledger.announcer, logged or [], writer)
    attempts = max(1, ctx.settings.model_max_attempts)
    delay = ctx.settings.model_backoff_initial_sec
    for attempt in range(1, attempts + 1):
        try:
            if streaming is None or stream is None:
                return Reply(await model.complete(req))
            return await unless_ended(spec, _streamed(streaming, req, stream), stale=stale)
        except Ended:
            # Interrupted mid-reply: the model's stream is closed now (no more tokens paid
            # for or shown), and readers are told the reply will not be final.
            raise _interrupted(stream, turn) from None
        except TransientModelError as exc:
            if stream is not None:
                stream.cut()
            if attempt == attempts:
                if stream is not None:
                    stream.withdraw()
                raise ModelError(
                    f"model {model.name!r} failed {attempts} times; last error: {exc}"
                ) from exc
            cap = ctx.settings.model_retry_after_max_sec
            wait, why = _retry_wait(delay, exc.retry_after, cap)
            log.warning(
                f"model call failed, retrying in {wait:g}s{why}",
                extra={
                    "event": "model_retry",
                    "session_id": spec["session_id"],
                    "turn": turn,
                    "attempt": attempt,
                    "error": str(exc),
                    "retry_after": exc.retry_after,
                    "wait_sec": wait,
                },
            )
            try:  # an interrupt, even one heard during the failed attempt, ends the wait
                await unless_ended(spec, asyncio.sleep(wait), look_first=True, stale=stale)
            except Ended:
                raise _interrupted(stream, turn) from None
            delay = min(delay * 2, ctx.settings.model_backoff_max_sec)
        except ModelError:
            if stream is not None:
                stream.withdraw()
            raise
    raise AssertionError("unreachable")


def _interrupted(stream: TurnStream | None, turn: int) -> RunInterrupted:
    """The run was interrupted during the turn: readers are told no reply of it is final."""
    if stream is not None:
        stream.withdraw()
    return RunInterrupted(f"turn {turn}")


def _retry_wait(delay: float, retry_after: float | None, cap: float) -> tuple[float, str]:
    """The wait before the next attempt, and why (for the log line): the backoff's
    ``delay``, or the provider's ``retry_after`` when longer, which counts for no more than
    ``cap`` (``model_retry_after_max_sec``): a provider asking for an hour would otherwise
    hold the worker's slot for an hour."""
    if retry_after is None or retry_after <= delay:
        return delay, ""
    if retry_after > cap:
        why = f" (the provider asked for {retry_after:g}s, more than model_retry_after_max_sec)"
        return max(delay, cap), why
    return retry_after, " as the provider asked"


async def _streamed(model: StreamingModel, req: ModelRequest, stream: TurnStream) -> Reply:
    continues = model.continues
    stream.next_attempt(continues)
    if stream.shown:
        req = req.model_copy(update={"continue_from": stream.shown})
    completed: ModelResponse | None = None
    async for event in model.stream(req):
        if isinstance(event, TextDelta):
            stream.add_text(event.text)
        elif isinstance(event, ToolCallDelta):
            stream.add_tool_call(event)
        elif isinstance(event, Completed):
            completed = event.response
    if completed is None:
        raise TransientModelError(f"model {model.name!r} ended its stream without a reply")
    text = stream.shown + stream.text  # what readers saw is the message
    response = completed.model_copy(
        update={"text": text or None, "usage": completed.usage + stream.cut_usage}
    )
    stream.open_tools.clear()  # final now: they come whole with the turn's message
    sid = stream.spec["session_id"]
    if stream.live():
        await stream.announcer.written(sid)
    rows = await stream.announcer.settle(sid)
    if stream.announcer.refused(stream.writer):
        raise StaleWriter(sid)
    if not rows and stream.last is not None and stream.writer is not None:
        rows = [stream.last]  # written already: only the record's fence
    return Reply(response, rows, stream, staged=stream.announcer.take_staged(sid))
