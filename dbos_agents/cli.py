"""The ``dbos-agents`` command line: a thin shell over the Python API."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from .errors import DbosAgentsError
from .settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
err = Console(stderr=True)


def resolve_database_url(url: str | None, settings: Settings) -> str:
    """The URL to use: the option, then ``DBOS_AGENTS_DATABASE_URL``, then embedded pgserver."""
    if url:
        return url
    if settings.database_url:
        return settings.database_url
    from .store.embedded import embedded_database_url

    err.print(
        f"[dim]no database URL set: using the embedded Postgres under {settings.data_dir}/[/]"
    )
    return embedded_database_url(f"{settings.data_dir}/pgdata")


@app.command()
def migrate(
    database_url: str | None = typer.Option(None, "--database-url", help="Postgres URL"),
) -> None:
    """Create or upgrade the dbos_agents schema (also done by every worker at launch)."""
    from .store.db import create_sync_engine
    from .store.migrate import current_version, prepare_database

    settings = Settings()
    url = resolve_database_url(database_url, settings)
    prepare_database(url, connect_timeout=settings.connect_timeout_sec)
    engine = create_sync_engine(url, pool_size=1)
    try:
        version = current_version(engine)
    finally:
        engine.dispose()
    typer.echo(f"dbos and dbos_agents schemas are current (dbos_agents version {version})")


@app.command()
def worker(
    app_spec: str = typer.Option(..., "--app", help="module:attr of an AgentRuntime or factory"),
) -> None:
    """Run a long-lived worker: launch DBOS, recover own sessions, consume the agent queue."""
    from .worker import run_worker

    run_worker(app_spec)


@app.command()
def demo(
    database_url: str | None = typer.Option(None, "--database-url", help="Postgres URL"),
) -> None:
    """Run the support-desk example with ScriptedModel; embedded Postgres by default."""
    from .demo import demo as run_demo

    settings = Settings()
    run_demo(resolve_database_url(database_url, settings), settings)


def main() -> None:
    try:
        app()
    except DbosAgentsError as exc:
        err.print(f"[red]error[/] {escape(f'[{exc.code}] {exc}')}")
        sys.exit(2)


if __name__ == "__main__":
    main()
