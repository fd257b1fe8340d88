"""Attacks of issue #27 part A, as functions ``benchmarks/robustness.py`` can call.

Each ``attack_*`` function runs one category against the code in this checkout and returns a
dict: ``category``, ``inputs`` (how many were tried), and the counts the benchmark sums:
``tracebacks``, ``hangs``, ``data_lost``, ``silent_wrong``, ``keys_on_disk`` and, for the
budget, ``worst_overrun_usd`` with ``reservation_usd`` (the bound it must stay within).
``ATTACKS`` lists them; :func:`tree_spec` makes the hostile decision trees (ladders, chains,
complete graphs, routers) that the path-limit tests use too.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUPPORTOPS = REPO / "examples" / "supportops"

_HEAD = """spec_id: {sid}
title: A hostile tree
tools:
- name: get_account
  description: Fetch the account.
  input_schema: {{type: object, properties: {{account_id: {{type: string}}}}, required: [account_id]}}
  output_schema: {{type: object, properties: {{status: {{type: string}}}}}}
- name: respond
  description: Submit the structured response.
  input_schema: {{type: object, properties: {{decision: {{type: string, enum: [A, B]}}}}, required: [decision]}}
response_contract:
  required_json_fields: [decision]
  decision_enum: [A, B]
decision_tree:
"""  # noqa: E501


def _node(nid: str, branches: list[tuple[str, str]]) -> str:
    return f"- node_id: {nid}\n  branches:\n" + "".join(
        f"  - when: {when}\n    next: {nxt}\n" for when, nxt in branches
    )


def tree_spec(shape: str, n: int) -> tuple[str, str]:
    """``(spec.yaml, agentprop.yaml)`` of a hostile tree: ``ladder`` (n two-way nodes in a row:
    2^n paths), ``chain`` (n nodes, each with an exit), ``complete`` (n nodes, each branching
    to every other) or ``router`` (one node with n branches). Every variable is bound
    ``internal``."""
    spec = _HEAD.format(sid=f"{shape}_{n}")
    if shape == "ladder":
        spec += "".join(
            _node(
                f"N{i}",
                [
                    (f"v{i} == 'x'", f"N{i + 1}" if i + 1 < n else "END_A"),
                    ("otherwise", f"N{i + 1}" if i + 1 < n else "END_A"),
                ],
            )
            for i in range(n)
        )
    elif shape == "chain":
        spec += "".join(
            _node(
                f"N{i}",
                [(f"v{i} == 'x'", f"N{i + 1}" if i + 1 < n else "END_A"), ("otherwise", "END_B")],
            )
            for i in range(n)
        )
    elif shape == "complete":
        spec += "".join(
            _node(
                f"N{i}",
                [
                    *((f"v{i} == 'k{j}'", f"N{j}") for j in range(n) if j != i),
                    ("otherwise", "END_A"),
                ],
            )
            for i in range(n)
        )
    elif shape == "router":
        spec += _node(
            "N0",
            [
                *((f"v == 'k{j}'", "END_A" if j % 2 else "END_B") for j in range(n)),
                ("otherwise", "END_A"),
            ],
        )
    else:
        raise ValueError(f"unknown tree shape {shape!r}")
    spec += "- node_id: END_A\n  branches: []\n- node_id: END_B\n  branches: []\n"
    names = sorted(set(re.findall(r"when: (v\d*) ==", spec)))
    bindings = 'version: 1\nutterances: ["Hello"]\nvariables:\n' + "".join(
        f"  {name}: {{internal: true}}\n" for name in names
    )
    return spec, bindings


def _cli(argv: list[str], *, timeout_s: float) -> tuple[int | None, str]:
    """``python -m agentprop ARGV`` in a subprocess: ``(exit code or None on a hang, output)``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agentprop", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stdout + done.stderr


