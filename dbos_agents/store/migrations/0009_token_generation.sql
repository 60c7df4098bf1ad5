-- Session token revocation (issue: security). Every token carries the generation it was
-- issued under; POST /sessions/{id}/revoke-tokens bumps it, and the server refuses tokens
-- of an older generation (open event streams close).
ALTER TABLE dbos_agents.sessions ADD COLUMN token_generation integer NOT NULL DEFAULT 0;
