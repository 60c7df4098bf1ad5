"""The worker process of bench/parked.py (``parked.py --worker``): one AgentRuntime and
nothing else, so /proc shows its cost alone. With ``--trace-frames`` it starts tracemalloc
at launch, and SIGUSR1 writes what the parked sessions hold (``--profile-memory``)."""

from __future__ import annotations

import contextlib
import gc
import json
import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from _lib.asker import asker_runtime, asker_settings
from _lib.child import hold


def _package(filename: str) -> str:
    for pkg in ("dbos_agents", "dbos", "sqlalchemy", "pydantic_core", "pydantic", "psycopg"):
        if f"/{pkg}/" in filename:
            return pkg
    if "/asyncio/" in filename:
        return "asyncio"
    if "/concurrent/" in filename or filename.endswith("threading.py"):
        return "threads"
    return "other"


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/lib/python3", "/work/main/"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker == "/lib/python3" else tail
    return filename


def memory_report(base_snapshot: Any, base_gc: Counter[str], parked: int) -> dict[str, Any]:
    """gc object counts by type and (if tracing) tracemalloc's allocation diff since launch."""
    import tracemalloc

    gc.collect()
    counts = Counter(type(o).__qualname__ for o in gc.get_objects())
    gc_diff = sorted(((k, counts[k] - base_gc.get(k, 0)) for k in counts), key=lambda kv: -kv[1])[
        :40
    ]
    out: dict[str, Any] = {
        "parked": parked,
        "gc_objects_total_diff": sum(counts.values()) - sum(base_gc.values()),
        "gc_by_type": [
            {"type": k, "diff": d, "per_session": d / max(1, parked)} for k, d in gc_diff
        ],
    }
    if base_snapshot is None or not tracemalloc.is_tracing():
        return out
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    traced, peak = tracemalloc.get_traced_memory()
    out["tracemalloc_traced_mb"] = traced / 2**20
    out["tracemalloc_peak_mb"] = peak / 2**20
    by_line = snap.compare_to(base_snapshot, "lineno")
    out["total_diff_kb"] = sum(s.size_diff for s in by_line) / 1024
    out["by_line"] = [
        {
            "where": f"{_short(s.traceback[-1].filename)}:{s.traceback[-1].lineno}",
            "kb": s.size_diff / 1024,
            "count": s.count_diff,
            "bytes_per_session": s.size_diff / max(1, parked),
        }
        for s in by_line[:40]
    ]
    # Attribute each allocation to the innermost frame in a library we care about (the
    # allocation site itself is often a builtin constructor or a stdlib helper).
    by_pkg: Counter[str] = Counter()
    by_caller: Counter[str] = Counter()
    by_ours: Counter[str] = Counter()
    for s in snap.compare_to(base_snapshot, "traceback"):
        if s.size_diff <= 0:
            continue
        frames = list(reversed(s.traceback))  # innermost first
        by_pkg[_package(frames[0].filename)] += s.size_diff
        lib = next(
            (f for f in frames if _package(f.filename) not in ("other", "asyncio", "threads")),
            frames[0],
        )
        by_caller[f"{_short(lib.filename)}:{lib.lineno}"] += s.size_diff
        ours = next((f for f in frames if "dbos_agents/" in f.filename), None)
        by_ours[
            "(no dbos_agents frame)" if ours is None else f"{_short(ours.filename)}:{ours.lineno}"
        ] += s.size_diff
    out["by_package_of_allocation_site"] = {k: v / 1024 for k, v in by_pkg.most_common()}
    out["by_innermost_library_frame"] = [
        {"where": k, "kb": v / 1024, "bytes_per_session": v / max(1, parked)}
        for k, v in by_caller.most_common(40)
    ]
    out["by_innermost_dbos_agents_frame"] = [
        {"where": k, "kb": v / 1024, "bytes_per_session": v / max(1, parked)}
        for k, v in by_ours.most_common(25)
    ]
    return out


async def worker(
    url: str,
    trace_frames: int,
    report_path: str | None,
    queue_poll: float | None,
    park_after: float | None,
) -> None:
    """One AgentRuntime. Prints ``READY`` when launched; SIGUSR1 writes the memory report
    (``MEM`` when written); SIGTERM shuts down."""
    import tracemalloc

    if trace_frames:
        tracemalloc.start(trace_frames)
    settings = asker_settings(
        database_url=url,
        executor_id="bench-parked",
        queue_polling_interval_sec=queue_poll,
        park_after_sec=park_after,
    )
    rt = asker_runtime(settings, timedelta(hours=12))
    await rt.launch()
    gc.collect()
    base_gc = Counter(type(o).__qualname__ for o in gc.get_objects())
    base_snap = tracemalloc.take_snapshot() if trace_frames else None

    def dump() -> None:
        parked = 0
        with contextlib.suppress(OSError, ValueError):
            parked = int(Path(f"{report_path}.n").read_text())
        report = memory_report(base_snap, base_gc, parked)
        Path(report_path or "/tmp/parked-mem.json").write_text(json.dumps(report, indent=1))
        print("MEM", flush=True)

    await hold(rt, "READY", dump, (signal.SIGTERM, signal.SIGINT))
