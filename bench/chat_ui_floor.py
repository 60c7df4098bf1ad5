"""The floor of bench/chat_ui.py: the AI SDK's UI message stream from a server with no
database, so a run tells how much of its first token and round trip is HTTP, SSE and the
AI SDK client on this host, and how much is ours.

A raw ASGI app under uvicorn (uvloop and httptools, as ``dbos-agents serve`` gets them; no
access log) answers ``POST /ai-sdk/stamp`` and ``POST /ai-sdk/asker`` as our server does
for bench/chat_ui_worker.py's agents, with the same parts, headers and ``[DONE]``:

- ``stamp``: the headers, ``start`` and ``data-session`` (a session token, sent back as
  ``Authorization: Bearer``), then after ``--lead-ms`` plus a random 0..``--jitter-ms``,
  ``--pieces`` text deltas ``"<i>:<unix time>;"``, one every ``--pace-ms``, each stamped
  right before it is sent;
- ``asker``: the client tool ``confirm``'s call, ``finish`` with ``tool-calls``; the POST of
  its output (the token checked, the call's wait kept in memory) streams
  ``tool-output-available`` and the pieces at once (no lead).

    python bench/chat_ui_floor.py [--port 0] [--pieces 20] [--pace-ms 50] [--lead-ms 500]
        [--jitter-ms 50]

Prints ``READY <port>`` once listening; SIGTERM stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn
from _lib import cli
from _lib.child import Child
from _lib.tables import ratio, rich_table
from chat_ui_worker import ARGS, ASKER, CALL_ID, STAMP, TOOL, piece
from rich.console import Console

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
    (b"x-vercel-ai-ui-message-stream", b"v1"),
]
"""What our server's UI message streams send (sse-starlette's and ``ai_sdk/stream.py``'s)."""
TOKEN_HEADER = b"x-dbos-agents-token"
DONE = b"data: [DONE]\n\n"


