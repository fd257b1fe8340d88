"""What a model call holds while it waits for the API.

Python's garbage collector counts the containers a program allocates towards its next
collection, and at concurrency 128 what the calls in flight hold is what its young generation
sees grow: the more they hold, the more collections, full ones included (issue #31, the floor).
A call parked in the provider's ``send`` holds the objects of its own path (its coroutines, the
canonical request, the budget reservation, the retry state and the attempt), not a closure
cell for each variable a retry hook would capture.

Counted in a fresh interpreter (nothing else allocating meanwhile): tracked objects with 100
calls parked in a stubbed ``send``, less those with 100 bare tasks parked on the same gate.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import asyncio, gc, json
from unittest import mock
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES
from agentprop.testing import respond_reply

N = 100
MODEL = "claude-haiku-4-5"
REPLY = json.dumps({**respond_reply(node_id="X", decision="D").message, "model": MODEL})


async def main():
    loop = asyncio.get_running_loop()
    gate = [None]
    parked = [0]

    async def send(self, client, body, *, stream=False):
        parked[0] += 1
        if gate[0] is not None:
            await gate[0]
        return json.loads(REPLY)

    async def bare(body):
        parked[0] += 1
        await gate[0]

    async def held(make):
        gate[0] = loop.create_future()
        parked[0] = 0
        bodies = [
            {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": str(i)}]}
            for i in range(N)
        ]
        gc.collect()
        before = len(gc.get_objects())
        tasks = [asyncio.ensure_future(make(body, i)) for i, body in enumerate(bodies)]
        while parked[0] < N:
            await asyncio.sleep(0)
        gc.collect()
        during = len(gc.get_objects())
        gate[0].set_result(None)
        await asyncio.gather(*tasks)
        gate[0] = None
        return during - before

    with mock.patch.object(type(ANTHROPIC_MESSAGES), "send", send):
        client = ModelClient(
            ANTHROPIC_MESSAGES, MODEL, cache=False, budget=Budget(max_usd=100.0),
            base_url="http://127.0.0.1:9", max_concurrent_requests=N,
        )
        await client.call({"model": MODEL, "max_tokens": 64, "messages": []}, trial=0)
        calls = await held(lambda body, i: client.call(body, trial=i))
        tasks = await held(lambda body, i: bare(body))
        await client.aclose()
    print((calls - tasks) / N)


asyncio.run(main())
"""


def test_a_call_waiting_on_the_api_holds_few_objects() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    per_call = float(proc.stdout.strip())
    # 23 on Python 3.11: the call's coroutines, two partials and their arguments, the canonical
    # request, the reservation, the booking that retries re-book it, the retry state, the
    # concurrency slot, and what asyncio keeps for a task awaiting another. A closure for the
    # retry hook held 8 more (a cell for each variable it captured, itself, its cells' tuple).
    assert 0 < per_call <= 25, proc.stdout
