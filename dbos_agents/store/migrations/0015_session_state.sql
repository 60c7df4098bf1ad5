-- Typed session state (issue 30, store/state.py): one row per committed version of a
-- session's state, written in the same transaction as the tool result that changed it
-- (so neither is ever stored without the other). ``version`` counts from 1 per session;
-- the latest row is the session's state. ``run_seq``, ``turn`` and ``tool_call_id`` name
-- the tool call whose recorded result committed it (NULL for a row that no call wrote,
-- e.g. one copied by a fork). Deleted with the session.
CREATE TABLE dbos_agents.session_states (
    session_id text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    version bigint NOT NULL CHECK (version >= 1),
    run_seq bigint,
    turn integer,
    tool_call_id text,
    state jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, version)
);

CREATE INDEX session_states_by_call ON dbos_agents.session_states (session_id, tool_call_id);

ALTER TABLE dbos_agents.session_states ENABLE ROW LEVEL SECURITY;
CREATE POLICY session_states_read ON dbos_agents.session_states FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY session_states_service ON dbos_agents.session_states FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

-- Application roles registered before this migration read states as they read messages.
DO $$
DECLARE r text;
BEGIN
    FOR r IN SELECT role_name FROM dbos_agents.app_roles LOOP
        EXECUTE 'GRANT SELECT ON dbos_agents.session_states TO ' || quote_ident(r);
    END LOOP;
END $$;
