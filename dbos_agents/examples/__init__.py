"""Runnable example agents, shipped in the package so `dbos-agents demo` finds them."""
