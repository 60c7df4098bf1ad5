"""``ScriptedModel``: a deterministic model for tests, demos and crash drills.

The turn it plays is chosen from the transcript (the number of assistant messages so far),
never from a counter in memory, so a worker that crashed and restarted plays the same turn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..messages import ModelResponse, ToolCall, Usage
from .base import ModelRequest

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
    """

    def __init__(
        self,
        turns: Sequence[Turn] | None = None,
        *,
        respond: Responder | None = None,
        name: str = "scripted",
        usd_per_1k_tokens: float = 0.0,
        on_call: Callable[[ModelRequest], None] | None = None,
    ) -> None:
        if (turns is None) == (respond is None):
            raise ValueError("give ScriptedModel either turns or respond, not both")
        self._turns = list(turns) if turns is not None else None
        self._respond = respond
        self._name = name
        self._price = usd_per_1k_tokens
        self._on_call = on_call

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._on_call is not None:
            self._on_call(request)
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
        response.tool_calls = [
            c if c.id else c.model_copy(update={"id": f"call_{index + 1}_{i + 1}"})
            for i, c in enumerate(response.tool_calls)
        ]
        if response.usage == Usage():
            response.usage = self._estimate(request, response)
        response.model = response.model or self._name
        return response

    def _estimate(self, request: ModelRequest, response: ModelResponse) -> Usage:
        prompt = len(request.instructions) + sum(len(m.content or "") for m in request.messages)
        output = len(response.text or "") + sum(
            len(c.name) + len(c.arguments) for c in response.tool_calls
        )
        inp, out = math.ceil(prompt / 4) + 1, math.ceil(output / 4) + 1
        return Usage(
            input_tokens=inp,
            output_tokens=out,
            cost_usd=round((inp + out) * self._price / 1000, 10),
        )
