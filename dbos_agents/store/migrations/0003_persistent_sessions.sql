-- Persistent sessions: the long-lived workflow of an idle session waits on its inbox.
ALTER TABLE dbos_agents.sessions ADD COLUMN inbox_open boolean NOT NULL DEFAULT false;
