-- Adoption only of dead workers (issue: survive routine operations).
-- instance_id: a token per worker *process*. A restarted worker (same executor id, new
--   token) takes its row back; a live process whose row was adopted finds its token gone
--   or the status 'adopted' at its next heartbeat, and exits.
-- beat: a counter bumped by every heartbeat. Adopters judge silence by watching this value
--   not move while they themselves stay connected (never by comparing clocks), and claim
--   with a conditional UPDATE on the exact value they saw, so a heartbeat that lands first
--   wins over the claim.
ALTER TABLE dbos_agents.workers ADD COLUMN instance_id text;
ALTER TABLE dbos_agents.workers ADD COLUMN beat bigint NOT NULL DEFAULT 0;
