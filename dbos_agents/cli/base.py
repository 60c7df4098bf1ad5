"""What every ``dbos-agents`` command shares: errors as one line with a code and an exit
status (never a traceback unless ``--debug``), ``--json`` output, the database to use (the
embedded default included) and progress spinners on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

try:  # a typer that vendors click (0.29) raises the usage errors of its own copy
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover  (older typer: click's own)
    from click.exceptions import NoArgsIsHelpError, UsageError  # type: ignore[assignment]

from ..errors import (
    DbosAgentsError,
    InvalidResultError,
    UnknownAgentError,
)
from ..logs import configure_cli
from ..settings import Settings

if TYPE_CHECKING:
    from ..client import AgentClient
    from ..store.embedded import EmbeddedStatus

out = Console(soft_wrap=False)
err = Console(stderr=True)

EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "INTERNAL_ERROR": 1,
    "INVALID_USAGE": 2,
    "INVALID_CONFIGURATION": 2,
    "already_completed": 3,
    "unknown_tool_call": 4,
    "late_answer_after_timeout": 5,
    "INVALID_RESULT": 6,
    "INVALID_REQUEST": 7,
    "NOT_ROOT_SESSION": 7,
    "SESSION_NOT_FOUND": 8,
    "DATABASE_UNAVAILABLE": 9,
    "UNKNOWN_AGENT": 10,
    "SESSION_BUSY": 11,
    "INTERRUPT_FAILED": 12,
    "run_not_completed": 13,
    "PORT_IN_USE": 14,
    "TURN_NOT_FOUND": 15,
    "DEMO_FAILED": 16,
    "AGENT_UNAVAILABLE": 17,
    "MCP_SERVER_ERROR": 18,
    "interrupted": 130,
}
"""Exit status per error code or outcome (docs/cli.md lists them). Lower-case keys are
outcomes (a submit that did not apply, a followed run that did not complete); upper-case
keys are the ``code`` of an error from ``dbos_agents.errors``. Anything else exits 1."""

EXIT_CODES_HELP = (
    "Exit codes: 0 ok, 1 internal error, 2 usage or configuration, 3 already_completed,"
    " 4 unknown_tool_call, 5 late_answer_after_timeout, 6 INVALID_RESULT, 7 INVALID_REQUEST,"
    " 8 SESSION_NOT_FOUND, 9 DATABASE_UNAVAILABLE, 10 UNKNOWN_AGENT, 11 SESSION_BUSY,"
    " 12 INTERRUPT_FAILED, 13 a followed run ended but did not complete, 14 PORT_IN_USE,"
    " 15 TURN_NOT_FOUND, 16 DEMO_FAILED, 17 AGENT_UNAVAILABLE, 18 MCP_SERVER_ERROR,"
    " 130 Ctrl-C."
)


@dataclass
class State:
    """Options of the ``dbos-agents`` group itself, reachable from every command."""

    debug: bool = False


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def describe_error(exc: Exception) -> tuple[str, str]:
    """(code, one-line message): our errors keep their code; the database driver's become
    DATABASE_UNAVAILABLE; settings that fail validation become INVALID_CONFIGURATION."""
    import pydantic
    import sqlalchemy as sa

    if isinstance(exc, UnknownAgentError) and exc.known:
        return exc.code, f"{exc} (this app has: {', '.join(sorted(exc.known))})"
    if isinstance(exc, DbosAgentsError):
        return exc.code, first_line(str(exc))
    if isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError):
        reason = first_line(str(exc.orig if exc.orig is not None else exc))
        return "DATABASE_UNAVAILABLE", f"the database stopped answering: {reason}"
    if isinstance(exc, pydantic.ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
        )
        return "INVALID_CONFIGURATION", f"invalid settings: {problems}"
    text = first_line(str(exc))
    return "INTERNAL_ERROR", f"{type(exc).__name__}{': ' + text if text else ''}"


def fail(
    code: str, message: str, *, as_json: bool, details: list[dict[str, object]] | None = None
) -> NoReturn:
    """Report one error (stdout as JSON with ``--json``, else one line on stderr) and exit."""
    status = EXIT_CODES.get(code, 1)
    message = " ".join(message.split())
    if as_json:
        body: dict[str, object] = {"error": code, "message": message, "exit_code": status}
        if details:
            body["details"] = details
        typer.echo(json.dumps(body, default=str))
    else:
        hint = " (rerun with --debug for the traceback)" if code == "INTERNAL_ERROR" else ""
        err.print(f"[bold red]error[/] {escape(f'[{code}] {message}{hint}')}", soft_wrap=True)
        for d in details or []:
            err.print(f"  {escape(str(d.get('path')))}: {escape(str(d.get('message')))}")
    raise typer.Exit(status)


@contextmanager
def usage_errors(as_json: bool) -> Iterator[None]:
    """A usage error (missing argument, bad value, unknown option or command) becomes one
    line ``error [INVALID_USAGE] ...`` naming the ``--help`` to read, exit 2, like every
    other error here; a bare group still prints its help."""
    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "dbos-agents"
        fail("INVALID_USAGE", f"{exc.format_message()} (see `{where} --help`)", as_json=as_json)


class Command(TyperCommand):
    """A command whose failures become one line (or one JSON document) and an exit code."""

    def make_context(self, info_name: Any, args: Any, *rest: Any, **extra: Any) -> Any:
        with usage_errors("--json" in args):
            return super().make_context(info_name, args, *rest, **extra)

    def invoke(self, ctx: Any) -> Any:
        as_json = bool(ctx.params.get("as_json"))
        try:
            with usage_errors(as_json):
                return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_CODES["interrupted"]) from None
        except Exception as exc:
            state = ctx.find_object(State)
            if state is not None and state.debug:
                err.print_exception()
            code, message = describe_error(exc)
            details = exc.errors if isinstance(exc, InvalidResultError) else None
            fail(code, message, as_json=as_json, details=details)


class Group(TyperGroup):
    """The ``dbos-agents`` group (and ``db``): its own usage errors (an unknown command or
    option) are one line too; a command's are handled by ``Command``."""

    def make_context(self, info_name: Any, args: Any, *rest: Any, **extra: Any) -> Any:
        as_json = "--json" in args
        with usage_errors(as_json):
            ctx = super().make_context(info_name, args, *rest, **extra)
        ctx.meta["dbos_agents.as_json"] = as_json
        return ctx

    def invoke(self, ctx: Any) -> Any:
        with usage_errors(bool(ctx.meta.get("dbos_agents.as_json"))):
            return super().invoke(ctx)


