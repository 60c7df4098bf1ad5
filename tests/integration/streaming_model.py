"""The integration model, streaming: ``ScriptedModel`` with scripted cuts for a few agents.

``stream_cut`` streams part of its reply, then the connection "drops" once
(``TransientModelError``); ``slow_streamer`` writes a piece every 20 ms (its end right after the last); ``stream_cut_tool`` does so in the middle of a tool call's
arguments; ``stream_fail`` fails for good mid-reply (``ModelError``). Every request is
kept in ``ASKED`` so tests can check what a continuation was asked.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator

from dbos_agents import ModelError, ModelResponse, TransientModelError
from dbos_agents.models import (
    Completed,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TextDelta,
    ToolCallDelta,
)

ASKED: list[ModelRequest] = []
CUTS: Counter[str] = Counter()
PIECES: Counter[str] = Counter()
"""``endless_streamer``: pieces yielded, by session message."""
CLOSED: Counter[str] = Counter()
"""``endless_streamer``: streams closed before their end (the caller stopped reading)."""
ENDLESS = 1500
_lock = threading.Lock()

LONG_REPLY = "The quick brown fox jumps over the lazy dog, " * 4 + "and that is all."


def _key(request: ModelRequest) -> str:
    user = next(m.content or "" for m in reversed(request.messages) if m.role == "user")
    turn = sum(1 for m in request.messages if m.role == "assistant")
    return f"{request.agent}:{user}:{turn}"


class StreamedScript:
    """Delegates to ``ScriptedModel``; cuts the first stream of the agents above."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def continues(self) -> bool:
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        with _lock:
            ASKED.append(request)
            key = _key(request)
            CUTS[key] += 1
            first = CUTS[key] == 1
        agent = request.agent
        if agent == "endless_streamer":  # a piece every 20 ms for 30 s
            async for event in _endless(_key(request)):
                yield event
            return
        if agent in ("slow_streamer", "slow_tool_streamer"):  # a piece every 20 ms
            async for event in self.inner.stream(request):
                if not isinstance(event, Completed):  # the end comes with the last piece
                    await asyncio.sleep(0.02)
                yield event
            return
        if agent not in ("stream_cut", "stream_cut_tool", "stream_fail") or not first:
            async for event in self.inner.stream(request):
                yield event
            return
        pieces: list[ModelEvent] = []
        async for event in self.inner.stream(request):
            if isinstance(event, Completed):
                break
            pieces.append(event)
        text_pieces = [p for p in pieces if isinstance(p, TextDelta)]
        if agent == "stream_cut_tool":
            # all of the text, then the tool call's first pieces, then the cut
            tool_pieces = [p for p in pieces if isinstance(p, ToolCallDelta)]
            for p in [*text_pieces, *tool_pieces[:2]]:
                yield p
            raise TransientModelError("connection reset mid tool call")
        for p in text_pieces[: len(text_pieces) // 2]:
            yield p
        if agent == "stream_fail":
            raise ModelError("the provider refused to go on")
        raise TransientModelError("connection reset mid reply")


async def _endless(key: str) -> AsyncIterator[ModelEvent]:
    done = False
    try:
        for _ in range(ENDLESS):
            await asyncio.sleep(0.02)
            PIECES[key] += 1
            yield TextDelta(text="tick ")
        done = True
        yield Completed(response=ModelResponse(text="tick " * ENDLESS))
    finally:
        if not done:
            CLOSED[key] += 1
