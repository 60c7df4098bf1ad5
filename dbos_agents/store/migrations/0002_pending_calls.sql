-- Durable human waits: client-tool calls and approvals, owned by the session whose workflow
-- waits on them, addressed by the root session id. Resolved rows stay as tombstones.
CREATE TABLE dbos_agents.pending_calls (
    root_session_id   text NOT NULL,
    tool_call_id      text NOT NULL,
    owner_session_id  text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    owner_workflow_id text NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('client', 'approval')),
    tool              text NOT NULL,
    arguments         text NOT NULL,
    deadline          timestamptz NOT NULL,
    output_schema     jsonb,
    status            text NOT NULL
        CHECK (status IN ('waiting', 'submitted', 'resolved', 'timed_out', 'cancelled')),
    submission        jsonb,
    submitted_at      timestamptz,
    resolved_at       timestamptz,
    late_submission   jsonb,
    late_at           timestamptz,
    late_noticed      boolean NOT NULL DEFAULT false,
    user_id           text,
    tenant_id         text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (root_session_id, tool_call_id)
);
CREATE INDEX pending_calls_open_idx ON dbos_agents.pending_calls (deadline)
    WHERE status IN ('waiting', 'submitted');
CREATE INDEX pending_calls_tombstone_idx ON dbos_agents.pending_calls (resolved_at)
    WHERE resolved_at IS NOT NULL;
CREATE INDEX pending_calls_owner_idx ON dbos_agents.pending_calls (owner_session_id);
CREATE INDEX pending_calls_tenant_idx ON dbos_agents.pending_calls (tenant_id, user_id);
