"""The model protocol: transcript and tool schemas in, text, tool calls and usage out.

``complete`` keeps adapters small; ``stream`` (optional) lets users read a reply as it is
written. Adapters raise ``TransientModelError`` for failures
worth retrying (429, 5xx, timeouts) and ``ModelError`` for the rest; the runtime's model
step retries only the former, with backoff.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ..messages import Message, ModelResponse


class ToolSpec(BaseModel):
    """A tool as the model sees it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class ModelRequest(BaseModel):
    """Everything one model call needs; JSON-serializable so it can be logged and replayed."""

    agent: str
    instructions: str = ""
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    continue_from: str | None = None
    """Text of the reply already shown to users: the model must continue it, not repeat it
    (set after a crash or a retried error mid-stream; only for a model that ``continues``)."""


@runtime_checkable
class Model(Protocol):
    """A language model adapter."""

    @property
    def name(self) -> str:
        """A short name recorded with usage rows (for example ``gpt-4.1-mini``)."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one model call."""
        ...


class TextDelta(BaseModel):
    """A piece of the reply's text, in order."""

    kind: Literal["text"] = "text"
    text: str


class ToolCallDelta(BaseModel):
    """A piece of tool call ``index``: its id and name arrive once, its arguments in pieces."""

    kind: Literal["tool_call"] = "tool_call"
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class Completed(BaseModel):
    """The last event of a stream: the whole response, with usage.

    Its text is the concatenation of the stream's text deltas (after ``continue_from``: only
    the new text), its tool calls those of the tool-call deltas.
    """

    kind: Literal["completed"] = "completed"
    response: ModelResponse


ModelEvent = TextDelta | ToolCallDelta | Completed


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream its reply. The runtime streams when a model has ``stream``."""

    @property
    def continues(self) -> bool:
        """True when the adapter honours ``ModelRequest.continue_from``; otherwise a reply cut
        by a crash is withdrawn and asked again from the start."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Make one model call, yielding deltas and then exactly one ``Completed``."""
        ...
