"""Worker subprocesses. A worker is a process of its own so that its RSS, threads, CPU and
connections are read from /proc without the bench's client, and because DBOS is a process
singleton. The two sides talk through the worker's stdout lines and signals: the worker
prints a word when it is ready (or done), SIGUSR1 asks it for a dump, SIGTERM stops it; or,
with ``stdin=subprocess.PIPE``, the parent ``send``s it lines (bench/concurrency.py's
``GO``) and ``close_stdin`` lets it finish."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from dbos_agents import AgentRuntime


class Child:
    """A subprocess whose stdout lines a daemon thread reads; ``on_line(line, time.time())``
    sees each as it arrives, and ``expect`` waits for one."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        stderr: IO[Any] | int | None = None,
        on_line: Callable[[str, float], None] | None = None,
        stdin: int | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env
        )
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._on_line = on_line
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True, name="bench-worker-stdout")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self._on_line is not None:
                self._on_line(line, time.time())
            with self._cv:
                self.lines.append(line.strip())
                self._cv.notify_all()

    def _find(self, word: str) -> str | None:
        return next((x for x in self.lines if x == word or x.startswith(word + " ")), None)

    def expect(self, word: str, timeout: float) -> str:
        """Wait for the line ``word`` (or ``word`` and more after a space); returns it and
        takes it off ``lines``."""
        with self._cv:
            found = self._cv.wait_for(
                lambda: self._find(word) is not None or self.proc.poll() is not None, timeout
            )
            line = self._find(word)
            if not found or line is None:
                raise RuntimeError(f"worker did not say {word} (exit {self.proc.poll()})")
            self.lines.remove(line)
            return line

    def send(self, line: str) -> None:
        """Write one line to the child's stdin (made with ``stdin=subprocess.PIPE``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        """Close the child's stdin: it reads end-of-file."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()

    def stop(self, timeout: float, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` (SIGTERM: drain and shut down), SIGKILL after ``timeout`` s."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def join(self, timeout: float) -> None:
        """Wait for the process to exit and its last stdout line to be read."""
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=5)


async def hold(
    rt: AgentRuntime,
    ready: str,
    on_usr1: Callable[[], None],
    signals: Sequence[signal.Signals] = (signal.SIGTERM,),
) -> None:
    """The worker side: with ``rt`` launched, print ``ready``, run ``on_usr1`` on each
    SIGUSR1, and shut the runtime down at the first of ``signals``."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, on_usr1)
    print(ready, flush=True)
    await stop.wait()
    await rt.shutdown()
