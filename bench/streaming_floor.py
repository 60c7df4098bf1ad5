"""Floors for bench/streaming.py's latency: the same SSE stack with nothing of ours behind it,
so the run tells how much of a piece's latency is the host and the stack, not dbos-agents.

- ``--serve local``: uvicorn (uvloop, httptools), Starlette and sse-starlette, as
  ``dbos-agents serve`` runs them; each stream's pieces are stamped in the server itself.
- ``--serve notify``: the same server forwards pieces that a producer process (``--produce``)
  stamps and sends through Postgres: every ``--flush-ms`` (default: our worker's
  ``stream_flush_sec``) one transaction of ``pg_notify``,
  a piece each, which the server's LISTEN thread hands to the streams' queues (no table,
  no read: less than any durable log can do).

Either way stream ``i`` starts ``offset`` seconds after the last reader connected (the
readers pass it; bench/streaming.py spreads them as its own sessions start) and sends
``--pieces`` pieces, one every ``--pace-ms``, then ``event: status``.

    python bench/streaming_floor.py --serve local|notify --port P --streams N [--database-url URL]
    python bench/streaming_floor.py --produce --database-url URL --streams N --offsets-ms 0,5,..
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator

import psycopg
import uvicorn
from _lib import cli
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from dbos_agents import Settings

CHANNEL = "bench_floor"
GO = "bench_floor_go"


def _delta(stamp: str) -> ServerSentEvent:
    return ServerSentEvent(json.dumps({"text": stamp + ";"}), event="delta", sep="\n")


def _status() -> ServerSentEvent:
    return ServerSentEvent('{"status": "completed"}', event="status", sep="\n")


def app(mode: str, streams: int, pieces: int, pace: float, database_url: str | None) -> Starlette:
    queues: dict[int, asyncio.Queue[str]] = {}
    go = asyncio.Event()
    loop: asyncio.AbstractEventLoop | None = None

    def listen() -> None:
        assert database_url is not None
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            for note in conn.notifies():
                i, _, stamp = note.payload.partition(":")
                q = queues.get(int(i))
                if q is not None and loop is not None:
                    loop.call_soon_threadsafe(q.put_nowait, stamp)

    async def connected() -> None:
        if len(queues) == streams and not go.is_set():
            go.set()
            if mode == "notify":
                assert database_url is not None
                async with await psycopg.AsyncConnection.connect(
                    database_url, autocommit=True
                ) as conn:
                    await conn.execute(f"NOTIFY {GO}")

    async def local(i: int, offset: float) -> AsyncIterator[ServerSentEvent]:
        await go.wait()
        await asyncio.sleep(offset)
        for k in range(pieces):
            if k:
                await asyncio.sleep(pace)
            yield _delta(f"{time.time():.6f}")
        yield _status()

    async def forwarded(q: asyncio.Queue[str]) -> AsyncIterator[ServerSentEvent]:
        while (stamp := await q.get()) != "end":
            yield _delta(stamp)
        yield _status()

    async def stream(request: Request) -> EventSourceResponse:
        nonlocal loop
        loop = asyncio.get_running_loop()
        i = int(request.path_params["i"])
        q: asyncio.Queue[str] = asyncio.Queue()
        queues[i] = q
        await connected()
        offset = float(request.query_params.get("offset", "0"))
        body = local(i, offset) if mode == "local" else forwarded(q)
        return EventSourceResponse(body, sep="\n")

    if mode == "notify":
        threading.Thread(target=listen, daemon=True).start()
    return Starlette(routes=[Route("/floor/{i}", stream)])


async def produce(
    database_url: str, offsets: list[float], pieces: int, pace: float, flush: float
) -> None:
    pending: list[str] = []
    done = 0

    async def one(i: int, offset: float) -> None:
        nonlocal done
        await asyncio.sleep(offset)
        for k in range(pieces):
            if k:
                await asyncio.sleep(pace)
            pending.append(f"{i}:{time.time():.6f}")
        pending.append(f"{i}:end")
        done += 1

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listen:
        await listen.execute(f"LISTEN {GO}")
        print("READY", flush=True)
        async for _ in listen.notifies(stop_after=1):
            break
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        tasks = [asyncio.create_task(one(i, o)) for i, o in enumerate(offsets)]
        while done < len(offsets) or pending:
            await asyncio.sleep(flush)
            if pending:
                batch, pending[:] = list(pending), []
                await conn.execute(
                    "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) p", (CHANNEL, batch)
                )
        await asyncio.gather(*tasks)


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument("--serve", choices=["local", "notify"])
    p.add_argument("--produce", action="store_true")
    p.add_argument("--offsets-ms", default="")
    cli.add_database_url(p)
    flush_ms = Settings.model_fields["stream_flush_sec"].default * 1000
    cli.options(p, port=0, streams=200, pieces=40, pace_ms=50.0, flush_ms=flush_ms)
    args = p.parse_args()
    pace = args.pace_ms / 1000
    if args.produce:
        offsets = [float(x) / 1000 for x in args.offsets_ms.split(",") if x]
        asyncio.run(produce(args.database_url, offsets, args.pieces, pace, args.flush_ms / 1000))
        return
    served = app(args.serve, args.streams, args.pieces, pace, args.database_url)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
