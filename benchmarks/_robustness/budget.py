"""How far a dollar budget is overrun: ``agentprop run --max-usd`` against a looping model.

The loopback Messages server (:class:`agentprop.testing.MessagesServer`) plays a model that
calls ``get_account`` on every step and never responds, each call costing ``INPUT_TOKENS`` in
and ``OUTPUT_TOKENS`` out (``claude-sonnet-4-6``: $3 / $15 per million), so every run makes
``max_steps`` (10) calls. ``agentprop run --agent anthropic --max-usd LIMIT --concurrency 8``
runs the SupportOps MFT cases with the Budget API as it stands; the figure is the dollars spent
(the report's ``metrics.extra.budget.usd``) over the limit, worst of ``seeds`` runs. For
comparison: one call's worst case, ``max_tokens x output price + INPUT_TOKENS x input price``,
the most a budget that reserves each call before sending it could overrun by.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

from agentprop._modelapi.budget import price_for
from agentprop.testing import MessagesServer, tool_use_reply

ROOT = Path(__file__).resolve().parents[2]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"
LIMIT_USD = 0.05
CONCURRENCY = 8
MAX_TOKENS = 1024
INPUT_TOKENS = 2_000
OUTPUT_TOKENS = 500
LATENCY_S = 0.01


def _looping_model(request: dict[str, Any]) -> Any:
    return tool_use_reply(
        "get_account", {"account_id": "A1"}, input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS
    )


def measure_overrun(*, seeds: int = 3) -> dict[str, Any]:
    """Dollars spent over the limit, worst of ``seeds`` runs (see the module docstring)."""
    from agentprop._cli import main

    price = price_for(MODEL)
    assert price is not None, MODEL
    per_call = (INPUT_TOKENS * price.input_per_mtok + OUTPUT_TOKENS * price.output_per_mtok) / 1e6
    worst_case = (INPUT_TOKENS * price.input_per_mtok + MAX_TOKENS * price.output_per_mtok) / 1e6
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="agentprop-budget-") as tmp,
        MessagesServer(handler=_looping_model, latency=LATENCY_S) as server,
    ):
        for seed in range(seeds):
            report_path = Path(tmp) / f"r{seed}.json"
            before = len(server.requests)
            out, err = io.StringIO(), io.StringIO()
            code = main(
                [
                    "run",
                    str(SUPPORTOPS),
                    "--agent",
                    "anthropic",
                    "--model",
                    MODEL,
                    "--base-url",
                    server.base_url,
                    "--cache",
                    "none",
                    "--max-usd",
                    str(LIMIT_USD),
                    "--concurrency",
                    str(CONCURRENCY),
                    "--kinds",
                    "mft",
                    "--max-tokens",
                    str(MAX_TOKENS),
                    "--shrink-budget",
                    "0",
                    "--corpus",
                    "none",
                    "--seed",
                    str(seed),
                    "--json",
                    str(report_path),
                ],
                out=out,
                err=err,
            )
            if not report_path.exists():
                raise RuntimeError(
                    f"agentprop run exited {code} without a report:\n"
                    f"{err.getvalue()}{out.getvalue()[-2000:]}"
                )
            report = json.loads(report_path.read_text())
            budget = report["metrics"]["extra"]["budget"]
            runs.append(
                {
                    "seed": seed,
                    "exit": code,
                    "usd": budget["usd"],
                    "runs": budget["runs"],
                    "calls": len(server.requests) - before,
                }
            )
    worst = max(r["usd"] for r in runs)
    return {
        "limit_usd": LIMIT_USD,
        "concurrency": CONCURRENCY,
        "seeds": seeds,
        "per_call_usd": round(per_call, 6),
        "call_worst_case_usd": round(worst_case, 6),
        "worst_spent_usd": round(worst, 6),
        "budget_max_overrun_ratio": round(worst / LIMIT_USD, 3),
        "allowed_ratio": round((LIMIT_USD + worst_case) / LIMIT_USD, 3),
        "runs": runs,
    }
