"""Talking to an MCP server with the official SDK: its tool list and one ``tools/call``
round, each returned as plain, recordable data.

One connection per server per event loop, kept between calls (a stdio server is one
process, not one per call) and opened again when it breaks. Nothing the server said is kept
between runs: the list is read anew for every run (the SDK's response cache is off).

A call round's outcome says what the caller may do next: ``result`` (the server answered;
``is_error`` for a tool error), ``input`` (the server asks questions first: answer them and
retry with its ``state``), ``stale`` (the server no longer accepts that state: ask again),
or ``unknown`` (the request may have reached the server, and no answer came back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import MCPServerError
from ..messages import JSONValue
from .server import IDEMPOTENCY_META, Hints, ListedTool, Listing, MCPServer
from .validate import schema_problem

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger("dbos_agents")

CONNECT_ATTEMPTS = 3
CONNECT_TIMEOUT_SEC = 10.0
"""A server that does not accept the connection within this is tried again (nothing was
sent yet), so a run never waits three request timeouts for a host that is gone."""


class Outcome(BaseModel):
    """One ``tools/call`` round (module doc); plain JSON, so a run records it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["result", "input", "stale", "unknown"]
    is_error: bool = False
    output: JSONValue = None
    requests: dict[str, dict[str, JSONValue]] = {}
    """The server's questions by its keys, as sent (``method`` and ``params``)."""
    state: str | None = None
    error: str | None = None


class _Connection:
    """An entered ``mcp.Client``, owned by one task (the SDK's task group must be entered
    and left in the same task); other tasks send their requests through it."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._own())

    async def _own(self) -> None:
        try:
            async with _client(self.server) as client:
                self.ready.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)

    async def close(self) -> None:
        if self.ready.done() and not self.ready.cancelled():
            self.ready.exception()  # seen: reported by whoever waited for it
        self._stop.set()
        with contextlib.suppress(BaseException):
            await self._task


_POOL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Connection]] = (
    weakref.WeakKeyDictionary()
)


def _client(server: MCPServer) -> Client:
    from mcp import Client, StdioServerParameters
    from mcp.client import ClientRequestContext
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import ElicitRequestParams, ElicitResult, ErrorData, Implementation

    async def legacy_elicitation(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        # A server on a protocol before input_required asks mid-call; that question cannot
        # outlive this connection, so it is declined rather than left to a crash.
        return ElicitResult(action="decline")

    target: Any
    if server.url is not None:
        import httpx2

        http = httpx2.AsyncClient(headers=server.headers, timeout=server.timeout.total_seconds())
        target = streamable_http_client(server.url, http_client=http)
    else:
        cmd, *args = server.command
        target = StdioServerParameters(command=cmd, args=args, env=server.env)
    return Client(
        target,
        cache=None,
        read_timeout_seconds=server.timeout.total_seconds(),
        elicitation_callback=legacy_elicitation,
        client_info=Implementation(name="dbos-agents", version="1"),
    )


async def _connection(server: MCPServer) -> Client:
    """The server's open connection, opened (with retries: nothing was sent yet) if none."""
    pool = _POOL.setdefault(asyncio.get_running_loop(), {})
    last: BaseException | None = None
    for attempt in range(CONNECT_ATTEMPTS):
        conn = pool.get(id(server))
        if conn is None or (conn.ready.done() and conn.ready.exception() is not None):
            conn = pool[id(server)] = _Connection(server)
        try:
            return await asyncio.wait_for(
                asyncio.shield(conn.ready), server.timeout.total_seconds()
            )
        except Exception as exc:
            last = exc
            pool.pop(id(server), None)
            await conn.close()
            if attempt + 1 < CONNECT_ATTEMPTS:
                await asyncio.sleep(0.2 * 2**attempt)
    raise MCPServerError(server.name, f"cannot connect: {_describe(last)}")


async def _drop(server: MCPServer) -> None:
    conn = _POOL.get(asyncio.get_running_loop(), {}).pop(id(server), None)
    if conn is not None:
        await conn.close()


async def close_all() -> None:
    """Close every loop's connections (stdio servers' processes end with them): a
    runtime's shutdown, whose loop need not be the one its workflows ran on."""
    here = asyncio.get_running_loop()
    for loop, pool in list(_POOL.items()):
        _POOL.pop(loop, None)
        if loop is here:
            await _close(pool)
        elif loop.is_running():
            done = asyncio.run_coroutine_threadsafe(_close(pool), loop)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.wrap_future(done), 5.0)


async def _close(pool: dict[int, _Connection]) -> None:
    await asyncio.gather(*(c.close() for c in pool.values()))


