"""What a shared budget ledger costs per model call: the Redis ledger next to the SQLite file
ledger (the baseline), both measured in this run, plus a budget without a ledger.

Usage: ``python benchmarks/ledger.py [--json PATH] [--calls N] [--redis URL]``

Each model call is what a model agent books: :meth:`Budget.reserve` before the call and
:meth:`Budget.settle` after it, under a dollar limit that is never reached. One process, one
thread, ``--calls`` calls per backend (default 2000). The Redis ledger runs against ``--redis
URL``, else a ``redis-server`` this script starts on a free loopback port (``--save ''
--appendonly no``) and stops. Without redis-py or a server, the Redis figure is not measured:
the output says so and the exit code is 3.

``--json PATH`` writes ``no_ledger_us_per_call``, ``file_ledger_us_per_call``,
``redis_ledger_us_per_call`` (``null`` when not measured) and ``redis_over_file``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentprop._modelapi.budget import Budget
from agentprop._modelapi.ledger import Ledger, RedisLedger, SharedLedger

MODEL = "claude-sonnet-4-5"


def per_call_us(ledger: Ledger | None, calls: int) -> float:
    """Microseconds per reserve + settle through a budget on ``ledger``."""
    budget = Budget(max_usd=1e9, ledger=ledger)
    start = time.perf_counter()
    for i in range(calls):
        held = budget.reserve(MODEL, input_tokens=1000, max_output_tokens=1000)
        budget.settle(held, 1000, i % 1000)
    return (time.perf_counter() - start) / calls * 1e6


@contextmanager
def local_redis() -> Iterator[str | None]:
    """A throwaway redis-server on a free loopback port (its URL), or ``None`` if none starts."""
    server = shutil.which("redis-server")
    if server is None:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with tempfile.TemporaryDirectory() as directory:
        cmd = [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            import redis

            client = redis.Redis(port=port)
            for _ in range(200):
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            else:
                yield None
                return
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def ledger_figures(calls: int, redis_url: str | None = None) -> tuple[float, float | None, str]:
    """Microseconds per call of the file ledger and of the Redis one (``None`` and why, when it
    cannot be measured): a server at ``redis_url``, else one started on loopback."""
    with tempfile.TemporaryDirectory() as directory:
        file_us = per_call_us(SharedLedger(Path(directory) / "ledger.sqlite"), calls)
    try:
        import redis  # noqa: F401
    except ImportError:
        return file_us, None, "redis-py is not installed (pip install 'agentprop[redis]')"
    with local_redis() if redis_url is None else _given(redis_url) as url:
        if url is None:
            return (
                file_us,
                None,
                "no redis-server could be started (apt-get install redis-server, "
                "or pass --redis URL)",
            )
        return file_us, per_call_us(RedisLedger(url, f"bench-{time.monotonic_ns()}"), calls), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument(
        "--calls", type=int, default=2000, help="model calls booked per backend (default 2000)"
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="a Redis server to measure against (default: start one on loopback)",
    )
    args = parser.parse_args(argv)
    none_us = per_call_us(None, args.calls)
    file_us, redis_us, why = ledger_figures(args.calls, args.redis)
    print(f"model calls booked per backend: {args.calls} (reserve + settle, one process)")
    print(f"no ledger:                {none_us:9.1f} us/call")
    print(f"file ledger (baseline):   {file_us:9.1f} us/call")
    if redis_us is None:
        print(f"redis ledger:             not measured: {why}")
    else:
        print(
            f"redis ledger:             {redis_us:9.1f} us/call  "
            f"({redis_us / file_us:.2f}x the file ledger)"
        )
    if args.json:
        figures = {
            "calls": args.calls,
            "no_ledger_us_per_call": none_us,
            "file_ledger_us_per_call": file_us,
            "redis_ledger_us_per_call": redis_us,
            "redis_over_file": None if redis_us is None else redis_us / file_us,
            "not_measured": why or None,
        }
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 3 if redis_us is None else 0


@contextmanager
def _given(url: str) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())
