"""The model protocol: transcript and tool schemas in, text, tool calls and usage out.

One async method keeps adapters small. Adapters raise ``TransientModelError`` for failures
worth retrying (429, 5xx, timeouts) and ``ModelError`` for the rest; the runtime's model
step retries only the former, with backoff.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

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
