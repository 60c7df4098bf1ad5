-- The agents each worker serves (issue 29): the HTTP server and AgentClient.start refuse a
-- session for an agent no live worker knows (404 UNKNOWN_AGENT), instead of a 201 and a
-- session that then fails in the worker. NULL: a worker of an earlier release (unknown).
ALTER TABLE dbos_agents.workers ADD COLUMN agents text[];
