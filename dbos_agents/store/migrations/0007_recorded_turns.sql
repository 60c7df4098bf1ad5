-- A turn's model output stored with its usage row: a model step that runs again after its
-- turn was recorded (the worker died before DBOS checkpointed the step) replays it instead
-- of asking the model a second time.
ALTER TABLE dbos_agents.usage ADD COLUMN response jsonb;
