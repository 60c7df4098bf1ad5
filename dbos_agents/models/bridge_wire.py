"""Our transcript to Pydantic AI's messages and back, and its stream events to our deltas.

Kept apart from ``bridge`` (the adapter: clients, errors, cost) so the mapping can be read
and tested on its own. Every bridged provider sees the same request: the instructions as a
system prompt, user and tool messages as request parts, an assistant message as a response
with its thinking, text and tool calls in that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic_ai import messages as pm
from pydantic_ai.tools import ToolDefinition

from ..errors import TransientModelError
from ..messages import Message, ModelResponse, Thinking, ToolCall
from .base import ModelEvent, ModelRequest, TextDelta, ToolCallDelta, ToolSpec
from .openai_stream import CONTINUE_PROMPT

SETTINGS = (
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop_sequences",
    "presence_penalty",
    "frequency_penalty",
    "parallel_tool_calls",
)
"""The ``ModelRequest.settings`` keys passed on as Pydantic AI ``ModelSettings`` (each
provider class sends those its API has); a key whose value is ``None`` is not sent."""

_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def messages(request: ModelRequest, provider: str) -> list[pm.ModelMessage]:
    """The transcript as Pydantic AI messages; ``provider`` marks thinking blocks (their
    signatures are sent back only to the provider that wrote them). A reply to continue
    (``continue_from``) follows as the model's partial turn and ``CONTINUE_PROMPT``: a
    prefill is not portable across providers, a request is."""
    out: list[pm.ModelMessage] = []
    parts: list[pm.ModelRequestPart] = []
    if request.instructions:
        parts.append(pm.SystemPromptPart(request.instructions))
    for message in request.messages:
        if message.role == "assistant":
            if parts:
                out.append(pm.ModelRequest(parts=parts))
                parts = []
            out.append(_response(message, provider))
        elif message.role == "tool":
            parts.append(
                pm.ToolReturnPart(
                    tool_name=message.name or "",
                    content=message.content or "",
                    tool_call_id=message.tool_call_id or "",
                )
            )
        elif message.role == "system":
            parts.append(pm.SystemPromptPart(message.content or ""))
        else:
            parts.append(pm.UserPromptPart(message.content or ""))
    if parts:
        out.append(pm.ModelRequest(parts=parts))
    if request.continue_from:
        out.append(pm.ModelResponse(parts=[pm.TextPart(request.continue_from)]))
        out.append(pm.ModelRequest(parts=[pm.UserPromptPart(CONTINUE_PROMPT)]))
    return out


def _response(message: Message, provider: str) -> pm.ModelResponse:
    parts: list[pm.ModelResponsePart] = [
        pm.ThinkingPart(t.text, signature=t.signature or None, provider_name=provider)
        for t in message.thinking
        if t.redacted is None
    ]
    if message.content:
        parts.append(pm.TextPart(message.content))
    parts += [
        pm.ToolCallPart(c.name, c.arguments or "{}", tool_call_id=c.id) for c in message.tool_calls
    ]
    return pm.ModelResponse(parts=parts, provider_name=provider)


def tools(specs: list[ToolSpec]) -> list[ToolDefinition]:
    return [
        ToolDefinition(
            name=s.name,
            description=s.description or None,
            parameters_json_schema=s.parameters or _EMPTY_OBJECT,
        )
        for s in specs
    ]


class EventFolder:
    """Pydantic AI's part events to our deltas. Tool calls are numbered in the order their
    parts start; text is what the deltas said, so the reply's text is exactly what readers
    were shown."""

    def __init__(self) -> None:
        self.text = ""
        self._tool_index: dict[int, int] = {}
        self._dict_args: set[int] = set()
        self._part_text: dict[int, str] = {}

    def feed(self, event: pm.ModelResponseStreamEvent) -> Iterator[ModelEvent]:
        if isinstance(event, pm.PartStartEvent):
            yield from self._start(event.index, event.part)
        elif isinstance(event, pm.PartDeltaEvent):
            yield from self._delta(event.index, event.delta)

    def _start(self, index: int, part: pm.ModelResponsePart) -> Iterator[ModelEvent]:
        if isinstance(part, pm.TextPart):
            # A part started again replaces the old one: only an extension can be shown.
            shown = self._part_text.get(index, "")
            if not part.content.startswith(shown):
                raise TransientModelError("the provider rewrote a reply part it had streamed")
            yield from self._text(index, part.content[len(shown) :])
        elif isinstance(part, pm.ToolCallPart) and index not in self._tool_index:
            self._tool_index[index] = len(self._tool_index)
            if not isinstance(part.args, str | None):
                self._dict_args.add(index)  # whole, not pieces: it comes with the reply
            yield ToolCallDelta(
                index=self._tool_index[index],
                id=part.tool_call_id,
                name=part.tool_name,
                arguments=part.args if isinstance(part.args, str) else "",
            )

    def _delta(self, index: int, delta: pm.ModelResponsePartDelta) -> Iterator[ModelEvent]:
        if isinstance(delta, pm.TextPartDelta):
            yield from self._text(index, delta.content_delta)
        elif isinstance(delta, pm.ToolCallPartDelta) and index in self._tool_index:
            if not isinstance(delta.args_delta, str | None):
                self._dict_args.add(index)
            args = delta.args_delta
            pieces = args if isinstance(args, str) and index not in self._dict_args else ""
            if pieces or delta.tool_call_id or delta.tool_name_delta:
                yield ToolCallDelta(
                    index=self._tool_index[index],
                    id=delta.tool_call_id,
                    name=delta.tool_name_delta,
                    arguments=pieces,
                )

    def _text(self, index: int, text: str) -> Iterator[ModelEvent]:
        if text:
            self._part_text[index] = self._part_text.get(index, "") + text
            self.text += text
            yield TextDelta(text=text)


def response_of(reply: pm.ModelResponse, text: str | None = None) -> ModelResponse:
    """Our response (usage and model set by the caller); ``text``: the streamed text."""
    if text is None:
        text = "".join(p.content for p in reply.parts if isinstance(p, pm.TextPart))
    calls = [
        ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
        for p in reply.parts
        if isinstance(p, pm.ToolCallPart)
    ]
    thinking = [
        Thinking(text=p.content, signature=p.signature or "")
        for p in reply.parts
        if isinstance(p, pm.ThinkingPart)
    ]
    return ModelResponse(text=text or None, tool_calls=calls, thinking=thinking)
