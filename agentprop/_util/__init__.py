"""Plumbing with no knowledge of agents or specs: atomic files, running coroutines from sync
code, YAML with source locations. Imports only :mod:`agentprop.errors`."""
