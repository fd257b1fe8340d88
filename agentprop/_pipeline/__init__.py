"""Whole runs over a spec: ``agentprop run`` and its case kinds, exploration, bugs, reports,
mutation testing, SURS, the TDAD split and PromptSmith."""
