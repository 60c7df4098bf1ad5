"""The newcomer test: docs/first-agent.md run from an empty folder."""
