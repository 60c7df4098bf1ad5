"""``ScriptedModel``: a deterministic model for tests, demos and crash drills.

The turn it plays is chosen from the transcript (the number of assistant messages so far),
never from a counter in memory, so a worker that crashed and restarted plays the same turn.
``stream`` plays the same turn in pieces, so streaming and crashes mid-stream can be
drilled without a model server.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..messages import ModelResponse, ToolCall, Usage
from .base import Completed, ModelEvent, ModelRequest, TextDelta, ToolCallDelta

Turn = str | ModelResponse
Responder = Callable[[ModelRequest], Turn]


def call(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str = "") -> ToolCall:
    """A scripted tool call. ``arguments`` may be a dict or raw (even malformed) JSON text."""
    raw = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
    return ToolCall(id=id, name=name, arguments=raw)


def calls(*tool_calls: ToolCall, text: str | None = None) -> ModelResponse:
    """A scripted turn that requests one or more tool calls (run concurrently)."""
    return ModelResponse(text=text, tool_calls=list(tool_calls))


class ScriptedModel:
    """Plays a fixed list of turns, or asks ``respond(request)`` for each turn.

    A ``str`` turn is a final answer; a ``ModelResponse`` may request tool calls. Tool calls
    without an id get ``call_{turn}_{index}``. Usage is estimated from text length (about
    four characters a token) and priced with ``usd_per_1k_tokens`` so budgets can be tested.

    ``stream`` yields the turn's text in pieces of ``chunk_chars`` characters, then each tool
    call (id and name first, arguments in pieces), sleeping ``pace_sec`` between pieces so a
    test can kill a worker mid-reply; its ``Completed`` holds what ``complete`` returns.
    With ``request.continue_from`` set it yields only the rest of the scripted text after
    that prefix; when the scripted text does not start with the prefix (the script changed,
    or ``respond`` answers differently now), it yields the whole text, as a model that
    ignored the prefix would.
    """

    def __init__(
        self,
        turns: Sequence[Turn] | None = None,
        *,
        respond: Responder | None = None,
        name: str = "scripted",
        usd_per_1k_tokens: float = 0.0,
        on_call: Callable[[ModelRequest], None] | None = None,
        chunk_chars: int = 8,
        pace_sec: float = 0.0,
    ) -> None:
        if (turns is None) == (respond is None):
            raise ValueError("give ScriptedModel either turns or respond, not both")
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be at least 1, not {chunk_chars}")
        if pace_sec < 0:
            raise ValueError(f"pace_sec must not be negative, not {pace_sec}")
        self._chunk = chunk_chars
        self._pace = pace_sec
        self._turns = list(turns) if turns is not None else None
        self._respond = respond
        self._name = name
        self._price = usd_per_1k_tokens
        self._on_call = on_call

    @property
    def name(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        """``scripted``: what the loop records as the provider of the turns it plays."""
        return "scripted"

    @property
    def continues(self) -> bool:
        """True: ``stream`` honours ``continue_from``."""
        return True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._on_call is not None:
            self._on_call(request)
        return self._play(request, prefix=None)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._on_call is not None:
            self._on_call(request)
        response = self._play(request, prefix=request.continue_from or None)
        for n, event in enumerate(self._pieces(response)):
            if n and self._pace:
                await asyncio.sleep(self._pace)
            yield event
        yield Completed(response=response)

    def _play(self, request: ModelRequest, *, prefix: str | None) -> ModelResponse:
        index = sum(1 for m in request.messages if m.role == "assistant")
        if self._respond is not None:
            turn = self._respond(request)
        else:
            assert self._turns is not None
            if index >= len(self._turns):
                raise ModelError(
                    f"ScriptedModel has {len(self._turns)} turns; turn {index + 1} was requested"
                )
            turn = self._turns[index]
        response = ModelResponse(text=turn) if isinstance(turn, str) else turn.model_copy()
        if prefix is not None and response.text is not None and response.text.startswith(prefix):
            response.text = response.text[len(prefix) :]  # what a continuing model adds
        response.tool_calls = [
            c if c.id else c.model_copy(update={"id": f"call_{index + 1}_{i + 1}"})
            for i, c in enumerate(response.tool_calls)
        ]
        if response.usage == Usage():
            response.usage = self._estimate(request, response, prefix or "")
        response.model = response.model or self._name
        return response

    def _pieces(self, response: ModelResponse) -> list[TextDelta | ToolCallDelta]:
        """The response as a model would stream it: text, then each tool call in turn."""
        size = self._chunk
        text = response.text or ""
        pieces: list[TextDelta | ToolCallDelta] = [
            TextDelta(text=text[i : i + size]) for i in range(0, len(text), size)
        ]
        for index, c in enumerate(response.tool_calls):
            pieces.append(ToolCallDelta(index=index, id=c.id, name=c.name))
            pieces += [
                ToolCallDelta(index=index, arguments=c.arguments[i : i + size])
                for i in range(0, len(c.arguments), size)
            ]
        return pieces

    def _estimate(self, request: ModelRequest, response: ModelResponse, prefix: str) -> Usage:
        """About four characters a token; a continued reply's prefix is sent back as input."""
        prompt = len(request.instructions) + sum(len(m.content or "") for m in request.messages)
        prompt += len(prefix)
        output = len(response.text or "") + sum(
            len(c.name) + len(c.arguments) for c in response.tool_calls
        )
        inp, out = math.ceil(prompt / 4) + 1, math.ceil(output / 4) + 1
        return Usage(
            input_tokens=inp,
            output_tokens=out,
            cost_usd=round((inp + out) * self._price / 1000, 10),
        )
