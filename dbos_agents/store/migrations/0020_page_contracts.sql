-- What a chat page may send each agent a worker serves (page_contract.py): its own tool
-- names, the tools a page may declare, its state's JSON schema. The server checks a page's
-- input against the newest live worker's before it stores anything. NULL: a worker of an
-- earlier release (its runs check the page themselves).
ALTER TABLE dbos_agents.workers ADD COLUMN page_contracts jsonb;
