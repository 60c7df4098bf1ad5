"""Chat UIs: what a page built on the AI SDK's useChat waits for, with N chats at once on one
worker: the first token after the model's first delta, and a client tool's round trip.

The official client (js/bench/ai-sdk-load.mjs: ``AbstractChat`` + ``DefaultChatTransport``,
in Node) talks to the worker and ``dbos-agents serve`` of bench/_lib/live.py, and, just
before, to a floor with no database that streams the same parts (``--floor-server``, this
script): what HTTP, SSE and the AI SDK cost on this host without us. Method and findings:
docs/bench-notes/chat_ui.md.

    python bench/chat_ui.py [--chats 1,100] [--rounds 3] [--pieces 20] [--pace-ms 50]
        [--lead-ms 500] [--jitter-ms 50] [--spread-ms 1000] [--timeout 300]
        [--db-name NAME] [--json] [--server-url URL] [--server-workers 1] [--no-floor]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn
from _lib import cli
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.live import ARGS, ASKER, CALL_ID, STAMP, TOOL, piece, processes, worker_args
from _lib.procfs import Meter
from _lib.render import chat_ui_section, show
from _lib.stats import pct
from rich.console import Console

HERE = Path(__file__).resolve().parent
JS = HERE.parent / "js"
LOAD = JS / "bench" / "ai-sdk-load.mjs"
DB_NAME = "dbos_agents_bench_chat_ui"

GOAL_FIRST_TOKEN_MS = 15.0
"""Issue 28: first token at the client after the model's first delta, p50, 100 chats."""
GOAL_ROUND_TRIP_MS = 30.0
"""Issue 28: tool input shown -> output posted -> next text delta at the client, p50."""


def run_node(args: Any, base: str, n: int) -> list[Any]:
    """js/bench/ai-sdk-load.mjs with ``n`` chats at once, ``args.rounds`` times; its JSON
    lines (one a chat, then ``done``)."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("Node is not installed (bench/chat_ui.py runs the official AI SDK)")
    if not (JS / "node_modules" / "ai").is_dir():
        raise SystemExit("the JS clients are not installed: run `npm ci --prefix js`")
    cfg = {"url": base, "chats": n, "pieces": args.pieces, "rounds": args.rounds}
    cfg |= {"spreadMs": args.spread_ms, "timeoutMs": args.timeout * 1000}
    proc = subprocess.run(
        [node, str(LOAD), json.dumps(cfg)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=args.rounds * (2 * args.timeout + 60),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"node exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]


def _p(xs: list[float], q: float) -> float | None:
    return round(pct(xs, q), 2) if xs else None


def summarize(n: int, rounds: int, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the Node process's lines (``rounds`` rounds pooled)."""
    chats = [x for x in lines if "chat" in x]
    done = next((x for x in lines if x.get("event") == "done"), {})

    def col(key: str) -> list[float]:
        return [float(c[key]) for c in chats if c.get(key) is not None]

    first, trip = col("first_token_ms"), col("round_trip_ms")
    pieces = [float(x) for c in chats for x in c["piece_ms"]]
    wrong = [c for c in chats if not (c["stamp_ok"] and c["tool_ok"])]
    row: dict[str, Any] = {
        "chats": n,
        "rounds": rounds,
        "chats_reported": len(chats),
        **{
            f"{k}_p{q}_ms": _p(xs, q)
            for k, xs in (("first_token", first), ("round_trip", trip))
            for q in (50, 99)
        },
        **{
            f"round_trip_{k}_p50_ms": _p(col(f"round_trip_{k}_ms"), 50)
            for k in ("post", "resume", "headers", "deliver")
        },
        "pieces": len(pieces),
        "piece_p50_ms": _p(pieces, 50),
        "piece_p99_ms": _p(pieces, 99),
        "stamp_headers_p50_ms": _p(col("stamp_headers_ms"), 50),
        "opened_after_first_piece": sum(1 for c in chats if c["opened_after_first_piece"]),
        "chats_with_wrong_text": len(wrong) + n * rounds - len(chats),
        "errors": sorted({e for c in wrong for e in c["stamp_errors"] + c["tool_errors"]})[:5],
        **{
            k: done.get(k)
            for k in ("stamp_phase_s", "asker_phase_s", "clock_skew_ms", "node_cpu_s")
        },
        "node_loop_lag_p99_ms": done.get("loop_lag_p99_ms"),
        "samples_first_token_ms": [round(x, 3) for x in first],
        "samples_round_trip_ms": [round(x, 3) for x in trip],
    }
    return row


