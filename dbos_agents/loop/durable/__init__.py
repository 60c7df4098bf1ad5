"""Durable tools: the workflow a ``@tool(durable=True)`` body runs in (``workflow``) and
what the body does through its context (``ops``: inner steps, snapshot, notes, asks)."""
