"""The session workflow: the agent loop as a DBOS workflow (``workflow``), its model turn
(``turn``), its call kinds (``calls``), its writes (``ledger``, ``run_bounds``) and what one
execution knows (``execution``, ``drain``, ``crashpoints``). Importing this package alone
registers nothing; ``loop.workflow`` registers the workflow.
"""
