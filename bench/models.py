"""The model adapters of issue 45: ``AnthropicModel`` against ``OpenAIModel`` per turn, and
each adapter's CPU per streamed piece against its SDK's bare stream loop.

The fake servers (``dbos_agents.testing.fake_anthropic``, ``fake_openai``) run as processes
of their own, so this process's CPU is the client's only, and stream the same replies in
pieces of the same size, with no delay. Per turn: one AgentRuntime, an agent per adapter
(``Agent(model=...)``), sessions of ``--turns`` tool turns and an answer (played by this
script's ``--serve`` mode), the agents alternating within a round, the order flipping every
round. Per piece: ``time.process_time`` of ``--replies`` replies of ``--pieces`` text
pieces through ``model.stream`` against the same request made with the SDK's streaming call,
events iterated bare; ``--batches`` alternated pairs a round. Ratios, medians of the
rounds; the reasoning and results: docs/bench-notes/models.md.

    python bench/models.py [--rounds 3] [--sessions 20] [--turns 5] [--replies 20]
        [--pieces 64] [--batches 5] [--database-url SERVER] [--json]
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from _lib import cli
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.procfs import loadavg
from _lib.render import models_section, show

from dbos_agents import Agent, AgentRuntime, Message, Settings, ToolContext, tool
from dbos_agents.models import AnthropicModel, ModelRequest, OpenAIModel
from dbos_agents.testing import create_fresh_database, drop_database
from dbos_agents.testing.cluster import free_port

PROVIDERS = ("anthropic", "openai")
NAMES = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4.1-mini"}
CHUNK = 8
SAY = "Let me charge that order now. "
ANSWER = "All the orders are charged. " * 7
DB = "dbos_agents_bench_models"
SIZES = {"rounds": 3, "sessions": 20, "turns": 5, "replies": 20, "pieces": 64, "batches": 5}
USER = {  # the adapters' messages for REQUEST, as the bare SDK loops send them
    "anthropic": [{"role": "user", "content": [{"type": "text", "text": "go"}]}],
    "openai": [{"role": "user", "content": "go"}],
}
REQUEST = ModelRequest(agent="bench", messages=[Message(role="user", content="go")])


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial; side-effecting, so run at most once)."""
    return {"charged": cents, "key": ctx.idempotency_key}


def serve(provider: str, port: int, turns: int) -> None:
    """``--serve``: the fake server of ``provider`` playing ``turns`` tool turns, then the
    answer (by the assistant messages in each request), until killed."""
    from dbos_agents.testing import fake_anthropic as fa
    from dbos_agents.testing import fake_openai as fo

    def respond(body: dict[str, Any]) -> Any:
        n = sum(m.get("role") == "assistant" for m in body["messages"])
        args, text = {"order_id": f"o{n}", "cents": 100}, SAY if n < turns else ANSWER
        if provider == "openai":
            calls = [fo.FakeToolCall("charge", json.dumps(args))] if n < turns else []
            return fake.completion(text, calls)
        calls = [fa.FakeToolUse("charge", args)] if n < turns else []
        stop = "tool_use" if calls else "end_turn"
        return fa.FakeReply(200, fake.message(text, calls, stop_reason=stop))

    anthropic = provider == "anthropic"
    fake: Any = (fa.FakeAnthropic if anthropic else fo.FakeOpenAI)(respond=respond)
    with (fa.serve_fake_anthropic if anthropic else fo.serve_fake_openai)(fake, port=port) as on:
        print(on.base_url, flush=True)
        threading.Event().wait()


@contextlib.contextmanager
def fakes(argv: Callable[[str], list[str]]) -> Iterator[dict[str, str]]:
    """One fake server process per provider (``argv(provider)`` after the interpreter and
    before ``--port``); yields their base URLs."""
    children, urls = [], {}
    try:
        for p in PROVIDERS:
            port = free_port()
            children.append(Child([sys.executable, *argv(p), "--port", str(port)]))
            urls[p] = f"http://127.0.0.1:{port}" + ("/v1" if p == "openai" else "")
            children[-1].expect(urls[p], 60)
        yield urls
    finally:
        for c in children:
            c.stop(10)


def model(provider: str, url: str) -> AnthropicModel | OpenAIModel:
    cls = AnthropicModel if provider == "anthropic" else OpenAIModel
    return cls(NAMES[provider], base_url=url)


async def per_turn(url: str, urls: dict[str, str], args: Any) -> list[dict[str, float]]:
    """Rounds of ``--sessions`` sessions of each agent, alternated: median ms per turn."""
    agents = [Agent(p, tools=[charge], model=model(p, urls[p])) for p in PROVIDERS]
    rt = AgentRuntime(agents, settings=Settings(database_url=url, log_level="WARNING"))
    await rt.launch()

    async def session(agent: str) -> float:
        t0 = time.perf_counter()
        out = await (await rt.start(agent, "charge them")).result()
        assert out.status == "completed", out
        return (time.perf_counter() - t0) * 1000 / (args.turns + 1)

    rounds = []
    try:
        for p in PROVIDERS:  # warm-up
            await session(p)
        for r in range(args.rounds):
            ms: dict[str, list[float]] = {p: [] for p in PROVIDERS}
            for _ in range(args.sessions):
                for p in PROVIDERS[:: 1 if r % 2 == 0 else -1]:
                    ms[p].append(await session(p))
            rounds.append({p: statistics.median(ms[p]) for p in PROVIDERS})
            print(f"[models] per turn, round {r + 1}:", rounds[-1], file=sys.stderr, flush=True)
    finally:
        await rt.shutdown()
    return rounds


