"""An event stream the server's shutdown cut is ended properly: its closing chunk is sent.

At SIGTERM the server stops its open event streams (``sse_starlette`` cancels them on
uvicorn's exit signal); the stream's ASGI call then returns without the response's last
body message, so the client saw a broken chunked body and uvicorn logged "ASGI callable
returned without completing response". Sending that message ends the stream like any other
end of stream: an ``EventSource`` or the chat page reconnects and resumes from the durable
log. Only event streams are completed this way; any other unfinished response stays an
error.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CompleteCutStreams"]


class CompleteCutStreams:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stream = False
        started = False
        complete = False

        async def watch(message: Message) -> None:
            nonlocal stream, started, complete
            if message["type"] == "http.response.start":
                started = True
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type" and value.startswith(b"text/event-stream"):
                        stream = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        await self.app(scope, receive, watch)
        if stream and started and not complete:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
