"""A small Anthropic-Messages-wire server for tests: scripted replies, recorded requests.

It speaks enough of ``POST /v1/messages`` for the real ``anthropic`` client (and so
``AnthropicModel``) to talk to it over loopback HTTP. Replies come from a FIFO queue the
test fills; every request body is recorded::

    with serve_fake_anthropic() as fake:
        fake.push_text("hello", input_tokens=12, output_tokens=3, cache_read=100)
        fake.push_tool_uses(FakeToolUse("lookup", {"id": 1}), thinking="Let me look.")
        fake.push_error(529, "Overloaded", type="overloaded_error", retry_after=2)
        model = AnthropicModel("claude-haiku-4-5", base_url=fake.base_url)
        ...
        assert fake.requests[0]["tools"][-1]["cache_control"] == {"type": "ephemeral"}

A request the real API would refuse (roles that do not alternate, an empty text block,
a tool result that answers no call, a prefill ending in whitespace, a thinking-enabled
tool loop whose assistant turn lost its thinking block) gets a 400 ``invalid_request_error``
without taking a scripted reply. When the queue is empty the server answers with
``respond(body)`` if one was given, else a 400 naming the problem.

With ``"stream": true`` the reply comes as Anthropic's server-sent events
(``chunk_chars`` characters a delta, ``chunk_delay_sec`` apart; ``cut_after=`` drops the
connection after that many events, ``error_after=`` sends Anthropic's overloaded ``error``
event instead of the rest, within the 200). A scripted reply is the whole intended answer: a
request that continues a partial reply (a trailing assistant prefill, or the partial and
``CONTINUE_PROMPT``) gets only the text after it, and each recorded request carries
``continuation`` (``"fresh"``, ``"prefix"`` or ``"request"``), ``offset`` and
``received_at`` (``time.monotonic()``, to measure a client's wait between requests).

As a separate process, for workers that are killed and restarted mid-stream::

    python -m dbos_agents.testing.fake_anthropic --port 8765 --text "the whole answer"

prints its base URL on the first line; ``GET /_fake/requests`` returns the recorded
requests and ``POST /_fake/reset`` clears them. Needs ``fastapi`` and ``uvicorn``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .fake_anthropic_stream import (
    StreamCut,
    check_request,
    continuation_of,
    continue_reply,
    sse_events,
    stream_events,
)
from .loopback import serve_in_thread

__all__ = ["FakeAnthropic", "FakeReply", "FakeToolUse", "serve_fake_anthropic"]


@dataclass(frozen=True)
class FakeToolUse:
    """One ``tool_use`` block. ``input`` is sent as the block's input; a ``str`` is sent
    verbatim as the streamed JSON (malformed on purpose, if need be). ``id`` defaults to
    ``toolu_<n>``."""

    name: str
    input: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class FakeReply:
    """One HTTP answer: status, JSON body and headers, after ``delay`` seconds; streamed,
    the connection is dropped after ``cut_after`` events, or an overloaded ``error`` event
    follows ``error_after`` events, when that is set."""

    status: int
    body: dict[str, Any]
    delay: float = 0.0
    cut_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_after: int | None = None


Responder = Callable[[dict[str, Any]], FakeReply]


class FakeAnthropic:
    """The scripted state behind the server (thread-safe): replies queued, requests seen."""

    def __init__(
        self,
        *,
        model: str = "claude-haiku-4-5",
        respond: Responder | None = None,
        chunk_chars: int = 8,
        chunk_delay_sec: float = 0.0,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be at least 1, not {chunk_chars}")
        self.model = model
        self.chunk_chars = chunk_chars
        self.chunk_delay_sec = chunk_delay_sec
        self.base_url = ""
        """``http://127.0.0.1:PORT`` (the SDK adds ``/v1``), set once the server listens."""
        self._respond = respond
        self._lock = threading.Lock()
        self._replies: deque[FakeReply] = deque()
        self._requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.app = self._build_app()

    # -- scripting ---------------------------------------------------------------------------

    def push(self, reply: FakeReply) -> None:
        with self._lock:
            self._replies.append(reply)

    def push_text(
        self,
        text: str,
        *,
        thinking: str | None = None,
        stop_reason: str = "end_turn",
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read: int = 0,
        cache_write: int = 0,
        cut_after: int | None = None,
        delay: float = 0.0,
        error_after: int | None = None,
    ) -> None:
        """Queue a text answer (after its thinking block, if given); streamed, cut after
        ``cut_after`` events, or given up with an ``error`` event after ``error_after``."""
        body = self.message(
            text,
            [],
            thinking=thinking,
            stop_reason=stop_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read=cache_read,
            cache_write=cache_write,
        )
        self.push(FakeReply(200, body, delay, cut_after, error_after=error_after))

    def push_tool_uses(
        self,
        *calls: FakeToolUse,
        text: str | None = None,
        thinking: str | None = None,
        input_tokens: int = 10,
        output_tokens: int = 5,
        cut_after: int | None = None,
        error_after: int | None = None,
    ) -> None:
        """Queue a reply requesting one or more (parallel) tool calls, in this order."""
        body = self.message(
            text,
            list(calls),
            thinking=thinking,
            stop_reason="tool_use",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        self.push(FakeReply(200, body, cut_after=cut_after, error_after=error_after))

    def push_error(
        self,
        status: int,
        message: str,
        *,
        type: str = "api_error",
        retry_after: float | None = None,
    ) -> None:
        """Queue an error with Anthropic's body (``{"type": "error", "error": {...}}``)."""
        body = {"type": "error", "error": {"type": type, "message": message}}
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        headers["request-id"] = f"req_fake_{next(self._ids)}"
        self.push(FakeReply(status, body, headers=headers))

    def message(
        self,
        text: str | None,
        calls: list[FakeToolUse],
        *,
        thinking: str | None = None,
        stop_reason: str = "end_turn",
        input_tokens: int = 10,
        output_tokens: int = 5,
        cache_read: int = 0,
        cache_write: int = 0,
    ) -> dict[str, Any]:
        """A Message body, for ``push`` or a ``respond`` callback."""
        content: list[dict[str, Any]] = []
        if thinking is not None:
            signature = f"sig-{next(self._ids)}"
            content.append({"type": "thinking", "thinking": thinking, "signature": signature})
        if text:
            content.append({"type": "text", "text": text})
        for c in calls:
            block: dict[str, Any] = {"type": "tool_use", "id": c.id or f"toolu_{next(self._ids)}"}
            block |= {"name": c.name, "input": c.input if isinstance(c.input, dict) else {}}
            if isinstance(c.input, str):
                block["_raw"] = c.input  # streamed verbatim; whole, sent as the input text
            content.append(block)
        return {
            "id": f"msg_fake_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        }

    # -- inspection --------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._replies.clear()

    # -- the app -----------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> FakeReply:
        kind, partial = continuation_of(body)
        refused = check_request(body)
        with self._lock:
            seen = {"continuation": kind, "offset": len(partial), "received_at": time.monotonic()}
            self._requests.append({**body, **seen})
            number = len(self._requests)
            reply = None if refused else (self._replies.popleft() if self._replies else None)
        if refused:
            return _invalid(refused)
        if reply is None and self._respond is not None:
            reply = self._respond(body)
        if reply is None:
            return _invalid(f"FakeAnthropic has no scripted reply for request {number}")
        if partial and reply.status == 200:
            reply = replace(reply, body=continue_reply(reply.body, partial))
        return reply

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake-anthropic")

        @app.post("/v1/messages")
        async def messages(request: Request) -> Response:
            body = await request.json()
            body = body if isinstance(body, dict) else {"_body": body}
            reply = self._next_reply(body)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if body.get("stream") is True and reply.status == 200:
                events = stream_events(reply.body, chunk_chars=self.chunk_chars)
                chunks = sse_events(
                    events,
                    delay_sec=self.chunk_delay_sec,
                    cut_after=reply.cut_after,
                    error_after=reply.error_after,
                )
                return StreamingResponse(chunks, media_type="text/event-stream")
            return JSONResponse(_whole(reply.body), status_code=reply.status, headers=reply.headers)

        @app.get("/_fake/requests")
        async def recorded_requests() -> JSONResponse:
            return JSONResponse(self.requests)

        @app.post("/_fake/reset")
        async def reset() -> JSONResponse:
            self.reset()
            return JSONResponse({"ok": True})

        return app


def _invalid(message: str) -> FakeReply:
    error = {"type": "invalid_request_error", "message": message}
    return FakeReply(400, {"type": "error", "error": error})


def _whole(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed body: a tool input scripted as raw text is sent as that string."""
    content = body.get("content")
    if not isinstance(content, list):
        return body
    blocks = []
    for b in content:
        if isinstance(b, dict) and "_raw" in b:
            b = {k: v for k, v in b.items() if k != "_raw"} | {"input": b["_raw"]}
        blocks.append(b)
    return {**body, "content": blocks}


class _QuietCuts(logging.Filter):
    """Drops uvicorn's traceback for a stream cut on purpose (``cut_after``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


_QUIET_CUTS = _QuietCuts()


@contextmanager
def serve_fake_anthropic(
    fake: FakeAnthropic | None = None, *, port: int = 0
) -> Iterator[FakeAnthropic]:
    """Run ``fake`` (or a new one) on 127.0.0.1:``port`` (default: a free port) in a
    background thread; yield it with ``base_url`` set."""
    fake = fake or FakeAnthropic()
    logging.getLogger("uvicorn.error").addFilter(_QUIET_CUTS)  # idempotent
    with serve_in_thread(fake.app, "fake-anthropic", port) as bound:
        fake.base_url = f"http://127.0.0.1:{bound}"
        yield fake


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dbos_agents.testing.fake_anthropic``: serve one answer until killed."""
    parser = argparse.ArgumentParser(
        prog="python -m dbos_agents.testing.fake_anthropic",
        description="A fake Anthropic Messages server answering every request with TEXT.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--text", required=True, help="the whole answer to every request")
    parser.add_argument("--chunk-chars", type=int, default=8, help="characters per delta")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between events")
    parser.add_argument("--model", default="claude-haiku-4-5", help="the model name reported")
    args = parser.parse_args(argv)
    text: str = args.text
    fake = FakeAnthropic(
        model=args.model,
        respond=lambda body: FakeReply(200, fake.message(text, [])),
        chunk_chars=args.chunk_chars,
        chunk_delay_sec=args.chunk_delay,
    )
    with serve_fake_anthropic(fake, port=args.port) as served:
        print(served.base_url, flush=True)  # the first line: a parent process reads it
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
