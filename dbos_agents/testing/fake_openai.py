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

Needs ``fastapi`` and ``uvicorn`` (test/demo dependencies, not runtime ones).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

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
    """One HTTP answer: status and JSON body, sent after ``delay`` seconds."""

    status: int
    body: dict[str, Any]
    delay: float = 0.0


Responder = Callable[[dict[str, Any]], FakeReply]


class FakeOpenAI:
    """The scripted state behind the server: a reply queue and the requests received.

    Thread-safe: the test thread pushes and reads while the server thread pops and records.
    ``base_url`` is set by ``serve_fake_openai`` once the server listens.
    """

    def __init__(self, *, model: str = "gpt-4.1-mini", respond: Responder | None = None) -> None:
        self.model = model
        """The ``model`` reported in replies when a push does not name one."""
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
    ) -> None:
        """Queue a final text answer."""
        self.push(self.completion(text, [], prompt_tokens, completion_tokens, model, delay))

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
    ) -> None:
        """Queue an error with an OpenAI-style body: ``{"error": {message, type, param, code}}``."""
        body = {"error": {"message": message, "type": type, "param": None, "code": code}}
        self.push(FakeReply(status, body, delay))

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

    # -- the app -----------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> FakeReply:
        with self._lock:
            self._requests.append(body)
            number = len(self._requests)
            reply = self._replies.popleft() if self._replies else None
        if reply is not None:
            return reply
        if self._respond is not None:
            return self._respond(body)
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
        async def chat_completions(request: Request) -> JSONResponse:
            body = await request.json()
            reply = self._next_reply(body if isinstance(body, dict) else {"_body": body})
            if reply.delay:
                await asyncio.sleep(reply.delay)
            return JSONResponse(reply.body, status_code=reply.status)

        return app


@contextmanager
def serve_fake_openai(fake: FakeOpenAI | None = None) -> Iterator[FakeOpenAI]:
    """Run ``fake`` (or a new ``FakeOpenAI``) with uvicorn on 127.0.0.1 and a free port, in a
    background thread; yield it with ``base_url`` set (``http://127.0.0.1:PORT/v1``)."""
    fake = fake or FakeOpenAI()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        fake.app,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="fake-openai", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError("the fake OpenAI server did not start")
        time.sleep(0.01)
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
