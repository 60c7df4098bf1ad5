-- Forks (issue 30, store/fork.py): a session made by ``fork`` records the root session and
-- the turn it was copied from. NULL for every other session. No foreign key: a fork keeps
-- its own copies of the rows, and outlives the session it came from.
ALTER TABLE dbos_agents.sessions ADD COLUMN forked_from text;
ALTER TABLE dbos_agents.sessions ADD COLUMN forked_at_turn integer;
CREATE INDEX sessions_forked_from_idx ON dbos_agents.sessions (forked_from)
    WHERE forked_from IS NOT NULL;
