-- The rows a turn writes skip the per-row foreign key check (docs/bench-notes/cheaper-turns.md).
--
-- Every insert into messages, tool_calls, usage and deltas ran its foreign key's trigger:
-- a query of the session row, locked FOR KEY SHARE, four or more times a turn. Each of
-- those writes already runs in a transaction that proves the session is there: a turn's
-- record and a run's begin update the session row first (count_running_turn, the begin's
-- fenced update), a result updates its ledger row, and a live piece is written only for
-- the running execution of a run (store/fence.py). What the constraint still gave is
-- ON DELETE CASCADE, which the trigger below keeps: deleting a session deletes these rows,
-- as the owner (the constraint's cascade ran as the table owner too).
ALTER TABLE dbos_agents.messages DROP CONSTRAINT IF EXISTS messages_session_id_fkey;
ALTER TABLE dbos_agents.tool_calls DROP CONSTRAINT IF EXISTS tool_calls_session_id_fkey;
ALTER TABLE dbos_agents.usage DROP CONSTRAINT IF EXISTS usage_session_id_fkey;
ALTER TABLE dbos_agents.deltas DROP CONSTRAINT IF EXISTS deltas_session_id_fkey;

CREATE FUNCTION dbos_agents.delete_turn_rows() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM dbos_agents.messages t USING gone WHERE t.session_id = gone.id;
    DELETE FROM dbos_agents.tool_calls t USING gone WHERE t.session_id = gone.id;
    DELETE FROM dbos_agents.usage t USING gone WHERE t.session_id = gone.id;
    DELETE FROM dbos_agents.deltas t USING gone WHERE t.session_id = gone.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_delete_turn_rows AFTER DELETE ON dbos_agents.sessions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT
    EXECUTE FUNCTION dbos_agents.delete_turn_rows();
