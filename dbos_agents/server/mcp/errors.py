"""The project's errors as MCP errors: one JSON-RPC error per failure of the request (the
tool is unknown, the arguments are bad, the caller is not let in), with the project's
stable code in ``error.data.error``, as the REST API's ``ErrorBody`` carries it. A run
that fails is no MCP error: its result has ``isError: true`` (``call.py``).

| project code | JSON-RPC code |
|---|---|
| ``UNKNOWN_AGENT``, ``INVALID_REQUEST``, ``INVALID_RESULT``, ``SESSION_NOT_FOUND``, ``NOT_ROOT_SESSION`` | -32602 invalid params |
| ``UNAUTHORIZED``, ``FORBIDDEN``, ``ACCESS_DENIED``, ``SESSION_BUSY`` and other 4xx | -32600 invalid request |
| ``DATABASE_UNAVAILABLE``, ``AGENT_UNAVAILABLE`` and anything else | -32603 internal error |
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from starlette.exceptions import HTTPException

from ...errors import DbosAgentsError, InvalidResultError
from ..errors import CODE_BY_STATUS, STATUS_BY_CODE

log = logging.getLogger("dbos_agents.server")

_PARAMS = frozenset(
    {"UNKNOWN_AGENT", "INVALID_REQUEST", "INVALID_RESULT", "SESSION_NOT_FOUND", "NOT_ROOT_SESSION"}
)


def mcp_error(exc: DbosAgentsError | HTTPException) -> MCPError:
    """The MCP error a failed request answers with (see the module doc)."""
    if isinstance(exc, HTTPException):
        code = CODE_BY_STATUS.get(exc.status_code, f"HTTP_{exc.status_code}")
        status, message = exc.status_code, str(exc.detail)
    else:
        code, status, message = exc.code, STATUS_BY_CODE.get(exc.code, 500), str(exc)
    data: dict[str, Any] = {"error": code}
    if isinstance(exc, InvalidResultError):
        data["details"] = exc.errors
    if code in _PARAMS:
        rpc = INVALID_PARAMS
    elif 400 <= status < 500:
        rpc = INVALID_REQUEST
    else:
        rpc = INTERNAL_ERROR
        if status == 500:
            log.error("MCP request failed", exc_info=exc, extra={"event": "server.error"})
            message = "internal server error"
    return MCPError(code=rpc, message=message, data=data)
