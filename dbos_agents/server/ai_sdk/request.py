"""The body ``DefaultChatTransport`` posts (``ai`` 7): ``{id, messages, trigger, messageId}``
plus whatever the page adds with the transport's ``body`` option (kept, unused).

Only what the server acts on is typed: a message's role and parts, a part's text, and a
tool part's call id, state, output, error and approval. Other part kinds (files, reasoning,
data parts) pass through unread, so a newer ``ai`` adding one does not break old servers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool
from pydantic.alias_generators import to_camel

__all__ = ["ChatRequest", "ToolApproval", "UIMessage", "UIPart"]


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class ToolApproval(_Wire):
    """A tool part's ``approval``: ``approved`` is set once the user answered
    (``addToolApprovalResponse``)."""

    id: str
    approved: StrictBool | None = None
    reason: str | None = None


class UIPart(_Wire):
    """One part of a ``UIMessage``: ``text``, ``tool-<name>``, ``dynamic-tool``,
    ``step-start`` and any other kind (unread)."""

    type: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    state: str | None = None
    output: JsonValue = None
    error_text: str | None = None
    provider_executed: bool | None = None
    approval: ToolApproval | None = None

    @property
    def is_tool(self) -> bool:
        return self.type.startswith("tool-") or self.type == "dynamic-tool"


class UIMessage(_Wire):
    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[UIPart]


class ChatRequest(_Wire):
    """What ``HttpChatTransport.sendMessages`` sends (no ``prepareSendMessagesRequest``)."""

    id: str = Field(min_length=1, description="The chat id (``useChat({id})``).")
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"]
    message_id: str | None = None
