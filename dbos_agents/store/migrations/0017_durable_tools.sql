-- Durable tools (issue 30, store/durable.py): a tool whose body runs as a child workflow of
-- the session, with inner steps recorded one by one and a JSON snapshot of its own.
--
-- durable_tools: one row per durable call, written as its workflow begins. ``deadline`` is
-- the tool's timeout fixed once (NULL: none); ``executions`` counts the executions of its
-- body (more than one: it was recovered; ``token`` names the latest, so a retried begin of
-- the same execution does not count twice); ``snapshot`` is the last ``ctx.checkpoint`` and
-- ``snapshot_no`` its number (a re-executed body checkpointing again never goes back).
ALTER TABLE dbos_agents.tool_calls DROP CONSTRAINT tool_calls_kind_check;
ALTER TABLE dbos_agents.tool_calls ADD CONSTRAINT tool_calls_kind_check
    CHECK (kind IN ('server', 'client', 'approval', 'subagent', 'durable'));

CREATE TABLE dbos_agents.durable_tools (
    session_id text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    tool_call_id text NOT NULL,
    workflow_id text NOT NULL UNIQUE,
    run_seq bigint NOT NULL,
    tool text NOT NULL,
    status text NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    deadline timestamptz,
    executions integer NOT NULL DEFAULT 1,
    token text NOT NULL,
    snapshot jsonb,
    snapshot_no integer NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    PRIMARY KEY (session_id, tool_call_id)
);

CREATE INDEX durable_tools_running ON dbos_agents.durable_tools (session_id)
    WHERE status = 'running';

-- tool_steps: one row per inner step (``ctx.step``) of a durable tool's workflow, numbered
-- in the order the body starts them. ``dispatched`` until its outcome is recorded: a
-- re-executed body finding a side-effecting step still ``dispatched`` does not run it again
-- (its outcome is unknown). ``token`` is the execution that marked it.
CREATE TABLE dbos_agents.tool_steps (
    workflow_id text NOT NULL,
    seq integer NOT NULL,
    session_id text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    name text NOT NULL,
    safe_to_retry boolean NOT NULL,
    status text NOT NULL CHECK (status IN ('dispatched', 'completed', 'failed')),
    token text NOT NULL,
    output jsonb,
    error_type text,
    error text,
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    PRIMARY KEY (workflow_id, seq)
);

CREATE INDEX tool_steps_by_session ON dbos_agents.tool_steps (session_id);

-- deltas: a durable tool's progress notes (``ctx.progress``) join the live log, numbered per
-- tool call; the pieces of a model turn keep their key.
ALTER TABLE dbos_agents.deltas DROP CONSTRAINT deltas_kind_check;
ALTER TABLE dbos_agents.deltas ADD CONSTRAINT deltas_kind_check
    CHECK (kind IN ('text', 'tool_call', 'retract', 'progress'));
ALTER TABLE dbos_agents.deltas ADD COLUMN fraction double precision;
ALTER TABLE dbos_agents.deltas DROP CONSTRAINT deltas_session_id_run_seq_turn_attempt_part_key;
CREATE UNIQUE INDEX deltas_piece ON dbos_agents.deltas (session_id, run_seq, turn, attempt, part)
    WHERE kind <> 'progress';
CREATE UNIQUE INDEX deltas_progress ON dbos_agents.deltas (session_id, tool_call_id, part)
    WHERE kind = 'progress';

ALTER TABLE dbos_agents.durable_tools ENABLE ROW LEVEL SECURITY;
CREATE POLICY durable_tools_read ON dbos_agents.durable_tools FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY durable_tools_service ON dbos_agents.durable_tools FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());
ALTER TABLE dbos_agents.tool_steps ENABLE ROW LEVEL SECURITY;
CREATE POLICY tool_steps_read ON dbos_agents.tool_steps FOR SELECT
    USING (dbos_agents.session_visible(session_id));
CREATE POLICY tool_steps_service ON dbos_agents.tool_steps FOR ALL
    USING (NOT dbos_agents.is_app_role()) WITH CHECK (NOT dbos_agents.is_app_role());

DO $$
DECLARE r text;
BEGIN
    FOR r IN SELECT role_name FROM dbos_agents.app_roles LOOP
        EXECUTE 'GRANT SELECT ON dbos_agents.durable_tools, dbos_agents.tool_steps TO '
            || quote_ident(r);
    END LOOP;
END $$;
