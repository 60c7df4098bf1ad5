"""The wire side of the fake Gemini server: request checks, Google's error bodies, thought
signatures and the server-sent events of ``streamGenerateContent?alt=sse``.

A scripted reply is always a whole ``GenerateContentResponse`` body. Streamed, it becomes
the chunks Gemini sends, each itself a ``GenerateContentResponse``: the text of each part in
pieces of ``chunk_chars`` characters (a thought part the same way, every piece marked
``thought: true``) with the part's ``thoughtSignature`` on its last piece, the function
calls whole and together in one chunk, and ``finishReason`` with the full ``usageMetadata``
on the last chunk (earlier chunks report the prompt's tokens only, as Gemini's do). Every
chunk repeats ``modelVersion`` and ``responseId``.

The SDK sends most fields in camelCase (``functionCall``, ``thoughtSignature``) but some in
snake_case (``parameters_json_schema`` inside a declaration); the API reads either, and so
do these checks.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections.abc import AsyncIterator
from typing import Any

__all__ = [
    "BAD_KEY",
    "BAD_KEY_INFO",
    "SIGNATURE_PREFIX",
    "STATUS_NAMES",
    "UNREGISTERED",
    "SKIP_SIGNATURE",
    "StreamCut",
    "check_request",
    "error_body",
    "sse_events",
    "stream_chunks",
]

SIGNATURE_PREFIX = b"fake-thought-signature:"
"""What every thought signature the fake issues starts with (once base64-decoded)."""

SKIP_SIGNATURE = b"skip_thought_signature_validator"
"""The placeholder Google documents for a function call replayed without its signature."""

_DATA_FIELDS = frozenset(
    {
        "text",
        "inlineData",
        "fileData",
        "functionCall",
        "functionResponse",
        "executableCode",
        "codeExecutionResult",
        "toolCall",
        "toolResponse",
    }
)

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""The ``google.rpc.Code`` name Gemini sends with each HTTP status."""

UNREGISTERED = (
    "Method doesn't allow unregistered callers (callers without established identity)."
    " Please use API Key or other form of API consumer identity to call this API."
)
BAD_KEY = "API key not valid. Please pass a valid API key."
BAD_KEY_INFO = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}


