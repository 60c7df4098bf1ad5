"""The wire side of the fake Anthropic server: request checks, continuations and the
Messages API's server-sent events.

A scripted reply is always a whole Message body (the whole intended answer); these
helpers cut it down to what the API returns after a prefill and encode it as Anthropic
streams it (``message_start``, ``ping``, ``content_block_start``/``_delta``/``_stop`` per
block, ``message_delta`` with the stop reason and usage, ``message_stop``), so the real
``anthropic`` client parses it unchanged; an ``error`` event within the 200 gives the
reply up mid-way, as the API does when it is overloaded.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from ..models.anthropic_request import CONTINUE_PROMPT

__all__ = [
    "OVERLOADED_EVENT",
    "StreamCut",
    "check_request",
    "continuation_of",
    "continue_reply",
    "sse_events",
    "stream_events",
]

ContinuationKind = Literal["fresh", "prefix", "request"]


class StreamCut(Exception):
    """Raised inside the response body to drop the connection mid-stream."""


def check_request(body: dict[str, Any]) -> str | None:
    """What the real API would refuse in ``body`` (a 400's message), or ``None``: roles
    that do not alternate, empty text, tool results that answer no call of the assistant
    turn before them (or do not lead their turn), a prefill ending in whitespace or with
    thinking on, and, with thinking on, a tool-use turn being answered that does not start
    with its thinking block."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    thinking = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    previous: dict[str, Any] | None = None
    for n, m in enumerate(messages):
        role, blocks = m.get("role"), _blocks(m)
        if n == 0 and role != "user":
            return "messages: the first message must use the user role"
        if previous is not None and previous.get("role") == role:
            return f"messages.{n}: roles must alternate between user and assistant"
        if not blocks:
            return f"messages.{n}: all messages must have non-empty content"
        if any(b.get("type") == "text" and not b.get("text") for b in blocks):
            return f"messages.{n}: text content blocks must be non-empty"
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if results:
            asked = [b.get("id") for b in _blocks(previous or {}) if b.get("type") == "tool_use"]
            if [b.get("type") for b in blocks[: len(results)]] != ["tool_result"] * len(results):
                return f"messages.{n}: tool_result blocks must come first in the user message"
            if not set(results) <= set(asked):
                return f"messages.{n}: unexpected tool_use_id in tool_result blocks: {results}"
            last_turn = n == len(messages) - 1 or n == len(messages) - 2
            first = _blocks(previous or {})[0].get("type")
            if thinking and last_turn and first not in ("thinking", "redacted_thinking"):
                return (
                    f"messages.{n - 1}.content.0.type: Expected `thinking` or"
                    " `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a"
                    " final `assistant` message must start with a thinking block"
                )
        previous = m
    last = messages[-1]
    if last.get("role") == "assistant":
        text = _text(last)
        if text != text.rstrip():
            return "final assistant content cannot end with trailing whitespace"
        if thinking:
            return "thinking: a final assistant message (prefill) is not supported with thinking"
    return None


def continuation_of(body: dict[str, Any]) -> tuple[ContinuationKind, str]:
    """How the request continues a reply, and the partial reply: ``"prefix"`` when the last
    message is an assistant message (a prefill), ``"request"`` when the last two are an
    assistant message and the user's ``CONTINUE_PROMPT``."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "fresh", ""
    last = messages[-1]
    if isinstance(last, dict) and last.get("role") == "assistant":
        return "prefix", _text(last)
    if (
        len(messages) >= 2
        and isinstance(last, dict)
        and last.get("role") == "user"
        and _text(last) == CONTINUE_PROMPT
        and isinstance(messages[-2], dict)
        and messages[-2].get("role") == "assistant"
    ):
        return "request", _text(messages[-2])
    return "fresh", ""


def continue_reply(body: dict[str, Any], partial: str) -> dict[str, Any]:
    """A copy of a Message body whose text is what follows ``partial`` (kept whole when it
    does not start with it: a model that ignored the prefill)."""
    body = copy.deepcopy(body)
    for block in body.get("content") or []:
        if block.get("type") == "text":
            text = block.get("text", "")
            if text.startswith(partial):
                block["text"] = text[len(partial) :]
            break
    body["content"] = [b for b in body.get("content") or [] if b.get("type") != "text" or b["text"]]
    return body


def stream_events(body: dict[str, Any], *, chunk_chars: int) -> list[tuple[str, dict[str, Any]]]:
    """A Message body as Anthropic's stream events, ``(event name, data)``."""
    usage = dict(body.get("usage") or {})
    start = {**body, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(body.get("content") or []):
        kind = block.get("type")
        head: dict[str, Any]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            head = {"type": "text", "text": ""}
            deltas = [
                {"type": "text_delta", "text": p} for p in _pieces(block["text"], chunk_chars)
            ]
        elif kind == "tool_use":
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = block.get("_raw")
            text = raw if isinstance(raw, str) else json.dumps(block.get("input", {}))
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [
                {"type": "input_json_delta", "partial_json": p} for p in _pieces(text, chunk_chars)
            ]
        elif kind == "thinking":
            head = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p}
                for p in _pieces(block["thinking"], chunk_chars)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:  # redacted_thinking comes whole
            head = dict(block)
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": head},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    stop = {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")}
    events.append(("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


OVERLOADED_EVENT: tuple[str, dict[str, Any]] = (
    "error",
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
)
"""What Anthropic sends when it gives up on a reply it has begun (the response is a 200)."""


async def sse_events(
    events: list[tuple[str, dict[str, Any]]],
    *,
    delay_sec: float,
    cut_after: int | None,
    error_after: int | None = None,
) -> AsyncIterator[str]:
    """The events as ``event:``/``data:`` pairs, ``delay_sec`` apart; after ``cut_after``
    events the connection is dropped instead, after ``error_after`` an ``error`` event
    (overloaded) ends the stream."""
    if error_after is not None:
        events = [*events[:error_after], OVERLOADED_EVENT]
    for n, (name, data) in enumerate(events):
        if cut_after is not None and n >= cut_after:
            raise StreamCut(f"the fake cut the stream after {cut_after} events")
        if n and delay_sec:
            await asyncio.sleep(delay_sec)
        yield f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(message: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in _blocks(message) if b.get("type") == "text")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
