"""Runtime settings, overridable from the environment (prefix ``DBOS_AGENTS_``).

Recovery depends on two of them: DBOS recovers at launch only the PENDING workflows of the
same ``executor_id`` and ``application_version``. Both are pinned here, so a restarted
worker recovers its own sessions after a code change or a dbos upgrade.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import ConfigurationError

CONFIG_ENV = "DBOS_AGENTS_CONFIG"
DEFAULT_CONFIG = Path("config") / "dbos-agents.toml"


def config_file() -> Path | None:
    """The settings file: ``$DBOS_AGENTS_CONFIG``, else ``config/dbos-agents.toml`` if present."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def file_sources(
    settings_cls: type[BaseSettings],
    init_settings: PydanticBaseSettingsSource,
    env_settings: PydanticBaseSettingsSource,
    table: str,
) -> tuple[PydanticBaseSettingsSource, ...]:
    """Arguments, then environment, then ``[table]`` of the settings file (if there is one)."""
    path = config_file()
    sources: tuple[PydanticBaseSettingsSource, ...] = (init_settings, env_settings)
    if path is not None:
        sources += (
            TomlConfigSettingsSource(settings_cls, toml_file=path, toml_table_header=(table,)),
        )
    return sources


CLIENT_POOL_SIZE = 5
"""The runtime's ``DBOSClient`` pool (submits and interrupts from inside the worker)."""
SYNC_POOL_SIZE = 5
"""The runtime's sync engine (migrations, client reads, reaping) and its overflow."""
SYNC_MAX_OVERFLOW = 2 * SYNC_POOL_SIZE


