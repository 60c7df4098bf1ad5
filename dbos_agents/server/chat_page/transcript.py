"""A session's stored transcript as the AI SDK's ``UIMessage`` list, so a reloaded page shows
the whole conversation before it resumes the active run's stream.

Each user message is one ``UIMessage``; the assistant and tool messages of a run are one
assistant ``UIMessage`` with the id the run's stream uses (``message_id``), so the resumed
stream of the active run replaces its message instead of adding a second one. Tool parts
read as the stream shows them: a result, an error, a denial, or (no result yet) input only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from ...records import HistoryEntry
from ..ai_sdk.mapping import message_id

__all__ = ["ui_messages"]


def _json(text: str) -> JsonValue:
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


def _result(part: dict[str, Any], content: str) -> None:
    """Settle a tool part with its stored result (``{"error": {"kind", "message"}}`` is a
    failure or a denial, as the stream's mapping reads it)."""
    value = _json(content)
    error = value.get("error") if isinstance(value, dict) and len(value) == 1 else None
    if isinstance(error, dict) and isinstance(error.get("kind"), str):
        if error["kind"] == "approval-denied":
            part.update(
                state="output-denied", approval={"id": part["toolCallId"], "approved": False}
            )
        else:
            text = error.get("message")
            part.update(
                state="output-error", errorText=text if isinstance(text, str) else error["kind"]
            )
        return
    part.update(state="output-available", output=value)


def ui_messages(chat_id: str, history: Sequence[HistoryEntry]) -> list[dict[str, Any]]:
    """The transcript as ``UIMessage`` dicts, in order (system messages left out)."""
    out: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for m in history:
        if m.role == "user":
            out.append(
                {
                    "id": f"{chat_id}-m{m.seq}",
                    "role": "user",
                    "parts": [{"type": "text", "text": m.content or ""}],
                }
            )
            current = None
            continue
        if m.role not in ("assistant", "tool"):
            continue
        mid = message_id(chat_id, m.run_seq)
        if current is None or current["id"] != mid:
            current = {"id": mid, "role": "assistant", "parts": []}
            out.append(current)
        if m.role == "assistant":
            current["parts"].append({"type": "step-start"})
            if m.content:
                current["parts"].append({"type": "text", "text": m.content, "state": "done"})
            for c in m.tool_calls:
                part: dict[str, Any] = {
                    "type": f"tool-{c.name}",
                    "toolCallId": c.id,
                    "state": "input-available",
                    "input": _json(c.arguments or "{}"),
                    "providerExecuted": True,
                }
                tools[c.id] = part
                current["parts"].append(part)
        elif m.tool_call_id is not None and m.tool_call_id in tools:
            _result(tools[m.tool_call_id], m.content or "")
    return out
