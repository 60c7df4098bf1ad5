"""A small Gemini-API-wire server for tests: scripted replies, recorded requests.

It speaks enough of the Gemini API (``generativelanguage`` ``v1beta``) for the real
``google-genai`` client, and so Pydantic AI's ``GoogleModel``, to talk to it over loopback
HTTP: ``POST /v1beta/models/{model}:generateContent`` and
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``. Replies come from a FIFO
queue the test fills; every request body is recorded::

    with serve_fake_gemini() as fake:
        fake.push_text("hello", input_tokens=12, output_tokens=3, thinking="Let me see.")
        fake.push_function_calls(FakeFunctionCall("lookup", {"id": "A-42"}), text="One moment.")
        fake.push_error(429, "Resource exhausted.", retry_after=2)
        client = genai.Client(api_key="fake", http_options=HttpOptions(base_url=fake.base_url))
        model = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(client=client))
        ...
        assert fake.requests[0]["model"] == "gemini-2.5-flash"

Each recorded request is the JSON body plus ``model`` (from the URL), ``stream`` and
``api_key`` (the ``x-goog-api-key`` header the SDK sends). A request the real API would
refuse (see ``fake_gemini_stream.check_request``: no contents, model turns that do not
alternate, a ``functionResponse`` that answers no call of the turn before, a thought
signature mangled on the way, a Gemini 3 function call that lost its signature) gets a 400
``INVALID_ARGUMENT`` without taking a scripted reply. When the queue is empty the server
answers with ``respond(request)`` if one was given, else a 400 naming the problem.

Replies are shaped as Gemini's: a function call's ``id`` is left out unless scripted (the
Gemini API sends none; Pydantic AI makes one up), the first function call of a reply carries
a ``thoughtSignature``, a text after ``thinking`` too, and errors are Google's
``{"error": {"code", "message", "status", "details"}}`` with the wait of a ``retry_after``
as a ``google.rpc.RetryInfo`` detail (Gemini sends no ``Retry-After`` header). Streamed, a
reply comes as ``data:`` events of ``chunk_chars`` characters, ``chunk_delay_sec`` apart;
``cut_after=`` drops the connection after that many events.

As a separate process, for workers that are killed and restarted mid-stream::

    python -m dbos_agents.testing.fake_gemini --port 8765 --text "the whole answer"

answers a continuation request (the partial as a model turn, then ``CONTINUE_PROMPT``) with
the rest of the answer (``remainder``), and prints its base URL on the first line; ``GET /_fake/requests`` returns the recorded
requests and ``POST /_fake/reset`` clears them. Needs ``fastapi`` and ``uvicorn``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import logging
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..models.openai_stream import CONTINUE_PROMPT
from .fake_gemini_stream import (
    BAD_KEY,
    BAD_KEY_INFO,
    SIGNATURE_PREFIX,
    UNREGISTERED,
    StreamCut,
    check_request,
    error_body,
    sse_events,
    stream_chunks,
)
from .loopback import serve_in_thread

__all__ = ["FakeFunctionCall", "FakeGemini", "FakeReply", "serve_fake_gemini"]


@dataclass(frozen=True)
class FakeFunctionCall:
    """One ``functionCall`` part. ``id`` is sent only when given (the Gemini API sends
    none)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class FakeReply:
    """One HTTP answer: status, JSON body and headers, after ``delay`` seconds; streamed,
    the connection is dropped after ``cut_after`` events when that is set."""

    status: int
    body: dict[str, Any]
    delay: float = 0.0
    cut_after: int | None = None
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], FakeReply]


