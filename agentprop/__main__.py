"""``python -m agentprop``: the same command line as the ``agentprop`` script."""

import sys

try:
    from agentprop._cli import main
except KeyboardInterrupt:  # Ctrl-C while the command's modules load: no traceback
    print("agentprop: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
