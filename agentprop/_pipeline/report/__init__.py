"""The run report: its model (:mod:`.model`, schema ``agentprop.run/1``) and its renderings."""
