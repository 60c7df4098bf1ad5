"""A lean SSE reader for load benches: one asyncio socket per stream, HTTP/1.1 chunked
decoding by hand, lines split on bytes. httpx's line iterator costs the reader process
about as much CPU as the server it measures; on a 2-core host that CPU is taken from the
server, so the bench would measure its own client.

``follow(host, port, path, headers, on_event)`` calls ``on_event(kind, data, now)`` for every
``event:``/``data:`` pair (``now``: ``time.time()`` when its bytes arrived) until
``on_event`` returns True or the server ends the response.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping


class SSEError(RuntimeError):
    pass


async def follow(
    host: str,
    port: int,
    path: str,
    headers: Mapping[str, str],
    on_event: Callable[[str, bytes, float], bool],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        status = await reader.readuntil(b"\r\n\r\n")
        first = status.split(b"\r\n", 1)[0]
        if b" 200 " not in first + b" ":
            raise SSEError(first.decode(errors="replace"))
        chunked = b"transfer-encoding: chunked" in status.lower()
        buf = b""
        kind = b""
        while True:
            if chunked:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    return
                data = (await reader.readexactly(size + 2))[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return
            now = time.time()
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"event: "):
                    kind = line[7:].rstrip(b"\r")
                elif line.startswith(b"data: ") and on_event(kind.decode(), line[6:], now):
                    return
    finally:
        writer.close()
