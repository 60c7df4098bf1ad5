"""Transcript types shared by models, the runtime and the store.

Everything here crosses a DBOS step boundary as plain JSON (``model_dump(mode="json")``) and
round-trips exactly, so a replayed step yields the same objects as the first run.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

Role = Literal["system", "user", "assistant", "tool"]
JSONValue = JsonValue
"""A value that ``json.dumps`` accepts (dict, list, str, int, float, bool, None)."""


class ToolCall(BaseModel):
    """One tool call requested by the model. ``arguments`` is the raw JSON text the model
    produced: it may be malformed, and that becomes a validation result, not a crash."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, JSONValue]:
        """The arguments as a dict; raises ``ValueError`` when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


class Message(BaseModel):
    """One transcript entry, as stored in ``dbos_agents.messages`` and sent to models."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    """For ``tool`` messages, the tool's name."""


class Usage(BaseModel):
    """Tokens and dollars of one or more model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 10),
        )


class ModelResponse(BaseModel):
    """What one model call returned: text, tool calls or both, and what it cost."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
