"""``--dry-run``: what ``agentprop run`` would start, computed without running any agent.

Only figures computed before running are printed: the MFT cases and each one's fewest and most
runs. Dollars are printed only from recorded usage of the same model in the API cache, as a
range stating what each end assumes; without recorded usage the output says dollars were not
estimated.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

    from agentprop._agents.model_agent import ModelAgent
    from agentprop._agents.project import Project
    from agentprop._scenario.build import Scenario
    from agentprop._stats.sequential import SequentialTest


class RecordedUsage(NamedTuple):
    calls: int
    mean_in: float
    mean_out: float
    max_in: int
    """The largest input of one recorded call (prompt caching aside: every input token)."""


def recorded_usage(path: Path, model: str) -> RecordedUsage | None:
    """Calls of ``model`` recorded in the API cache at ``path``, their mean input and output
    tokens and the largest input, read without creating or changing the file; ``None`` when
    there are none."""
    if not path.is_file():
        return None
    # caches written before the columns took Chat Completions' names hold 0 there: read the usage
    inp = "COALESCE(NULLIF(input_tokens, 0), json_extract(usage_json, '$.prompt_tokens'), 0)"
    out = "COALESCE(NULLIF(output_tokens, 0), json_extract(usage_json, '$.completion_tokens'), 0)"
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
            row = db.execute(
                f"SELECT COUNT(*), AVG({inp}), AVG({out}), MAX({inp}) FROM "
                "responses WHERE model = ?",
                (model,),
            ).fetchone()
    except sqlite3.Error:
        return None
    return (
        RecordedUsage(int(row[0]), float(row[1]), float(row[2]), int(row[3]))
        if row and row[0]
        else None
    )


def calls_per_turn(tool_limit: int | None, max_steps: int) -> tuple[int, str]:
    """The model calls a turn is assumed to make at most, and the assumption in words: one per
    tool call the spec allows a turn plus one to respond, within the agent's ``max_steps``."""
    if tool_limit is None or tool_limit + 1 >= max_steps:
        return max_steps, f"{max_steps} model calls a turn (the agent's max_steps, its hard cap)"
    return tool_limit + 1, (
        f"{tool_limit + 1} model calls a turn (max_tool_calls_per_turn {tool_limit}, each tool "
        "call in a call of its own, then one to respond; an agent that ignores refusals or "
        "answers without respond makes more)"
    )


def clean_runs(test_max: int | None, make: Callable[[], SequentialTest]) -> int:
    """Runs the test ``make()`` takes to decide when every run passes (capped at ``test_max``)."""
    test = make()
    while not test.done and (test_max is None or test.n < test_max):
        test.update(True)
    return test.n


