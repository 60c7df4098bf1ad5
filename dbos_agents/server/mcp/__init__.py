"""Agents as MCP tools (``dbos-agents serve --mcp``; docs/mcp-serve.md).

An MCP client (an IDE, a desktop assistant, another agent) calls a durable agent as one
tool over streamable HTTP, on the 2026-07-28 protocol and the handshake versions before it,
through the official ``mcp`` SDK (no protocol code of our own):

- ``catalogue``: which agents are tools, their descriptions and input schema;
- ``state``: what a call's sealed ``requestState`` carries, and the key that seals it;
- ``forms``: a run's wait as a form elicitation, an answer to it as a ``Delivery``;
- ``runs``: waiting until a run ends or waits on something this caller may answer;
- ``access``: the REST API's authentication hook and tenant scoping, for MCP calls;
- ``call``: the ``tools/call`` handler (start or continue, answer, wait, map);
- ``errors``: the project's errors as MCP errors;
- ``mount``: the SDK's server and session manager, mounted in the FastAPI app.

Nothing here is imported unless ``ServerSettings.mcp`` is on, since ``mcp`` is an optional
extra (``pip install 'dbos-agents[mcp]'``): ``create_app`` imports ``mount`` then.
"""
