"""``python -m agentprop`` and the ``agentprop`` script: the command line, with a Ctrl-C while its
modules load (asyncio, every command's parser) ending it quietly, exit 130. The process ends
with the objects it kept out of the collector's sight (``gc.freeze``): the interpreter's last
collection would walk all of them only to free memory the process gives back anyway."""

import gc
import sys


def console() -> int:
    """The ``agentprop`` script's entry point: :func:`agentprop._cli.main`, imported here so a
    Ctrl-C during the import prints no traceback."""
    try:
        from agentprop._cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command's modules load: no traceback
        print("agentprop: interrupted", file=sys.stderr)
        return 130
    code = main()
    # the process ends now: the modules, the model SDK's classes and the project live until
    # it does, and the collection at the interpreter's exit (a tenth of a second over them)
    # would free nothing the process does not give back anyway
    gc.freeze()
    return code


if __name__ == "__main__":
    raise SystemExit(console())
