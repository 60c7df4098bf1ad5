"""The floor of bench/server_pieces.py: the SSE stack ``dbos-agents serve`` runs (uvicorn on
uvloop and httptools, Starlette, sse-starlette) fed by the same ``pg_notify`` the bench's
writer sends, with nothing of ours between them: one LISTEN thread hands each notification's
rows to the queue of the stream at ``GET /sessions/{id}/events``, which sends each row as an
``event: delta``. No auth, no session read, no full read, no cursor, no exactly-once: what a
durable stream cannot do with less.

    python bench/_lib/floor_server.py --port P --database-url URL
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections.abc import AsyncIterator

import psycopg
import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from dbos_agents.live import announce


def app(database_url: str) -> Starlette:
    queues: dict[str, asyncio.Queue[list[str]]] = {}
    loop: asyncio.AbstractEventLoop | None = None

    def listen() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"LISTEN {announce.CHANNEL}")
            for note in conn.notifies():
                head, _, rows = note.payload.partition(" ")
                q = queues.get(head.removeprefix(announce.DELTAS))
                if q is not None and loop is not None and rows:
                    texts = [json.dumps(r) for r in json.loads(rows)]
                    loop.call_soon_threadsafe(q.put_nowait, texts)

    async def pieces(q: asyncio.Queue[list[str]]) -> AsyncIterator[ServerSentEvent]:
        while True:
            for text in await q.get():
                yield ServerSentEvent(text, event="delta", sep="\n")

    async def stream(request: Request) -> EventSourceResponse:
        nonlocal loop
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[list[str]] = asyncio.Queue()
        queues[request.path_params["sid"]] = q
        return EventSourceResponse(pieces(q), sep="\n")

    async def healthz(_request: Request) -> Response:
        return PlainTextResponse("ok")

    threading.Thread(target=listen, daemon=True).start()
    routes = [Route("/sessions/{sid}/events", stream), Route("/healthz", healthz)]
    return Starlette(routes=routes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--database-url", required=True)
    args = p.parse_args()
    uvicorn.run(app(args.database_url), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
