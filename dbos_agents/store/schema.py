"""The name of our Postgres schema, defined once for every store module."""

from typing import Final

SCHEMA: Final = "dbos_agents"
