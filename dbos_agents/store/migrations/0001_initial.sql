-- Sessions, transcript, tool-call ledger and usage.
CREATE TABLE dbos_agents.sessions (
    id               text PRIMARY KEY,
    root_session_id  text NOT NULL,
    parent_session_id text,
    agent            text NOT NULL,
    status           text NOT NULL,
    user_id          text,
    tenant_id        text,
    run_seq          integer NOT NULL DEFAULT 1,
    workflow_id      text NOT NULL,
    turns            integer NOT NULL DEFAULT 0,
    input_tokens     bigint NOT NULL DEFAULT 0,
    output_tokens    bigint NOT NULL DEFAULT 0,
    cost_usd         numeric(20, 10) NOT NULL DEFAULT 0,
    final_output     text,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_root_idx ON dbos_agents.sessions (root_session_id);
CREATE INDEX sessions_tenant_user_idx ON dbos_agents.sessions (tenant_id, user_id);

CREATE TABLE dbos_agents.messages (
    session_id   text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    seq          integer NOT NULL,
    run_seq      integer NOT NULL,
    role         text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content      text,
    tool_calls   jsonb NOT NULL DEFAULT '[]'::jsonb,
    tool_call_id text,
    name         text,
    user_id      text,
    tenant_id    text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);
-- One result message per tool call, whatever a replay does.
CREATE UNIQUE INDEX messages_one_result_per_call
    ON dbos_agents.messages (session_id, tool_call_id) WHERE role = 'tool';

CREATE TABLE dbos_agents.tool_calls (
    session_id      text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    tool_call_id    text NOT NULL,
    run_seq         integer NOT NULL,
    turn            integer NOT NULL,
    tool            text NOT NULL,
    arguments       text NOT NULL,
    idempotency_key text NOT NULL,
    safe_to_retry   boolean NOT NULL,
    status          text NOT NULL CHECK (status IN ('requested', 'dispatched', 'completed', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    result          jsonb,
    error_kind      text,
    requested_at    timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    completed_at    timestamptz,
    PRIMARY KEY (session_id, tool_call_id)
);
CREATE INDEX tool_calls_status_idx ON dbos_agents.tool_calls (status);

CREATE TABLE dbos_agents.usage (
    id            bigserial PRIMARY KEY,
    session_id    text NOT NULL REFERENCES dbos_agents.sessions (id) ON DELETE CASCADE,
    run_seq       integer NOT NULL,
    turn          integer NOT NULL,
    model         text,
    input_tokens  bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost_usd      numeric(20, 10) NOT NULL,
    tenant_id     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, run_seq, turn)
);
