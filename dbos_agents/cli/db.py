"""``dbos-agents db url|start|stop|status``: the embedded Postgres, seen and managed.

Its postmaster outlives the commands, workers and scripts that start it (they share it), so
a user needs a way to see where it runs and to stop it; ``url`` is what to hand to ``psql``,
the DBOS CLI or another program (``AgentClient()`` finds it by itself).
"""

from __future__ import annotations

import typer
from rich.markup import escape

from ..settings import Settings
from .base import AsJson, Command, Group, app, emit, out, resolve_database_url

db_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    help="The embedded Postgres (in $DBOS_AGENTS_DATA_DIR/pgdata, default .dbos_agents/pgdata):"
    " its URL, start, stop, status.",
)
app.add_typer(db_app, name="db", rich_help_panel="Setup and processes")


@db_app.command("url", cls=Command)
def url(as_json: bool = AsJson) -> None:
    """Print the database URL that commands and AgentClient() use.

    The configured one (DBOS_AGENTS_DATABASE_URL or the settings file), else the embedded
    one, created and started if needed.
    """
    resolved = resolve_database_url(None)
    if as_json:
        emit({"url": resolved, "embedded": Settings().database_url is None})
        return
    typer.echo(resolved)  # alone on stdout: $(dbos-agents db url)


@db_app.command("start", cls=Command)
def start(as_json: bool = AsJson) -> None:
    """Create (first use) or start the embedded Postgres; it keeps running until `db stop`."""
    from ..store.locate import embedded_pgdata, locate_database, shown

    settings = Settings()
    located = locate_database(settings.model_copy(update={"database_url": None}))
    before = located.before
    assert before is not None  # the embedded database, whatever the settings name
    if as_json:
        emit({"state": "running", "was": before.state, "url": located.url})
        return
    where = shown(embedded_pgdata(settings))
    verb = {"missing": "created and started", "stopped": "started"}.get(before.state)
    said = f"{verb} the embedded Postgres" if verb else "the embedded Postgres is already running"
    out.print(
        f"{said} in {escape(where)}/: {escape(located.url)}"
        " (it keeps running; `dbos-agents db stop` stops it)",
        soft_wrap=True,
    )


@db_app.command("stop", cls=Command)
def stop(as_json: bool = AsJson) -> None:
    """Stop the embedded Postgres (a fast shutdown: open sessions' workers lose it)."""
    from ..store.embedded import stop_embedded_database
    from ..store.locate import embedded_pgdata, shown

    pgdata = embedded_pgdata(Settings())
    stopped = stop_embedded_database(pgdata)
    if as_json:
        emit({"stopped": stopped, "pgdata": str(pgdata.resolve())})
        return
    where = escape(shown(pgdata))
    said = (
        "stopped the embedded Postgres in" if stopped else "the embedded Postgres is not running in"
    )
    out.print(f"{said} {where}/", soft_wrap=True)


@db_app.command("status", cls=Command)
def status(as_json: bool = AsJson) -> None:
    """Whether the embedded Postgres exists and runs, where, and on which port."""
    from ..store.embedded import embedded_status
    from ..store.locate import embedded_pgdata, shown

    settings = Settings()
    st = embedded_status(embedded_pgdata(settings))
    if as_json:
        emit({"state": st.state, "pgdata": str(st.pgdata), "port": st.port, "pid": st.pid})
        return
    where = escape(shown(st.pgdata))
    if st.state == "missing":
        line = f"not created: no embedded Postgres in {where}/ yet (any command creates it)"
    elif st.state == "stopped":
        line = f"stopped: the embedded Postgres in {where}/ (`dbos-agents db start` starts it)"
    else:
        line = (
            f"running: the embedded Postgres in {where}/ on 127.0.0.1:{st.port}, pid {st.pid}"
            " (`dbos-agents db stop` stops it)"
        )
    out.print(line, soft_wrap=True)
    if settings.database_url:
        out.print(
            "[dim]note: a database URL is configured (DBOS_AGENTS_DATABASE_URL or the settings"
            " file); commands use it, not this one[/]",
            soft_wrap=True,
        )
