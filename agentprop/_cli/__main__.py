"""``python -m agentprop._cli``: the same command line as the ``agentprop`` script."""

import sys

from agentprop._cli import main

sys.exit(main())