def print_dry_run(
    project: Project,
    scenarios: list[Scenario],
    kinds: tuple[str, ...],
    args: argparse.Namespace,
    out: TextIO,
    *,
    model_agent: ModelAgent | None,
    repeats: str = "",
) -> None:
    """Print the cases per kind, the agent runs (fewest for a correct agent, the cap) and the
    price basis of ``agentprop run``'s plan under ``args``; run nothing."""
    from agentprop._cli.common import load_prices_of
    from agentprop._decide.oracle import OracleSettings
    from agentprop._decide.profiles import get_profile, screened
    from agentprop._decide.safety import case_settings

    spec = project.spec
    profile = get_profile(getattr(args, "profile", None))
    explicit = [
        f"--{k} {v}" for k in ("mode", "tau", "runs") if (v := getattr(args, k, None)) is not None
    ]
    mode = getattr(args, "mode", None) or (
        "fixed"
        if getattr(args, "runs", None) is not None and spec.risk_level not in ("high", "critical")
        else None
    )
    oracle = OracleSettings.for_spec(
        spec,
        mode=mode,
        tau=getattr(args, "tau", None),
        runs=getattr(args, "runs", None),
        max_runs=getattr(args, "max_runs_per_case", None),
    )
    least = most = most_turns = 0
    for s in scenarios:
        rule = case_settings(spec, project.bindings, s, oracle, explicit=" ".join(explicit) or None)
        settings = rule.settings if explicit else screened(profile, rule).settings
        cap = settings.make_test().max_runs or settings.runs
        least += clean_runs(cap, settings.make_test)
        most += cap
        most_turns += cap * max(1, len(s.turns))
    mft = len(scenarios) if "mft" in kinds else 0
    per_path = args.explore if "explore" in kinds else 0
    depth = "explicit " + " ".join(explicit) if explicit else f"profile {profile.name}"
    print(f"dry run ({depth}): nothing is run and nothing is written", file=out)
    if mft:
        print(
            f"  MFT: {mft} case(s); agent runs at least {least:,} (every run passes, as a correct "
            f"agent's do), at most {most:,} (each case's cap)",
            file=out,
        )
    if per_path:
        print(
            f"  EXPLORE: up to {per_path * len(scenarios)} case(s) ({per_path} per path); agent "
            f"runs up to {least * per_path:,} if every run passes, {most * per_path:,} at the caps",
            file=out,
        )
    others = [k.upper() for k in kinds if k not in ("mft", "explore")]
    if others:
        print(
            f"  {'/'.join(others)}: built from the runs, so neither cases nor runs are "
            "counted before running",
            file=out,
        )
    if repeats:
        print(f"  {repeats}: those runs are not counted before running", file=out)
    if model_agent is not None:
        from agentprop._modelapi.budget import price_for

        price = price_for(model_agent.model, load_prices_of(args))
        if price is None:
            print(
                f"  dollars: {model_agent.model} has no known price (--prices FILE gives one): "
                "dollars not estimated",
                file=out,
            )
        else:
            basis = (
                f"  dollars: {model_agent.model} costs ${price.input_per_mtok:g} in / "
                f"${price.output_per_mtok:g} out per million tokens; "
            )
            from agentprop._modelapi.client import DEFAULT_API_CACHE_PATH

            cache = (
                None
                if (args.cache or "").lower() == "none"
                else Path(args.cache or DEFAULT_API_CACHE_PATH)
            )
            usage = recorded_usage(cache, model_agent.model) if cache is not None else None
            if usage is None or not mft:
                print(basis + "no recorded usage: dollars not estimated", file=out)
                return
            per_call = price.cost(round(usage.mean_in), round(usage.mean_out))
            worst_call = price.cost(usage.max_in, model_agent.max_tokens)
            calls, assumed = calls_per_turn(spec.max_tool_calls_per_turn, model_agent.max_steps)
            turns = most_turns * (1 + per_path)
            low, high, hard = (
                least * per_call,
                turns * calls * worst_call,
                turns * model_agent.max_steps * worst_call,
            )
            print(
                basis
                + f"the API cache holds {usage.calls} call(s) of it, {usage.mean_in:.0f} in / "
                f"{usage.mean_out:.0f} out tokens a call on average, {usage.max_in:,} in at most",
                file=out,
            )
            cases = "MFT and EXPLORE cases" if per_path else "MFT cases"
            print(f"  dollars for the {cases}: ${low:.4f} to ${high:.4f}", file=out)
            print(
                f"    at least ${low:.4f}: the MFT cases' fewest runs ({least:,}), one call a run "
                "at the average tokens",
                file=out,
            )
            print(
                f"    at most ${high:.4f}, assuming every case runs to its cap ({turns:,} turns), "
                f"{assumed}, no call's input above the largest recorded ({usage.max_in:,} tokens) "
                f"and {model_agent.max_tokens:,} out a call (max_tokens)"
                + (
                    f"; at the agent's max_steps ({model_agent.max_steps} calls a "
                    f"turn) up to ${hard:.4f}"
                    if hard > high
                    else ""
                ),
                file=out,
            )
            others = [k.upper() for k in kinds if k not in ("mft", "explore")]
            left = [
                *(["/".join(others) + " runs"] if others else []),
                *([repeats] if repeats else []),
                "shrinking",
            ]
            limit = getattr(args, "max_usd", None)
            capped = (
                f"; --max-usd caps the whole command at ${limit:g}" if limit is not None else ""
            )
            print(f"    not counted: {', '.join(left)}{capped}", file=out)
