-- The fence a session.v3 model turn writes under: lock the session row only while the run
-- is its running one, else abort the turn's transaction (an interrupt or a newer run got
-- there first). One statement, so the turn's writes stay one script.
CREATE FUNCTION dbos_agents.lock_running_run(p_session text, p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM dbos_agents.sessions
    WHERE id = p_session AND run_seq = p_run AND status = 'running'
    FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'DA001',
            MESSAGE = 'run ' || p_run || ' of session ' || p_session || ' is no longer running';
    END IF;
END
$$;