def attack_trees(
    *,
    timeout_s: float = 120.0,
    shapes: tuple[tuple[str, int], ...] = (
        ("ladder", 16),
        ("chain", 990),
        ("complete", 7),
        ("router", 1000),
    ),
) -> dict[str, Any]:
    """Item 4 and 11: `agentprop lint` on exponential and deep trees ends with a bounded error
    (P004 naming the limit and how to raise it) or a clean lint, never a traceback or a hang."""
    out = {
        "category": "path enumeration (#27 items 4, 11)",
        "inputs": 0,
        "tracebacks": 0,
        "hangs": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "keys_on_disk": 0,
        "seconds": {},
    }
    with tempfile.TemporaryDirectory(prefix="agentprop-trees-") as tmp:
        for shape, n in shapes:
            folder = Path(tmp) / f"{shape}{n}"
            folder.mkdir()
            spec, bindings = tree_spec(shape, n)
            (folder / "spec.yaml").write_text(spec)
            (folder / "agentprop.yaml").write_text(bindings)
            started = time.monotonic()
            code, text = _cli(["lint", str(folder)], timeout_s=timeout_s)
            out["seconds"][f"{shape}_{n}"] = round(time.monotonic() - started, 1)
            out["inputs"] += 1
            if code is None:
                out["hangs"] += 1
            elif "Traceback" in text:
                out["tracebacks"] += 1
            elif code not in (0, 1):
                out["silent_wrong"] += 1
    return out


_HOSTILE_AGENTS = """
import os
import signal
import sys
import threading

from agent import SupportOpsAgent


class Exits(SupportOpsAgent):
    def turn(self, message, ctx):
        sys.exit(5)


class Interrupts(SupportOpsAgent):
    def turn(self, message, ctx):
        raise KeyboardInterrupt


class AsyncExits:
    async def turn(self, message, ctx):
        sys.exit(5)


class BadGetattr(SupportOpsAgent):
    def __getattr__(self, name):
        raise RuntimeError(name)


class BlocksOnClose(SupportOpsAgent):
    def close_conversation(self):
        threading.Event().wait(3600)


class LoopsOnRefusals:
    def turn(self, message, ctx):
        while True:
            try:
                ctx.call("no_such_tool")
            except Exception:
                pass


class HugeReply(SupportOpsAgent):
    def _respond(self, ctx, node, decision, message, evidence=""):
        super()._respond(ctx, node, decision, message + "x" * 70_000_000, evidence)


class LeaksKey(SupportOpsAgent):
    def _respond(self, ctx, node, decision, message, evidence=""):
        super()._respond(ctx, node, decision, message + " " + os.environ["ANTHROPIC_API_KEY"], evidence)

    def close_conversation(self):
        raise RuntimeError("closing " + os.environ["ANTHROPIC_API_KEY"])


_turns = [0]


class PressesCtrlC(SupportOpsAgent):
    def turn(self, message, ctx):
        _turns[0] += 1
        if _turns[0] == 40:
            os.kill(os.getpid(), signal.SIGINT)
        super().turn(message, ctx)
"""  # noqa: E501

_KEY = "sk-ant-api03-ATTACKAkeyvalue0123456789"


def attack_agents(*, timeout_s: float = 120.0) -> dict[str, Any]:
    """Items 2, 8, 9, 12: hostile Python agents under `agentprop run`. Each run must end on its
    own (no hang), without a traceback, with its JSON report written (none lost), and the key
    the leaking agent holds must be on no file and in no output."""
    out = {
        "category": "hostile agents (#27 items 2, 8, 9, 12)",
        "inputs": 0,
        "tracebacks": 0,
        "hangs": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "keys_on_disk": 0,
    }
    os.environ.setdefault("ANTHROPIC_API_KEY", _KEY)
    key = os.environ["ANTHROPIC_API_KEY"]
    with tempfile.TemporaryDirectory(prefix="agentprop-agents-") as tmp:
        project = Path(tmp) / "proj"
        shutil.copytree(
            SUPPORTOPS,
            project,
            ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__"),
        )
        (project / "hostile.py").write_text(_HOSTILE_AGENTS)
        for agent, expected in (
            ("Exits", {1}), ("Interrupts", {1}), ("AsyncExits", {1}), ("BadGetattr", {0}),
            ("BlocksOnClose", {1}), ("LoopsOnRefusals", {1}), ("HugeReply", {1}), ("LeaksKey", {1}),
            ("PressesCtrlC", {130}),
        ):  # fmt: skip
            report = Path(tmp) / f"{agent}.json"
            # a blocking close_conversation() is let go at the turn timeout (60 s): one run per case
            runs = "1" if agent == "BlocksOnClose" else "3"
            argv = [
                "run",
                str(project),
                "--agent",
                f"hostile:{agent}",
                "--kinds",
                "mft",
                "--runs",
                runs,
                "--concurrency",
                "1",
            ]
            argv += [
                "--shrink-budget",
                "0",
                "--corpus",
                str(Path(tmp) / "corpus"),
                "--json",
                str(report),
            ]
            if agent != "PressesCtrlC":
                argv += ["--case", "END_BILLING_ANSWER<-N3_BILLING"]
            code, text = _cli(
                argv, timeout_s=timeout_s * 2 if agent == "BlocksOnClose" else timeout_s
            )
            out["inputs"] += 1
            if code is None:
                out["hangs"] += 1
                continue
            if "Traceback" in text:
                out["tracebacks"] += 1
            if not report.exists():
                out["data_lost"] += 1
            elif code not in expected:
                out["silent_wrong"] += 1
            if key in text:
                out["keys_on_disk"] += 1
        out["keys_on_disk"] += sum(
            key in p.read_text(errors="replace")
            for p in Path(tmp).rglob("*")
            if p.is_file() and p.suffix in (".json", ".md", ".html", ".xml")
        )
    return out