class FakeGemini:
    """The scripted state behind the server (thread-safe): replies queued, requests seen.

    ``api_key``: when set, a request with another key gets Google's 400 ``API_KEY_INVALID``;
    a request with none always gets a 403 ``PERMISSION_DENIED``, as from the real API."""

    def __init__(
        self,
        *,
        respond: Responder | None = None,
        chunk_chars: int = 8,
        chunk_delay_sec: float = 0.0,
        api_key: str | None = None,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError(f"chunk_chars must be at least 1, not {chunk_chars}")
        self.chunk_chars = chunk_chars
        self.chunk_delay_sec = chunk_delay_sec
        self.api_key = api_key
        self.base_url = ""
        """``http://127.0.0.1:PORT`` (the SDK adds ``/v1beta``), set once the server listens."""
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
        finish_reason: str = "STOP",
        input_tokens: int = 10,
        output_tokens: int = 5,
        thinking_tokens: int = 0,
        cut_after: int | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue a text answer (after a thought part, if ``thinking`` is given); streamed,
        cut after ``cut_after`` events if set."""
        body = self.response(
            text,
            [],
            thinking=thinking,
            finish_reason=finish_reason,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            thinking_tokens=thinking_tokens,
        )
        self.push(FakeReply(200, body, delay, cut_after))

    def push_function_calls(
        self,
        *calls: FakeFunctionCall,
        text: str | None = None,
        thinking: str | None = None,
        input_tokens: int = 10,
        output_tokens: int = 5,
        thinking_tokens: int = 0,
        cut_after: int | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue a reply calling one or more functions (several: parallel calls), in this
        order, after ``text`` if given."""
        body = self.response(
            text,
            list(calls),
            thinking=thinking,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            thinking_tokens=thinking_tokens,
        )
        self.push(FakeReply(200, body, delay, cut_after))

    def push_error(
        self,
        status: int,
        message: str,
        *,
        status_name: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Queue an error in Google's shape. ``status_name`` defaults to the one Gemini sends
        with ``status`` (429: ``RESOURCE_EXHAUSTED``, 503: ``UNAVAILABLE``, ...)."""
        details = []
        if retry_after is not None:
            retry = {"@type": "type.googleapis.com/google.rpc.RetryInfo"}
            details.append(retry | {"retryDelay": f"{retry_after:g}s"})
        self.push(FakeReply(status, error_body(status, message, status_name, details)))

    def response(
        self,
        text: str | None,
        calls: list[FakeFunctionCall],
        *,
        thinking: str | None = None,
        finish_reason: str = "STOP",
        input_tokens: int = 10,
        output_tokens: int = 5,
        thinking_tokens: int = 0,
    ) -> dict[str, Any]:
        """A ``GenerateContentResponse`` body, for ``push`` or a ``respond`` callback. Its
        ``modelVersion`` is added when sent: the model the request names."""
        parts: list[dict[str, Any]] = []
        if thinking is not None:
            parts.append({"text": thinking, "thought": True})
        if text:
            parts.append({"text": text})
        for c in calls:
            call: dict[str, Any] = {"name": c.name, "args": c.args}
            if c.id is not None:
                call["id"] = c.id
            parts.append({"functionCall": call})
        signed = next((p for p in parts if "functionCall" in p), None)
        if signed is None and thinking is not None and text:
            signed = parts[-1]
        if signed is not None:
            signed["thoughtSignature"] = self._signature()
        usage = {
            "promptTokenCount": input_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": input_tokens + output_tokens + thinking_tokens,
        }
        if thinking_tokens:
            usage["thoughtsTokenCount"] = thinking_tokens
        candidate = {"content": {"role": "model", "parts": parts}, "finishReason": finish_reason}
        return {
            "candidates": [candidate | {"index": 0}],
            "usageMetadata": usage,
            "responseId": f"fake-response-{next(self._ids)}",
        }

    def _signature(self) -> str:
        raw = SIGNATURE_PREFIX + f"{next(self._ids)}".encode()
        return base64.b64encode(raw).decode()

    # -- inspection --------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received so far, oldest first (a copy): the body plus ``model``,
        ``stream`` and ``api_key``."""
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

    def _next_reply(self, record: dict[str, Any]) -> FakeReply:
        key = record["api_key"]
        refused = check_request(record, model=record["model"])
        with self._lock:
            self._requests.append(record)
            number = len(self._requests)
            taken = bool(key) and not refused and (self.api_key is None or key == self.api_key)
            reply = self._replies.popleft() if taken and self._replies else None
        if not key:
            return FakeReply(403, error_body(403, UNREGISTERED))
        if self.api_key is not None and key != self.api_key:
            return FakeReply(400, error_body(400, BAD_KEY, details=[BAD_KEY_INFO]))
        if refused:
            return FakeReply(400, error_body(400, refused))
        if reply is None and self._respond is not None:
            reply = self._respond(record)
        if reply is None:
            message = f"FakeGemini has no scripted reply for request {number}"
            return FakeReply(400, error_body(400, message))
        if reply.status == 200 and "modelVersion" not in reply.body:
            body = {**reply.body, "modelVersion": record["model"]}
            reply = FakeReply(200, body, reply.delay, reply.cut_after, reply.headers)
        return reply

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="fake-gemini")

        @app.post("/v1beta/models/{target}")
        async def generate(target: str, request: Request) -> Response:
            model, _, method = target.rpartition(":")
            if method not in ("generateContent", "streamGenerateContent") or not model:
                message = f"Method not found: models/{target}"
                return JSONResponse(error_body(404, message), status_code=404)
            try:
                body = await request.json()
            except json.JSONDecodeError as e:
                message = f"Invalid JSON payload received. {e}"
                return JSONResponse(error_body(400, message), status_code=400)
            stream = method == "streamGenerateContent"
            key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
            record = {**body} if isinstance(body, dict) else {"_body": body}
            record |= {"model": model, "stream": stream, "api_key": key}
            reply = self._next_reply(record)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if not stream or reply.status != 200:
                return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers)
            chunks = stream_chunks(reply.body, chunk_chars=self.chunk_chars)
            if request.query_params.get("alt") != "sse":  # a JSON array of the chunks
                return JSONResponse(chunks, headers=reply.headers)
            events = sse_events(chunks, delay_sec=self.chunk_delay_sec, cut_after=reply.cut_after)
            return StreamingResponse(events, media_type="text/event-stream", headers=reply.headers)

        @app.get("/_fake/requests")
        async def recorded_requests() -> JSONResponse:
            return JSONResponse(self.requests)

        @app.post("/_fake/reset")
        async def reset() -> JSONResponse:
            self.reset()
            return JSONResponse({"ok": True})

        return app


