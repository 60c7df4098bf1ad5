"""The shared schema-form module (``inbox/static/schema-form.mjs``, also bundled into the
chat page) reads the schemas pydantic writes: which answer is a yes/no pair of buttons, and
what an optional (``anyOf [X, null]``) or a ``$ref`` field is. Run with Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
from pydantic import BaseModel

from .conftest import REPO

MODULE = REPO / "dbos_agents" / "server" / "inbox" / "static" / "schema-form.mjs"


class Confirm(BaseModel):
    ok: bool
    note: str = ""


class Two(BaseModel):
    ok: bool
    sure: bool


class Optional(BaseModel):
    ok: bool | None = None


class Address(BaseModel):
    city: str


class Order(BaseModel):
    quantity: int
    ship_to: Address | None = None


def _run(code: str) -> Any:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node is not installed")
    script = f"import * as m from {json.dumps(MODULE.as_uri())};\n{code}"
    out = subprocess.run(
        [node, "--input-type=module", "-e", script], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_a_yes_no_answer_is_one_required_boolean() -> None:
    schemas = [m.model_json_schema() for m in (Confirm, Two, Optional, Order)]
    keys = _run(f"console.log(JSON.stringify({json.dumps(schemas)}.map(m.yesNoKey)))")
    assert keys == ["ok", None, None, None]


def test_optional_and_referenced_fields_are_read_through() -> None:
    schema = Order.model_json_schema()
    shape = _run(
        f"const s = {json.dumps(schema)};"
        "console.log(JSON.stringify(m.shapeOf(s.properties.ship_to, s)))"
    )
    assert shape["type"] == "object" and shape["properties"]["city"]["type"] == "string"
