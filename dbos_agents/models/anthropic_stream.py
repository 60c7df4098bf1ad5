"""The reply half of ``AnthropicModel``: a Message (whole, or as streamed events) into our
``ModelResponse`` and its deltas.

Nothing here opens a connection. Content blocks map as follows: ``text`` is the reply's
text (a ``TextDelta`` per ``text_delta``), ``tool_use`` is a ``ToolCall`` (its id and name
in one ``ToolCallDelta``, its ``input_json_delta`` pieces in more; the delta's index is the
call's position among the reply's calls, not the block's), ``thinking`` and
``redacted_thinking`` are kept as ``Thinking`` (never text, never a delta). Any
``stop_reason`` ends a reply whole; ``max_tokens`` leaves it cut where the limit fell
(as chat completions' ``length``: a tool call cut there has arguments that do not parse,
and the loop tells the model so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from anthropic.types import (
    Message as AnthropicMessage,
)
from anthropic.types import (
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

from ..messages import ModelResponse, Thinking, ToolCall, Usage
from .anthropic_request import PrefillTail
from .base import TextDelta, ToolCallDelta

__all__ = ["EventAssembler", "Tokens", "response_of"]


@dataclass
class Tokens:
    """A reply's token counts as Anthropic reports them (``input`` excludes the cached)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


def response_of(message: AnthropicMessage, tail: str) -> tuple[ModelResponse, Tokens]:
    """A whole (non-streamed) Message as our response, without usage, and its tokens."""
    text: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[Thinking] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            text.append(block.text)
        elif isinstance(block, ToolUseBlock):
            calls.append(ToolCall(id=block.id, name=block.name, arguments=_arguments(block.input)))
        elif isinstance(block, ThinkingBlock):
            thinking.append(Thinking(text=block.thinking, signature=block.signature))
        elif isinstance(block, RedactedThinkingBlock):
            thinking.append(Thinking(redacted=block.data))
    trim = PrefillTail(tail)
    joined = trim.feed("".join(text)) + trim.flush()
    u = message.usage
    tokens = Tokens(
        u.input_tokens,
        u.output_tokens,
        u.cache_read_input_tokens or 0,
        u.cache_creation_input_tokens or 0,
    )
    response = ModelResponse(
        text=joined or None, tool_calls=calls, thinking=thinking, model=message.model
    )
    return response, tokens


class _Call:
    def __init__(self, index: int, id: str, name: str) -> None:
        self.index = index
        self.id = id
        self.name = name
        self.arguments: list[str] = []


class _Thought:
    def __init__(self, redacted: str | None = None) -> None:
        self.text: list[str] = []
        self.signature = ""
        self.redacted = redacted


class EventAssembler:
    """Turns raw stream events into deltas and keeps what the final response needs, so
    ``response`` agrees with the deltas by construction."""

    def __init__(self, tail: str = "") -> None:
        self._trim = PrefillTail(tail)
        self._text: list[str] = []
        self._calls: dict[int, _Call] = {}  # by content block index
        self._thoughts: dict[int, _Thought] = {}
        self.tokens = Tokens()
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.finished = False
        """True once ``message_stop`` arrived: the reply is whole, not cut."""

    def feed(self, event: RawMessageStreamEvent) -> list[TextDelta | ToolCallDelta]:
        if event.type == "message_start":
            self.model = event.message.model or self.model
            u = event.message.usage
            self.tokens = Tokens(
                u.input_tokens,
                u.output_tokens,
                u.cache_read_input_tokens or 0,
                u.cache_creation_input_tokens or 0,
            )
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                call = _Call(len(self._calls), block.id, block.name)
                self._calls[event.index] = call
                return [ToolCallDelta(index=call.index, id=block.id, name=block.name)]
            if block.type == "thinking":
                self._thoughts[event.index] = _Thought()
            elif block.type == "redacted_thinking":
                self._thoughts[event.index] = _Thought(redacted=block.data)
            elif block.type == "text" and block.text:
                return self._add_text(block.text)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                return self._add_text(delta.text)
            if delta.type == "input_json_delta":
                known = self._calls.get(event.index)
                if known is not None and delta.partial_json:
                    known.arguments.append(delta.partial_json)
                    return [ToolCallDelta(index=known.index, arguments=delta.partial_json)]
            elif delta.type == "thinking_delta":
                self._thought(event.index).text.append(delta.thinking)
            elif delta.type == "signature_delta":
                self._thought(event.index).signature += delta.signature
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            d = event.usage  # cumulative counts; the input ones only when they changed
            self.tokens.output = d.output_tokens
            if d.input_tokens is not None:
                self.tokens.input = d.input_tokens
            if d.cache_read_input_tokens is not None:
                self.tokens.cache_read = d.cache_read_input_tokens
            if d.cache_creation_input_tokens is not None:
                self.tokens.cache_write = d.cache_creation_input_tokens
        elif event.type == "message_stop":
            self.finished = True
            rest = self._trim.flush()
            if rest:
                self._text.append(rest)
                return [TextDelta(text=rest)]
        return []

    def response(self, usage: Usage, model: str) -> ModelResponse:
        """The whole reply. ``text`` is ``None`` when no text came (a tool-call-only turn)."""
        return ModelResponse(
            text="".join(self._text) or None,
            tool_calls=[
                ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments) or "{}")
                for c in sorted(self._calls.values(), key=lambda c: c.index)
            ],
            thinking=[
                Thinking(redacted=t.redacted)
                if t.redacted is not None
                else Thinking(text="".join(t.text), signature=t.signature)
                for _, t in sorted(self._thoughts.items())
            ],
            usage=usage,
            model=model,
        )

    def _add_text(self, text: str) -> list[TextDelta | ToolCallDelta]:
        text = self._trim.feed(text)
        if not text:
            return []
        self._text.append(text)
        return [TextDelta(text=text)]

    def _thought(self, index: int) -> _Thought:
        return self._thoughts.setdefault(index, _Thought())


def _arguments(value: object) -> str:
    """A tool_use input as our arguments text: JSON of it, or the text itself when the
    provider sent a string (malformed input passes through; the loop refuses it)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
