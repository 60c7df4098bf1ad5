-- How each run ended, one row per run, written by the statement list that ends it (or by
-- the interrupt that stops it), first writer wins. A NOTIFY on dbos_agents_runs with the
-- payload '<session id>:<run seq>' commits with it, so a waiter in any process learns of
-- the end without polling. (Before, the outcome was a DBOS workflow event written through
-- DBOS internals.)
CREATE TABLE dbos_agents.runs (
    session_id text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    run_seq bigint NOT NULL,
    status text NOT NULL,
    output text,
    error text,
    turns integer NOT NULL DEFAULT 0,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost_usd double precision NOT NULL DEFAULT 0,
    ended_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, run_seq)
);

ALTER TABLE dbos_agents.runs ENABLE ROW LEVEL SECURITY;
CREATE POLICY runs_read ON dbos_agents.runs FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY runs_service ON dbos_agents.runs FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());
