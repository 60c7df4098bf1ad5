"""py-spy: record a worker (raw collapsed stacks), dump its threads, and summarize the raw
samples. Profiling slows the worker down; figures taken with it on are marked so."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any


def spy_bin() -> str:
    """The venv's py-spy (the ``bench`` extra), else one on PATH."""
    mine = Path(sys.executable).with_name("py-spy")
    return str(mine) if mine.exists() else shutil.which("py-spy") or "py-spy"


def record(
    pid: int,
    output: str | Path,
    *flags: str,
    rate: int = 100,
    stderr: IO[Any] | int | None = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """``py-spy record`` of ``pid`` into ``output`` (raw format) until ``stop``.
    ``--gil`` samples only the thread holding the GIL: where the Python time goes."""
    cmd = [spy_bin(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw"]
    return subprocess.Popen(
        [*cmd, "--output", str(output), "--nonblocking", *flags],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def stop(spy: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """SIGINT makes py-spy write its file; killed if it has not after ``timeout`` s."""
    if spy.poll() is None:
        spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        spy.kill()


def dump(pid: int, path: Path) -> Path:
    """``py-spy dump --locals`` of ``pid`` into ``path``."""
    out = subprocess.run(
        [spy_bin(), "dump", "--pid", str(pid), "--locals"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    path.write_text(out.stdout + out.stderr)
    return path


_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _frame_name(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    return f"{m['fn']} ({m['file'].split('site-packages/')[-1].split('/work/main/')[-1]})"


def summarize(path: str, top: int = 30) -> dict[str, Any]:
    """Shares of py-spy's raw samples: per thread group (thread names without their
    numbers), per function handed to an executor thread (the frame under
    ``_WorkItem.run``: what the event loop pushed off to threads), and per function,
    inclusive and self."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    offloaded: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        head = 1 if frames[0].startswith("thread") else 0
        thread = frames[0].split(": ", 1)[-1] if head else "?"
        names = [_frame_name(f) for f in frames[head:]]
        total += count
        group = re.sub(r"[_-]*\d+$", "", thread)
        if group in ("?", "thread") or not group:
            group = next(
                (
                    n
                    for n in names
                    if not n.startswith(("Thread.", "_bootstrap", "<module>", "run (threading"))
                ),
                "?",
            )
        threads[group] += count
        for i, name in enumerate(names[:-1]):
            if name.startswith("_WorkItem.run "):
                offloaded[names[i + 1]] += count
                break
        for name in set(names):
            inclusive[name] += count
        if names:
            own[names[-1]] += count

    def shares(c: Counter[str]) -> list[tuple[str, int, float]]:
        return [(f, n, n / total) for f, n in c.most_common(top)] if total else []

    return {
        "samples": total,
        "threads": shares(threads),
        "offloaded": shares(offloaded),
        "inclusive": shares(inclusive),
        "self": shares(own),
    }
