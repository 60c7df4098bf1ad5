"""A worker subprocess with its stderr on its own (the log tests count its lines), and no
executor id unless given (the executor-id tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAST = {
    "DBOS_AGENTS_HEARTBEAT_INTERVAL_SEC": "0.5",
    "DBOS_AGENTS_STALE_AFTER_SEC": "3",
    "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": "1",
    "DBOS_AGENTS_QUEUE_POLLING_INTERVAL_SEC": "0.05",
}
READY = "dbos-agents worker ready executor_id="


class Worker:
    """``dbos-agents worker --app tests.crash.app:runtime``; stdout in ``<log>``, stderr
    there too unless ``split`` (then in ``<log>.err``)."""

    def __init__(
        self,
        url: str,
        log: Path,
        executor_id: str | None = None,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        split: bool = False,
        app: str = "tests.crash.app:runtime",
    ) -> None:
        full = {**os.environ, **FAST, "DBOS_AGENTS_DATABASE_URL": url, **(env or {})}
        full.setdefault("DBOS_AGENTS_WITNESS", str(log.parent / "witness.jsonl"))
        full.pop("DBOS_AGENTS_EXECUTOR_ID", None)
        if executor_id is not None:
            full["DBOS_AGENTS_EXECUTOR_ID"] = executor_id
        self.log_path = log
        self.err_path = log.with_suffix(".err") if split else log
        with open(log, "wb") as out, open(self.err_path, "ab") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "dbos_agents.cli", "worker", "--app", app, *args],
                stdout=out,
                stderr=err if split else subprocess.STDOUT,
                env=full,
                cwd=REPO,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def ready_id(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log().splitlines():
                if line.startswith(READY):
                    return line[len(READY) :].strip()
            if self.popen.poll() is not None:
                raise AssertionError(f"worker exited {self.popen.returncode}:\n{self.stderr()}")
            time.sleep(0.05)
        raise TimeoutError(self.log())

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode
