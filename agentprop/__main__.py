"""``python -m agentprop`` and the ``agentprop`` script: the command line, with a Ctrl-C while its
modules load (asyncio, every command's parser) ending it quietly, exit 130."""

import sys


def console() -> int:
    """The ``agentprop`` script's entry point: :func:`agentprop._cli.main`, imported here so a
    Ctrl-C during the import prints no traceback."""
    try:
        from agentprop._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load: no traceback
        print("agentprop: interrupted", file=sys.stderr)
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(console())
