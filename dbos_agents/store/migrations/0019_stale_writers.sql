-- Stale writers fenced (store/deltas.py): a live piece is written only by the execution that
-- owns its run's workflow (DBOS's ``workflow_status.owner_xid``, a token set at each claim).
-- The batch writer filters a stale execution's pieces out in SQL; a turn's record, the run's
-- end and a batch with staged results must fail instead, which this function does: called
-- only for a row whose writer no longer owns its workflow, it raises ``DA002``.
CREATE FUNCTION dbos_agents.refuse_stale_writer(p_session text, p_workflow text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'DA002',
        MESSAGE = 'workflow ' || p_workflow || ' of session ' || p_session
            || ' is no longer owned by this execution (adopted): its live pieces are refused';
END
$$;
