"""``agentprop judge calibrate RUBRIC LABELS.jsonl``: measure a model judge against human labels.

The judge model reads each labelled transcript ``--samples`` times under the rubric; the command
prints sensitivity, specificity and Cohen's kappa with intervals and the judge's self-disagreement,
and stores the calibration under the rubric's digest and the model (``--store``). A judge with
fewer labels than ``--min-labels`` is told it can report but not gate.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_OK
from agentprop._cli.options import CACHE_MODES
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._judge.judges import Rubric
    from agentprop._spec.bindings import JudgeBinding

_PROVIDERS = ("anthropic", "openai", "openai-responses")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    judge = sub.add_parser(
        "judge", help="model judges: measure a judge's error against human labels"
    )
    judge.set_defaults(handler=command)
    actions = judge.add_subparsers(dest="judge_action", metavar="ACTION")
    cal = actions.add_parser(
        "calibrate",
        help="run the judge on labelled transcripts; report and store its "
        "sensitivity, specificity, kappa",
    )
    cal.add_argument(
        "rubric",
        help="rubric file: YAML with `text:` (and `name:`, `criteria:`), or plain text; with "
        "--spec, a rubric's clause (policies.ID)",
    )
    cal.add_argument(
        "--spec",
        metavar="SPEC_DIR",
        help="take the rubric from this spec's test_guidance and store the calibration where its "
        "bindings' judge: finds it",
    )
    cal.add_argument(
        "--bindings",
        help="with --spec: the bindings file (default: agentprop.yaml next to the spec)",
    )
    cal.add_argument(
        "labels",
        help='JSONL, one labelled example a line: {"transcript": "...", "label": "pass"} (or '
        '"trace": a trace\'s JSON)',
    )
    cal.add_argument(
        "--model",
        help="the judge model, e.g. claude-haiku-4-5 or gpt-4.1-mini (default with --spec: the "
        "bindings' judge: model)",
    )
    cal.add_argument(
        "--provider",
        choices=_PROVIDERS,
        help="the judge model's API (default: the bindings', else anthropic)",
    )
    cal.add_argument(
        "--base-url",
        metavar="URL",
        help="API endpoint (default: the provider's; a local endpoint needs no key)",
    )
    cal.add_argument(
        "--samples",
        type=int,
        help="answers asked per transcript; 2 or more also measures self-disagreement (default: "
        "the bindings', else 1)",
    )
    cal.add_argument(
        "--tau",
        type=float,
        default=0.9,
        help="the tolerated pass rate the judge must gate at (default 0.9: 0.95 vs 0.80)",
    )
    cal.add_argument(
        "--min-labels",
        type=int,
        help="labels a judge needs before it may gate (default: the bindings', else 50)",
    )
    cal.add_argument(
        "--max-tokens",
        type=int,
        default=300,
        help="most output tokens per judge call (default 300)",
    )
    cal.add_argument(
        "--store",
        metavar="DIR",
        help="where calibrations are kept (default: the bindings' calibrations directory, "
        "else .agentprop/judges)",
    )
    cal.add_argument(
        "--cache",
        metavar="PATH",
        help="API cache file (default .agentprop/api-cache.sqlite; `none` for no cache)",
    )
    cal.add_argument(
        "--cache-mode",
        choices=CACHE_MODES,
        help="default: replay-only when CI is set, else read-write",
    )
    cal.add_argument(
        "--max-usd", type=float, help="stop sending judge calls once this many dollars are spent"
    )
    cal.add_argument(
        "--prices",
        metavar="FILE",
        help="JSON price table added to agentprop's, for a model it does not price",
    )
    cal.add_argument(
        "--json", dest="json_path", metavar="PATH", help="also write the calibration as JSON here"
    )


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._judge.judges import CalibrationStore, ModelJudge, calibrate, load_labels
    from agentprop._modelapi.budget import Budget, load_prices
    from agentprop._modelapi.client import DEFAULT_API_CACHE_PATH

    if args.judge_action != "calibrate":
        raise InputError(
            "agentprop judge needs an action",
            expected="agentprop judge calibrate RUBRIC LABELS.jsonl --model MODEL",
            fix="add `calibrate`",
        )
    rubric, binding, store_dir = _rubric_and_binding(args)
    model = args.model or (binding.model if binding is not None else None)
    if not model:
        raise InputError(
            "no judge model",
            expected="--model MODEL, or a judge: section in the bindings of --spec",
            fix="pass --model, e.g. --model claude-haiku-4-5",
        )
    provider = args.provider or (binding.provider if binding is not None else "anthropic")
    base_url = args.base_url or (binding.base_url if binding is not None else None)
    args.samples = (
        args.samples
        if args.samples is not None
        else (binding.samples if binding is not None else 1)
    )
    args.min_labels = (
        args.min_labels
        if args.min_labels is not None
        else (binding.min_labels if binding is not None else 50)
    )
    if args.samples < 1:
        raise InputError(
            f"--samples {args.samples} is below 1",
            fix="ask at least once per transcript: --samples 1 (3 to measure self-disagreement)",
        )
    if args.min_labels < 1:
        raise InputError(
            f"--min-labels {args.min_labels} is below 1",
            fix="use the default 50, or the number of labels your reviewers require",
        )
    examples = load_labels(args.labels)
    prices = load_prices(args.prices) if args.prices else None
    budget = Budget(max_usd=args.max_usd, prices=prices)
    if args.max_usd is not None:
        budget.check_priced(model)
    cache: Path | bool = (
        False
        if (args.cache or "").lower() == "none"
        else Path(args.cache or DEFAULT_API_CACHE_PATH)
    )
    store = CalibrationStore(store_dir)
    judge = ModelJudge.for_model(
        rubric,
        model,
        provider=provider,
        base_url=base_url,
        cache=cache,
        cache_mode=args.cache_mode,
        budget=budget,
        samples=args.samples,
        min_labels=args.min_labels,
        store=store,
    )
    judge.max_tokens = args.max_tokens
    calibration = calibrate(judge, examples)
    path = store.save(calibration, rubric)
    judge.calibration = calibration
    print(calibration.summary(), file=out)
    stats = judge.client.stats()
    print(
        f"judge calls: {stats['model_calls']} ({stats['cache_hits']} from the cache, "
        f"{stats['live_calls']} to the API)",
        file=out,
    )
    print(f"stored: {path}", file=out)
    reason = judge.why_not_gating()
    if reason is None:
        p0, p1 = (1.0 + args.tau) / 2.0, 2.0 * args.tau - 1.0
        hypotheses = calibration.hypotheses(p0, p1) if 0.0 < p1 < p0 < 1.0 else None
        if hypotheses is None:
            print(
                f"gates: no -- at tau {args.tau:g} ({p0:g} vs {p1:g}) this judge cannot tell a "
                "good agent from a bad one; it reports only",
                file=out,
            )
        else:
            print(
                f"gates: yes -- at tau {args.tau:g} the oracle tests the judge's pass rate "
                f"{hypotheses[0]:.3f} vs {hypotheses[1]:.3f}",
                file=out,
            )
    else:
        print(f"gates: no -- {reason}; it reports only", file=out)
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(calibration.model_dump(), indent=2) + "\n", encoding="utf-8"
        )
    return EXIT_OK


def _rubric_and_binding(args: argparse.Namespace) -> tuple[Rubric, JudgeBinding | None, Path]:
    """The rubric (a file, or with --spec a rubric of the spec), the bindings' judge: section
    (with --spec) and the directory its calibration goes to."""
    from agentprop._agents.project import load_project
    from agentprop._judge.judges import Rubric, spec_rubrics

    if args.spec is None:
        return (
            Rubric.from_file(args.rubric),
            None,
            Path(args.store or Path(".agentprop") / "judges"),
        )
    project = load_project(args.spec, bindings=args.bindings)
    found = {r.rubric.name: r.rubric for r in spec_rubrics(project.spec)}
    if args.rubric not in found:
        raise InputError(
            f"{project.spec_path}: no rubric {args.rubric!r} in the spec's test_guidance",
            expected=", ".join(found) or "a policy or node with test_guidance: {rubric: ...}",
            fix="name a rubric by its clause, e.g. policies.ID or decision_tree.NODE",
        )
    binding = project.bindings.judge
    calibrations = (
        binding.calibrations
        if binding is not None and binding.calibrations
        else str(Path(".agentprop") / "judges")
    )
    return (
        found[args.rubric],
        binding,
        Path(args.store) if args.store else project.bindings.base_dir / calibrations,
    )