Loop = tuple[
    Callable[[int], Awaitable[int]], Callable[[], Awaitable[None]]
]  # (n replies -> pieces, close)


def bare_loop(provider: str, url: str) -> Loop:
    """The SDK's own streaming call with the adapter's request (the same client options),
    its events iterated bare."""
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    opts: dict[str, Any] = {"api_key": "not-needed", "base_url": url, "max_retries": 0,
                            "timeout": 60.0}  # fmt: skip
    kw = {"model": NAMES[provider], "messages": USER[provider], "stream": True}
    if provider == "anthropic":
        client: Any = AsyncAnthropic(**opts)
        start = functools.partial(client.messages.create, **kw, max_tokens=4096)
        piece: Callable[[Any], bool] = lambda e: e.type == "content_block_delta"  # noqa: E731
    else:
        usage = {"stream_options": {"include_usage": True}}
        client = AsyncOpenAI(**opts)
        start = functools.partial(client.chat.completions.create, **kw, **usage)
        piece = lambda c: bool(c.choices and c.choices[0].delta.content)  # noqa: E731

    async def loop(n: int) -> int:
        got = 0
        for _ in range(n):
            async with await start() as events:
                async for e in events:
                    got += piece(e)
        return got

    return loop, client.close


def adapter_loop(provider: str, url: str) -> Loop:
    """``model.stream(REQUEST)`` consumed whole."""
    m = model(provider, url)

    async def loop(n: int) -> int:
        got = 0
        for _ in range(n):
            async for event in m.stream(REQUEST):
                got += event.kind == "text"
        return got

    return loop, m.aclose


async def per_piece(urls: dict[str, str], args: Any) -> list[dict[str, dict[str, float]]]:
    """Rounds of ``--batches`` alternated (SDK, adapter) pairs per provider: CPU us per piece."""
    loops = {(p, "sdk"): bare_loop(p, urls[p]) for p in PROVIDERS}
    loops |= {(p, "adapter"): adapter_loop(p, urls[p]) for p in PROVIDERS}
    for loop, _ in loops.values():  # warm-up
        await loop(args.replies)
    rounds = []
    for r in range(args.rounds):
        res: dict[str, dict[str, float]] = {}
        for p in PROVIDERS[:: 1 if r % 2 == 0 else -1]:
            cpu, pieces = {"sdk": 0.0, "adapter": 0.0}, {"sdk": 0, "adapter": 0}
            for b in range(args.batches):
                for k in ("sdk", "adapter")[:: 1 if (r + b) % 2 == 0 else -1]:
                    c0 = time.process_time()
                    pieces[k] += await loops[p, k][0](args.replies)
                    cpu[k] += time.process_time() - c0
            assert pieces["sdk"] == pieces["adapter"] == args.batches * args.replies * args.pieces
            res[p] = {k: cpu[k] * 1e6 / pieces[k] for k in cpu}
        rounds.append(res)
        print(f"[models] per piece, round {r + 1}:", res, file=sys.stderr, flush=True)
    for _, close in loops.values():  # on this loop: the clients' connections belong to it
        await close()
    return rounds


def run(args: Any) -> dict[str, Any]:
    text = (ANSWER * (CHUNK * args.pieces // len(ANSWER) + 1))[: CHUNK * args.pieces]
    text_argv = ["--text", text, "--chunk-chars", str(CHUNK)]
    with fakes(lambda p: ["-m", f"dbos_agents.testing.fake_{p}", *text_argv]) as urls:
        pieces = asyncio.run(per_piece(urls, args))  # first: no DBOS threads in the process yet
    server = args.database_url or LOCAL_SERVER
    url = create_fresh_database(server, DB)
    try:
        with fakes(lambda p: [__file__, "--serve", p, "--turns", str(args.turns)]) as urls:
            turns = asyncio.run(per_turn(url, urls, args))
    finally:
        drop_database(server, DB)
    return {
        "per_turn": summary(turns, "anthropic", "openai", "ms"),
        "per_piece": {
            p: summary([r[p] for r in pieces], "adapter", "sdk", "us") for p in PROVIDERS
        },
        "sizes": {k: getattr(args, k) for k in SIZES} | {"chunk_chars": CHUNK},
        "loadavg": loadavg(),
        "versions": cli.versions("anthropic", "openai"),
    }


def summary(rounds: list[dict[str, float]], ours: str, against: str, unit: str) -> dict[str, Any]:
    """The rounds' medians of ``ours`` and ``against`` and of their ratio (the headline)."""
    ratios = [r[ours] / r[against] for r in rounds]
    out = {
        f"{k}_{unit}": round(statistics.median(r[k] for r in rounds), 3) for k in (ours, against)
    }
    ratio = round(statistics.median(ratios), 3)
    return out | {"ratio": ratio, "round_ratios": [round(x, 3) for x in ratios], "rounds": rounds}


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, **SIZES, port=0)
    p.add_argument("--serve", choices=PROVIDERS, help="internal: run a scripted fake server")
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON object")
    args = p.parse_args()
    if args.serve:
        return serve(args.serve, args.port, args.turns)
    with cli.report_to_stderr(args.json):
        res = run(args)
        show(models_section(res))
    if args.json:
        cli.print_json(res)


if __name__ == "__main__":
    main()
