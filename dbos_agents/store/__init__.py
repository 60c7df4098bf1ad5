"""Postgres storage: schema, migrations and the embedded default database."""
