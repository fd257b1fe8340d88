"""Model-written inputs in pytest, offline: the SupportOps property of ``test_cancel_wording.py``
with ``--agentprop-input-model``.

Starts a loopback model (``agentprop.testing.MessagesServer`` on 127.0.0.1, the one
``run.py`` uses) standing in for the input model, runs pytest once to record its replies in
the session's API cache, then again with ``--agentprop-cache-mode replay-only``: the second
session sends no request (counted at the server) and draws the same inputs. With a real model,
drop the server: ``pytest examples/model_inputs/test_cancel_wording.py
--agentprop-input-model anthropic:claude-haiku-4-5`` with ``ANTHROPIC_API_KEY`` set.

Written for agentprop (see examples/THIRD_PARTY.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from run import loopback_model  # the loopback model of run.py: fixed frames, and texts to drop

from agentprop.testing import MessagesServer

HERE = Path(__file__).resolve().parent


def session(workdir: Path, mode: str) -> tuple[int, str, int]:
    """One pytest session in ``workdir`` (its API cache: ``.agentprop/api-cache.sqlite``)."""
    with MessagesServer(handler=loopback_model) as server:
        # the loopback server checks no key
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "not-a-real-key",
        }
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        args += [str(HERE / "test_cancel_wording.py"), "--rootdir", str(workdir)]
        args += ["--agentprop-input-model", "anthropic:loopback-writer"]
        args += ["--agentprop-cache-mode", mode, "--hypothesis-seed", "0"]
        done = subprocess.run(args, env=env, cwd=workdir, capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr, len(server.requests)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for mode, label in (("read-write", "first"), ("replay-only", "replay-only")):
            code, printed, asked = session(Path(tmp), mode)
            lines = printed.splitlines()
            print("\n".join(line for line in lines if line.startswith(("input model", "1 "))))
            print(f"{label} session: {asked} request(s) to the loopback model (exit {code})")