class _QuietCuts(logging.Filter):
    """Drops uvicorn's traceback for a stream cut on purpose (``cut_after``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], StreamCut))


_QUIET_CUTS = _QuietCuts()


def remainder(request: dict[str, Any], text: str) -> str:
    """``text``, or what is left of it after the partial reply a continuation request
    carries (a model turn that ``text`` starts with, then ``CONTINUE_PROMPT``)."""
    contents = request.get("contents") or []
    if len(contents) >= 2 and contents[-2].get("role") == "model":
        asked, partial = _text_of(contents[-1]), _text_of(contents[-2])
        if asked == CONTINUE_PROMPT and partial and text.startswith(partial):
            return text[len(partial) :]
    return text


def _text_of(content: dict[str, Any]) -> str:
    return "".join(str(p.get("text", "")) for p in content.get("parts") or [])


@contextmanager
def serve_fake_gemini(fake: FakeGemini | None = None, *, port: int = 0) -> Iterator[FakeGemini]:
    """Run ``fake`` (or a new one) on 127.0.0.1:``port`` (default: a free port) in a
    background thread; yield it with ``base_url`` set."""
    fake = fake or FakeGemini()
    logging.getLogger("uvicorn.error").addFilter(_QUIET_CUTS)  # idempotent
    with serve_in_thread(fake.app, "fake-gemini", port) as bound:
        fake.base_url = f"http://127.0.0.1:{bound}"
        yield fake


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dbos_agents.testing.fake_gemini``: serve one answer until killed."""
    parser = argparse.ArgumentParser(
        prog="python -m dbos_agents.testing.fake_gemini",
        description="A fake Gemini API server answering every request with TEXT.",
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--text", required=True, help="the whole answer to every request")
    parser.add_argument("--chunk-chars", type=int, default=8, help="characters per chunk")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between events")
    args = parser.parse_args(argv)
    text: str = args.text
    fake = FakeGemini(
        respond=lambda request: FakeReply(200, fake.response(remainder(request, text), [])),
        chunk_chars=args.chunk_chars,
        chunk_delay_sec=args.chunk_delay,
    )
    with serve_fake_gemini(fake, port=args.port) as served:
        print(served.base_url, flush=True)  # the first line: a parent process reads it
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
