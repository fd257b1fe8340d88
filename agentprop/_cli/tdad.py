"""``agentprop tdad``: the TDAD evaluation — visible/hidden split, VPR, HPR, RPR, the mutation
score and, with ``--base``, SURS."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    announce_plan,
    check_budget_args,
    check_explore,
    check_positive_runs,
    check_report_outputs,
    cli_budget,
    load_cli_agent,
    parse_kinds,
    require_cases,
    require_decisions,
    resolve_settings,
    selected_scenarios,
    write_report_outputs,
)
from agentprop._cli.options import (
    SPEC_HELP,
    agent_parent,
    budget_parent,
    model_parent,
    profile_parent,
    report_outputs_parent,
    selection_parent,
    suite_parent,
)
from agentprop._util import aio
from agentprop._version import __version__
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._decide.oracle import OracleSettings
    from agentprop._pipeline.mutation.mutants import MutationReport
    from agentprop._pipeline.report.model import RunReport
    from agentprop._pipeline.surs import SursResult
    from agentprop._pipeline.tdad import TdadMetrics
    from agentprop._spec.model import Spec


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tdad = sub.add_parser(
        "tdad",
        help="TDAD evaluation: visible/hidden split, VPR, HPR, RPR and the mutation score",
        parents=[
            agent_parent(),
            selection_parent(),
            profile_parent(),
            suite_parent(),
            budget_parent(),
            model_parent(),
            report_outputs_parent(),
        ],
    )
    tdad.add_argument("spec", help=SPEC_HELP)
    tdad.add_argument(
        "--mutations",
        metavar="FILE",
        help="mutation pack (default: mutations.yaml next to the spec or one level up); `none` "
        "skips mutation testing",
    )
    tdad.add_argument(
        "--visible-fraction",
        type=float,
        default=0.5,
        metavar="F",
        help="share of the BOUNDARY, DIR and INV cases that is visible (default 0.5; MFT "
        "cases are always visible)",
    )
    tdad.add_argument(
        "--split-seed", type=int, default=0, help="seed of the visible/hidden split (default 0)"
    )
    tdad.add_argument(
        "--probe-runs",
        type=int,
        default=3,
        metavar="N",
        help="runs of each mutant's activation probe (default 3)",
    )
    tdad.add_argument(
        "--control-runs",
        type=int,
        metavar="N",
        help="runs of each probe on the clean agent, the control (default 10, more if "
        "--probe-runs needs it)",
    )
    tdad.add_argument(
        "--runs",
        type=int,
        help="decide each case on a fixed N runs instead of the sequential test (cheaper "
        "with a model, less sure)",
    )
    tdad.add_argument(
        "--base",
        metavar="V1_SPEC",
        help="the previous version's spec directory (spec + bindings): its "
        "invariant cases give SURS",
    )
    tdad.add_argument(
        "--dry-run",
        action="store_true",
        help="print the cases per kind and the agent runs of the suite (fewest for a correct "
        "agent, the cap); run nothing, write nothing",
    )
    tdad.add_argument(
        "--json", dest="json_path", help="write the run report with metrics.extra.tdad to this file"
    )
    tdad.set_defaults(handler=command)


def _print_split(report: RunReport, split: Mapping[str, str], out: TextIO) -> None:
    """The suite per kind, visible and hidden, then every case that did not pass."""
    print("suite:", file=out)
    for kind in sorted({c.kind for c in report.cases}):
        group = [c for c in report.cases if c.kind == kind]
        vis = [c for c in group if split.get(c.id) == "visible"]
        hid = [c for c in group if split.get(c.id) == "hidden"]
        print(
            f"  {kind:<10} {len(vis):>3} visible ({sum(c.verdict == 'PASS' for c in vis)} pass), "
            f"{len(hid):>3} hidden ({sum(c.verdict == 'PASS' for c in hid)} pass)",
            file=out,
        )
    for c in report.cases:
        if c.verdict != "PASS":
            first = c.failures[0].explanation if c.failures else (c.reason or "")
            print(f"  {c.verdict:<12} [{split.get(c.id, '?')}] {c.id}  {first[:120]}", file=out)
    out.flush()


def suite_oracle(spec: Spec, args: argparse.Namespace) -> OracleSettings:
    """The oracle of the mutation and SURS runs: the spec's defaults under the resolved settings
    (:func:`~agentprop._cli.common.resolve_settings`; ``--runs`` alone selects fixed N)."""
    from agentprop._decide.oracle import OracleSettings

    mode = args.mode or ("fixed" if args.runs else None)
    return OracleSettings.for_spec(
        spec, mode=mode, tau=args.tau, runs=args.runs, max_runs=args.max_runs_per_case
    )


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._decide.memo import TrialMemo
    from agentprop._pipeline.mutation.mutants import fault_mutants
    from agentprop._pipeline.mutation.pack import (
        check_mutation_bindings,
        find_mutation_pack,
        load_mutation_pack,
    )
    from agentprop._pipeline.mutation.probe import default_control_runs, min_control_runs
    from agentprop._pipeline.mutation.run import KillerCase, amutation_test, fault_knob_maker
    from agentprop._pipeline.mutation.smith import prompt_mutant_factory
    from agentprop._pipeline.run import RunSettings, arun_cases
    from agentprop._pipeline.surs import asurs
    from agentprop._pipeline.tdad import split_suite, tdad_metrics

    check_report_outputs(args)
    project = load_project(args.spec, bindings=args.bindings)
    if not 0.0 <= args.visible_fraction <= 1.0:
        raise InputError(
            f"--visible-fraction {args.visible_fraction} must be between 0 and 1",
            fix="use e.g. --visible-fraction 0.5",
        )
    if args.probe_runs < 1:
        raise InputError(
            f"--probe-runs {args.probe_runs} must be at least 1",
            fix="use --probe-runs 3 (the default)",
        )
    if args.control_runs is not None and args.control_runs < min_control_runs(args.probe_runs):
        raise InputError(
            f"--control-runs {args.control_runs} is too few: with --probe-runs {args.probe_runs} "
            "no mutant could be told from the clean agent",
            fix=f"use --control-runs {min_control_runs(args.probe_runs)} or more, or leave it out "
            f"(default {default_control_runs(args.probe_runs)})",
        )
    kinds = parse_kinds(args.kinds, need_mft=True)
    pack_path: Path | None
    if args.mutations and args.mutations.lower() == "none":
        pack_path = None
    elif args.mutations:
        pack_path = Path(args.mutations)
    else:
        pack_path = find_mutation_pack(project)
    pack = load_mutation_pack(pack_path) if pack_path is not None else None
    base = load_project(args.base) if args.base else None
    if base is not None:
        require_cases(base, "--base")
    agent, model_agent = load_cli_agent(args, project, out)
    if pack is not None:  # before any run: a typo should not cost a suite
        check_mutation_bindings(project, pack, agent if model_agent is None else None)
    budget = cli_budget(args, model_agent)
    scenarios = selected_scenarios(project, args.case)
    require_decisions(project, scenarios)
    check_positive_runs(args.runs)
    resolve_settings(args)  # after the agent: its module may register the profile
    check_budget_args(args)
    check_explore(args)
    settings = RunSettings(
        kinds=kinds,
        seed=args.seed,
        concurrency=args.concurrency,
        case_filter=tuple(args.case),
        mode=args.mode,
        tau=args.tau,
        runs=args.runs,
        max_runs=args.max_runs_per_case,
        explore=args.explore,
        profile=args.profile,
    )
    oracle = suite_oracle(project.spec, args)
    print(
        f"agentprop {__version__}: TDAD evaluation of {project.spec.spec_id} "
        f"with agent {agent.ref}",
        file=out,
    )
    repeats = (
        f"then each of the {len(pack.mutations)} mutation intents reruns the "
        "visible cases it targets"
        if pack is not None
        else ""
    )
    if args.dry_run:
        from agentprop._cli.dryrun import print_dry_run

        print_dry_run(
            project, scenarios, kinds, args, out, model_agent=model_agent, repeats=repeats
        )
        if model_agent is not None:
            asyncio.run(model_agent.aclose())
        return EXIT_OK
    announce_plan(project, scenarios, kinds, args, out, model_agent=model_agent, repeats=repeats)

    async def evaluate() -> tuple[RunReport, TdadMetrics, MutationReport | None, SursResult | None]:
        try:
            report = await arun_cases(
                project,
                agent,
                scenarios,
                settings,
                problems=project.problems,
                budget=budget,
                memo=TrialMemo(),
            )
            split = split_suite(
                report.cases, visible_fraction=args.visible_fraction, seed=args.split_seed
            )
            _print_split(report, split, out)
            mutation = None
            if pack is not None:
                order = {"MFT": 0, "BOUNDARY": 1, "DIR": 2, "INV": 3}
                shown = sorted(
                    (
                        c
                        for c in report.cases
                        if split.get(c.id) == "visible" and c.id in report._replays
                    ),
                    key=lambda c: order.get(c.kind, 9),
                )
                visible = [
                    KillerCase(c.id, report._replays[c.id], clean_verdict=c.verdict) for c in shown
                ]
                mutants = (
                    fault_mutants(project, pack, agent, fault_knob_maker(agent))
                    if model_agent is None
                    else []
                )
                generate = (
                    prompt_mutant_factory(model_agent, project, pack)
                    if model_agent is not None
                    else None
                )
                can_kill = sum(c.verdict == "PASS" for c in shown)
                print(
                    f"mutation testing with {pack.mutation_pack_id}: {len(pack.mutations)} "
                    f"intents, {can_kill} visible cases the clean agent passes to kill them"
                    + (
                        f" ({len(shown) - can_kill} it does not pass cannot kill)"
                        if can_kill < len(shown)
                        else ""
                    )
                    + "; each probe also runs on the clean agent",
                    file=out,
                )
                mutation = await amutation_test(
                    project,
                    pack,
                    agent,
                    visible,
                    mutants=mutants,
                    generate=generate,
                    settings=oracle,
                    probe_runs=args.probe_runs,
                    control_runs=args.control_runs,
                    budget=budget,
                    seed=args.seed,
                    on_result=lambda r: print("  " + r.line(), file=out, flush=True),
                )
            regression = None
            if base is not None:
                print(
                    f"spec evolution: the invariants of {base.spec.spec_id} on this agent",
                    file=out,
                    flush=True,
                )
                regression = await asurs(
                    base,
                    project,
                    agent,
                    settings=suite_oracle(base.spec, args),
                    budget=budget,
                    seed=args.seed,
                )
            metrics = tdad_metrics(
                report.cases,
                split,
                mutation,
                visible_fraction=args.visible_fraction,
                seed=args.split_seed,
                surs=regression,
            )
            report.metrics.extra["tdad"] = metrics.model_dump(mode="json")
            if mutation is not None:
                report.metrics.extra["tdad"]["mutation"] = mutation.model_dump(mode="json")
            if regression is not None:
                report.metrics.extra["tdad"]["surs_detail"] = regression.model_dump(mode="json")
            return report, metrics, mutation, regression
        finally:
            if model_agent is not None:
                await model_agent.aclose()

    # not asyncio.run: see agentprop._util.aio
    report, metrics, mutation, regression = aio.run(evaluate())
    if mutation is not None:
        for line in mutation.skipped_lines() + mutation.clean_not_passing_lines():
            print("  " + line, file=out)
    if regression is not None:
        for line in regression.summary().splitlines()[1:]:
            print(line, file=out)
    print(metrics.summary(), file=out)
    write_report_outputs(report, args, out, json=report.to_json)
    if getattr(args, "output_failed", False):
        # the results are kept where the message says; the exit code shows the loss
        return EXIT_USAGE
    if model_agent is not None and model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    survived = mutation is not None and any(m.status == "survived" for m in mutation.mutants)
    regressed = regression is not None and regression.passed < regression.invariants
    all_pass = metrics.visible_passed == metrics.visible and metrics.hidden_passed == metrics.hidden
    return EXIT_OK if all_pass and not survived and not regressed else EXIT_FAIL
