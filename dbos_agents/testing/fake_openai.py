"""A small OpenAI-wire-compatible server for tests and demos: scripted replies, recorded requests.

It speaks just enough of ``POST /v1/chat/completions`` for the real ``openai`` client (and so
``OpenAIModel``) to talk to it over loopback HTTP. Replies come from a FIFO queue the test
fills; every request body is recorded so the test can assert what the adapter sent::

    with serve_fake_openai() as fake:
        fake.push_text("hello", prompt_tokens=12, completion_tokens=3)
        fake.push_tool_calls(FakeToolCall("lookup", '{"id": 1}'))
        fake.push_error(429, "slow down")
        model = OpenAIModel("gpt-4.1-mini", base_url=fake.base_url)
        ...
        assert fake.requests[0]["parallel_tool_calls"] is True

When the queue is empty the server answers with ``respond(body)`` if one was given, else a
400 error naming the problem (not retryable, so a missing script fails fast).

A request with ``"stream": true`` gets the same scripted reply as OpenAI's server-sent
``chat.completion.chunk`` events (``chunk_chars`` characters a piece, ``chunk_delay_sec``
apart; ``cut_after=`` drops the connection mid-stream). A scripted reply is the whole
intended answer: a request that continues a partial reply (an assistant ``prefix`` message,
or the partial followed by ``CONTINUE_PROMPT``) gets only the text after the partial, and
each recorded request carries ``continuation`` (``"fresh"``, ``"prefix"`` or ``"request"``)
and ``offset`` (the partial's length).

As a separate process, for workers that are killed and restarted mid-stream::

    python -m dbos_agents.testing.fake_openai --port 8765 --text "the whole answer"

answers every request with that text and prints its base URL on the first line;
``GET /_fake/requests`` returns the recorded requests and ``POST /_fake/reset`` clears them.

Needs ``fastapi`` and ``uvicorn`` (test/demo dependencies, not runtime ones).
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

from .fake_openai_stream import (
    StreamCut,
    continuation_of,
    continue_reply,
    sse_chunks,
    stream_events,
)
from .loopback import serve_in_thread

__all__ = ["FakeOpenAI", "FakeReply", "FakeToolCall", "serve_fake_openai"]


@dataclass(frozen=True)
class FakeToolCall:
    """One function tool call in a scripted reply. ``arguments`` is sent verbatim (it may be
    malformed JSON on purpose); ``id`` defaults to ``call_<n>`` with a server-wide counter."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class FakeReply:
    """One HTTP answer: status, JSON body and headers, sent after ``delay`` seconds.
    Streamed, the connection is dropped after ``cut_after`` chunks when that is set."""

    status: int
    body: dict[str, Any]
    delay: float = 0.0
    cut_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], FakeReply]