def sse(part: dict[str, Any]) -> bytes:
    """One part as an SSE ``data:`` line, JSON as our server writes it."""
    return (
        b"data: " + json.dumps(part, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    )


class Floor:
    """The ASGI app; every chat's token, run count and waiting tool call in memory."""

    def __init__(self, pieces: int, pace_ms: float, lead_ms: float, jitter_ms: float) -> None:
        self.pieces, self.pace = pieces, pace_ms / 1000
        self.lead, self.jitter = lead_ms / 1000, jitter_ms / 1000
        self.tokens: dict[str, str] = {}
        self.runs: dict[str, int] = {}
        self.waits: dict[str, str] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if method == "GET" and path == "/healthz":
            return await _plain(send, 200, b"ok")
        agent = path.removeprefix("/ai-sdk/")
        if method != "POST" or agent not in (STAMP, ASKER):
            return await _plain(send, 404, b"not found")
        try:
            body = json.loads(await _body(receive))
            chat_id, last = str(body["id"]), body["messages"][-1]
            role = last["role"]
        except (ValueError, KeyError, IndexError, TypeError):
            return await _plain(send, 400, b"not a chat request")
        if role == "user":
            return await self._say(send, agent, chat_id)
        if role == "assistant" and chat_id in self.tokens:
            return await self._answer(scope, send, chat_id, last)
        return await _plain(send, 400, b"nothing to do")

    async def _say(self, send: Send, agent: str, chat_id: str) -> None:
        run = self.runs[chat_id] = self.runs.get(chat_id, 0) + 1
        mid = f"{chat_id}-run-{run}"
        head = [sse({"type": "start", "messageId": mid})]
        headers = HEADERS
        if chat_id not in self.tokens:
            token = self.tokens[chat_id] = secrets.token_urlsafe(32)
            head.append(sse({"type": "data-session", "data": {"token": token}, "transient": True}))
            headers = [*HEADERS, (TOKEN_HEADER, token.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for chunk in head:
            await _chunk(send, chunk)
        if agent == ASKER and run == 1:  # the model's first turn: the client tool
            self.waits[chat_id] = CALL_ID
            for part in (
                {"type": "start-step"},
                {"type": "tool-input-start", "toolCallId": CALL_ID, "toolName": TOOL},
                {"type": "tool-input-delta", "toolCallId": CALL_ID, "inputTextDelta": ARGS},
                {"type": "tool-input-available", "toolCallId": CALL_ID, "toolName": TOOL,
                 "input": json.loads(ARGS)},
                {"type": "finish-step"},
                {"type": "finish", "finishReason": "tool-calls"},
            ):  # fmt: skip
                await _chunk(send, sse(part))
            return await _chunk(send, DONE, more=False)
        if agent == STAMP:
            await asyncio.sleep(self.lead + random.random() * self.jitter)
        await self._pieces(send, mid)

    async def _answer(self, scope: Scope, send: Send, chat_id: str, last: Any) -> None:
        auth = dict(scope["headers"]).get(b"authorization", b"")
        if auth != b"Bearer " + self.tokens[chat_id].encode():
            return await _plain(send, 401, b"not this chat's token")
        parts = last.get("parts") or []
        step = max((i for i, p in enumerate(parts) if p.get("type") == "step-start"), default=-1)
        outputs = [
            p
            for p in parts[step + 1 :]
            if str(p.get("type")).startswith("tool-") and p.get("state") == "output-available"
        ]
        mid = f"{chat_id}-run-{self.runs[chat_id]}"
        waiting = self.waits.get(chat_id)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await _chunk(send, sse({"type": "start", "messageId": mid}))
        answer = next((p for p in outputs if p.get("toolCallId") == waiting), None)
        output = answer.get("output") if answer is not None else None
        if answer is None or not isinstance(output, dict) or not isinstance(output.get("ok"), bool):
            await _chunk(send, sse({"type": "error", "errorText": "no open wait for this call"}))
            await _chunk(send, sse({"type": "finish", "finishReason": "error"}))
            return await _chunk(send, DONE, more=False)
        del self.waits[chat_id]
        await _chunk(send, sse({"type": "tool-output-available", "toolCallId": CALL_ID,
                                "output": output}))  # fmt: skip
        await self._pieces(send, mid)

    async def _pieces(self, send: Send, mid: str) -> None:
        """The model's text turn: one step, one text part, the stamped pieces."""
        text_id = f"{mid}-1"
        await _chunk(send, sse({"type": "start-step"}))
        await _chunk(send, sse({"type": "text-start", "id": text_id}))
        for i in range(self.pieces):
            if i:
                await asyncio.sleep(self.pace)
            await _chunk(send, sse({"type": "text-delta", "id": text_id, "delta": piece(i)}))
        for part in ({"type": "text-end", "id": text_id}, {"type": "finish-step"},
                     {"type": "finish", "finishReason": "stop"}):  # fmt: skip
            await _chunk(send, sse(part))
        await _chunk(send, DONE, more=False)


async def _body(receive: Receive) -> bytes:
    out = b""
    while True:
        m = await receive()
        out += bytes(m.get("body", b""))
        if not m.get("more_body"):
            return out


async def _chunk(send: Send, data: bytes, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": data, "more_body": more})


async def _plain(send: Send, status: int, text: bytes) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(text)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text})


# ---------------------------------------------------------------- bench/chat_ui.py's side


@contextlib.contextmanager
def running(worker_args: list[str]) -> Iterator[tuple[str, Child]]:
    """The floor server in a process of its own, with the worker's options: (base URL, its
    process); stopped afterwards."""
    floor = Child([sys.executable, str(Path(__file__).resolve()), *worker_args])
    try:
        port = int(floor.expect("READY", 60).split()[1])
        yield f"http://127.0.0.1:{port}", floor
    finally:
        floor.stop(10)


KEPT = (
    "chats_reported", "first_token_p50_ms", "first_token_p99_ms", "round_trip_p50_ms",
    "round_trip_p99_ms", "round_trip_post_p50_ms", "round_trip_resume_p50_ms",
    "round_trip_headers_p50_ms", "round_trip_deliver_p50_ms", "piece_p50_ms", "piece_p99_ms",
    "stamp_headers_p50_ms", "opened_after_first_piece", "chats_with_wrong_text", "errors",
    "stamp_phase_s", "asker_phase_s", "node_cpu_s", "node_loop_lag_p99_ms",
)  # fmt: skip
"""What a row keeps of the floor's summary, each key prefixed ``floor_``."""


def fields(summary: dict[str, Any], server_cpu_s: float, host_busy_pct: float) -> dict[str, Any]:
    """The floor's keys of a bench/chat_ui.py row, from its summary of the floor's chats."""
    out = {f"floor_{k}": summary[k] for k in KEPT}
    out["floor_server_cpu_s"] = round(server_cpu_s, 2)
    out["floor_host_busy_pct"] = round(host_busy_pct, 1)
    return out


def report(console: Console, rows: list[dict[str, Any]]) -> None:
    """The floor's table, as bench/chat_ui.py's first, and ours / floor (p50s)."""
    rows = [r for r in rows if "floor_first_token_p50_ms" in r]
    if not rows:
        return
    t = rich_table(
        "Same client, server without a database (floor; ms); ours / floor of the p50s",
        ("N", "first token p50", "p99", "tool round trip p50", "p99", "wrong text",
         "ours/floor first token", "round trip"),
    )  # fmt: skip
    for r in rows:
        t.add_row(
            str(r["chats"]),
            *("-" if r[f"floor_{k}"] is None else f"{r[f'floor_{k}']:.1f}" for k in (
                "first_token_p50_ms", "first_token_p99_ms", "round_trip_p50_ms",
                "round_trip_p99_ms")),
            str(r["floor_chats_with_wrong_text"]),
            ratio(r["first_token_p50_ms"], r["floor_first_token_p50_ms"]),
            ratio(r["round_trip_p50_ms"], r["floor_round_trip_p50_ms"]),
        )  # fmt: skip
    console.print(t)
    for r in rows:
        if r["floor_errors"]:
            console.print(f"[red]N={r['chats']}, floor: errors[/red] {r['floor_errors']}")


def main() -> None:
    p = cli.parser(__doc__)
    cli.options(p, port=0, pieces=20, pace_ms=50.0, lead_ms=500.0, jitter_ms=50.0)
    args = p.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    app = Floor(args.pieces, args.pace_ms, args.lead_ms, args.jitter_ms)
    config = uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning")
    print(f"READY {sock.getsockname()[1]}", flush=True)  # connections wait in the backlog
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
