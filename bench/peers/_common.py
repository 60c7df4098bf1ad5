"""Shared argument parsing and result shape for the peer scripts.

Runs under bench/peers/.venv (not the dbos-agents venv), so it imports nothing from
dbos_agents. Each peer script prints one JSON object per measured system on stdout, and
run.py (under the dbos-agents venv) collects those lines; keeping the shape in one place
keeps the peers comparable.

With ``--concurrent N`` a peer script is instead a child of bench/concurrency.py, and
``burst`` below is its side of the window (bench/concurrency_ours.py uses it too, so every
system is timed by the same code): it prints ``READY``, waits for ``GO`` on stdin, starts N
sessions at once, prints ``DONE {json}``, and exits once stdin closes.
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
    p.add_argument(
        "--database-url",
        required=True,
        help="postgresql:// URL of a fresh, empty database (run.py creates one per peer)",
    )
    p.add_argument("--sessions", type=int, default=20, help="measured sessions (after 1 warm-up)")
    p.add_argument("--turns", type=int, default=10, help="tool-calling turns before the answer")
    add_concurrency_args(p)
    args = p.parse_args()
    if args.sessions < 1 or args.turns < 1:
        p.error("--sessions and --turns must be at least 1")
    return args


def add_concurrency_args(p: argparse.ArgumentParser) -> None:
    """``--concurrent N`` (bench/concurrency.py's mode: N sessions at once, driven through
    stdin) and ``--model-ms`` (the scripted model sleeps this long per call, in that mode)."""
    p.add_argument(
        "--concurrent",
        type=int,
        default=0,
        help="bench/concurrency.py's child: N sessions at once after GO on stdin (0: off)",
    )
    p.add_argument(
        "--model-ms",
        type=float,
        default=0.0,
        help="with --concurrent: the scripted model's asyncio.sleep per call",
    )


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def burst(sessions: int, one: Callable[[int], Awaitable[int]], **info: Any) -> None:
    """The measured window, child side. Prints ``READY``; on ``GO`` (a stdin line) runs
    ``one(i)`` for i in 0..sessions-1 at once (``one`` returns the tool turns its session
    completed, or raises); prints ``DONE`` and one JSON object (``info`` merged in). Then it
    waits for stdin to close (the parent reads the Postgres backends meanwhile) and ends the
    process at once, ``os._exit``: no shutdown, so the ``pg_stat_database`` counters the
    parent reads once the backends have exited (and flushed) hold the window's transactions,
    not the shutdown's. Returns only if the parent went away before ``GO``.

    The window's CPU is ``time.process_time()`` (CLOCK_PROCESS_CPUTIME_ID: every thread of
    this process, ns resolution), read just before the first start and just after the last
    session ended."""
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