app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    epilog=EXIT_CODES_HELP,
    pretty_exceptions_enable=False,
)


@app.callback(
    help="Crash-proof LLM agents on DBOS and Postgres. With no database configured, every"
    " command uses the embedded Postgres in .dbos_agents/ (DBOS_AGENTS_DATA_DIR), created on"
    " first use; `dbos-agents db` shows and stops it."
)
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False, "--debug", envvar="DBOS_AGENTS_DEBUG", help="print tracebacks of errors"
    ),
) -> None:
    ctx.obj = State(debug=debug)
    configure_cli(debug)  # our records as one line each; only errors unless --debug


def command(
    name: str | None = None, *, panel: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``@app.command`` with the error handling of ``Command``, listed under ``panel``."""
    return app.command(name, cls=Command, rich_help_panel=panel)


DbUrl = typer.Option(
    None, "--database-url", help="Postgres URL (else DBOS_AGENTS_DATABASE_URL, else embedded)"
)
AsJson = typer.Option(False, "--json", help="machine-readable output")


def emit(doc: object) -> None:
    """One JSON document on stdout (a line of JSON lines, for streams)."""
    typer.echo(json.dumps(doc, default=str))


@contextmanager
def progress(message: str) -> Iterator[None]:
    """A spinner on stderr while a long step runs; invisible when stderr is not a terminal."""
    with err.status(escape(message), spinner="dots"):
        yield


def resolve_database_url(option: str | None, *, configured: str | None = None) -> str:
    """The URL to use: the option, then ``configured`` (an app's own settings), then
    ``DBOS_AGENTS_DATABASE_URL`` (or the settings file), then the embedded Postgres, created
    on first use (the one rule of ``store/locate.py``, which ``AgentClient()`` follows too).

    For the embedded database one line on stderr says where it is, and, when this command
    created or started its postmaster (which keeps running), how to stop it.
    """
    from ..store.locate import describe, locate_database, shown

    def starting(before: EmbeddedStatus) -> AbstractContextManager[object]:
        where = shown(before.pgdata)
        if before.state == "missing":
            return progress(f"creating the embedded Postgres in {where} (first use)")
        if before.state == "stopped":
            return progress(f"starting the embedded Postgres in {where}")
        return nullcontext()

    located = locate_database(Settings(), option, configured, starting=starting)
    if located.before is not None:
        line = escape(describe(located))
        err.print(line if located.started else f"[dim]{line}[/]", soft_wrap=True)
    return located.url


@contextmanager
def open_client(option: str | None) -> Iterator[AgentClient]:
    """An ``AgentClient`` on the resolved database (its schema brought up to date first)."""
    from ..client import AgentClient

    url = resolve_database_url(option)
    with progress("connecting to Postgres and applying migrations"):
        client = AgentClient(url, settings=Settings())
    try:
        yield client
    finally:
        client.close()