def attack_abandoned_calls(*, timeout_s: float = 180.0) -> dict[str, Any]:
    """Item 3: a billing loopback server answering after the client's timeout. What it billed
    must be reported (never less) and stay within one reservation of the dollar limit."""
    from agentprop._cli import main
    from agentprop._modelapi.budget import price_for
    from agentprop.testing import MessagesServer, slow_reply, tool_use_reply

    usage = {"input_tokens": 2000, "output_tokens": 500}
    reply = tool_use_reply("get_account", {"account_id": "A1"}, **usage)
    price = price_for("claude-sonnet-4-6")
    assert price is not None
    limit = 0.05
    out = {
        "category": "abandoned model calls (#27 item 3)",
        "inputs": 1,
        "tracebacks": 0,
        "hangs": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "keys_on_disk": 0,
    }
    with (
        tempfile.TemporaryDirectory(prefix="agentprop-billing-") as tmp,
        MessagesServer(handler=lambda request: slow_reply(reply, 0.6)) as server,
    ):
        report = Path(tmp) / "r.json"
        argv = [
            "run",
            str(SUPPORTOPS),
            "--agent",
            "anthropic",
            "--model",
            "claude-sonnet-4-6",
            "--base-url",
            server.base_url,
            "--cache",
            "none",
        ]
        argv += [
            "--max-usd",
            str(limit),
            "--timeout",
            "0.1",
            "--kinds",
            "mft",
            "--shrink-budget",
            "0",
            "--corpus",
            "none",
            "--json",
            str(report),
        ]
        try:
            main(argv, out=io.StringIO(), err=io.StringIO())
        except Exception:
            out["tracebacks"] += 1
            return out
        billed = len(server.requests) * price.cost(usage["input_tokens"], usage["output_tokens"])
        budget = json.loads(report.read_text())["metrics"]["extra"]["budget"]
    out.update(
        billed_usd=round(billed, 6),
        reported_usd=round(budget["usd"], 6),
        limit_usd=limit,
        reservation_usd=budget["largest_reservation_usd"],
    )
    out["worst_overrun_usd"] = round(max(0.0, billed - limit), 6)
    if budget["usd"] < billed:
        out["silent_wrong"] += 1
    return out


def attack_corpus_prune(*, timeout_s: float = 180.0) -> dict[str, Any]:
    """Item 1: `corpus prune` from another directory after a run given a relative spec path:
    no entry may be lost."""
    out = {
        "category": "corpus prune from elsewhere (#27 item 1)",
        "inputs": 1,
        "tracebacks": 0,
        "hangs": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "keys_on_disk": 0,
    }
    with tempfile.TemporaryDirectory(prefix="agentprop-prune-") as tmp:
        project = Path(tmp) / "proj"
        shutil.copytree(
            SUPPORTOPS,
            project,
            ignore=shutil.ignore_patterns(".agentprop", "__snapshots__", "__pycache__"),
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [
            sys.executable,
            "-m",
            "agentprop",
            "run",
            "proj",
            "--fault",
            "skip_auth=1",
            "--kinds",
            "mft",
            "--case",
            "END_CANCELLED<-N7_CANCEL",
            "--shrink-budget",
            "40",
        ]
        subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout_s)
        corpus = project / ".agentprop" / "corpus"
        before = sorted(corpus.glob("*/*.json"))
        elsewhere = Path(tmp) / "elsewhere"
        elsewhere.mkdir()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentprop",
                "corpus",
                "prune",
                "--no-replay",
                "--dir",
                str(corpus),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=elsewhere,
            timeout=timeout_s,
        )
        if "Traceback" in done.stderr:
            out["tracebacks"] += 1
        after = sorted(corpus.glob("*/*.json"))
        out["data_lost"] += len(set(before) - set(after))
        if not before:
            out["silent_wrong"] += 1  # the run should have saved a reproducer
    return out


