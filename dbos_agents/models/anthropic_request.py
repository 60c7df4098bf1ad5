"""The request half of ``AnthropicModel``: our transcript and tools as Messages API params.

Nothing here opens a connection. The Messages API differs from chat completions where it
matters to a transcript:

- The system prompt is a parameter, not a message; our ``instructions`` go there (with a
  ``cache_control`` marker when prompt caching is on). A ``system`` message inside the
  transcript (rare: a notice) becomes a user text block, in its place.
- Roles alternate: consecutive user-side messages (tool results, a user message after
  them) are merged into one user turn, tool results first, as the API requires.
- An assistant turn is content blocks: its thinking blocks first (sent back verbatim),
  then its text, then one ``tool_use`` block per call. Empty text blocks are not sent
  (the API refuses them).
- A reply to continue (``continue_from``) is a trailing assistant message (prefill): the
  model writes on from its last character. The API refuses a prefill that ends in
  whitespace, so that is cut off and ``PrefillTail`` drops it from the reply's start.
  With extended thinking a prefill is not accepted either; the partial reply is then
  followed by a user message, ``CONTINUE_PROMPT``, asking to carry on.
"""

from __future__ import annotations

import json
from typing import Any, cast

from anthropic.types import MessageParam, TextBlockParam, ToolParam

from ..errors import ModelError
from ..messages import Message, Thinking
from .base import ModelRequest, ToolSpec

__all__ = ["CONTINUE_PROMPT", "CACHE", "PrefillTail", "messages", "system", "tools"]

CACHE: dict[str, str] = {"type": "ephemeral"}
"""The ``cache_control`` marker of a prompt-caching breakpoint (five-minute cache)."""

CONTINUE_PROMPT = "Continue your previous reply exactly where it stopped. Do not repeat any of it."
"""The user message after a partial reply when it cannot be prefilled (extended thinking)."""


def system(request: ModelRequest, cache: bool) -> list[TextBlockParam] | None:
    """The system parameter: the instructions, marked as a cache breakpoint if ``cache``."""
    if not request.instructions:
        return None
    block: TextBlockParam = {"type": "text", "text": request.instructions}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return [block]


def tools(specs: list[ToolSpec], cache: bool) -> list[ToolParam]:
    """Tool definitions; the last carries the cache breakpoint (it covers all of them)."""
    out: list[ToolParam] = []
    for spec in specs:
        tool: ToolParam = {
            "name": spec.name,
            "input_schema": spec.parameters or {"type": "object", "properties": {}},
        }
        if spec.description:
            tool["description"] = spec.description
        out.append(tool)
    if cache and out:
        out[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def messages(request: ModelRequest, *, prefill: bool) -> tuple[list[MessageParam], str]:
    """The conversation, with ``continue_from`` appended (a prefill if ``prefill``, else
    a partial turn and ``CONTINUE_PROMPT``). Also returns the whitespace cut from the end
    of a prefill, which the reply is expected to start with."""
    turns: list[dict[str, Any]] = []
    for m in request.messages:
        role, blocks = _blocks(m)
        if not blocks:
            continue
        last = turns[-1] if turns else None
        if last is not None and last["role"] == role:
            merged = list(last["content"]) + blocks
            if role == "user":  # tool results lead their turn
                merged.sort(key=lambda b: 0 if _type(b) == "tool_result" else 1)
            last["content"] = merged
        else:
            turns.append({"role": role, "content": blocks})
    partial = request.continue_from or ""
    tail = ""
    if partial and not prefill:
        turns.append({"role": "assistant", "content": [{"type": "text", "text": partial}]})
        turns.append({"role": "user", "content": [{"type": "text", "text": CONTINUE_PROMPT}]})
    elif partial:
        shown = partial.rstrip()
        tail = partial[len(shown) :]
        if shown:
            turns.append({"role": "assistant", "content": [{"type": "text", "text": shown}]})
    return cast(list[MessageParam], turns), tail


class PrefillTail:
    """Drops the whitespace cut from a prefill from the start of the continued reply, when
    the model writes it again; text arrives in pieces, so it is held until it can tell."""

    def __init__(self, tail: str) -> None:
        self._tail = tail
        self._held = ""

    def feed(self, text: str) -> str:
        if not self._tail:
            return text
        self._held += text
        n = min(len(self._held), len(self._tail))
        if self._held[:n] != self._tail[:n]:  # not a repeat: nothing to drop
            out, self._held, self._tail = self._held, "", ""
            return out
        if len(self._held) < len(self._tail):
            return ""  # still a possible repeat
        out, self._held, self._tail = self._held[len(self._tail) :], "", ""
        return out

    def flush(self) -> str:
        """What is still held when the reply ends (only a prefix of the tail)."""
        out, self._held, self._tail = self._held, "", ""
        return out


def _blocks(m: Message) -> tuple[str, list[Any]]:
    if m.role == "tool":
        if not m.tool_call_id:
            raise ModelError(f"a tool message ({m.name or 'unnamed tool'}) has no tool_call_id")
        result = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content or ""}
        return "user", [result]
    if m.role in ("user", "system"):
        return "user", [{"type": "text", "text": m.content}] if m.content else []
    blocks: list[Any] = [_thinking(t) for t in m.thinking]
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return "assistant", blocks


def _thinking(t: Thinking) -> dict[str, str]:
    if t.redacted is not None:
        return {"type": "redacted_thinking", "data": t.redacted}
    return {"type": "thinking", "thinking": t.text, "signature": t.signature}


def _input(arguments: str) -> object:
    """A recorded call's input as the API wants it (an object). Arguments that were not
    a JSON object were refused by the loop (the result says so): sent as ``{}``."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _type(block: object) -> object:
    return block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