def measure(args: Any, chats: list[int], console: Console) -> list[dict[str, Any]]:
    live = worker_args(args.pieces, args.pace_ms, args.lead_ms, args.jitter_ms)
    rows = []
    with contextlib.ExitStack() as stack:
        floor_base, floor_proc = (
            stack.enter_context(floor_server(live)) if args.floor else ("", None)
        )
        base, worker, server_pid = stack.enter_context(
            processes(args.server_url, args.db_name, live, args.server_workers)
        )
        for n in chats:
            floor_row: dict[str, Any] = {}
            if floor_proc is not None:
                console.print(f"[chat_ui] {n} chat(s) at once, floor")
                meter = Meter({"server": floor_proc.pid})
                summary = summarize(n, args.rounds, run_node(args, floor_base, n))
                floor_row = {f"floor_{k}": v for k, v in (summary | meter.read()).items()
                             if k in FLOOR_KEPT}  # fmt: skip
            console.print(f"[chat_ui] {n} chat(s) at once")
            meter = Meter({"worker": worker.pid, "server": server_pid}, args.db_name, ("server",))
            row = summarize(n, args.rounds, run_node(args, base, n)) | meter.read()
            row["profiled"] = False
            row["server_workers"] = args.server_workers
            rows.append(row | floor_row)
    return rows


# ---------------------------------------------------------------------------- the floor

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


@contextlib.contextmanager
def floor_server(live: list[str]) -> Iterator[tuple[str, Child]]:
    """The floor server in a process of its own, with the worker's options: (base URL, its
    process); stopped afterwards."""
    floor = Child([sys.executable, str(Path(__file__).resolve()), "--floor-server", *live])
    try:
        port = int(floor.expect("READY", 60).split()[1])
        yield f"http://127.0.0.1:{port}", floor
    finally:
        floor.stop(10)


FLOOR_KEPT = (
    "chats_reported", "first_token_p50_ms", "first_token_p99_ms", "round_trip_p50_ms",
    "round_trip_p99_ms", "round_trip_post_p50_ms", "round_trip_resume_p50_ms",
    "round_trip_headers_p50_ms", "round_trip_deliver_p50_ms", "piece_p50_ms", "piece_p99_ms",
    "stamp_headers_p50_ms", "opened_after_first_piece", "chats_with_wrong_text", "errors",
    "stamp_phase_s", "asker_phase_s", "node_cpu_s", "node_loop_lag_p99_ms", "server_cpu_s",
    "host_busy_pct",
)  # fmt: skip
"""What a row keeps of the floor's summary, each key prefixed ``floor_``."""


def serve_floor(args: Any) -> None:
    """``--floor-server``: the floor, listening on ``--port`` (0: any); prints ``READY
    <port>`` (connections wait in the backlog meanwhile)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(2048)
    app = Floor(args.pieces, args.pace_ms, args.lead_ms, args.jitter_ms)
    config = uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning")
    print(f"READY {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument(
        "--server-url", default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER)
    )
    p.add_argument("--chats", default="1,100", help="chats at once, a list")
    p.add_argument(
        "--server-workers", type=int, default=1, help="dbos-agents serve --workers (processes)"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--db-name", default=DB_NAME, help="the fresh database's name")
    p.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the client against --floor-server (no database), before ours",
    )
    p.add_argument("--floor-server", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    cli.options(p, pieces=20, pace_ms=50.0, lead_ms=500.0, jitter_ms=50.0, spread_ms=1000.0)
    cli.options(p, rounds=3, timeout=300.0)
    args = p.parse_args()
    if args.floor_server:
        serve_floor(args)
        return
    chats = [int(x) for x in args.chats.split(",") if x]
    if not chats or min(chats) < 1 or args.pieces < 1 or args.rounds < 1:
        p.error("--chats, --pieces and --rounds must be at least 1")
    with cli.report_to_stderr(args.json):
        console = Console(width=max(Console().width, 120))
        rows = measure(args, chats, console)
        keep = ("rounds", "pieces", "pace_ms", "lead_ms", "jitter_ms", "spread_ms", "floor")
        result = {
            "rows": rows,
            "args": {k: getattr(args, k) for k in keep},
            "goals_ms": {
                "first_token_p50": GOAL_FIRST_TOKEN_MS,
                "round_trip_p50": GOAL_ROUND_TRIP_MS,
            },
            "versions": {**cli.versions(), "ai": _ai_version()},
        }
        show(chat_ui_section(result), console)
        for r in rows:
            for k in ("errors", "floor_errors"):
                if r.get(k):
                    console.print(f"N={r['chats']}, {k}: {r[k]}")
    if args.json:
        cli.print_json(result)


def _ai_version() -> str:
    try:
        version: str = json.loads((JS / "node_modules" / "ai" / "package.json").read_text())[
            "version"
        ]
        return version
    except (OSError, ValueError, KeyError):
        return "unknown"


if __name__ == "__main__":
    main()
