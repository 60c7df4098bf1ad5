"""Run an ``AgentRuntime`` as a long-lived worker process (``dbos-agents worker``)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable

from .errors import ConfigurationError
from .imports import import_object
from .runtime import AgentRuntime

log = logging.getLogger("dbos_agents")


def load_runtime(spec: str) -> AgentRuntime:
    """Import ``module:attr``; ``attr`` is an ``AgentRuntime`` or a function returning one."""
    obj = import_object(spec, "--app")
    runtime = obj() if callable(obj) and not isinstance(obj, AgentRuntime) else obj
    if not isinstance(runtime, AgentRuntime):
        raise ConfigurationError(f"{spec!r} is not an AgentRuntime (got {type(runtime).__name__})")
    return runtime


async def serve_forever(runtime: AgentRuntime, *, ready_message: bool = True) -> None:
    """Launch, heartbeat, adopt silent workers, reap tombstones; on SIGTERM or SIGINT stop
    dequeuing, give running workflows ``shutdown_grace_sec``, and exit. Whatever is
    unfinished recovers at the next launch or is adopted by another worker."""
    await runtime.launch()
    s = runtime.settings
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await runtime.heartbeat()
    if ready_message:
        print(f"dbos-agents worker ready executor_id={s.executor_id}", flush=True)
    tasks = [
        asyncio.create_task(_every(s.heartbeat_interval_sec, runtime.heartbeat, "heartbeat")),
        asyncio.create_task(
            _every(s.heartbeat_interval_sec, runtime.adopt_stale_workers, "adoption")
        ),
        asyncio.create_task(_every(s.reap_interval_sec, runtime.reap_tombstones, "reaping")),
    ]
    await stop.wait()
    log.info("worker stopping", extra={"event": "worker_stopping", "grace": s.shutdown_grace_sec})
    for t in tasks:
        t.cancel()
    await runtime.shutdown(workflow_completion_timeout_sec=s.shutdown_grace_sec)


async def _every(interval: float, job: Callable[[], Awaitable[object]], name: str) -> None:
    """Run ``job`` forever; a database blip must not kill the worker."""
    while True:
        try:
            await job()
        except Exception as exc:
            log.warning(f"{name} failed", extra={"event": f"{name}_failed", "error": str(exc)})
        await asyncio.sleep(interval)


def run_worker(spec: str) -> None:
    asyncio.run(serve_forever(load_runtime(spec)))
