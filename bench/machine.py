"""Machine facts for bench/all.py's report: CPU, RAM, load, Postgres and package versions."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version


def _first(path: str, key: str) -> str | None:
    """Value of the first ``key: value`` line of a /proc file (None off Linux)."""
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == key:
                    return v.strip()
    except OSError:
        return None
    return None


def postgres_version(server_url: str) -> str:
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


def machine(server_url: str) -> dict[str, str]:
    """What the numbers were measured on; the CPU and load matter more than anything else."""
    from sqlalchemy.engine import make_url

    mem_kb = _first("/proc/meminfo", "MemTotal")
    cpus = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    return {
        "CPU": f"{_first('/proc/cpuinfo', 'model name') or platform.processor() or 'unknown'}"
        f", {cpus} logical CPUs ({usable} usable by this process)",
        "RAM": f"{int(mem_kb.split()[0]) / 1024 / 1024:.1f} GiB" if mem_kb else "unknown",
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "Postgres": f"{postgres_version(server_url)} at"
        f" {make_url(server_url).render_as_string(hide_password=True)}",
    }


def busy_note(load_before: str, note: str | None) -> str | None:
    """The user's note, plus a warning when the 1-minute load already exceeded half the CPUs
    at the start: absolute milliseconds are then inflated (the ratios much less so)."""
    try:
        load1 = float(load_before.split()[0])
    except (ValueError, IndexError):
        return note
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if load1 <= 0.5 * (cpus or 1):
        return note
    warning = (
        f"The machine was busy: 1-minute load average {load1:.2f} on {cpus} CPUs when the run"
        " started, so absolute milliseconds are inflated; compare ratios, not milliseconds."
    )
    return f"{note} {warning}" if note else warning


def pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"
