"""A process's RSS, threads, CPU time and Postgres sockets, and the host's CPU, from /proc.

Read from outside the process, so a bench's own client, threads and polling are not
counted in the figures of the worker it measures."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def proc_status(pid: int | str = "self") -> dict[str, int]:
    """``Threads``, ``VmRSS`` and ``VmHWM`` (kB) of /proc/<pid>/status."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Threads", "VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    return out


def stat_cpu_seconds(path: str) -> float:
    """utime + stime (fields 14, 15 of stat(5)) of a ``/proc/.../stat`` file, seconds."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), seconds."""
    return stat_cpu_seconds(f"/proc/{pid}/stat")


def tree_cpu_seconds(pid: int) -> float:
    """``cpu_seconds`` of a process and its live descendants (a server's ``--workers``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            total += cpu_seconds(p)
        todo.extend(children.get(p, []))
    return total


def cpu_seconds_or_nan(path: str) -> float:
    """``stat_cpu_seconds``, NaN once the process is gone."""
    try:
        return stat_cpu_seconds(path)
    except OSError:
        return float("nan")


def host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host (busy = all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def host_busy_pct(since: tuple[int, int]) -> float:
    """Host CPU busy %, over all cores, since a ``host_cpu()`` reading."""
    busy, total = host_cpu()
    return 100 * (busy - since[0]) / max(1, total - since[1])


class Meter:
    """CPU over a window, read from outside: named processes' (those in ``tree`` with their
    children), the Postgres backends serving ``database``, and the host's busy share."""

    def __init__(self, pids: dict[str, int], database: str = "", tree: tuple[str, ...] = ()):
        self.pids, self.database, self.tree = pids, database, tree
        self.wall0, self.cpu0, self.host0 = time.perf_counter(), self._cpu(), host_cpu()

    def _cpu(self) -> dict[str, float]:
        out = {k: (tree_cpu_seconds if k in self.tree else cpu_seconds)(pid)
               for k, pid in self.pids.items()}  # fmt: skip
        return out | ({"postgres": backend_cpu_seconds(self.database)} if self.database else {})

    def read(self, per: float = 1) -> dict[str, float]:
        """``<name>_cpu_s`` (divided by ``per``, e.g. rounds) and ``host_busy_pct``."""
        now = self._cpu()
        out = {f"{k}_cpu_s": round((now[k] - self.cpu0[k]) / per, 2) for k in now}
        return out | {"host_busy_pct": round(host_busy_pct(self.host0), 1)}

    @property
    def wall(self) -> float:
        return time.perf_counter() - self.wall0


def postgres_cpu_seconds() -> float:
    """CPU of every local ``postgres`` process, with the reaped backends' (children's) time.

    Zero when the server is not on this machine."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/stat") as f:
                head, _, rest = f.read().rpartition(")")
            if head.endswith("(postgres"):
                fields = rest.split()
                total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def backend_cpu_seconds(database: str) -> float:
    """CPU seconds of the live Postgres backends serving ``database`` (their process title
    names it; backends that exited in between, and the server's own background processes,
    are not counted)."""
    total = 0.0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            title = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres:") and f" {database} ".encode() in title:
            total += cpu_seconds_or_nan(f"/proc/{d}/stat")
    return total


def pg_ports(pid: int, server_port: int = 5432) -> set[int]:
    """Local ports of the process's TCP sockets connected to the Postgres server port."""
    inodes: set[str] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/net/{table}") as f:
            next(f)
            for line in f:
                parts = line.split()
                local, remote, state, inode = parts[1], parts[2], parts[3], parts[9]
                if (
                    inode in inodes
                    and state == "01"
                    and int(remote.rsplit(":", 1)[1], 16) == server_port
                ):
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages ("n/a" off Linux)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def raise_nofile() -> None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (thousands of sessions, sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
