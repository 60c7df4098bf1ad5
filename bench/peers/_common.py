"""Shared argument parsing and result shape for the peer scripts.

Runs under bench/peers/.venv (not the dbos-agents venv), so it imports nothing from
dbos_agents. Each peer script prints one JSON object per measured system on stdout, and
run.py (under the dbos-agents venv) collects those lines; keeping the shape in one place
keeps the peers comparable.

With ``--concurrent N`` a peer script is instead the child of a measured window
(bench/_lib/pgwatch.py's ``run_window``), and ``burst`` below is its side of it
(bench/turn_overhead.py uses it too, so every system is timed by the same code).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def parse_args(description: str) -> argparse.Namespace:
    """The flags every peer takes, so run.py can drive them all the same way."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--database-url", required=True, help="a fresh, empty database")
    p.add_argument("--sessions", type=int, default=20, help="measured sessions (after 1 warm-up)")
    p.add_argument("--turns", type=int, default=10, help="tool-calling turns before the answer")
    p.add_argument("--stream", action="store_true", help="langgraph_pg.py: its streaming row")
    add_concurrency_args(p)
    args = p.parse_args()
    if args.sessions < 1 or args.turns < 1:
        p.error("--sessions and --turns must be at least 1")
    return args


def add_concurrency_args(p: argparse.ArgumentParser) -> None:
    """``--concurrent N`` (a window of bench/_lib/pgwatch.py: N sessions at once, driven
    through stdin), ``--model-ms`` (the scripted model sleeps this long per call, in that
    mode) and ``--sequential`` (the N sessions one after another)."""
    p.add_argument("--concurrent", type=int, default=0, help="N sessions after GO on stdin")
    p.add_argument("--model-ms", type=float, default=0.0, help="the model's sleep per call")
    p.add_argument("--sequential", action="store_true", help="the N one after another")


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def burst(
    sessions: int, one: Callable[[int], Awaitable[int]], sequential: bool = False, **info: Any
) -> None:
    """The measured window, child side: ``READY``; on ``GO`` (a stdin line) ``one(i)`` for
    each session (it returns the tool turns done, or raises), at once or one after another;
    ``DONE`` and one JSON object (``info`` merged in). Then, once the parent closes stdin,
    ``os._exit``: no shutdown, so the counters the parent reads after the backends exited
    hold the window's transactions, not the shutdown's. CPU is ``time.process_time()``
    (every thread of this process) over the window."""
    print("READY", flush=True)
    if (await _stdin_line()).strip() != "GO":
        return

    async def timed(i: int) -> tuple[float, float, int, str | None]:
        t = time.time()
        try:
            n = await one(i)
        except Exception as exc:  # a failed session is reported, not fatal
            return t, time.time(), 0, f"{type(exc).__name__}: {exc}"[:300]
        return t, time.time(), n, None

    cpu0, t0 = time.process_time(), time.time()
    if sequential:
        done = [await timed(i) for i in range(sessions)]
    else:
        done = await asyncio.gather(*(timed(i) for i in range(sessions)))
    cpu1, t1 = time.process_time(), time.time()
    first = min(s for s, _, _, _ in done)
    result = {
        **info,
        "sessions": sessions,
        "wall_s": max(e for _, e, _, _ in done) - first,
        "window_s": t1 - t0,
        "cpu_s": cpu1 - cpu0,
        "turns": sum(n for _, _, n, _ in done),
        "failed": sum(1 for *_, err in done if err),
        "errors": sorted({err for *_, err in done if err})[:5],
        "session_s": [e - s for s, e, _, err in done if not err],
    }
    print("DONE " + json.dumps(result), flush=True)
    await _stdin_line()  # the parent closes stdin once it has read the backends
    sys.stderr.flush()
    os._exit(0)


def versions(*packages: str) -> dict[str, str]:
    """Installed versions, so a number is never quoted without what produced it."""
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def p90(xs: list[float]) -> float:
    """90th percentile (inclusive method), which is defined for a single sample too."""
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=10, method="inclusive")[-1]


def emit(
    system: str,
    ms_per_turn: list[float],
    *,
    turns: int,
    divisor: int,
    measures: str,
    pkg_versions: dict[str, str],
    floor: bool = False,
) -> None:
    """Print one result line. ``divisor`` is what each session's wall time was divided by."""
    print(
        json.dumps(
            {
                "system": system,
                "ms_per_turn_median": round(statistics.median(ms_per_turn), 3),
                "ms_per_turn_p90": round(p90(ms_per_turn), 3),
                "ms_per_turn_min": round(min(ms_per_turn), 3),
                "sessions": len(ms_per_turn),
                "turns": turns,
                "divisor": divisor,
                "floor": floor,
                "measures": measures,
                "versions": pkg_versions,
            }
        ),
        flush=True,
    )