class FakeOpenAI:
    """The scripted state behind the server: a reply queue and the requests received.

    Thread-safe: the test thread pushes and reads while the server thread pops and records.
    ``base_url`` is set by ``serve_fake_openai`` once the server listens.
    """

    def __init__(
        self,
        *,
        model: str = "gpt-4.1-mini",
        respond: Responder | None = None,
        chunk_chars: int = 8,
        chunk_delay_sec: float = 0.0,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be at least 1, not {chunk_chars}")
        self.model = model
        """The ``model`` reported in replies when a push does not name one."""
        self.chunk_chars = chunk_chars
        """Characters of text (or tool arguments) per streamed chunk."""
        self.chunk_delay_sec = chunk_delay_sec
        """Seconds between streamed chunks."""
        self.base_url = ""
        self._respond = respond
        self._lock = threading.Lock()
        self._replies: deque[FakeReply] = deque()
        self._requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self.app = self._build_app()

    # -- scripting ---------------------------------------------------------------------------

    def push(self, reply: FakeReply) -> None:
        """Queue a raw reply (any status and body, for example a 200 with no choices)."""
        with self._lock:
            self._replies.append(reply)

    def push_text(
        self,
        text: str | None,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        model: str | None = None,
        delay: float = 0.0,
        cut_after: int | None = None,
    ) -> None:
        """Queue a final text answer; streamed, cut after ``cut_after`` chunks if set."""
        reply = self.completion(text, [], prompt_tokens, completion_tokens, model, delay)
        self.push(FakeReply(reply.status, reply.body, reply.delay, cut_after))

    def push_tool_calls(
        self,
        *calls: FakeToolCall,
        text: str | None = None,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        model: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue an answer requesting one or more (parallel) tool calls, in this order."""
        reply = self.completion(text, list(calls), prompt_tokens, completion_tokens, model, delay)
        self.push(reply)

    def push_error(
        self,
        status: int,
        message: str,
        *,
        type: str = "server_error",
        code: str | None = None,
        delay: float = 0.0,
        retry_after: float | None = None,
    ) -> None:
        """Queue an error with an OpenAI-style body: ``{"error": {message, type, param, code}}``
        (and the ``retry-after`` header, in seconds, when given)."""
        body = {"error": {"message": message, "type": type, "param": None, "code": code}}
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        self.push(FakeReply(status, body, delay, headers=headers))

    def completion(
        self,
        text: str | None,
        calls: list[FakeToolCall],
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        model: str | None = None,
        delay: float = 0.0,
    ) -> FakeReply:
        """A ``chat.completion`` reply, for ``push`` or for a ``respond`` callback."""
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c.id or f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        body = {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        return FakeReply(200, body, delay)

    # -- inspection --------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received so far (parsed JSON), oldest first; a copy."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many scripted replies have not been served yet."""
        with self._lock:
            return len(self._replies)

    def reset(self) -> None:
        """Forget the recorded requests and drop the scripted replies not served yet."""
        with self._lock:
            self._requests.clear()
            self._replies.clear()

    # -- the app -----------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> FakeReply:
        kind, partial = continuation_of(body)
        with self._lock:
            self._requests.append({**body, "continuation": kind, "offset": len(partial)})
            number = len(self._requests)
            reply = self._replies.popleft() if self._replies else None
        if reply is None and self._respond is not None:
            reply = self._respond(body)
        if reply is not None:
            if partial and reply.status == 200:
                body = continue_reply(reply.body, partial)
                reply = replace(reply, body=body)
            return reply
        return FakeReply(
            400,
            {
                "error": {
                    "message": f"FakeOpenAI has no scripted reply for request {number}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "fake_queue_empty",
                }
            },
        )

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake-openai")

        @app.post("/v1/chat/completions")
        async def chat_completions(request: Request) -> Response:
            body = await request.json()
            body = body if isinstance(body, dict) else {"_body": body}
            reply = self._next_reply(body)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if body.get("stream") is True and reply.status == 200:
                options = body.get("stream_options")
                include_usage = isinstance(options, dict) and options.get("include_usage") is True
                events = stream_events(
                    reply.body, chunk_chars=self.chunk_chars, include_usage=include_usage
                )
                chunks = sse_chunks(
                    events, delay_sec=self.chunk_delay_sec, cut_after=reply.cut_after
                )
                return StreamingResponse(chunks, media_type="text/event-stream")
            return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)

        @app.get("/_fake/requests")
        async def recorded_requests() -> JSONResponse:
            return JSONResponse(self.requests)

        @app.post("/_fake/reset")
        async def reset() -> JSONResponse:
            self.reset()
            return JSONResponse({"ok": True})

        return app


class _QuietCuts(logging.Filter):
    """Drops uvicorn's traceback for a stream cut on purpose (``cut_after``): it is the test's
    scenario, not a server fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


_QUIET_CUTS = _QuietCuts()


@contextmanager
def serve_fake_openai(fake: FakeOpenAI | None = None, *, port: int = 0) -> Iterator[FakeOpenAI]:
    """Run ``fake`` (or a new ``FakeOpenAI``) with uvicorn on 127.0.0.1 and ``port`` (by
    default a free one), in a background thread; yield it with ``base_url`` set
    (``http://127.0.0.1:PORT/v1``)."""
    fake = fake or FakeOpenAI()
    logging.getLogger("uvicorn.error").addFilter(_QUIET_CUTS)  # idempotent: a filter is added once
    with serve_in_thread(fake.app, "fake-openai", port) as bound:
        fake.base_url = f"http://127.0.0.1:{bound}/v1"
        yield fake


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dbos_agents.testing.fake_openai``: serve one answer until killed."""
    parser = argparse.ArgumentParser(
        prog="python -m dbos_agents.testing.fake_openai",
        description="A fake OpenAI chat-completions server answering every request with TEXT.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--text", required=True, help="the whole answer to every request")
    parser.add_argument("--chunk-chars", type=int, default=8, help="characters per chunk")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--model", default="gpt-4.1-mini", help="the model name reported")
    args = parser.parse_args(argv)
    text: str = args.text
    fake = FakeOpenAI(
        model=args.model,
        respond=lambda body: fake.completion(text, []),
        chunk_chars=args.chunk_chars,
        chunk_delay_sec=args.chunk_delay,
    )
    with serve_fake_openai(fake, port=args.port) as served:
        print(served.base_url, flush=True)  # the first line: a parent process reads it
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
