"""An MCP tool's input schema: whether we can offer it to the model, and arguments checked
against it before the call is dispatched (a bad call becomes the model's tool error, and
the server never sees it)."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

from ..messages import JSONValue

if TYPE_CHECKING:
    import jsonschema


def schema_problem(schema: object) -> str | None:
    """Why a tool's input schema cannot be offered to the model (None: it can)."""
    import jsonschema

    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not a JSON Schema object (type: object)"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"its input schema is not valid JSON Schema: {exc.message}"
    return None


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> jsonschema.Draft202012Validator:
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(schema_json))


def check_arguments(schema: dict[str, JSONValue], arguments: dict[str, JSONValue]) -> None:
    """Raise ``ValueError`` naming the first place the arguments fail the schema."""
    import jsonschema

    validator = _validator(json.dumps(schema, sort_keys=True))
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ValueError(f"{where}: {error.message}")
