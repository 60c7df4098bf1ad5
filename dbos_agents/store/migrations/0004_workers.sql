-- The worker fleet: heartbeats, and who adopted a silent worker's sessions.
CREATE TABLE dbos_agents.workers (
    executor_id          text PRIMARY KEY,
    hostname             text NOT NULL,
    pid                  integer NOT NULL,
    application_version  text NOT NULL,
    status               text NOT NULL CHECK (status IN ('running', 'stopped', 'adopted')),
    started_at           timestamptz NOT NULL DEFAULT now(),
    heartbeat_at         timestamptz NOT NULL DEFAULT now(),
    adopted_by           text,
    adopted_at           timestamptz
);
