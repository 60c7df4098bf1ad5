-- Less Postgres work per turn (docs/bench-notes/cheaper-turns.md).
--
-- A model turn's fence and its usage in one statement: the UPDATE takes the session row's
-- lock that lock_running_run took with a separate SELECT ... FOR UPDATE (a lock record in
-- the WAL, then the update's own), and still aborts the turn's transaction with DA001
-- unless the run is the session's running one. lock_running_run stays for the writes that
-- add no usage (and for workers of the previous release).
CREATE FUNCTION dbos_agents.count_running_turn(
    p_session text, p_run bigint, p_in bigint, p_out bigint, p_cost numeric
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dbos_agents.sessions SET turns = turns + 1, input_tokens = input_tokens + p_in,
        output_tokens = output_tokens + p_out, cost_usd = cost_usd + p_cost, updated_at = now()
    WHERE id = p_session AND run_seq = p_run AND status = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'DA001',
            MESSAGE = 'run ' || p_run || ' of session ' || p_session || ' is no longer running';
    END IF;
END
$$;

-- No query reads tool calls by status alone, and the index made every status change of a
-- call (requested, dispatched, completed) a new index entry; without it, and with room on
-- the page, those updates are heap-only. The session row, updated every turn, likewise.
DROP INDEX IF EXISTS dbos_agents.tool_calls_status_idx;
ALTER TABLE dbos_agents.tool_calls SET (fillfactor = 75);
ALTER TABLE dbos_agents.sessions SET (fillfactor = 75);

-- A usage row is named by its turn; the serial id was a second index and a sequence per
-- turn that nothing reads.
ALTER TABLE dbos_agents.usage DROP COLUMN id;
ALTER TABLE dbos_agents.usage DROP CONSTRAINT usage_session_id_run_seq_turn_key;
ALTER TABLE dbos_agents.usage ADD PRIMARY KEY (session_id, run_seq, turn);
