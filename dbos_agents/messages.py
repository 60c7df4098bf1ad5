"""Transcript types shared by models, the runtime and the store.

Everything here crosses a DBOS step boundary as plain JSON (``model_dump(mode="json")``) and
round-trips exactly, so a replayed step yields the same objects as the first run.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

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


class Thinking(BaseModel):
    """A reasoning block a provider returned with a reply and wants back verbatim on the
    next turn (Anthropic's extended thinking, in a tool-use loop). Never shown as text;
    ``text`` and ``signature`` of a thinking block, or ``redacted`` (the provider's
    encrypted data) of a redacted one."""

    model_config = ConfigDict(frozen=True)

    text: str = ""
    signature: str = ""
    redacted: str | None = None


class _OmitsUnset(BaseModel):
    """A subclass's fields named in ``_omitted_unset`` are left out of a dump while they hold
    their default (``thinking`` empty, ``provider`` None): a value without them dumps (and so
    stores, serves and replays) byte for byte as before those fields existed, and a dump
    that leaves one out validates back to the default, so the round trip stays exact."""

    _omitted_unset: ClassVar[tuple[str, ...]] = ()
    _unset: ClassVar[dict[str, object]] = {}

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields
        cls._unset = {
            name: fields[name].get_default(call_default_factory=True) for name in cls._omitted_unset
        }

    @model_serializer(mode="wrap")
    def _drop_unset(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        for name, default in self._unset.items():
            if getattr(self, name) == default:  # "" is a provider: only None is unset
                data.pop(name, None)
        return data


class Message(_OmitsUnset):
    """One transcript entry, as stored in ``dbos_agents.messages`` and sent to models.

    ``thinking`` (an assistant message's reasoning blocks) travels with the run's
    transcript in memory and in its recorded turns, not in the messages table: a provider
    needs it back only within the tool-use loop that produced it.
    """

    role: Role
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    """For ``tool`` messages, the tool's name."""
    thinking: list[Thinking] = Field(default_factory=list)

    _omitted_unset = ("thinking",)


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


class ModelResponse(_OmitsUnset):
    """What one model call returned: text, tool calls or both, and what it cost;
    ``thinking``: reasoning blocks to send back with the assistant message (never text)."""

    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    """The model that answered, as its provider names it; recorded with the turn's usage."""
    provider: str | None = None
    """Who served it (``openai``, ``anthropic``, ...). An adapter may leave it unset: the
    loop then takes the answering model's optional ``provider`` attribute (``FallbackModel``
    sets the one of the model that answered). Left out of dumps while None."""
    thinking: list[Thinking] = Field(default_factory=list)

    _omitted_unset = ("thinking", "provider")
