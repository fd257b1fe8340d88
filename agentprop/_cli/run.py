"""``agentprop run``: run an agent over a spec's cases and decide each case."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import secrets
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import (
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_USAGE,
    announce_plan,
    check_budget_args,
    check_explore,
    check_positive_runs,
    check_report_outputs,
    cli_budget,
    cli_corpus,
    load_cli_agent,
    model_summary,
    parse_kinds,
    require_decisions,
    resolve_settings,
    selected_scenarios,
    write_report_outputs,
)
from agentprop._cli.ctrl_c import CtrlC
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
from agentprop._util.heap import freeze_more, frozen_heap
from agentprop._version import __version__
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.model_agent import ModelAgent
    from agentprop._agents.project import Project
    from agentprop._decide.records import Recorder, ShardInfo
    from agentprop._decide.written import InputWriter
    from agentprop._modelapi.budget import Budget
    from agentprop._pipeline.merge_report import MergedReport
    from agentprop._pipeline.report.model import RunReport
    from agentprop._pipeline.run import RunSettings
    from agentprop._pipeline.shards import Shard


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run an agent over the spec's cases and decide each case",
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
    run.add_argument("spec", help=SPEC_HELP)
    run.add_argument(
        "--mode",
        choices=["sprt", "zero-failure", "fixed"],
        help="how each case is decided (default: sprt; zero-failure for high-risk "
        "specs and safety cases)",
    )
    run.add_argument(
        "--tau", type=float, help="required pass rate (default: the spec's min_pass_rate)"
    )
    run.add_argument(
        "--runs",
        type=int,
        help="runs of fixed or zero-failure mode (alone, selects fixed mode: N runs a case); an "
        "INV case N runs a side, and under 5 (the fewest its test compares) only its first "
        "paraphrase, left INCONCLUSIVE: --runs 1 starts one run a case",
    )
    run.add_argument(
        "--max-runs-per-case",
        type=int,
        metavar="N",
        help="truncate each case's sequential test after N runs (default 100; "
        "undecided means UNSTABLE)",
    )
    run.add_argument(
        "--shrink-budget",
        type=int,
        default=200,
        metavar="RUNS",
        help="runs the shrinker may spend on each bug, a judge call counting as a run (default "
        "200; 0 turns shrinking off)",
    )
    run.add_argument(
        "--corpus",
        default=None,
        metavar="DIR",
        help="where shrunk reproducers are kept and replayed first (default .agentprop/corpus "
        "beside the bindings; 'none' to turn off)",
    )
    run.add_argument(
        "--explore-seed",
        type=int,
        default=None,
        metavar="N",
        help="the seed of the explored inputs (default: a new one each run, printed; 0 when CI is "
        "set; --seed N sets both)",
    )
    run.add_argument(
        "--input-model",
        default=None,
        metavar="PROVIDER:MODEL",
        help="explored turns are also written by this model (anthropic:..., openai:..., "
        "openai-responses:...), validated, cached in the API cache (--cache, --cache-mode) and "
        "replayed offline; endpoint from ANTHROPIC_BASE_URL / OPENAI_BASE_URL "
        "(docs/model-written-inputs.md)",
    )
    run.add_argument(
        "--simulated-user",
        action="store_true",
        help="with --input-model: follow-up turns (answers to the agent's questions) are played "
        "by a simulated user with a persona (patient, hurried, confused, adversarial); its "
        "rejected turns are counted as its errors, never the agent's",
    )
    run.add_argument(
        "--replay-corpus",
        choices=("own", "all"),
        default="own",
        help="which corpus entries replay first: those found with this agent and its --fault "
        "knobs (own, the default), or all of the spec's as regression checks (another agent's "
        "passes never retire an entry)",
    )
    run.add_argument(
        "--turn-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds each turn of a run may take before the run is recorded as a "
        "timeout error (default 60)",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the cases per kind, the agent runs (fewest for a correct agent, the cap) and "
        "the price basis; run nothing, write nothing",
    )
    run.add_argument(
        "--json", dest="json_path", help="write the report (schema agentprop.run/1) to this file"
    )
    run.add_argument(
        "--records",
        metavar="DIR",
        help="stream a record of every trial to DIR/trials.jsonl and the trace of every run to "
        "DIR/traces.jsonl as they end (schema agentprop.trials/1); DIR may not hold an earlier "
        "run's records",
    )
    run.add_argument(
        "--replace-records",
        action="store_true",
        help="with --records DIR: delete the records an earlier run left in DIR first",
    )
    run.add_argument(
        "--shard",
        metavar="i/N",
        help="decide only shard i of N (1-based): the cases whose id hashes to it, so N runs with "
        "1/N .. N/N decide every case once; with --records, `agentprop merge` makes one report of "
        "the N shards' records (docs/scaling.md)",
    )
    run.add_argument(
        "--top-up-shards",
        nargs="+",
        metavar="DIR",
        help="instead of running the cases, merge the N shards of this run (their --records "
        "DIRs, as `agentprop merge`) and make the pooled top-up of a policy that an unsharded run "
        "makes and shards cannot, with this run's agent; give the shards' own command with this "
        "in place of --shard (docs/scaling.md)",
    )
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the traceback of an exception the agent raised (under its case) and of an "
        "error that is not the agent's",
    )
    run.set_defaults(handler=command)


def input_writer(args: argparse.Namespace, *, explore_seed: int) -> InputWriter | None:
    """The writer of model-written turns ``--input-model`` asks for (``None`` without it), seeded
    by the explored inputs' seed and cached in the run's API cache (``--cache``,
    ``--cache-mode``)."""
    from pydantic import ValidationError

    from agentprop._decide.written import InputModelOptions, InputWriter

    model = getattr(args, "input_model", None)
    if model is None:
        if getattr(args, "simulated_user", False):
            raise InputError(
                "--simulated-user needs a model to play the user",
                fix="add --input-model PROVIDER:MODEL",
            )
        return None
    cache = getattr(args, "cache", None)
    try:
        options = InputModelOptions(
            model=model,
            simulated_user=bool(getattr(args, "simulated_user", False)),
            seed=explore_seed,
            cache=None if cache is None or cache.lower() == "none" else cache,
            cache_mode="off"
            if cache is not None and cache.lower() == "none"
            else getattr(args, "cache_mode", None),
        )
    except ValidationError as exc:
        raise InputError(
            str(exc.errors()[0]["msg"]).removeprefix("Value error, "),
            fix="write --input-model PROVIDER:MODEL",
        ) from None
    return InputWriter(options)


def explore_seed(args: argparse.Namespace) -> int:
    """The seed of a run's explored inputs, in Hypothesis's manner: the one given
    (``--explore-seed``, else a non-zero ``--seed``), ``AGENTPROP_SEED``, 0 under ``CI``, else a
    new one per run (``--seed`` under ``--shard``, so the shards agree), so repeated runs explore
    other inputs; the trials keep ``--seed``, so the runs of inputs met before are reused.
    ``args.explore_seed_source`` says which."""
    if args.explore_seed is not None:
        args.explore_seed_source = "given"
        return int(args.explore_seed)
    if args.seed:
        args.explore_seed_source = "from --seed"
        return int(args.seed)
    fixed = os.environ.get("AGENTPROP_SEED", "").strip()
    if fixed:
        try:
            value = int(fixed)
        except ValueError:
            raise InputError(
                f"AGENTPROP_SEED={fixed!r} is not an integer",
                fix="set AGENTPROP_SEED to a whole number, or unset it",
            ) from None
        args.explore_seed_source = "AGENTPROP_SEED"
        return value
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        args.explore_seed_source = "fixed because CI is set"
        return 0
    # shards of one run must explore the same inputs to merge (and the top-up of their merge)
    if getattr(args, "shard", None) or getattr(args, "top_up_shards", None):
        args.explore_seed_source = "fixed by --shard, so every shard explores the same inputs"
        return int(args.seed)
    args.explore_seed_source = (
        "a new seed each run outside CI, so reruns explore other inputs; CI=true or "
        "--explore-seed N fixes it"
    )
    return secrets.randbelow(1_000_000) + 1


def check_records_args(args: argparse.Namespace) -> None:
    """``--records DIR`` may not hold an earlier run's records (appended to, the two runs would
    read as one) unless ``--replace-records`` says to delete them, nor be a directory of
    ``--top-up-shards``; checked before any work (the plugin checks its own options alike)."""
    from agentprop._decide.records import check_records_dir

    shards = [Path(d).resolve() for d in getattr(args, "top_up_shards", None) or []]
    if args.records and Path(args.records).resolve() in shards:
        raise InputError(
            f"--records {args.records} is one of the --top-up-shards directories: the top-up's "
            "records would be mixed with that shard's (or, with --replace-records, delete them)",
            fix="give the top-up its own --records directory",
        )
    check_records_dir(args.records, replace=args.replace_records)


def open_records(directory: str, *, replace: bool = False) -> Recorder:
    """The recorder of ``--records DIR`` (created if missing), after deleting the records an
    earlier run left there if ``replace`` (``--replace-records``); a directory that cannot be
    written is an input error."""
    from agentprop._decide.records import Recorder, delete_records, earlier_records

    if replace:
        delete_records(earlier_records(directory))
    try:
        return Recorder(directory)
    except OSError as exc:
        raise InputError(
            f"--records {directory}: cannot write trial records there ({exc.strerror or exc})",
            fix="give a directory you can write to",
        ) from None


def shard_info(
    project: Project, agent: LoadedAgent, settings: RunSettings, shard: Shard
) -> ShardInfo:
    """What the shards of one run share: the project's digest, a digest of the settings, the
    agent and the case selection (everything that makes the run but the shard), and the seed."""
    import dataclasses
    import hashlib
    import json

    from agentprop._decide.records import ShardInfo
    from agentprop._decide.run_key import project_digest

    chosen = {
        f.name: getattr(settings, f.name)
        for f in dataclasses.fields(settings)
        if f.name not in ("shard", "input_writer", "keep_partial")
    }
    chosen["input_model"] = None if settings.input_writer is None else settings.input_writer.model
    chosen["agent"] = [agent.ref, sorted(agent.faults.items()), agent.fingerprint]
    text = json.dumps(chosen, sort_keys=True, default=str)
    return ShardInfo(
        index=shard.index,
        count=shard.count,
        spec_digest=project_digest(project),
        settings_digest=hashlib.sha256(text.encode()).hexdigest()[:16],
        seed=settings.seed,
        spec_path=str(project.spec_path),
        bindings_path=str(project.bindings.path) if project.bindings.path is not None else None,
        case_filter=list(settings.case_filter),
    )


def _top_up_shards(
    args: argparse.Namespace,
    project: Project,
    agent: LoadedAgent,
    model_agent: ModelAgent | None,
    budget: Budget,
    settings: RunSettings,
    out: TextIO,
    ctrl_c: CtrlC,
) -> int:
    """``--top-up-shards DIR...``: the shards of this run merged (as ``agentprop merge``), with
    the pooled top-up an unsharded run makes made here, with this run's agent and budget; the
    top-up's decisions are recorded in ``--records`` (as shard 0, which ``agentprop merge`` takes
    with the shards to make the same top-up again from the records)."""
    from agentprop._decide.records import recording
    from agentprop._pipeline.merge import merge_shards
    from agentprop._pipeline.merge_report import merge_reports
    from agentprop._pipeline.merge_topup import merged_top_up
    from agentprop._pipeline.shards import Shard

    if args.shard:
        raise InputError(
            "--top-up-shards merges the shards of a run, and --shard makes one of them",
            fix="run the shards with --shard i/N --records DIR, then this command with "
            "--top-up-shards DIR... and without --shard",
        )
    run = merge_shards(args.top_up_shards)
    if run.info.runner != "run":
        raise InputError(
            "--top-up-shards: the shards are of a pytest session (--agentprop-shard), which "
            "makes no pooled top-up",
            fix="merge them with agentprop merge DIR... --json PATH",
        )
    mine = shard_info(project, agent, settings, Shard(1, run.info.count))
    what = {"spec_digest": "spec and bindings", "settings_digest": "settings, agent and cases"}
    for name in ("spec_digest", "settings_digest", "seed"):
        if getattr(mine, name) != getattr(run.info, name):
            raise InputError(
                f"--top-up-shards: the shards are not of this run: their {what.get(name, name)} "
                f"({name} {getattr(run.info, name)!r}) differ from this command's "
                f"({getattr(mine, name)!r})",
                fix="give the shards' own command (the same spec, bindings, agent, faults, "
                "options and --seed) with --top-up-shards DIR... in place of --shard i/N",
            )
    ctrl_c.install()  # a signal from here on: as in the rest of `agentprop run`
    print(
        f"agentprop {__version__}: merging {run.info.count} shard(s) of {project.spec.spec_id} "
        f"with agent {agent.ref}, topping up as the unsharded run does",
        file=out,
    )
    recorder = open_records(args.records, replace=args.replace_records) if args.records else None
    if recorder is not None:  # recorded like a shard's, as shard 0: `agentprop merge` takes it
        recorder.set_shard(mine.model_copy(update={"index": 0}))
    top_up = merged_top_up(
        run,
        agent,
        budget,
        concurrency=settings.concurrency,
        attach=ctrl_c.attach,
        detach=ctrl_c.detach,
    )
    try:
        with recording(recorder):
            merged = merge_reports(
                args.top_up_shards, spec=args.spec, bindings=args.bindings, run=run, top_up=top_up
            )
    finally:
        if recorder is not None:
            recorder.close()
        if model_agent is not None:
            aio.run(model_agent.aclose())
    snapshot = budget.snapshot()
    merged.report.metrics.extra["budget"] = snapshot.model_dump()
    stopped = [n for n in merged.not_recomputed if n.endswith("(interrupted)")]
    if recorder is not None and not stopped:
        from agentprop._pipeline.merge_report import write_shard_report

        write_shard_report(recorder.directory, merged.report)  # last: the top-up finished
    code = report_merged(merged, args, out)
    if not ctrl_c.pressed:
        return code
    by = "" if ctrl_c.signum == signal.SIGINT else f" by {ctrl_c.name}"
    if stopped:
        print(
            f"interrupted{by}: {stopped[0].removesuffix(' (interrupted)')} was not finished "
            f"({snapshot.runs} runs started, ${snapshot.usd:.4f} spent"
            + (f"; its trial records are in {recorder.directory}" if recorder is not None else "")
            + "); the reports above hold the shards' merge without it",
            file=out,
        )
    else:
        made = "top_up" in merged.report.metrics.extra["merge"]
        print(
            f"interrupted{by}: after the {'top-up was made' if made else 'shards were merged'}; "
            "the reports above hold the whole run",
            file=out,
        )
    return ctrl_c.exit_code


def report_merged(merged: MergedReport, args: argparse.Namespace, out: TextIO) -> int:
    """Print and write the merged run's report (``args``' --json, --html, --junit, --markdown)
    and say how the run would exit: 1 when a case failed, 3 when something is not in it (a
    top-up the shards skipped) or coverage is not met, else 0."""
    from agentprop._pipeline.run import render_table

    report, run, info = merged.report, merged.run, merged.report.metrics.extra["merge"]
    print(
        f"merged {run.info.count} shard(s) of one run (seed {run.info.seed}, settings "
        f"{run.info.settings_digest}): {len(report.cases)} cases, {info['cases_decided_again']} "
        f"decided again from {run.trials} trial lines ({info['cases_from_reports']} with no "
        "decision in their records to make again taken from the shards' reports)",
        file=out,
    )
    print(render_table(report), file=out)
    topped = info.get("top_up")
    if topped:
        print(
            f"topped up {', '.join(topped['policies'])} as the unsharded run does: "
            f"{topped['runs']} more run(s) of {len(topped['cases'])} case(s)",
            file=out,
        )
    for problem in report.problems:
        print(f"note: {problem}", file=out)
    write_report_outputs(report, args, out, json=report.json_chunks)
    if getattr(args, "output_failed", False) or print_infrastructure(report, out):
        return EXIT_USAGE
    if report.metrics.passed + report.metrics.not_applicable != report.metrics.cases:
        return EXIT_FAIL
    if merged.not_recomputed:
        print(
            f"INCOMPLETE: not in the merged report: {'; '.join(merged.not_recomputed)} (the "
            "shards did not measure it; the shards' command with --top-up-shards DIR... in "
            "place of --shard makes it)",
            file=out,
        )
        return EXIT_INCOMPLETE
    branches = report.metrics.extra["coverage"]["branches"]
    if not merged.case_filter and (
        not branches["met"] or report.metrics.extra["coverage"].get("untested")
    ):
        print(
            "INCOMPLETE: every case passed, but the spec was not covered "
            "(listed under 'not tested')",
            file=out,
        )
        return EXIT_INCOMPLETE
    return EXIT_OK


def check_turn_timeout(seconds: float) -> float:
    """``--turn-timeout``: a positive, finite number of seconds."""
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(
            f"--turn-timeout {seconds:g} is not a positive, finite number of seconds",
            fix="use e.g. --turn-timeout 60",
        )
    return seconds


def command(args: argparse.Namespace, out: TextIO) -> int:
    ctrl_c = CtrlC()  # from the header line on (agentprop._cli.ctrl_c)
    try:
        # what the run loads lives as long as it: no full collection need walk it (see
        # agentprop._util.heap)
        with frozen_heap():
            return _command(args, out, ctrl_c)
    finally:
        ctrl_c.restore()


def _command(args: argparse.Namespace, out: TextIO, ctrl_c: CtrlC) -> int:
    from agentprop._agents.project import load_project
    from agentprop._decide import corpus as corpus_module
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.records import RECORDS_FILE, recording
    from agentprop._pipeline.import_cases import imported_cases
    from agentprop._pipeline.run import RunSettings, arun_cases, render_table, shrink_failures
    from agentprop._pipeline.shards import parse_shard
    from agentprop._spec.requirements import unchecked_requirements

    check_report_outputs(args)
    check_records_args(args)
    shard = parse_shard(args.shard) if args.shard else None
    project = load_project(args.spec, bindings=args.bindings)
    agent, model_agent = load_cli_agent(args, project, out)
    check_budget_args(args)
    budget = cli_budget(args, model_agent)
    # built once per project: coverage and shrinking read the same list
    scenarios, problems = project.scenarios(), project.problems
    scenarios = selected_scenarios(project, args.case)
    scenarios += imported_cases(project, args.case)  # `agentprop import --to-cases`
    require_decisions(project, scenarios)
    check_positive_runs(args.runs, fix="use --runs 1 or more")
    resolve_settings(args)  # after the agent: its module may register the profile
    kinds = parse_kinds(args.kinds)
    check_explore(args)
    if shard is not None:  # MFT, JUDGE, EXPLORE and INV cases follow their scenario's shard
        scenarios = [s for s in scenarios if shard.keeps(s.id)]
    project.turn_timeout_s = check_turn_timeout(args.turn_timeout)  # shrinking runs the project too
    if args.dry_run:
        from agentprop._cli.dryrun import print_dry_run

        print_dry_run(project, scenarios, kinds, args, out, model_agent=model_agent)
        if model_agent is not None:
            asyncio.run(model_agent.aclose())
        return EXIT_OK
    inputs_seed = explore_seed(args)
    settings = RunSettings(
        kinds=kinds,
        case_filter=tuple(args.case),
        turn_timeout_s=project.turn_timeout_s,
        mode=args.mode,
        runs=args.runs,
        tau=args.tau,
        max_runs=args.max_runs_per_case,
        seed=args.seed,
        concurrency=args.concurrency,
        explore=args.explore,
        keep_partial=True,  # Ctrl-C: the report of what was decided, not a traceback
        replay_corpus=args.replay_corpus,
        profile=args.profile,
        explore_seed=inputs_seed,
        shrink_budget=max(0, args.shrink_budget),
        input_writer=input_writer(args, explore_seed=inputs_seed),
        shard=shard,
    )
    if args.top_up_shards:
        return _top_up_shards(args, project, agent, model_agent, budget, settings, out, ctrl_c)
    faults = ", ".join(f"{k}={v:g}" for k, v in agent.faults.items())
    ctrl_c.install()
    print(
        f"agentprop {__version__}: {project.spec.spec_id} ({project.spec.title}) "
        f"with agent {agent.ref}" + (f" [faults: {faults}]" if faults else ""),
        file=out,
    )

    announce_plan(project, scenarios, kinds, args, out, model_agent=model_agent)
    explores = "explore" in kinds and args.explore > 0
    if explores:
        print(
            f"explored inputs: --explore-seed {settings.explore_seed} ({args.explore_seed_source})",
            file=out,
        )
    corpus = (
        None
        if (args.corpus or "").lower() == "none"
        else cli_corpus(args, args.corpus or corpus_module.default_corpus_dir(project))
    )
    if args.shrink_budget < 0:
        raise InputError(
            f"--shrink-budget {args.shrink_budget} is negative",
            fix="use 0 to turn shrinking off, or a number of runs",
        )
    memo = TrialMemo()

    async def run_all() -> RunReport:
        ctrl_c.attach()
        try:
            report = await arun_cases(
                project,
                agent,
                scenarios,
                settings,
                problems=problems,
                budget=budget,
                memo=memo,
                corpus=corpus,
            )
            if args.shrink_budget > 0 and "interrupted" not in report.metrics.extra:
                # failing cases shrink to minimal reproducers, saved to the corpus
                await _unless_interrupted(
                    report,
                    # a daemon thread: a Ctrl-C does not wait for the shrink's every run
                    aio.to_daemon_thread(
                        lambda: shrink_failures(
                            project,
                            agent,
                            report,
                            budget=args.shrink_budget,
                            corpus=corpus,
                            session_budget=budget,
                            memo=memo,
                            seed=args.seed,
                            stream=sys.stderr,
                        ),
                        "agentprop-shrink",
                    ),
                )
            ctrl_c.detach()  # decided: a press from here on is only remembered
            return report
        finally:
            if model_agent is not None:
                await model_agent.aclose()

    recorder = open_records(args.records, replace=args.replace_records) if args.records else None
    if recorder is not None and shard is not None:
        recorder.set_shard(shard_info(project, agent, settings, shard))
    try:
        freeze_more()  # the SDK, the project and the agent, loaded since
        with recording(recorder):
            report = aio.run(run_all())  # not asyncio.run: see agentprop._util.aio
    finally:
        if recorder is not None:
            recorder.close()
    if settings.input_writer is not None:  # the shrinker may have asked the model too
        report.metrics.extra["input_model"] = settings.input_writer.summary()
    interrupted = report.metrics.extra.get("interrupted")
    if interrupted and ctrl_c.pressed:
        interrupted["by"] = ctrl_c.name  # the reports say what stopped the run
    by = "" if ctrl_c.signum == signal.SIGINT else f" by {ctrl_c.name}"
    snapshot = budget.snapshot()
    report.metrics.extra["budget"] = snapshot.model_dump()
    if model_agent is not None:
        report.metrics.extra["model"] = {
            **model_agent.stats(),
            "cache": model_agent.cache.stats.as_dict(),
        }
    print(render_table(report, verbose=args.verbose), file=out)
    if model_agent is not None:
        print(model_summary(model_agent.stats(), snapshot), file=out)
    if settings.input_writer is not None:
        print(settings.input_writer.describe(), file=out)
    if interrupted:
        print(
            f"interrupted{by}: {interrupted['cases_decided']} case(s) decided before it, the "
            f"rest not run or not decided ({snapshot.runs} runs started, ${snapshot.usd:.4f} "
            "spent); the reports below hold what was decided",
            file=out,
        )
    if snapshot.exhausted and (snapshot.refused_runs or snapshot.refused_calls):
        print(
            f"budget exhausted: {snapshot.exhausted_reason}; {report.metrics.inconclusive} "
            "case(s) INCONCLUSIVE",
            file=out,
        )
    for pr in problems:
        print(f"note: {pr}", file=out)
    if corpus is not None and args.replay_corpus == "own":
        others = [
            e
            for e in corpus.entries(spec_id=project.spec.spec_id)
            if not corpus_module.found_with(e, agent)
        ]
        if others:
            agents = sorted(
                {corpus_module.agent_label(e.agent_ref, e.agent_faults) for e in others}
            )
            print(
                f"note: {len(others)} corpus entr{'y' if len(others) == 1 else 'ies'} found with "
                f"another agent ({'; '.join(agents)}) not replayed, and kept; --replay-corpus all "
                "replays them as regression checks",
                file=out,
            )
    for u in unchecked_requirements(project.spec):
        print(
            f"note: not checked: {u.clause} (agentprop has no check for it; "
            "`agentprop lint` shows where)",
            file=out,
        )
    if recorder is not None and shard is not None:
        from agentprop._pipeline.merge_report import write_shard_report

        # what `agentprop merge` needs beyond the trials
        write_shard_report(recorder.directory, report)
    write_report_outputs(report, args, out, json=report.json_chunks)
    if recorder is not None:
        print(
            f"trial records written to {recorder.directory / RECORDS_FILE} "
            f"({recorder.lines} lines)",
            file=out,
        )
    if ctrl_c.pressed and not interrupted:
        print(
            f"interrupted{by}: after every case was decided; the reports above hold the whole run",
            file=out,
        )
    if interrupted or ctrl_c.pressed:
        return ctrl_c.exit_code
    if getattr(args, "output_failed", False):
        # the results are kept where the message says; the exit code shows the loss
        return EXIT_USAGE
    if model_agent is not None and model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    if print_infrastructure(report, out, verbose=args.verbose):
        return EXIT_USAGE
    # NOT APPLICABLE cases (listed with their reason) neither pass nor fail the run, nor do the
    # cases of a judge that reports only (uncalibrated, or too noisy to gate)
    reports_only = [
        c
        for c in report.cases
        if c.kind == "JUDGE" and not (c.details.get("judged") or {}).get("gates", True)
    ]
    for c in reports_only:
        print(f"note: {c.id} does not gate: {c.details['judged'].get('why_not')}", file=out)
    gating_passed = (
        report.metrics.passed
        + report.metrics.not_applicable
        + sum(c.verdict != "PASS" for c in reports_only)
    )
    if gating_passed != report.metrics.cases:
        if explores and any(c.kind == "EXPLORE" and c.verdict != "PASS" for c in report.cases):
            print(
                "the explored inputs of this run: --explore-seed "
                f"{settings.explore_seed} repeats them",
                file=out,
            )
        return EXIT_FAIL
    coverage = report.metrics.extra["coverage"]
    branches = coverage["branches"]
    if args.case or shard is not None:  # coverage is the whole run's: `agentprop merge` reports it
        return EXIT_OK
    gaps = coverage.get("untested") or []
    if not branches["met"] or gaps:
        below = (
            f"branch coverage {branches['enforced']:.0%} of all branches is below the spec's "
            f"min_branch_coverage {branches['min_branch_coverage']}; "
            if not branches["met"]
            else ""
        )
        print(
            f"INCOMPLETE: every case passed, but {below}{len(gaps)} item(s) of the spec were not "
            "tested (listed under 'not tested'): fix the spec or the bindings where the reasons "
            "say, or run the missing cases",
            file=out,
        )
        return EXIT_INCOMPLETE
    return EXIT_OK


async def _unless_interrupted(report: RunReport, work: Awaitable[object]) -> None:
    """Await ``work`` (shrinking); if the run is interrupted meanwhile, mark ``report`` so."""
    try:
        await work
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        decided = len(report.cases)
        report.metrics.extra["interrupted"] = {
            "cases_planned": decided,
            "cases_decided": decided,
            "stage": "shrinking",
        }


def print_infrastructure(report: RunReport, out: TextIO, *, verbose: bool = False) -> bool:
    """The cases left undecided by errors that are not the agent's (cache misses in
    replay-only mode, no key, a refused key, an unreachable API, the budget spent inside a
    run), with the first error in full; whether there were any (the run then exits 2)."""
    hit = [c for c in report.cases if c.infrastructure_error]
    if not hit:
        return False
    kinds = sorted({str(c.infrastructure_error["kind"]) for c in hit if c.infrastructure_error})
    print(
        f"{len(hit)} case(s) not decided for reasons that are not the agent's "
        f"({', '.join(kinds)}): nothing was shrunk or saved for them; fix the cause and run again",
        file=out,
    )
    first = hit[0].infrastructure_error or {}
    print(f"  {hit[0].id}: " + str(first.get("message", "")).replace("\n", "\n    "), file=out)
    if verbose and first.get("traceback"):
        print("    " + str(first["traceback"]).rstrip().replace("\n", "\n    "), file=out)
    return True
