"""bench/submit_latency.py's measurements and their console tables."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from _lib.procfs import proc_status
from _lib.stats import pct
from _lib.tables import rich_table
from rich.markup import escape
from rich.table import Table

Phase = tuple[str, float, float | None, float | None]
"""(label, wall s, worker-process CPU s, host CPU busy %)."""


@dataclass
class Metrics:
    rows: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value_ms: float) -> None:
        self.rows.setdefault(name, []).append(value_ms)


@dataclass
class Snapshot:
    """This process's threads and memory at one moment."""

    label: str
    active: int
    threads: int
    rss_mb: float
    hwm_mb: float
    dbos_executor: int

    @classmethod
    def take(cls, label: str) -> Snapshot:
        st = proc_status()
        return cls(
            label,
            threading.active_count(),
            st["Threads"],
            st["VmRSS"] / 1024,
            st["VmHWM"] / 1024,
            sum(1 for t in threading.enumerate() if t.name.startswith("dbos-executor-")),
        )


def latency_table(title: str, metrics: Metrics, primary: str | None = None) -> Table:
    table = rich_table(title, ("metric (ms)", "n", "p50", "p90", "p99", "max", "min"))
    for name, xs in metrics.rows.items():
        label = f"[bold]{name}  (primary)[/bold]" if name == primary else name
        table.add_row(
            label,
            str(len(xs)),
            *(f"{pct(xs, q):.1f}" for q in (50, 90, 99)),
            f"{max(xs):.1f}",
            f"{min(xs):.1f}",
        )
    return table


def phase_table(title: str, phases: Sequence[Phase]) -> Table:
    table = rich_table(title, ("phase", "wall s", "worker CPU s", "host CPU busy % (2 cores)"))
    for label, wall, cpu, host in phases:
        table.add_row(
            label,
            f"{wall:.2f}",
            "" if cpu is None else f"{cpu:.2f}",
            "" if host is None else f"{host:.0f}",
        )
    return table


def snapshot_table(title: str, snaps: Sequence[Snapshot]) -> Table:
    st = rich_table(
        title,
        (
            "when",
            "threading.active_count()",
            "/proc Threads",
            "dbos-executor threads",
            "VmRSS MB",
            "VmHWM MB",
        ),
    )
    for snap in snaps:
        st.add_row(
            snap.label,
            str(snap.active),
            str(snap.threads),
            str(snap.dbos_executor),
            f"{snap.rss_mb:.1f}",
            f"{snap.hwm_mb:.1f}",
        )
    return st


def errors_table(counts: Counter[str]) -> Table:
    et = rich_table(
        "exceptions DBOS logged for failed workflows", ("count", "exception"), left=("exception",)
    )
    for text, count in counts.most_common():
        et.add_row(str(count), escape(text))
    return et
