-- The live stream of a model turn (store/deltas.py): text pieces as the model writes them,
-- tool-call pieces, and retractions of what a crash or a retried error cut off. Written in
-- batches by the worker (one statement per flush), read by every event stream. ``id``
-- orders a session's deltas (one writer per session at a time); ``after_seq`` is the
-- session's last message when the delta was written, so readers can merge deltas between
-- messages. Deleted with the session.
CREATE SEQUENCE dbos_agents.deltas_id_seq;

CREATE TABLE dbos_agents.deltas (
    session_id text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    id bigint NOT NULL DEFAULT nextval('dbos_agents.deltas_id_seq'),
    after_seq bigint NOT NULL,
    run_seq bigint NOT NULL,
    turn integer NOT NULL,
    attempt integer NOT NULL,
    part integer NOT NULL,
    kind text NOT NULL CHECK (kind IN ('text', 'tool_call', 'retract')),
    tool_index integer,
    tool_call_id text,
    name text,
    text text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, id),
    UNIQUE (session_id, run_seq, turn, attempt, part)
);

ALTER SEQUENCE dbos_agents.deltas_id_seq OWNED BY dbos_agents.deltas.id;

ALTER TABLE dbos_agents.deltas ENABLE ROW LEVEL SECURITY;
CREATE POLICY deltas_read ON dbos_agents.deltas FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY deltas_service ON dbos_agents.deltas FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

-- Application roles registered before this migration read deltas as they read messages.
DO $$
DECLARE r text;
BEGIN
    FOR r IN SELECT role_name FROM dbos_agents.app_roles LOOP
        EXECUTE 'GRANT SELECT ON dbos_agents.deltas TO ' || quote_ident(r);
    END LOOP;
END $$;
