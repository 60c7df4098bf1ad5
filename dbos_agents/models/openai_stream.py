"""The streaming half of ``OpenAIModel``: continuing a cut reply, and chunks into events.

Kept apart from ``openai.py`` so the request/response adapter stays readable; nothing here
opens a connection. ``OpenAIModel.stream`` sends the request and feeds each
``chat.completion.chunk`` to a ``ChunkAssembler``.

Two ways to ask a chat-completions server to continue a reply already shown to a user:

- ``"prefix"``: the partial reply is the last message, an assistant message with
  ``"prefix": true`` (assistant prefill, as DeepSeek and Mistral accept it). The server
  writes on from the last character and returns only the new text. Exact, but only servers
  that support prefill honour it; others may ignore the flag and answer from scratch.
- ``"request"``: the partial reply is an assistant message followed by a user message,
  ``CONTINUE_PROMPT``. Any server accepts it; the model is asked, not forced, to carry on
  without repeating itself.
"""

from __future__ import annotations

from typing import Literal, cast

from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

from ..messages import ModelResponse, ToolCall, Usage
from .base import TextDelta, ToolCallDelta

__all__ = ["CONTINUE_PROMPT", "ChunkAssembler", "Continuation", "continued"]

CONTINUE_PROMPT = "Continue your previous reply exactly where it stopped. Do not repeat any of it."
"""The user message that follows the partial reply in the ``"request"`` continuation style."""

Continuation = Literal["prefix", "request"]


def continued(
    messages: list[ChatCompletionMessageParam], partial: str, style: Continuation
) -> list[ChatCompletionMessageParam]:
    """``messages`` with the partial reply appended so that the answer is its continuation."""
    if style == "prefix":
        # ``prefix`` is not in the SDK's types; the SDK sends unknown keys through as they are.
        prefill = cast(
            ChatCompletionMessageParam,
            {"role": "assistant", "content": partial, "prefix": True},
        )
        return [*messages, prefill]
    if style == "request":
        return [
            *messages,
            {"role": "assistant", "content": partial},
            {"role": "user", "content": CONTINUE_PROMPT},
        ]
    raise ValueError(f"unknown continuation style {style!r}: use 'prefix' or 'request'")


class _Call:
    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class ChunkAssembler:
    """Turns ``chat.completion.chunk`` objects into deltas and keeps what the final response
    needs, so the ``Completed`` event agrees with the deltas by construction."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _Call] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.model: str | None = None
        self.finished = False
        """True once a choice carried a ``finish_reason``: the reply is whole, not cut."""

    def feed(self, chunk: ChatCompletionChunk) -> list[TextDelta | ToolCallDelta]:
        self.model = chunk.model or self.model
        if chunk.usage is not None:  # the last chunk (``include_usage``), with no choices
            self.input_tokens = chunk.usage.prompt_tokens
            self.output_tokens = chunk.usage.completion_tokens
        events: list[TextDelta | ToolCallDelta] = []
        for choice in chunk.choices:
            if choice.index != 0:  # ``n`` > 1 is never asked for; the first choice is the reply
                continue
            delta = choice.delta
            # A refusal takes the place of the text, as in ``complete``.
            for text in (delta.content, delta.refusal):
                if text:
                    self._text.append(text)
                    events.append(TextDelta(text=text))
            for piece in delta.tool_calls or []:
                call = self._calls.setdefault(piece.index, _Call())
                function = piece.function
                name = function.name if function is not None else None
                arguments = (function.arguments if function is not None else None) or ""
                call.id = piece.id or call.id
                call.name = name or call.name
                call.arguments.append(arguments)
                if piece.id or name or arguments:
                    events.append(
                        ToolCallDelta(
                            index=piece.index, id=piece.id, name=name, arguments=arguments
                        )
                    )
            if choice.finish_reason is not None:
                self.finished = True
        return events

    def response(self, usage: Usage, model: str) -> ModelResponse:
        """The whole reply. ``text`` is ``None`` when no text came (a tool-call-only turn)."""
        return ModelResponse(
            text="".join(self._text) or None,
            tool_calls=[
                ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments))
                for _, c in sorted(self._calls.items())
            ],
            usage=usage,
            model=model,
        )
