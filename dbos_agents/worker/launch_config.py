"""What a worker hands DBOS at launch: its configuration and the datasource the loop's
writes go through (pool sizes, no ping per checkout), kept apart from the runtime's
lifecycle."""

from __future__ import annotations

from dbos import AsyncSQLAlchemyDatasource, DBOSConfig

from ..settings import Settings
from ..store.db import PREPARED, sqlalchemy_url
from ..store.migrate import SCHEMA

SYSTEM_APPLICATION_NAME = {"application_name": "dbos_transact"}
"""DBOS's own name for its system-database connections, which our arguments replace."""


def dbos_config(s: Settings, url: str, executor_id: str) -> DBOSConfig:
    config: DBOSConfig = {
        "name": s.app_name,
        "system_database_url": sqlalchemy_url(url),
        "dbos_system_schema": s.dbos_system_schema,
        "application_version": s.application_version,
        "executor_id": executor_id,
        "log_level": s.dbos_level(),
        "max_executor_threads": s.max_executor_threads,
        "sys_db_pool_size": s.system_db_pool_size,
        # DBOS's system engine pings every checkout, and every DBOS operation checks a
        # connection out: about a fifth of a resumed turn's round trips. A connection
        # that died with the server fails its statement instead, which invalidates the
        # pool and is retried (DBOS's ``db_retry``), as the datasource below does.
        "db_engine_kwargs": {
            "pool_pre_ping": False,
            "connect_args": {**PREPARED, **SYSTEM_APPLICATION_NAME},
        },
    }
    return config


async def datasource(s: Settings, url: str) -> AsyncSQLAlchemyDatasource:
    return await AsyncSQLAlchemyDatasource.create(
        sqlalchemy_url(url),
        schema=SCHEMA,
        engine_kwargs={
            # Every connection the bound allows is kept once opened: an overflow
            # connection is closed on return and reopened by the next burst (a new
            # backend each, milliseconds of Postgres CPU).
            "pool_size": s.db_pool_size + s.db_max_overflow,
            "max_overflow": 0,
            "pool_timeout": s.db_pool_timeout_sec,
            # No ping per checkout (a round trip each, most of a checkout's CPU): a
            # connection that died with the server fails its statement, is invalidated
            # and the write retried (``calls.retry_transient``, DBOS's own retries).
            "pool_pre_ping": False,
            "connect_args": dict(PREPARED),
        },
    )
