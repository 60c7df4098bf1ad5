"""Run an ``AgentRuntime`` as a long-lived worker process (``dbos-agents worker``).

SIGTERM (a deploy) drains: DBOS stops dequeuing, running steps finish and checkpoint within
``shutdown_grace_sec`` with the runtime intact, every other workflow parks at its next step,
and the process leaves with ``os._exit`` so neither DBOS nor the workflow code records
anything on the way out. What did not finish stays PENDING under this executor id: the next
worker with the same id recovers it, or a peer adopts it once this worker is dead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable

from .. import logs
from ..errors import ConfigurationError
from ..imports import import_object
from ..settings import Settings
from ..traces import setup as traces_setup
from .runtime import AgentRuntime

log = logging.getLogger("dbos_agents")

EXIT_ADOPTED = 75
"""Exit status of a worker that learned its row was adopted (EX_TEMPFAIL: restart me)."""


def load_runtime(spec: str) -> AgentRuntime:
    """Import ``module:attr``; ``attr`` is an ``AgentRuntime`` or a function returning one."""
    obj = import_object(spec, "--app")
    runtime = obj() if callable(obj) and not isinstance(obj, AgentRuntime) else obj
    if not isinstance(runtime, AgentRuntime):
        raise ConfigurationError(f"{spec!r} is not an AgentRuntime (got {type(runtime).__name__})")
    return runtime


def _flush() -> None:
    traces_setup.flush()  # queued spans: the SDK's own flush at exit is skipped by os._exit
    for handler in logging.getLogger().handlers + log.handlers:
        with contextlib.suppress(Exception):  # best effort on the way out
            handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()


def exit_now(code: int) -> None:
    """Leave the process at once, after flushing logs; no atexit, no DBOS teardown."""
    _flush()
    os._exit(code)


def _adopted() -> None:
    """Its row is no longer this process's (presence logged who took it, and why)."""
    exit_now(EXIT_ADOPTED)


async def serve_forever(
    runtime: AgentRuntime, *, ready_message: bool = True, exit_process: bool = True
) -> None:
    """Launch, heartbeat and adopt dead peers (a thread), reap tombstones; on SIGTERM or
    SIGINT drain (see the module doc) and exit 0. ``exit_process=False`` returns after the
    drain instead (the parked workflows then belong to whoever stops DBOS)."""
    s = runtime.settings
    s.check_worker()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if _early_stop.is_set():  # SIGTERM while the app was importing: launch, then drain
        stop.set()
    await runtime.launch(on_adopted=_adopted)
    if ready_message:
        print(f"dbos-agents worker ready executor_id={runtime.executor_id}", flush=True)
    reaper = asyncio.create_task(_every(s.reap_interval_sec, _reaping(runtime), "reaping"))
    await stop.wait()
    log.info(
        f"worker draining (grace {s.shutdown_grace_sec:g}s)",
        extra={"event": "worker_draining", "grace": s.shutdown_grace_sec},
    )
    reaper.cancel()
    idle = await runtime.drain(s.shutdown_grace_sec)
    await runtime.leave()
    if idle:
        log.info("worker stopped", extra={"event": "worker_stopped", "idle": idle})
    else:
        log.warning(
            "worker stopped with steps still running (grace over)",
            extra={"event": "worker_stopped", "idle": idle},
        )
    if exit_process:
        exit_now(0)


def _reaping(runtime: AgentRuntime) -> Callable[[], Awaitable[object]]:
    async def reap() -> None:
        await runtime.reap_tombstones()
        await runtime.reap_deltas()

    return reap


async def _every(interval: float, job: Callable[[], Awaitable[object]], name: str) -> None:
    """Run ``job`` forever; a database blip must not kill the worker."""
    while True:
        try:
            await job()
        except Exception as exc:
            log.warning(f"{name} failed", extra={"event": f"{name}_failed", "error": str(exc)})
        await asyncio.sleep(interval)


_early_stop = threading.Event()
STARTING_LINE = "dbos-agents worker starting"


def _remember_stop(signum: int, frame: object) -> None:
    _early_stop.set()


def configure_logging(settings: Settings, log_format: logs.LogFormat | None = None) -> None:
    """The worker's log lines on stderr (``dbos_agents.logs``); ``log_format`` overrides
    the setting (``--log-format``)."""
    logs.configure(
        settings.log_level,
        log_format or settings.log_format,
        dbos_level=settings.dbos_level(),
    )


def run_worker(
    spec: str,
    *,
    database_url: Callable[[str | None], str] | None = None,
    log_format: logs.LogFormat | None = None,
) -> None:
    """The CLI entry: a SIGTERM that arrives while the app imports or DBOS launches is
    remembered and drains right after launch, so even an early stop exits 0.

    ``database_url`` maps the URL the app configured (None: none) to the one to use; the
    CLI passes its ``--database-url`` / embedded-default resolution."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _remember_stop)
    # From this line on a SIGTERM drains; before it (interpreter start, imports) nothing of
    # ours runs that could catch it. Supervisors and tests can tell the two apart by it.
    print(STARTING_LINE, flush=True)
    configure_logging(Settings(), log_format)  # the environment's, while the app imports
    runtime = load_runtime(spec)
    configure_logging(runtime.settings, log_format)  # the app's own, if it set any
    if database_url is not None:
        url = database_url(runtime.settings.database_url)
        runtime.settings = runtime.settings.model_copy(update={"database_url": url})
    asyncio.run(serve_forever(runtime))
