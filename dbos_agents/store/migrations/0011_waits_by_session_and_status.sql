-- A session's open waits through one index each, whatever the planner's statistics say.
-- With a table that grew by thousands of waits since its last ANALYZE (or never analyzed:
-- a server without autovacuum), the planner combined the owner index with the partial
-- open-waits index, reading every open wait of every session to find one run's (a run's
-- end, an interrupt, a session's pending list). An index on the session and the status
-- answers those alone; the owner one still serves the cascade from sessions.
DROP INDEX dbos_agents.pending_calls_owner_idx;
CREATE INDEX pending_calls_owner_status_idx ON dbos_agents.pending_calls (owner_session_id, status);
CREATE INDEX pending_calls_root_status_idx ON dbos_agents.pending_calls (root_session_id, status);