def error_body(
    status: int,
    message: str,
    status_name: str | None = None,
    details: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Google's error body: ``{"error": {"code", "message", "status", "details"}}``."""
    name = status_name or STATUS_NAMES.get(status, "UNKNOWN")
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if details:
        error["details"] = details
    return {"error": error}


class StreamCut(Exception):
    """Raised inside the response body to drop the connection mid-stream."""


def check_request(body: dict[str, Any], *, model: str) -> str | None:
    """What the real API would refuse in ``body`` (a 400's message), or ``None``:

    - no ``contents``; a content with a role other than ``user``/``model``, without parts,
      or with a part that carries no data;
    - a ``model`` turn first or right after another ``model`` turn (consecutive ``user``
      contents are accepted, as the API merges them: Pydantic AI sends function responses
      and a following user text as two contents);
    - ``functionResponse`` parts not right after a turn of function calls, answering no call
      of it (by name, and by id when both carry one), or not one per call;
    - a thought signature the fake did not issue (a signature mangled on its way through a
      store), and, for ``gemini-3*`` models, a function-call turn of the current turn whose
      first call lost its signature.
    """
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified\n"
    turns: list[tuple[str, int, list[dict[str, Any]]]] = []  # role, first index, parts
    for n, content in enumerate(contents):
        refused = _check_content(n, content)
        if refused:
            return refused
        role = content.get("role") or "user"
        parts = content["parts"]
        if role == "model" and (not turns or turns[-1][0] == "model"):
            return "Please ensure that multiturn requests alternate between user and model."
        if role == "user" and turns and turns[-1][0] == "user":
            turns[-1] = ("user", turns[-1][1], turns[-1][2] + parts)
        else:
            turns.append((role, n, list(parts)))
    for k, (role, n, parts) in enumerate(turns):
        responses = _all(parts, "functionResponse")
        calls = _all(turns[k - 1][2], "functionCall") if k else []
        if role == "user" and responses and not calls:
            return (
                f"* GenerateContentRequest.contents[{n}]: Please ensure that function response"
                " turn comes immediately after a function call turn."
            )
        if role == "user" and calls:
            refused = _check_answers(n, calls, responses)
            if refused:
                return refused
    if model.startswith("gemini-3"):
        return _check_current_turn(contents)
    return None


def _check_content(n: int, content: object) -> str | None:
    where = f"* GenerateContentRequest.contents[{n}]"
    if not isinstance(content, dict):
        return f"{where}: Invalid value (a Content object was expected)\n"
    if (content.get("role") or "user") not in ("user", "model"):
        return "Please use a valid role: user, model."
    parts = content.get("parts")
    if not isinstance(parts, list) or not parts:
        return f"{where}.parts: contents.parts must not be empty.\n"
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not any(_get(part, f) is not None for f in _DATA_FIELDS):
            return (
                f"{where}.parts[{j}].data: required oneof field 'data' must have one"
                " initialized field\n"
            )
        signature = _get(part, "thoughtSignature")
        if signature is not None and not _valid_signature(signature):
            return f"{where}.parts[{j}].thought_signature: Corrupted thought signature."
    return None


def _check_answers(
    n: int, calls: list[dict[str, Any]], responses: list[dict[str, Any]]
) -> str | None:
    """Each function response answers a call of the turn before, one per call."""
    names = [c.get("name") for c in calls]
    ids = {c.get("id") for c in calls} - {None}
    for r in responses:
        if r.get("name") not in names or (ids and r.get("id") not in (None, *ids)):
            return (
                f"* GenerateContentRequest.contents[{n}]: functionResponse"
                f" {r.get('name')!r} (id {r.get('id')!r}) answers no functionCall of the"
                f" previous turn (calls: {names}, ids: {sorted(map(str, ids))})."
            )
    if len(responses) != len(calls):
        return (
            "Please ensure that the number of function response parts is equal to the number"
            " of function call parts of the function call turn."
        )
    return None


def _check_current_turn(contents: list[dict[str, Any]]) -> str | None:
    """Gemini 3: after the last user content that is not function responses (the current
    turn), the first function call of each model content carries its thought signature."""
    start = max(
        (
            n
            for n, c in enumerate(contents)
            if (c.get("role") or "user") == "user" and not _all(c["parts"], "functionResponse")
        ),
        default=0,
    )
    for n, content in enumerate(contents[start:], start):
        parts = content["parts"]
        first = next((p for p in parts if _get(p, "functionCall") is not None), None)
        if first is not None and _get(first, "thoughtSignature") is None:
            name = (_get(first, "functionCall") or {}).get("name")
            return (
                "Function call is missing a thought_signature in functionCall parts. This is"
                " required for tools to work correctly, and missing thought_signature may lead"
                f" to degraded model performance. Additional data, function call `{name}` ,"
                f" position {n + 1}. Please refer to"
                " https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
            )
    return None


def stream_chunks(body: dict[str, Any], *, chunk_chars: int) -> list[dict[str, Any]]:
    """A ``GenerateContentResponse`` body as the chunks Gemini streams (see the module doc)."""
    candidate = dict((body.get("candidates") or [{}])[0])
    content = candidate.pop("content", None) or {}
    finish = {k: candidate.pop(k) for k in ("finishReason", "finishMessage") if k in candidate}
    head = {k: v for k, v in body.items() if k not in ("candidates", "usageMetadata")}
    groups: list[list[dict[str, Any]]] = []
    calls: list[dict[str, Any]] = []
    for part in content.get("parts") or []:
        if "functionCall" in part:
            calls.append(part)
            continue
        if calls:
            groups.append(calls)
            calls = []
        text = part.get("text")
        if not isinstance(text, str) or not text:
            groups.append([part])
            continue
        rest = {k: v for k, v in part.items() if k not in ("text", "thoughtSignature")}
        pieces = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
        for i, piece in enumerate(pieces):
            chunk_part = {"text": piece, **rest}
            if i == len(pieces) - 1 and "thoughtSignature" in part:
                chunk_part["thoughtSignature"] = part["thoughtSignature"]
            groups.append([chunk_part])
    if calls or not groups:
        groups.append(calls)
    usage: dict[str, Any] = dict(body.get("usageMetadata") or {})
    prompt = usage.get("promptTokenCount", 0)
    chunks = []
    for i, parts in enumerate(groups):
        last = i == len(groups) - 1
        chunk_candidate = {"content": {"role": "model", "parts": parts}, **candidate}
        chunk_candidate |= finish if last else {}
        chunk_usage = usage if last else {"promptTokenCount": prompt, "totalTokenCount": prompt}
        chunks.append({"candidates": [chunk_candidate], "usageMetadata": chunk_usage, **head})
    return chunks


async def sse_events(
    chunks: list[dict[str, Any]], *, delay_sec: float, cut_after: int | None
) -> AsyncIterator[str]:
    """The chunks as ``data:`` events, ``delay_sec`` apart; after ``cut_after`` events the
    connection is dropped instead."""
    for n, chunk in enumerate(chunks):
        if cut_after is not None and n >= cut_after:
            raise StreamCut(f"the fake cut the stream after {cut_after} events")
        if n and delay_sec:
            await asyncio.sleep(delay_sec)
        yield f"data: {json.dumps(chunk)}\r\n\r\n"


def _get(obj: dict[str, Any], camel: str) -> Any:
    """A field by its camelCase name or its snake_case one (the API reads both)."""
    if camel in obj:
        return obj[camel]
    return obj.get(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel))


def _all(parts: list[dict[str, Any]], camel: str) -> list[dict[str, Any]]:
    found = (_get(p, camel) for p in parts)
    return [f if isinstance(f, dict) else {} for f in found if f is not None]


def _valid_signature(value: object) -> bool:
    if not isinstance(value, str):
        return False
    standard = value.replace("-", "+").replace("_", "/")  # the API reads either alphabet
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw.startswith(SIGNATURE_PREFIX) or raw == SKIP_SIGNATURE
