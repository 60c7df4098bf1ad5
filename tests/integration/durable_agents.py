"""Agents with durable tools (``@tool(durable=True)``), for
tests/integration/test_durable_tools.py (registered with the in-process runtime through
``agents.py``). Every inner step's effect is counted in ``EFFECTS``."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from dbos_agents import APPROVAL, Agent, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, call, calls

EFFECTS: Counter[str] = Counter()
STARTED: dict[str, asyncio.Event] = {}
CANCELLED: Counter[str] = Counter()
_lock = threading.Lock()


class Page(BaseModel):
    n: int
    words: int


def _effect(key: str) -> None:
    with _lock:
        EFFECTS[key] += 1


async def fetch_page(session: str, n: int) -> Page:
    """A safe inner step: read page ``n``."""
    _effect(f"fetch:{session}:{n}")
    return Page(n=n, words=10 * n)


def store_page(session: str, n: int, words: int) -> dict[str, Any]:
    """A side-effecting inner step (synchronous: run in a thread)."""
    _effect(f"store:{session}:{n}")
    return {"stored": n, "words": words}


@tool(durable=True)
async def crawl(ctx: ToolContext, pages: int) -> dict[str, Any]:
    """Crawl ``pages`` pages: fetch each (safe), store each (side-effecting)."""
    total = 0
    for n in range(1, pages + 1):
        page = await ctx.step(f"fetch-{n}", fetch_page, ctx.session_id, n, safe_to_retry=True)
        assert isinstance(page, Page)  # typed by fetch_page's annotation, on every execution
        await ctx.step(f"store-{n}", store_page, ctx.session_id, n, page.words)
        total += page.words
        ctx.checkpoint({"done": n, "words": total})
        ctx.progress(f"page {n} of {pages}", n / pages)
    return {"pages": pages, "words": total, "snapshot": ctx.snapshot}


async def _sleep_step(session: str, seconds: float) -> str:
    STARTED.setdefault(session, asyncio.Event()).set()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        with _lock:
            CANCELLED[session] += 1
        raise
    _effect(f"slept:{session}")
    return "slept"


@tool(durable=True)
async def long_job(ctx: ToolContext, seconds: float) -> str:
    """One long inner step, then another (an interrupt stops it in the middle)."""
    await ctx.step("sleep", _sleep_step, ctx.session_id, seconds)
    await ctx.step("after", _effect, f"after:{ctx.session_id}")
    return "done"


@tool(durable=True, timeout=timedelta(seconds=1))
async def hasty_job(ctx: ToolContext, seconds: float) -> str:
    """Times out after one second."""
    await ctx.step("sleep", _sleep_step, ctx.session_id, seconds)
    return "done in time"


@tool(durable=True)
async def bad_checkpoint(ctx: ToolContext) -> str:
    """Checkpoints something that is not JSON; the error names the path."""
    ctx.checkpoint({"ok": [1, 2, {"when": {1, 2}}]})
    return "unreachable"


@tool(durable=True)
async def failing_step(ctx: ToolContext) -> str:
    """An inner step raises: the tool catches the typed error and goes on."""
    from dbos_agents import StepFailedError

    def boom() -> None:
        raise RuntimeError("disk full")

    try:
        await ctx.step("boom", boom)
    except StepFailedError as exc:
        return f"caught {exc.error_type}: {exc.detail}"
    return "no error"


class ConfirmIn(BaseModel):
    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm_mid = client_tool("confirm_mid", input=ConfirmIn, output=ConfirmOut)


@tool(durable=True)
async def guarded_refund(ctx: ToolContext, cents: int) -> str:
    """Asks a human to approve, then the browser to confirm, then refunds."""
    decision = await ctx.ask(APPROVAL, {"refund_cents": cents})
    if not decision.approved:
        return f"refused by {decision.decided_by}: {decision.reason}"
    answer = await ctx.ask(confirm_mid, {"question": f"refund {cents}?"})
    assert isinstance(answer, ConfirmOut)
    if not answer.ok:
        return "the browser said no"
    await ctx.step("refund", _effect, f"refund:{ctx.session_id}:{cents}")
    return f"refunded {cents} ({answer.note})"


@tool(durable=True)
async def hurried_refund(ctx: ToolContext, cents: int) -> str:
    """Asks for an approval within a second; without one it refunds nothing."""
    from dbos_agents import AskTimeoutError

    try:
        await ctx.ask(APPROVAL, {"refund_cents": cents}, within=timedelta(seconds=1))
    except AskTimeoutError as exc:
        return f"no answer within {exc.timeout_sec:g}s"
    await ctx.step("refund", _effect, f"refund:{ctx.session_id}:{cents}")
    return f"refunded {cents}"


def _turn(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _last_user(request: ModelRequest) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def _last_tool(request: ModelRequest) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == "tool"), "")


CALLS = {
    "crawler": lambda arg: call("crawl", {"pages": int(arg or 3)}),
    "long_worker": lambda arg: call("long_job", {"seconds": float(arg or 60)}),
    "hasty": lambda arg: call("hasty_job", {"seconds": float(arg or 30)}),
    "bad_saver": lambda arg: call("bad_checkpoint", {}),
    "failer": lambda arg: call("failing_step", {}),
    "refunder": lambda arg: call("guarded_refund", {"cents": int(arg or 500)}),
    "hurried": lambda arg: call("hurried_refund", {"cents": int(arg or 500)}),
    "refund_boss": lambda arg: call("subagent__sub_refunder", {"message": arg or "500"}),
    "sub_refunder": lambda arg: call("guarded_refund", {"cents": int(arg or 500)}),
}


def respond(request: ModelRequest) -> str | ModelResponse:
    if _turn(request) % 2 == 0:
        return calls(CALLS[request.agent](_last_user(request)))
    return "result: " + _last_tool(request)


def tool_output(content: str) -> Any:
    """The value a tool message carries (its JSON)."""
    return json.loads(content)


NAMES = tuple(CALLS)
AGENTS = [
    Agent("crawler", tools=[crawl]),
    Agent("long_worker", tools=[long_job]),
    Agent("hasty", tools=[hasty_job]),
    Agent("bad_saver", tools=[bad_checkpoint]),
    Agent("failer", tools=[failing_step]),
    Agent("refunder", tools=[guarded_refund, confirm_mid], tool_timeout=timedelta(minutes=5)),
    Agent("hurried", tools=[hurried_refund]),
    Agent(  # the refunder's asks, made in a sub-agent
        "refund_boss",
        sub_agents=[
            Agent(
                "sub_refunder",
                tools=[guarded_refund, confirm_mid],
                tool_timeout=timedelta(minutes=5),
            )
        ],
    ),
]
