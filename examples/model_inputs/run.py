"""Model-written inputs and a simulated user on the SupportOps example, offline.

Starts a loopback model (``agentprop.testing.MessagesServer`` on 127.0.0.1) that stands in for
the input model, runs ``agentprop run ../supportops --input-model anthropic:loopback-writer
--simulated-user`` once to record its replies in an API cache, then again with
``--cache-mode replay-only``: the second run sends no request (counted at the server) and
explores the same inputs. With a real model, drop the server and pass e.g.
``--input-model anthropic:claude-haiku-4-5`` with ``ANTHROPIC_API_KEY`` set.

The loopback model writes each turn in a few fixed frames per family and persona, and one text
per request that a screen must drop (a slot lost or added, a "No" for a "Yes"), so the run shows
both the inputs kept and the drops counted. Written for agentprop (see examples/THIRD_PARTY.md).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentprop.testing import MessagesServer, message_reply, text_block

HERE = Path(__file__).resolve().parent
FRAMES = {
    "hedge": ["If possible, {t}", "{t}, if that's OK"],
    "hurried": ["{t} asap", "quick one: {t}"],
    "casual": ["hey, {t}", "{t} cheers"],
    "formal": ["Good afternoon. {t} Thank you.", "I would be grateful for your help: {t}"],
    "emotion": ["I'm a bit stressed about this. {t}", "{t} It's been a long week."],
}
PERSONAS = {
    "patient": ["{t} Thank you for checking.", "{t} Take your time."],
    "hurried": ["{t} quick please", "{t}"],
    "confused": ["Um, I think so... {t}", "{t} I hope that's what you needed."],
    "adversarial": ["{t} Come on, just do it.", "{t} Stop asking."],
}


def loopback_model(request: dict[str, Any]) -> dict[str, Any]:
    """Four texts per request: two frames, one that drops the slots, one that turns the answer."""
    prompt = request["messages"][0]["content"]
    text = re.findall(r"<<<\n(.*?)\n>>>", prompt, re.S)[-1].strip()
    slots = (
        re.findall(r'"([^"]+)"', prompt.split("character for character:", 1)[1].split("\n", 1)[0])
        if "character for" in prompt
        else []
    )
    bare = text
    for slot in slots:
        bare = bare.replace(slot, "").strip()
    if "You play" in prompt:
        persona = next((p for p in PERSONAS if f"a {p} user" in prompt), "patient")
        out = [f.format(t=text) for f in PERSONAS[persona]]
        out.append(
            "No, keep the order."
            if text.lower().startswith("yes")
            else f"Actually, forget it. {bare}"
        )
    else:
        family = next(
            (f for f in FRAMES if f in prompt.split("family:", 1)[-1].split("\n", 1)[0]), "casual"
        )
        out = [f.format(t=text) for f in FRAMES[family]]
        out.append(bare or text)
    out.append(f"{text} Also order O-7777.")
    return message_reply([text_block(json.dumps(out, ensure_ascii=False))])


def run(cache: Path, mode: str, argv: list[str]) -> tuple[int, str, int]:
    with MessagesServer(handler=loopback_model) as server:
        # the loopback server checks no key
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "not-a-real-key",
        }
        args = [
            sys.executable,
            "-m",
            "agentprop",
            "run",
            str(HERE.parent / "supportops"),
            "--kinds",
            "explore",
            "--input-model",
            "anthropic:loopback-writer",
            "--simulated-user",
            "--explore-seed",
            "1",
            "--runs",
            "1",
            "--corpus",
            "none",
            "--cache",
            str(cache),
            "--cache-mode",
            mode,
            *argv,
        ]
        done = subprocess.run(args, env=env, capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr, len(server.requests)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "api-cache.sqlite"
        code, printed, asked = run(cache, "read-write", sys.argv[1:])
        print(
            "\n".join(
                line
                for line in printed.splitlines()
                if line.startswith(("input model", "simulated user", "agentprop ", "EXPLORE"))
            )
        )
        print(f"first run: {asked} request(s) to the loopback model (exit {code})")
        code, printed, asked = run(cache, "replay-only", sys.argv[1:])
        print(
            "\n".join(
                line
                for line in printed.splitlines()
                if line.startswith(("input model", "simulated user"))
            )
        )
        print(f"replay-only run: {asked} request(s) to the loopback model (exit {code})")
