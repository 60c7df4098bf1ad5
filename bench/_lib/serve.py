"""Waiting for a ``dbos-agents serve`` a bench started: until its ``/healthz`` answers,
and loudly when it exits or never does (a bench must not measure a server that is not
there)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_healthy(
    base: str,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    log: Path | None = None,
    timeout: float = 60.0,
) -> None:
    """Until ``GET {base}/healthz`` is 200; ``proc``: the server's process (its exit ends
    the wait with its ``log``'s tail)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"dbos-agents serve exited {proc.returncode}: {tail}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{base} did not become healthy in {timeout:.0f} s")