async def list_tools(server: MCPServer) -> Listing:
    """The server's tools, every page; raises ``MCPServerError`` when it does not answer."""
    client = await _connection(server)
    tools: list[ListedTool] = []
    skipped: dict[str, str] = {}
    cursor: str | None = None
    try:
        for _ in range(100):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            for t in page.tools:
                if not server.offers(t.name):
                    continue
                problem = schema_problem(t.input_schema)
                if problem is not None:
                    skipped[t.name] = problem
                    continue
                a = t.annotations
                hints = Hints(
                    read_only=a.read_only_hint if a else None,
                    destructive=a.destructive_hint if a else None,
                    idempotent=a.idempotent_hint if a else None,
                    open_world=a.open_world_hint if a else None,
                )
                tools.append(
                    ListedTool(
                        name=t.name,
                        description=t.description or t.title or "",
                        input_schema=t.input_schema,
                        hints=hints,
                    )
                )
            cursor = page.next_cursor
            if cursor is None:
                break
    except Exception as exc:
        await _drop(server)
        raise MCPServerError(server.name, f"tools/list failed: {_describe(exc)}") from exc
    return Listing(server=server.name, tools=tools, skipped=skipped)


async def call(
    server: MCPServer,
    tool: str,
    arguments: dict[str, JSONValue],
    key: str,
    responses: dict[str, JSONValue] | None = None,
    state: str | None = None,
) -> Outcome:
    """One ``tools/call`` round (module doc). ``MCPServerError``: nothing was sent."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import (
        CONNECTION_CLOSED,
        HEADER_MISMATCH,
        INVALID_PARAMS,
        REQUEST_TIMEOUT,
        CallToolResult,
        RequestParamsMeta,
    )

    client = await _connection(server)
    typed = None if responses is None else _responses(responses)
    for relisted in (False, True):
        try:
            result = await client.session.call_tool(
                tool,
                arguments,
                input_responses=typed,
                request_state=state,
                meta=cast("RequestParamsMeta", {IDEMPOTENCY_META: key}),
                allow_input_required=True,
            )
        except MCPError as exc:
            if exc.code == HEADER_MISMATCH and not relisted:
                # This connection has not listed the tool (a new process): the server
                # refused the call unrun, so list and send it again.
                await client.list_tools(cache_mode="refresh")
                continue
            if exc.code in (REQUEST_TIMEOUT, CONNECTION_CLOSED):
                await _drop(server)
                return Outcome(kind="unknown", error=f"no answer: {exc.message}")
            if exc.code == INVALID_PARAMS and state is not None and "requestState" in str(exc):
                return Outcome(kind="stale", error=exc.message)
            return Outcome(
                kind="result", is_error=True, output=f"MCP error {exc.code}: {exc.message}"
            )
        except ValidationError as exc:
            return Outcome(kind="unknown", error=f"malformed result: {_describe(exc)}")
        except Exception as exc:  # the transport broke after the request was sent
            await _drop(server)
            return Outcome(kind="unknown", error=f"no answer: {_describe(exc)}")
        if isinstance(result, CallToolResult):
            return Outcome(kind="result", is_error=result.is_error, output=_output(result))
        requests = {
            k: r.model_dump(mode="json", by_alias=True, exclude_none=True)
            for k, r in (getattr(result, "input_requests", None) or {}).items()
        }
        return Outcome(kind="input", requests=requests, state=result.request_state)
    raise AssertionError("unreachable")


def _responses(responses: dict[str, JSONValue]) -> Any:
    from mcp_types import ElicitResult, ListRootsResult

    out: dict[str, Any] = {}
    for k, v in responses.items():
        out[k] = (
            ListRootsResult.model_validate(v)
            if isinstance(v, dict) and "roots" in v
            else ElicitResult.model_validate(v)
        )
    return out


def _output(result: Any) -> JSONValue:
    """What the model reads: the text blocks (which carry structured results serialized,
    as the protocol asks), else the structured result, with other blocks described
    without their bytes."""
    texts: list[str] = []
    for block in result.content:
        if getattr(block, "type", None) == "text":
            texts.append(block.text)
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "uri", None) or ""
            texts.append(f"[{block.type} {mime}]".replace(" ]", "]"))
    if result.structured_content is not None and not any(
        getattr(b, "type", None) == "text" for b in result.content
    ):
        structured: JSONValue = result.structured_content
        return structured
    return "\n".join(texts)


def _describe(exc: BaseException | None) -> str:
    """An exception as one line; a task group's wrapper is unwrapped to what went wrong."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "unknown error"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
