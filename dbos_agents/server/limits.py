"""Request body limits, decided from the headers before a byte of the body is read.

- ``Transfer-Encoding`` (chunked) bodies: 411, their length is not known up front.
- No ``Content-Length`` (and no ``Transfer-Encoding``): a body of 0 bytes, as HTTP/1.1
  frames it, so ``curl -X POST .../interrupt`` works without ``-d ''``.
- ``Content-Length`` over the limit: 413; not a number: 400.

The ASGI server enforces Content-Length framing (uvicorn reads exactly that many bytes),
so a body cannot run past the announced length.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.lower(), value)
        if b"transfer-encoding" in headers:
            await _refuse(
                send, 411, "LENGTH_REQUIRED", "chunked bodies are not accepted; send Content-Length"
            )
            return
        raw_length = headers.get(b"content-length")
        if raw_length is None:
            length = 0
        else:
            try:
                length = int(raw_length)
                if length < 0:
                    raise ValueError
            except ValueError:
                await _refuse(send, 400, "INVALID_REQUEST", "Content-Length is not a number")
                return
        if length > self.max_body_bytes:
            await _refuse(
                send,
                413,
                "PAYLOAD_TOO_LARGE",
                f"the body has {length} bytes; the limit is {self.max_body_bytes}",
            )
            return

        await self.app(scope, receive, send)
