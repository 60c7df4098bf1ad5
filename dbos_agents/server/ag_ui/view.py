"""The transcript as the AG-UI client holds it, kept in step with the events it is sent.

An AG-UI client applies events to its own message list: a text message id it already has
is appended to, never reset. So when pieces are withdrawn (a ``RetractEvent``), or a run is
streamed again from its start (a rerun), the client's copy must lose them first: the
server sends a ``MESSAGES_SNAPSHOT`` of this view, which replaces the client's list. The
view starts as the request's messages and follows every event the mapping sends.

Ids the server mints name their run: ``dbos:<run>:<turn>:<restart>`` for an assistant
message, ``dbos:<run>:m<seq>`` for one that was not streamed, ``dbos:<run>:tool:<call>``
for a server tool's result; so a rerun of run ``r`` drops ``dbos:<r>:*`` and the tool
results that answer calls of those messages.
"""

from __future__ import annotations

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    ToolCall,
    ToolMessage,
)

__all__ = ["MINTED", "ClientView", "run_prefix"]

MINTED = "dbos:"
"""The prefix of every message id the server mints."""


def run_prefix(run: int) -> str:
    return f"{MINTED}{run}:"


class ClientView:
    """See the module doc."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages: list[Message] = list(messages)

    def _assistant(self, message_id: str) -> AssistantMessage:
        for m in self.messages:
            if m.id == message_id and isinstance(m, AssistantMessage):
                return m
        created = AssistantMessage(id=message_id)
        self.messages.append(created)
        return created

    def add_text(self, message_id: str, text: str) -> None:
        m = self._assistant(message_id)
        m.content = (m.content or "") + text

    def add_tool_call(self, message_id: str, call_id: str, name: str) -> None:
        m = self._assistant(message_id)
        call = ToolCall(id=call_id, function=FunctionCall(name=name, arguments=""))
        m.tool_calls = [*(m.tool_calls or []), call]

    def add_arguments(self, call_id: str, delta: str) -> None:
        for m in self.messages:
            if isinstance(m, AssistantMessage):
                for c in m.tool_calls or []:
                    if c.id == call_id:
                        c.function.arguments += delta
                        return

    def add_tool_result(self, message_id: str, call_id: str, content: str) -> None:
        self.messages.append(ToolMessage(id=message_id, tool_call_id=call_id, content=content))

    def has_tool_call(self, call_id: str) -> bool:
        return any(
            isinstance(m, AssistantMessage) and any(c.id == call_id for c in m.tool_calls or [])
            for m in self.messages
        )

    def has_tool_result(self, call_id: str) -> bool:
        return any(isinstance(m, ToolMessage) and m.tool_call_id == call_id for m in self.messages)

    def drop_message(self, message_id: str) -> None:
        self.messages = [m for m in self.messages if m.id != message_id]

    def drop_tool_call(self, call_id: str) -> None:
        for m in self.messages:
            if isinstance(m, AssistantMessage) and m.tool_calls:
                m.tool_calls = [c for c in m.tool_calls if c.id != call_id] or None

    def drop_run(self, run: int) -> bool:
        """Forget what the server minted for ``run`` (and the answers to its tool calls);
        True when anything was dropped (the client then needs a snapshot)."""
        prefix = run_prefix(run)
        ours = [m for m in self.messages if m.id.startswith(prefix)]
        calls = {
            c.id for m in ours if isinstance(m, AssistantMessage) for c in (m.tool_calls or [])
        }
        kept = [
            m
            for m in self.messages
            if not m.id.startswith(prefix)
            and not (isinstance(m, ToolMessage) and m.tool_call_id in calls)
        ]
        dropped = len(kept) != len(self.messages)
        self.messages = kept
        return dropped

    def snapshot(self) -> MessagesSnapshotEvent:
        return MessagesSnapshotEvent(messages=[m.model_copy(deep=True) for m in self.messages])