class Settings(BaseSettings):
    """Settings shared by workers, clients and the CLI.

    Precedence: constructor arguments, then ``DBOS_AGENTS_*`` environment variables, then the
    ``[dbos_agents]`` table of the settings file (see ``config_file``), then defaults.
    """

    model_config = SettingsConfigDict(env_prefix="DBOS_AGENTS_", extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return file_sources(settings_cls, init_settings, env_settings, "dbos_agents")

    database_url: str | None = None
    """Postgres URL. None means the embedded pgserver under ``data_dir`` (CLI only)."""
    data_dir: str = ".dbos_agents"
    app_name: str = "dbos-agents"
    application_version: str = "dbos-agents-1"
    """Pinned, not derived from a code hash, so restarts after upgrades recover sessions."""
    executor_id: str | None = None
    """Unique per live worker, stable across its restarts (DBOS recovers a restarted worker's
    sessions by it). None: the first free slot of the host, ``worker-<host>``, then
    ``worker-<host>:1``... (``worker/identity.py``); a configured id that a live worker
    holds is refused."""
    queue_name: str = "dbos_agents"
    """The prefix of the agent queues (``<queue_name>:<agent>``, one per agent: a worker
    dequeues only its agents' runs), and the queue of runs enqueued by earlier releases."""
    start_when_no_worker: Literal["queue", "refuse"] = "queue"
    """A start of an agent that workers have run, but no live worker runs now: ``queue``
    accepts it (it waits on its agent's queue until such a worker comes up); ``refuse``
    raises ``AgentUnavailableError`` (HTTP 503). An agent no worker ever ran is refused
    either way (``UnknownAgentError``)."""
    worker_concurrency: int | None = None
    """Runs one worker takes at once from each of its agents' queues (DBOS's per-queue
    ``worker_concurrency``): a worker of three agents may run three times this many."""
    queue_polling_interval_sec: float | None = None
    """The queue's safety-net poll (``queue_poll_sec`` resolves ``None``): starts are
    announced by ``NOTIFY`` and claimed at once, except on a queue with
    ``worker_concurrency``, which only the poll claims. Each poll also walks every active
    workflow in DBOS, so a fast poll costs CPU in proportion to the parked sessions."""
    stream_replies: bool = True
    """Stream a model's reply to readers as it is written (``GET /sessions/{id}/events``,
    ``AgentClient.stream``, ``dbos-agents follow``) when the model has ``stream``; False:
    readers see each reply when its turn is recorded."""
    stream_flush_sec: float = Field(default=0.005, ge=0)
    """The least time between the starts of two batches of live deltas and announcements a
    worker writes (a batch goes at once when none was started for this long). Shorter:
    readers see pieces sooner; longer: fewer, larger transactions under load."""
    model_max_attempts: int = 5
    model_backoff_initial_sec: float = 0.5
    model_backoff_max_sec: float = 10.0
    model_retry_after_max_sec: float = Field(default=60.0, ge=0)
    """The longest a model turn waits for a provider's ``retry-after`` before its next
    attempt (it waits the longer of that and its backoff). A provider asking for more gets
    this: the turn holds its worker's slot while it waits."""
    connect_timeout_sec: float = 5.0
    db_pool_size: int = 10
    db_max_overflow: int = 20
    system_db_pool_size: int = 20
    """DBOS's system-database pool (steps, waits, events, queue claims; no overflow)."""
    db_pool_timeout_sec: float = 600.0
    """How long a workflow write waits for a pooled connection. Waiting is backpressure; a
    short timeout would fail a burst of sessions for good (their workflows end in ERROR)."""
    max_executor_threads: int = 48
    """DBOS's thread pool, where async workflows' database calls run. Unbounded (DBOS's
    default), a burst of blocked calls grows it by a thread each, into the thousands."""
    park_after_sec: float | None = Field(default=30.0, gt=0)
    """How long a root session's client-tool, approval or idle-inbox wait stays in memory
    (a suspended workflow, about 25 KB) before it parks (rows only, about 1 KB); a parked
    wait resumes by replaying its workflow, a few milliseconds more per resume. ``None``:
    never park.
    Ignored under ``worker_concurrency`` (a resume would start past the queue's limit)."""
    wake_recheck_interval_sec: float = 60.0
    """How often the worker looks, in one query for all waiting sessions, for a submitted
    result whose notification was lost. DBOS alone would re-check each waiting session at
    this interval with a query and a thread hop of its own: 170/s with 10,000 waiting."""
    result_recheck_sec: float = Field(default=5.0, gt=0)
    """``SessionHandle.result()`` learns of a run's end from a NOTIFY; this is its safety
    net: how often it also reads the run's row and asks DBOS whether the workflow ended
    without recording one."""
    tombstone_retention_sec: float = 24 * 3600
    """How long settled pending calls are kept, so duplicate submits say already_completed."""
    delta_retention_sec: float = Field(default=24 * 3600, ge=0)
    """How long the live-stream pieces of a run that ended are kept (``deltas``): a reader
    resuming from an older cursor gets that run's messages whole, not piece by piece."""
    reap_interval_sec: float = 600.0
    """How often a worker deletes expired tombstones and live-stream pieces."""
    heartbeat_interval_sec: float = 5.0
    """How often a worker bumps its row (from a thread of its own) and watches its peers."""
    stale_after_sec: float = 30.0
    """A peer whose heartbeat did not move for this long, watched by a worker that stayed
    connected all that time, is dead: that worker adopts its PENDING sessions."""
    shutdown_grace_sec: float = 10.0
    """On SIGTERM: how long running steps get to finish (and checkpoint) before exit."""
    log_level: str = "INFO"
    """dbos-agents' own log level in ``dbos-agents worker``: INFO logs a line when a
    session's run starts, waits and ends."""
    dbos_log_level: str = "WARNING"
    """DBOS's log level (DBOS's ``log_level``); never below ``log_level``
    (``dbos_level``), so ``log_level = "ERROR"`` quiets both."""
    log_format: Literal["text", "json"] = "text"
    """``dbos-agents worker``'s log lines on stderr: text (rich on a terminal), or one JSON
    object per line (``--log-format json``)."""
    dbos_system_schema: str = "dbos"
    """The schema of DBOS's system tables (DBOS's ``dbos_system_schema``); our own SQL that
    reads them (a submit's status check, the inbox) uses the same name."""
    dbos_fast_paths: bool = True
    """Use dbos-agents' replacements for some of DBOS's internal paths (faster starts,
    submits, resumes and recovery; parked waits; batched wake-up re-checks), reviewed for
    the dbos versions ``dbos_agents._dbos.REVIEWED`` names. ``False`` runs on DBOS's public
    API only: every guarantee holds, waits stay in memory (no parking), starts wait for the
    queue's poll, and an unreviewed dbos release is accepted with a warning."""

    def dbos_level(self) -> str:
        """DBOS's log level in force: the higher of ``dbos_log_level`` and ``log_level``."""
        levels = [logging.getLevelName(x.upper()) for x in (self.log_level, self.dbos_log_level)]
        numeric = [lv for lv in levels if isinstance(lv, int)]
        return logging.getLevelName(max(numeric)) if numeric else self.dbos_log_level.upper()

    def queue_poll_sec(self) -> float:
        """The poll interval in force: the setting, else 1 s, or 0.2 s under a
        ``worker_concurrency`` limit (the poll is then what claims every start)."""
        if self.queue_polling_interval_sec is not None:
            return self.queue_polling_interval_sec
        return 0.2 if self.worker_concurrency is not None else 1.0

    def park_after(self) -> float | None:
        """The parking delay in force: ``park_after_sec``, except ``None`` (never park)
        under ``worker_concurrency``, where a resume would start past the queue's limit."""
        return self.park_after_sec if self.worker_concurrency is None else None

    def max_database_connections(self) -> int:
        """The most Postgres connections one worker opens, whatever its load: DBOS's system
        pool and its LISTEN connection, the runtime's DBOS client, the datasource (pool and
        overflow), the runtime's sync engine, the start watch, the run-outcome listener, the
        heartbeat and the executor id's lock. Size
        Postgres's ``max_connections`` for your workers, API servers and admin scripts."""
        return (
            self.system_db_pool_size
            + 1
            + CLIENT_POOL_SIZE
            + self.db_pool_size
            + self.db_max_overflow
            + SYNC_POOL_SIZE
            + SYNC_MAX_OVERFLOW
            + 4
        )

    def check_worker(self) -> None:
        """Refuse settings that invite adopting a live or draining worker.

        An adopter needs ``stale_after_sec`` of unbroken observation, and a tick gap over
        three intervals breaks it; a peer must get several beats into that window, so
        ``stale_after_sec >= 3 * heartbeat_interval_sec``. The whole drain, plus two beats
        of slack, must also fit in one window: even a drainer whose heartbeats stall is
        gone before anyone could call it dead. Raises ``ConfigurationError``.
        """
        hb, stale, grace = (
            self.heartbeat_interval_sec,
            self.stale_after_sec,
            self.shutdown_grace_sec,
        )
        problems = []
        if hb <= 0:
            problems.append(f"heartbeat_interval_sec must be positive (got {hb})")
        if grace < 0:
            problems.append(f"shutdown_grace_sec must not be negative (got {grace})")
        if hb > 0 and stale < 3 * hb:
            problems.append(
                f"stale_after_sec ({stale}) must be at least 3 x heartbeat_interval_sec"
                f" ({hb}): a live worker could be adopted after a few slow heartbeats"
            )
        if hb > 0 and grace >= 0 and grace + 2 * hb >= stale:
            problems.append(
                f"shutdown_grace_sec + 2 x heartbeat_interval_sec ({grace + 2 * hb:g}) must be"
                f" below stale_after_sec ({stale}): a draining worker could be adopted"
                " while its last steps still run"
            )
        if problems:
            raise ConfigurationError("unsafe worker settings: " + "; ".join(problems))
