"""The streaming side of the fake OpenAI server: continuations and ``chat.completion.chunk``
server-sent events.

A scripted reply is always written as a whole ``chat.completion`` body (the whole intended
answer); these helpers cut it down to what a continuing server would return and encode it
the way OpenAI streams it, so the real ``openai`` client parses it unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from ..models.openai_stream import CONTINUE_PROMPT

__all__ = ["StreamCut", "continuation_of", "continue_reply", "sse_chunks", "stream_events"]

ContinuationKind = Literal["fresh", "prefix", "request"]


class StreamCut(Exception):
    """Raised inside the response body to drop the connection mid-stream, as a crashed or
    overloaded provider would."""


def continuation_of(body: dict[str, Any]) -> tuple[ContinuationKind, str]:
    """How the request asks to continue a reply, and the partial reply it carries.

    ``"prefix"``: the last message is an assistant message with ``prefix: true``.
    ``"request"``: the last two are an assistant message and the user's ``CONTINUE_PROMPT``.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "fresh", ""
    last = messages[-1]
    if _is(last, "assistant") and last.get("prefix") is True:
        return "prefix", _text(last)
    if (
        len(messages) >= 2
        and _is(last, "user")
        and last.get("content") == CONTINUE_PROMPT
        and _is(messages[-2], "assistant")
    ):
        return "request", _text(messages[-2])
    return "fresh", ""


def continue_reply(body: dict[str, Any], partial: str) -> dict[str, Any]:
    """A copy of a ``chat.completion`` body whose text is what follows ``partial``; the text
    is kept whole when it does not start with ``partial`` (a server that ignored it)."""
    body = copy.deepcopy(body)
    for choice in body.get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        text = message.get("content") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(text, str) and text.startswith(partial):
            message["content"] = text[len(partial) :]
    return body


def stream_events(
    body: dict[str, Any], *, chunk_chars: int, include_usage: bool
) -> list[dict[str, Any]]:
    """A ``chat.completion`` body as the ``chat.completion.chunk`` objects OpenAI streams:
    the role, text pieces, each tool call (id and name, then argument pieces), a chunk with
    the finish reason and, when asked for, a usage chunk with no choices."""
    base = {
        "id": body.get("id", "chatcmpl-fake"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model", ""),
        "system_fingerprint": None,
    }
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], **extra}

    events: list[dict[str, Any]] = []
    choices = body.get("choices") or []
    if choices:
        choice = choices[0]
        message = choice.get("message") or {}
        text = message.get("content")
        events.append(chunk({"role": "assistant", "content": "" if text else text}))
        for piece in _pieces(text or "", chunk_chars):
            events.append(chunk({"content": piece}))
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            head = {"name": function.get("name", ""), "arguments": ""}
            first = {"index": index, "id": call.get("id"), "type": "function", "function": head}
            events.append(chunk({"tool_calls": [first]}))
            for piece in _pieces(function.get("arguments") or "", chunk_chars):
                arguments = {"index": index, "function": {"arguments": piece}}
                events.append(chunk({"tool_calls": [arguments]}))
        events.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        events.append({**base, "choices": [], "usage": body.get("usage")})
    return events


async def sse_chunks(
    events: list[dict[str, Any]], *, delay_sec: float, cut_after: int | None
) -> AsyncIterator[str]:
    """The events as ``data: {...}`` lines, ``delay_sec`` apart, then ``data: [DONE]``; after
    ``cut_after`` events the connection is dropped instead."""
    for n, event in enumerate(events):
        if cut_after is not None and n >= cut_after:
            raise StreamCut(f"the fake cut the stream after {cut_after} chunks")
        if n and delay_sec:
            await asyncio.sleep(delay_sec)
        yield f"data: {json.dumps(event)}\n\n"
    if cut_after is not None and cut_after <= len(events):
        raise StreamCut(f"the fake cut the stream after {cut_after} chunks")
    yield "data: [DONE]\n\n"


def _is(message: object, role: str) -> bool:
    return isinstance(message, dict) and message.get("role") == role


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
