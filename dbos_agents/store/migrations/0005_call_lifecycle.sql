-- A tool call's life (issue: survive routine operations).
-- tool_calls: the call kind, and the attempt token that makes the dispatch mark idempotent
-- across a lost commit acknowledgement (the same attempt retrying is not "an earlier attempt").
ALTER TABLE dbos_agents.tool_calls ADD COLUMN kind text NOT NULL DEFAULT 'server'
    CHECK (kind IN ('server', 'client', 'approval', 'subagent'));
ALTER TABLE dbos_agents.tool_calls ADD COLUMN attempt_token text;
ALTER TABLE dbos_agents.tool_calls ADD COLUMN prior_status text;
-- pending_calls: 'closed' = the run that owned the wait ended without reading it.
ALTER TABLE dbos_agents.pending_calls DROP CONSTRAINT pending_calls_status_check;
ALTER TABLE dbos_agents.pending_calls ADD CONSTRAINT pending_calls_status_check
    CHECK (status IN ('waiting', 'submitted', 'resolved', 'timed_out', 'cancelled', 'closed'));
ALTER TABLE dbos_agents.pending_calls ADD COLUMN close_reason text;
