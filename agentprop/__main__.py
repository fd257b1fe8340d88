"""``python -m agentprop``: the same command line as the ``agentprop`` script."""

from agentprop._cli import main

raise SystemExit(main())
