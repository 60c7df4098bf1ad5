"""Run an ``AgentRuntime`` as a long-lived worker process (``dbos-agents worker``)."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal

from .errors import ConfigurationError
from .runtime import AgentRuntime

log = logging.getLogger("dbos_agents")


def load_runtime(spec: str) -> AgentRuntime:
    """Import ``module:attr``; ``attr`` is an ``AgentRuntime`` or a function returning one."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"--app must look like 'package.module:runtime', got {spec!r}")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {spec!r}: {exc}") from exc
    runtime = obj() if callable(obj) and not isinstance(obj, AgentRuntime) else obj
    if not isinstance(runtime, AgentRuntime):
        raise ConfigurationError(f"{spec!r} is not an AgentRuntime (got {type(runtime).__name__})")
    return runtime


async def serve_forever(runtime: AgentRuntime, *, ready_message: bool = True) -> None:
    """Launch, then run until SIGTERM or SIGINT; unfinished sessions recover at next launch."""
    await runtime.launch()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready_message:
        print(f"dbos-agents worker ready executor_id={runtime.settings.executor_id}", flush=True)
    reaper = asyncio.create_task(_reap_forever(runtime))
    await stop.wait()
    reaper.cancel()
    await runtime.shutdown()


async def _reap_forever(runtime: AgentRuntime) -> None:
    """Tombstones answer duplicate submits for the retention window, then go."""
    while True:
        try:
            n = await runtime.reap_tombstones()
            if n:
                log.info("tombstones reaped", extra={"event": "tombstones_reaped", "count": n})
        except Exception as exc:  # a database blip must not kill the worker
            log.warning("tombstone reaping failed", extra={"error": str(exc)})
        await asyncio.sleep(runtime.settings.reap_interval_sec)


def run_worker(spec: str) -> None:
    asyncio.run(serve_forever(load_runtime(spec)))