def _verdicts(report: Path) -> dict[str, str]:
    """``{case id: verdict}`` of a ``--json`` run report, with the kind of a cause that is not
    the agent's (``INCONCLUSIVE (api_unavailable)``)."""
    data = json.loads(report.read_text())
    out = {}
    for case in data["cases"]:
        kind = re.match(r"not the agent's \((\w+)\)", str(case.get("reason") or ""))
        out[str(case["id"])] = str(case["verdict"]) + (f" ({kind.group(1)})" if kind else "")
    return out


def attack_timed_out_replay(*, timeout_s: float = 180.0) -> dict[str, Any]:
    """Item 13: a live run whose model calls outlive their time (the turn timeout; an HTTP
    attempt's ``--timeout``) against a slow loopback model, then the same run replayed from the
    API cache it wrote (``--cache-mode replay-only``): the same verdict for every case (and the
    same cause when it is not the agent's), and not one call reaching the server. A different
    verdict or a live call is ``silent_wrong``; no report is ``data_lost``."""
    from agentprop._cli import main
    from agentprop.testing import MessagesServer, respond_reply, slow_reply, tool_use_reply

    out = {
        "category": "timed-out live runs replayed (#27 item 13)",
        "inputs": 0,
        "tracebacks": 0,
        "hangs": 0,
        "data_lost": 0,
        "silent_wrong": 0,
        "keys_on_disk": 0,
        "replay_live_calls": 0,
    }
    answer = respond_reply(
        node_id="END_BILLING_ANSWER",
        decision="BILLING_ANSWER",
        tool_actions=["get_account"],
        evidence="get_account",
        user_message="Plan PLAN-BASIC.",
    )

    def model(request: Any) -> Any:  # the first call answers at once, the second after 4 s
        calls = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return (
            tool_use_reply("get_account", {"account_id": "A1"})
            if calls == 0
            else slow_reply(answer, 4.0)
        )

    # (what times out, its option): the turn at 1.5 s, or each HTTP attempt at 1 s
    for label, limit in (("turn", ["--turn-timeout", "1.5"]), ("http", ["--timeout", "1"])):
        with (
            tempfile.TemporaryDirectory(prefix="agentprop-replay-") as tmp,
            MessagesServer(handler=model) as server,
        ):
            argv = [
                "run",
                str(SUPPORTOPS),
                "--agent",
                "anthropic",
                "--model",
                "claude-sonnet-4-6",
                "--base-url",
                server.base_url,
                *limit,
            ]
            argv += [
                "--cache",
                str(Path(tmp) / "api.sqlite"),
                "--kinds",
                "mft",
                "--case",
                "END_BILLING_ANSWER<-N3_BILLING",
                "--runs",
                "2",
            ]
            argv += ["--shrink-budget", "0", "--corpus", "none", "--seed", "1"]
            verdicts = []
            for mode in ("read-write", "replay-only"):
                out["inputs"] += 1
                report = Path(tmp) / f"{label}-{mode}.json"
                sent = len(server.requests)
                try:
                    main(
                        [*argv, "--cache-mode", mode, "--json", str(report)],
                        out=io.StringIO(),
                        err=io.StringIO(),
                    )
                except SystemExit:
                    pass
                except Exception:
                    out["tracebacks"] += 1
                    continue
                if mode == "replay-only":
                    out["replay_live_calls"] += len(server.requests) - sent
                if not report.exists():
                    out["data_lost"] += 1
                    continue
                verdicts.append(_verdicts(report))
            if len(verdicts) == 2 and (verdicts[0] != verdicts[1] or not verdicts[0]):
                out["silent_wrong"] += 1
            out[f"{label}_verdicts"] = verdicts
    out["silent_wrong"] += int(out["replay_live_calls"] > 0)
    return out


ATTACKS: dict[str, Callable[..., dict[str, Any]]] = {
    "trees": attack_trees,
    "agents": attack_agents,
    "abandoned_calls": attack_abandoned_calls,
    "corpus_prune": attack_corpus_prune,
    "timed_out_replay": attack_timed_out_replay,
}
"""Every category of part A, by name: ``{name: fn}``; each ``fn(timeout_s=...)``
returns its dict."""


if __name__ == "__main__":  # python benchmarks/_robustness/attack_a.py [NAME ...]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in sys.argv[1:] or list(ATTACKS):
        print(json.dumps(ATTACKS[name](), indent=None))
