-- Who answered each model turn: the provider of the model named in ``model`` (``openai``,
-- ``anthropic``, ...; ``ModelResponse.provider``), read back with ``AgentClient.usage``.
-- NULL for the turns recorded before this migration and for a model that names none.
-- The row-level security policies of 0008 are per row, so they cover the new column; a
-- fork copies it with the rest of the row (store/fork.py reads the columns from
-- pg_attribute).
ALTER TABLE dbos_agents.usage ADD COLUMN provider text;
