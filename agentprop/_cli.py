"""The ``agentprop`` command line.

Exit codes: 0 all cases pass (or lint found no error), 1 a case failed (or lint found an
error), 2 usage or input error (bad spec, bindings, agent or arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from agentprop._version import __version__
from agentprop._agents import LoadedAgent, load_agent, parse_faults
from agentprop._anthropic_agent import DEFAULT_API_CACHE_PATH, AnthropicAgent, default_cache_mode
from agentprop._budget import Budget
from agentprop._cache import CacheMode
from agentprop._project import Project, load_project
from agentprop._prompt import find_seed_artifacts
from agentprop._report import RunReport
from agentprop._scenario import Scenario
from agentprop._check import acheck
from agentprop import _corpus as corpus_module
from agentprop._corpus import DEFAULT_DIR as DEFAULT_CORPUS_DIR, Corpus, CorpusEntry, judge_replay, pytest_regression
from agentprop._sync import run_sync
from agentprop._memo import TrialMemo
from agentprop._explore import DEFAULT_PER_PATH
from agentprop._run import RunSettings, arun_cases, render_table, shrink_failures
from agentprop._run_kinds import KINDS
from agentprop._mutation import (
    KillerCase,
    MutationReport,
    amutation_test,
    check_mutation_bindings,
    default_control_runs,
    fault_knob_maker,
    fault_mutants,
    find_mutation_pack,
    load_mutation_pack,
    min_control_runs,
    prompt_mutant_factory,
)
from agentprop._tdad import TdadMetrics, split_suite, tdad_metrics
from agentprop._surs import SursResult, asurs
from agentprop._promptsmith import CompileResult, acompile_prompt
from agentprop._oracle import OracleSettings
from agentprop._snapshot import (
    SnapshotResult,
    SnapshotStore,
    acheck_snapshot,
    check_reason,
    default_snapshot_dir,
    render_baseline,
    render_pending,
)
from agentprop._readings import binding_findings, unchecked_requirements
from agentprop._spec.lint import LintFinding, condition_variables, implied_decision
from agentprop._scrub import scrub_text
from agentprop._yaml_source import load_yaml
from agentprop._spec.load import lint_spec, resolve_spec_path
from agentprop.errors import AgentPropError, BindingsError, InputError, InvalidArgument, SourceLocation, SpecError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentprop",
        description="Property-based, statistically decided tests for tool-using LLM agents.",
    )
    p.add_argument("--version", action="version", version=f"agentprop {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    lint = sub.add_parser("lint", help="check a spec (and its bindings) and list inconsistencies")
    lint.add_argument("spec", help="spec file, or a directory with spec.yaml")
    lint.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
    lint.add_argument("--json", dest="json_path", help="also write the findings as JSON to this file")

    run = sub.add_parser("run", help="run an agent over the spec's cases and decide each case")
    run.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    _add_agent_options(run)
    run.add_argument("--mode", choices=["sprt", "zero-failure", "fixed"], help="how each case is decided (default: sprt; zero-failure for high-risk specs)")
    run.add_argument("--tau", type=float, help="required pass rate (default: the spec's min_pass_rate)")
    run.add_argument("--runs", type=int, help="runs of fixed or zero-failure mode (alone, selects fixed mode)")
    run.add_argument("--max-runs-per-case", type=int, metavar="N", help="truncate each case's sequential test after N runs (default 100; undecided means UNSTABLE)")
    run.add_argument("--seed", type=int, default=0, help="trial namespace: change it to draw fresh samples")
    run.add_argument("--concurrency", type=int, default=8, help="runs in flight at once (default 8)")
    run.add_argument("--kinds", default="mft,explore,boundary,dir,inv", help="case kinds to run, comma-separated: mft (every path), explore (every path written many ways), boundary (both sides of numeric edges), dir (one flipped condition), inv (paraphrases); default all")
    run.add_argument("--explore", type=int, default=DEFAULT_PER_PATH, metavar="N", help=f"inputs explored per path: templates and phrase-pack paraphrases on every turn, the search weighted towards what failed (default {DEFAULT_PER_PATH}; 0 turns exploration off)")
    run.add_argument("--case", action="append", default=[], metavar="ID", help="only run cases whose id contains ID, or is ID exactly (repeatable)")
    run.add_argument("--shrink-budget", type=int, default=200, metavar="RUNS", help="runs the shrinker may spend on each failing case (default 200; 0 turns shrinking off)")
    run.add_argument("--corpus", default=None, metavar="DIR", help="where shrunk reproducers are kept and replayed first (default .agentprop/corpus beside the bindings; 'none' to turn off)")
    run.add_argument("--json", dest="json_path", help="write the report (schema agentprop.run/1) to this file")
    run.add_argument("-v", "--verbose", action="store_true", help="show the traceback of an exception the agent raised (under its case) and of an error that is not the agent's")
    budget = run.add_argument_group("budget (one for the whole run; when it is spent, undecided cases are INCONCLUSIVE)")
    budget.add_argument("--max-usd", type=float, help="stop starting agent runs once this many dollars are spent")
    budget.add_argument("--max-runs", type=int, metavar="N", help="start at most N agent runs in the whole run, shrinking included (like --agentprop-max-runs in pytest)")
    _add_model_options(run)
    _corpus_parser(sub)
    _snapshot_parser(sub)
    tdad = sub.add_parser("tdad", help="TDAD evaluation: visible/hidden split, VPR, HPR, RPR and the mutation score")
    tdad.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    _add_agent_options(tdad)
    tdad.add_argument("--mutations", metavar="FILE", help="mutation pack (default: mutations.yaml next to the spec or one level up); `none` skips mutation testing")
    tdad.add_argument("--visible-fraction", type=float, default=0.5, metavar="F", help="share of the BOUNDARY, DIR and INV cases that is visible (default 0.5; MFT cases are always visible)")
    tdad.add_argument("--split-seed", type=int, default=0, help="seed of the visible/hidden split (default 0)")
    tdad.add_argument("--probe-runs", type=int, default=3, metavar="N", help="runs of each mutant's activation probe (default 3)")
    tdad.add_argument("--control-runs", type=int, metavar="N", help="runs of each probe on the clean agent, the control (default 10, more if --probe-runs needs it)")
    tdad.add_argument("--kinds", default="mft,explore,boundary,dir,inv", help="case kinds in the suite (default all)")
    tdad.add_argument("--explore", type=int, default=DEFAULT_PER_PATH, metavar="N", help=f"inputs explored per path (default {DEFAULT_PER_PATH}; 0 turns exploration off)")
    tdad.add_argument("--case", action="append", default=[], metavar="ID", help="only cases whose id contains ID, or is ID exactly (repeatable)")
    tdad.add_argument("--runs", type=int, help="decide each case on a fixed N runs instead of the sequential test (cheaper with a model, less sure)")
    tdad.add_argument("--seed", type=int, default=0, help="trial namespace (default 0)")
    tdad.add_argument("--concurrency", type=int, default=8, help="runs in flight at once (default 8)")
    tdad.add_argument("--max-runs", type=int, metavar="N", help="start at most N agent runs in all, mutants included")
    tdad.add_argument("--max-usd", type=float, help="stop starting agent runs once this many dollars are spent")
    tdad.add_argument("--base", metavar="V1_SPEC", help="the previous version's spec directory (spec + bindings): its invariant cases give SURS")
    tdad.add_argument("--json", dest="json_path", help="write the run report with metrics.extra.tdad to this file")
    _add_model_options(tdad)
    comp = sub.add_parser("compile", help="PromptSmith: edit a model agent's prompt until the spec's visible cases pass")
    comp.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    comp.add_argument("--out", required=True, metavar="DIR", help="where the compiled prompt.txt, tool_descriptions.yaml and compile_log.json go (rewritten after every iteration)")
    comp.add_argument("--agent", default="anthropic", help=argparse.SUPPRESS)
    comp.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)
    comp.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
    comp.add_argument("--case", action="append", default=[], metavar="ID", help="compile against only the cases whose id contains ID, or is ID exactly (repeatable)")
    comp.add_argument("--max-iterations", type=int, default=6, metavar="N", help="outer iterations: full runs of the visible cases (default 6)")
    comp.add_argument("--max-inner", type=int, default=8, metavar="N", help="inner iterations on the failing cases once fewer than --inner-threshold fail (default 8)")
    comp.add_argument("--inner-threshold", type=int, default=10, metavar="N", help="switch to the inner loop below this many failing cases (default 10)")
    comp.add_argument("--runs", type=int, help="decide each case on a fixed N runs instead of the sequential test (cheaper, less sure)")
    comp.add_argument("--promptsmith-temperature", type=float, help="sampling temperature of PromptSmith's edits (default: the API's)")
    comp.add_argument("--seed", type=int, default=0, help="trial namespace (default 0)")
    comp.add_argument("--max-runs", type=int, metavar="N", help="start at most N agent runs in all")
    comp.add_argument("--max-usd", type=float, help="stop once this many dollars are spent")
    comp.add_argument("--json", dest="json_path", help="also write the compile log to this file")
    _add_model_options(comp, always=True)
    return p


def _corpus_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    corpus = sub.add_parser("corpus", help="list, show, remove and prune the shrunk reproducers kept by agentprop run")
    actions = corpus.add_subparsers(dest="corpus_action", metavar="ACTION")

    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument("--spec", help="spec directory or file: its corpus is .agentprop/corpus beside its bindings (the default location)")
        p.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")
        p.add_argument("--dir", help="corpus directory (overrides --spec; default ./.agentprop/corpus)")

    lst = actions.add_parser("list", help="one line per entry: id, spec, case, failure rate, last seen, signature")
    lst.add_argument("--retired", action="store_true", help="list the retired entries instead")
    where(lst)
    show = actions.add_parser("show", help="print one entry (JSON), or with --pytest as a ready regression test")
    show.add_argument("id", help="entry id (a unique prefix is enough)")
    show.add_argument("--pytest", action="store_true", help="print the entry as a self-contained pytest regression test")
    where(show)
    rm = actions.add_parser("rm", help="delete entries")
    rm.add_argument("ids", nargs="+", metavar="ID", help="entry ids (unique prefixes are enough)")
    where(rm)
    prune = actions.add_parser("prune", help="remove entries whose spec or case is gone, and retire those that now pass")
    prune.add_argument("--no-replay", action="store_true", help="only remove entries whose spec or case is gone; run no agent")
    prune.add_argument("--seed", type=int, default=0, help="trial namespace of the replays (default 0)")
    where(prune)
    clear = actions.add_parser("clear", help="delete every entry, retired ones included")
    clear.add_argument("--yes", action="store_true", help="do it without asking (required when not on a terminal or when CI is set)")
    where(clear)


def _snapshot_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    snap = sub.add_parser("snapshot", help="check, review and approve behaviour snapshots (approved baselines of what the agent does)")
    actions = snap.add_subparsers(dest="snapshot_action", metavar="ACTION")
    check = actions.add_parser("check", help="run every case and compare its behaviour with the approved baseline")
    check.add_argument("spec", help="spec directory (spec.yaml + agentprop.yaml) or spec file")
    _add_agent_options(check)
    check.add_argument("--case", action="append", default=[], metavar="ID", help="only cases whose id contains ID, or is ID exactly (repeatable)")
    check.add_argument("--runs", type=int, default=10, help="runs per case (default 10)")
    check.add_argument("--alpha", type=float, default=0.05, help="significance of the two-sample test that calls a behaviour changed (default 0.05)")
    check.add_argument("--seed", type=int, default=0, help="trial namespace (default 0)")
    check.add_argument("--ignore", action="append", default=[], metavar="PATTERN", help="leave out response fields or tool arguments: response.FIELD, tools.TOOL.ARG, globs allowed (repeatable)")
    check.add_argument("--update", action="store_true", help="approve every NEW or CHANGED snapshot instead of failing (needs --reason; refused when CI is set)")
    check.add_argument("--reason", help="why the new behaviour is right (required with --update; kept in the snapshot's history)")
    check.add_argument("--max-runs", type=int, metavar="N", help="start at most N agent runs in all; unfinished cases are INCONCLUSIVE")
    check.add_argument("--max-usd", type=float, help="stop starting agent runs once this many dollars are spent")
    check.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")
    check.add_argument("--json", dest="json_path", help="also write the results as JSON to this file")
    _add_model_options(check)
    for name, text in (("review", "show every pending candidate with its diff against the baseline"),
                       ("list", "list the approved baselines and their latest approval")):
        action = actions.add_parser(name, help=text)
        action.add_argument("spec", help="spec directory or file (snapshots live in __snapshots__ next to it), or a snapshot directory")
        action.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")
    for name, text, verb in (("approve", "make pending candidates the baselines, with a reason", "approve"),
                             ("reject", "discard pending candidates; the baselines stay as they are", "discard")):
        action = actions.add_parser(name, help=text)
        action.add_argument("spec", help="spec directory or file, or a snapshot directory")
        action.add_argument("names", nargs="*", metavar="NAME", help="snapshot names (a unique part is enough)")
        action.add_argument("--all", action="store_true", help=f"{verb} every pending candidate")
        if name == "approve":
            action.add_argument("--reason", help="why the new behaviour is right (required; kept in the snapshot's history)")
        action.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")
    show = actions.add_parser("show", help="print a baseline: its behaviours and its approval history")
    show.add_argument("spec", help="spec directory or file, or a snapshot directory")
    show.add_argument("name", help="snapshot name (a unique part is enough)")
    show.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")


def _add_agent_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", help="MODULE:ATTR of the agent, or `anthropic` for a model through the Messages API (default: `agent:` in the bindings)")
    p.add_argument("--fault", action="append", default=[], metavar="NAME=P", help="turn on a fault knob of the agent with probability P (repeatable)")
    p.add_argument("--bindings", help="bindings file (default: agentprop.yaml next to the spec)")


def _add_model_options(p: argparse.ArgumentParser, *, always: bool = False) -> None:
    """The model agent's options; ``always``: the command only runs a model agent (compile)."""
    model = p.add_argument_group("the model (its prompt is what gets compiled)" if always else "model agent (--agent anthropic)")
    model.add_argument("--model", help="model name, e.g. claude-sonnet-4-6 (required" + ("" if always else " with --agent anthropic") + ")")
    model.add_argument("--prompt", metavar="FILE", help="system prompt file (default: seed_prompt.txt next to the spec)")
    model.add_argument("--tool-descriptions", metavar="FILE", help="YAML of tool name -> description (default: seed_tool_descriptions.yaml next to the spec)")
    model.add_argument("--base-url", metavar="URL", help="Messages API endpoint (default: ANTHROPIC_BASE_URL, else Anthropic's); the key comes from ANTHROPIC_API_KEY")
    model.add_argument("--temperature", type=float, help="sampling temperature (default: the API's)")
    model.add_argument("--max-tokens", type=int, help="most output tokens per model call (default 1024)")
    model.add_argument("--max-steps", type=int, help="most model calls per turn (default 10)")
    model.add_argument("--timeout", type=float, help="seconds for one HTTP attempt (default 120)")
    model.add_argument("--cache", metavar="PATH", help="API cache file (default .agentprop/api-cache.sqlite; `none` for no cache)")
    model.add_argument("--cache-mode", choices=[m.value for m in CacheMode], help="off, read, write, read-write or replay-only (default: replay-only when CI is set, else read-write)")


def _corpus_dir(args: argparse.Namespace) -> Path:
    """``--dir``; else the corpus beside ``--spec``'s bindings; else ./.agentprop/corpus
    (the default corpus of the bindings in the current directory)."""
    if args.dir:
        return Path(args.dir)
    if args.spec:
        return corpus_module.default_corpus_dir(load_project(args.spec, bindings=args.bindings))
    return DEFAULT_CORPUS_DIR


def _entry_line(e: CorpusEntry) -> str:
    rate = f"{e.reproducer_rate:.0%}" if e.reproducer_rate is not None else "?"
    when = f"retired {e.retired}" if e.retired else f"last seen {e.last_seen or e.created}"
    return f"{e.id}  {e.spec_id}  {e.scenario_id}  fails {rate}  seen {e.seen}x, {when}  {e.signature}"


def _corpus(args: argparse.Namespace, out: TextIO, stdin: TextIO | None = None) -> int:
    action = args.corpus_action
    if action is None:
        raise InputError("agentprop corpus needs an action", expected="list, show, rm, prune or clear",
                         fix="e.g. `agentprop corpus list --spec examples/supportops`")
    root = _corpus_dir(args)
    corpus = Corpus(root)
    if action == "list":
        entries = corpus.entries(retired=args.retired)
        if not entries:
            print(f"no {'retired ' if args.retired else ''}entries in {root}" + ("" if args.dir or args.spec else " (give --spec SPEC or --dir DIR for another corpus)"), file=out)
        for e in entries:
            print(_entry_line(e), file=out)
            print(f"    {e.scenario.messages!r}", file=out)
            if e.retired_reason:
                print(f"    {e.retired_reason}", file=out)
        _print_damaged(corpus, out)
        return EXIT_OK
    if action == "show":
        entry = corpus.get(args.id)
        print(pytest_regression(entry) if args.pytest else entry.model_dump_json(indent=2), file=out)
        return EXIT_OK
    if action == "rm":
        chosen = [corpus.get(i) for i in args.ids]  # every id is checked before anything is deleted
        for entry in chosen:
            corpus.remove(entry)
            print(f"removed {entry.id} ({entry.scenario_id}: {entry.signature})", file=out)
        return EXIT_OK
    if action == "prune":
        return _corpus_prune(corpus, args, out)
    entries = corpus.entries() + corpus.entries(retired=True)
    if not entries:
        print(f"no entries in {root}", file=out)
        return EXIT_OK
    if not args.yes:
        stdin = stdin or sys.stdin
        interactive = bool(getattr(stdin, "isatty", lambda: False)()) and not os.environ.get("CI")
        if not interactive:
            raise InputError(f"agentprop corpus clear would delete {len(entries)} entries in {root}",
                             fix="pass --yes to delete them (it never asks when CI is set or input is not a terminal)")
        print(f"delete {len(entries)} entries in {root}? [y/N] ", end="", file=out, flush=True)
        if stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=out)
            return EXIT_OK
    count = corpus.clear()
    print(f"deleted {count} entries in {root}", file=out)
    return EXIT_OK


def _print_damaged(corpus: Corpus, out: TextIO) -> None:
    """The entry files :meth:`Corpus.entries` skipped, each with its problem and fix."""
    for err in corpus.damaged:
        print(f"damaged (skipped): {str(err).splitlines()[0]}", file=out)
        if err.fix:
            print(f"    fix: {err.fix}", file=out)


def _corpus_prune(corpus: Corpus, args: argparse.Namespace, out: TextIO) -> int:
    """Remove entries whose spec or case no longer exists; replay the rest with the agent that
    made them (`agent_ref` and its faults) and retire those that pass (:func:`judge_replay`)."""
    removed = retired = kept = 0
    projects: dict[str, Project | None] = {}
    for entry in corpus.entries():
        spec_path = entry.spec_path or ""
        if spec_path not in projects:
            try:
                projects[spec_path] = load_project(spec_path) if spec_path and Path(spec_path).exists() else None
            except AgentPropError:
                projects[spec_path] = None
        project = projects[spec_path]
        gone = None
        if project is None:
            gone = f"its spec {spec_path or '(not recorded)'} no longer loads"
        elif project.spec.spec_id != entry.spec_id:
            gone = f"{spec_path} is now spec {project.spec.spec_id}, not {entry.spec_id}"
        elif entry.scenario_id.split("/")[0] not in {s.id.split("/")[0] for s in project.scenarios()}:
            gone = f"case {entry.scenario_id} is no longer in {entry.spec_id}"
        if gone is not None:
            corpus.remove(entry)
            removed += 1
            print(f"removed {entry.id}: {gone}", file=out)
            continue
        if args.no_replay:
            kept += 1
            continue
        assert project is not None
        if entry.agent_ref == "anthropic":
            kept += 1
            print(f"kept {entry.id}: not replayed (a model agent; `agentprop run --agent anthropic ...` replays and retires it)", file=out)
            continue
        try:
            agent = load_agent(entry.agent_ref, project.base_dir, entry.agent_faults)
        except AgentPropError as exc:
            kept += 1
            print(f"kept {entry.id}: not replayed, its agent {entry.agent_ref} does not load ({str(exc).splitlines()[0]})", file=out)
            continue
        oracle = OracleSettings.for_spec(project.spec)
        result = run_sync(acheck(project, entry.scenario, agent, settings=oracle, seed=args.seed, name=f"corpus {entry.id}"))
        verdict, message = judge_replay(entry, result, confidence=oracle.confidence)
        if verdict == "retired":
            corpus.retire(entry, message)
            retired += 1
        else:
            kept += 1
        print(message if verdict == "retired" else f"kept {entry.id}: {message}", file=out)
    _print_damaged(corpus, out)
    print(f"pruned {corpus.root}: {removed} removed, {retired} retired, {kept} kept", file=out)
    return EXIT_OK


def _path_findings(project: Project) -> list[LintFinding]:
    """Unrealisable paths as lint findings, each at the spec line of the node it stops at."""
    try:
        src = load_yaml(project.spec_path, error=SpecError)
    except AgentPropError:
        src = None
    index = {n.node_id: i for i, n in enumerate(project.spec.decision_tree)}
    out: list[LintFinding] = []
    for pr in project.path_problems:
        loc = None
        if src is not None and pr.node in index:
            loc = src.location(("decision_tree", index[pr.node]))
        where = " -> ".join(pr.nodes)
        out.append(
            LintFinding(
                code=pr.code,
                severity="info" if pr.code == "P003" else "warning",
                message=f"{pr.label} {pr.path_id}" + (f" ({where})" if where else "") + f": {pr.reason}",
                file=str(loc.path if loc is not None and loc.path else project.spec_path),
                line=loc.line if loc is not None else None,
                column=loc.column if loc is not None else None,
                fix=pr.fix,
            )
        )
    return out


def _lint(args: argparse.Namespace, out: TextIO) -> int:
    findings = lint_spec(args.spec)
    problems: list[str] = []
    warnings: list[str] = []
    try:
        project = load_project(args.spec, bindings=args.bindings)
    except AgentPropError as exc:
        if not any(f.severity == "error" for f in findings):
            raise
        project = None
        print(f"(bindings not checked: {str(exc).splitlines()[0]})", file=out)
    if project is not None and project.bindings.path is not None:
        warnings = project.bindings.warnings
        problems = project.problems
    resolved: list[str] = []
    if project is not None and project.bindings.path is not None:
        mapped = {k.split("<-", 1)[0] for k in project.bindings.outcomes}
        kept = []
        for f in findings:
            leaf = next((w for w in f.message.split() if w in mapped), None) if f.code in ("L003", "L012") else None
            if leaf is not None and f.severity != "error":
                resolved.append(leaf)
            else:
                kept.append(f)
        findings = kept
    for f in findings:
        print(f.render(), file=out)
    if resolved:
        print(f"(decisions of {', '.join(sorted(set(resolved)))} are given by `outcomes:` in {project.bindings.path})", file=out)  # type: ignore[union-attr]
    for w in warnings:
        print(f"{project.bindings.path}: warning B001: {w}", file=out)  # type: ignore[union-attr]
    path_findings = _path_findings(project) if problems else []
    for f in path_findings:
        print(f.render(), file=out)
    downgrades = binding_findings(project.bindings, project.spec) if project is not None and project.bindings.path is not None else []
    for f in downgrades:
        print(f.render(), file=out)
    if project is not None and project.bindings.path is None:
        names = condition_variables(project.spec)
        print(
            f"note: no bindings file (agentprop.yaml) next to the spec; to test it, bind these condition "
            f"variables: {', '.join(names)} (see docs/reference.md#bindings)",
            file=out,
        )
    errors = sum(f.severity == "error" for f in findings)
    warns = sum(f.severity == "warning" for f in findings) + len(warnings) + sum(f.severity == "warning" for f in path_findings)
    infos = sum(f.severity == "info" for f in findings) + sum(f.severity == "info" for f in path_findings) + len(downgrades)
    print(f"{resolve_spec_path(args.spec)}: {errors} error(s), {warns} warning(s), {infos} note(s)", file=out)
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps({"findings": [f.model_dump() for f in findings], "bindings_warnings": warnings, "unrealisable_paths": problems, "bindings_readings": [f.model_dump() for f in downgrades]}, indent=2),
            encoding="utf-8",
        )
    return EXIT_FAIL if errors else EXIT_OK


_MODEL_OPTIONS = ("model", "prompt", "tool_descriptions", "base_url", "temperature", "max_tokens", "max_steps", "timeout", "cache", "cache_mode")


def _anthropic_agent(args: argparse.Namespace, project: Project, out: TextIO) -> AnthropicAgent:
    if args.fault:
        raise InputError("--fault applies to Python agents with fault knobs, not to --agent anthropic", fix="drop --fault")
    if not args.model:
        raise InputError(
            "--agent anthropic needs --model",
            expected="--model MODEL, e.g. --model claude-sonnet-4-6",
            fix="name the model to call with --model",
        )
    seed_prompt, seed_tools = find_seed_artifacts(project.spec_path.parent)
    prompt = Path(args.prompt) if args.prompt else seed_prompt
    tools = Path(args.tool_descriptions) if args.tool_descriptions else seed_tools
    mode = CacheMode.parse(args.cache_mode) if args.cache_mode else default_cache_mode()
    cache: Path | bool = False if (args.cache or "").lower() == "none" else Path(args.cache or DEFAULT_API_CACHE_PATH)
    max_tokens = 1024 if args.max_tokens is None else args.max_tokens
    max_steps = 10 if args.max_steps is None else args.max_steps
    timeout = 120.0 if args.timeout is None else args.timeout
    try:
        agent = AnthropicAgent.from_files(
            args.model,
            prompt,
            tools,
            temperature=args.temperature,
            max_tokens=max_tokens,
            max_steps=max_steps,
            timeout=timeout,
            base_url=args.base_url,
            cache=cache,
            cache_mode=mode,
        )
    except InvalidArgument as exc:
        raise InputError(str(exc), fix="correct the option's value") from None
    agent.check_spec(project.spec)
    agent.preflight()  # a damaged cache or no way to call the model: one error now, not a failure per case
    print(
        f"model {args.model}; prompt {prompt or '(written from the spec)'}; tool descriptions {tools or '(the spec)'}; "
        f"cache {cache if cache is not False else 'off'} ({mode.value if cache is not False else 'off'})",
        file=out,
    )
    return agent


def _load_cli_agent(args: argparse.Namespace, project: Project, out: TextIO) -> tuple[LoadedAgent, AnthropicAgent | None]:
    """The agent named by --agent (or the bindings' `agent:`), and the model agent behind it
    when it is `anthropic` (the caller closes it)."""
    ref = args.agent or project.bindings.agent
    if not ref:
        raise InputError(
            "no agent to run",
            expected="--agent MODULE:ATTR, or `agent: MODULE:ATTR` in the bindings file",
            fix="pass --agent MODULE:ATTR, where MODULE.py sits next to the spec or is importable "
            "(e.g. --agent agent:SupportOpsAgent for examples/supportops/agent.py), or add `agent:` to agentprop.yaml",
        )
    model_agent: AnthropicAgent | None = None
    if ref == "anthropic":
        model_agent = _anthropic_agent(args, project, out)
        agent = model_agent.loaded()
    else:
        given = [f"--{name.replace('_', '-')}" for name in _MODEL_OPTIONS if getattr(args, name) is not None]
        if given:
            raise InputError(f"{', '.join(given)} only apply to --agent anthropic", fix="drop them, or pass --agent anthropic")
        base = project.base_dir if not args.agent else Path.cwd()
        agent = load_agent(ref, base if (base / (ref.split(':')[0].replace('.', '/') + '.py')).is_file() else project.base_dir, parse_faults(args.fault))
    return agent, model_agent


def _run(args: argparse.Namespace, out: TextIO) -> int:
    project = load_project(args.spec, bindings=args.bindings)
    agent, model_agent = _load_cli_agent(args, project, out)
    _check_budget_args(args)
    budget = Budget(max_runs=args.max_runs, max_usd=args.max_usd)
    if model_agent is not None:
        model_agent.budget = budget
    # built once per project: coverage and shrinking read the same list
    scenarios, problems = project.scenarios(), project.problems
    scenarios = _selected_scenarios(project, args.case)
    _require_decisions(project, scenarios)
    if args.runs is not None and args.runs < 1:
        raise InputError(f"--runs {args.runs} must be at least 1", fix="use --runs 1 or more")
    kinds = tuple(k.strip().lower() for k in args.kinds.split(",") if k.strip())
    unknown_kinds = sorted(set(kinds) - set(KINDS))
    if unknown_kinds or not kinds:
        raise InputError(f"unknown case kind(s) {', '.join(unknown_kinds) or '(none given)'}", expected=f"a comma-separated subset of {','.join(KINDS)}", fix="e.g. --kinds mft,inv")
    _check_explore(args)
    settings = RunSettings(kinds=kinds, case_filter=tuple(args.case), mode=args.mode, runs=args.runs, tau=args.tau, max_runs=args.max_runs_per_case, seed=args.seed, concurrency=args.concurrency, explore=args.explore)
    faults = ", ".join(f"{k}={v:g}" for k, v in agent.faults.items())
    print(f"agentprop {__version__}: {project.spec.spec_id} ({project.spec.title}) with agent {agent.ref}" + (f" [faults: {faults}]" if faults else ""), file=out)

    corpus = None if (args.corpus or "").lower() == "none" else Corpus(args.corpus or corpus_module.default_corpus_dir(project))
    if args.shrink_budget < 0:
        raise InputError(f"--shrink-budget {args.shrink_budget} is negative", fix="use 0 to turn shrinking off, or a number of runs")
    memo = TrialMemo()

    async def run_all() -> RunReport:
        try:
            report = await arun_cases(project, agent, scenarios, settings, problems=problems, budget=budget, memo=memo, corpus=corpus)
            if args.shrink_budget > 0:
                # failing cases shrink to minimal reproducers, saved to the corpus
                await asyncio.to_thread(
                    shrink_failures, project, agent, report,
                    budget=args.shrink_budget, corpus=corpus, session_budget=budget, memo=memo, seed=args.seed, stream=sys.stderr,
                )
            return report
        finally:
            if model_agent is not None:
                await model_agent.aclose()

    report = asyncio.run(run_all())
    snapshot = budget.snapshot()
    report.metrics.extra["budget"] = snapshot.model_dump()
    if model_agent is not None:
        report.metrics.extra["model"] = {**model_agent.stats(), "cache": model_agent.cache.stats.as_dict()}
    print(render_table(report, verbose=args.verbose), file=out)
    if model_agent is not None:
        stats = model_agent.stats()
        print(
            f"model calls: {stats['model_calls']} ({stats['cache_hits']} from the cache, {stats['live_calls']} to the API, "
            f"{stats['retries']['retries']} retries); spent ${snapshot.usd:.4f}, saved ${snapshot.usd_saved:.4f} by replays",
            file=out,
        )
    if snapshot.exhausted and snapshot.refused_runs:
        print(f"budget exhausted: {snapshot.exhausted_reason}; {report.metrics.inconclusive} case(s) INCONCLUSIVE", file=out)
    for pr in problems:
        print(f"note: {pr}", file=out)
    for u in unchecked_requirements(project.spec):
        print(f"note: not checked: {u.clause} (agentprop has no check for it; `agentprop lint` shows where)", file=out)
    if args.json_path:
        Path(args.json_path).write_text(report.to_json(), encoding="utf-8")
        print(f"report written to {args.json_path}", file=out)
    if model_agent is not None and model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    if _print_infrastructure(report, out, verbose=args.verbose):
        return EXIT_USAGE
    branches = report.metrics.extra["coverage"]["branches"]
    if not branches["met"] and not args.case:
        print(
            f"branch coverage {branches['enforced']:.0%} is below the spec's min_branch_coverage "
            f"{branches['min_branch_coverage']}: run the cases for {', '.join(branches['not_run']) or 'the missing branches'}",
            file=out,
        )
        return EXIT_FAIL
    # NOT APPLICABLE cases (listed with their reason) neither pass nor fail the run
    return EXIT_OK if report.metrics.passed + report.metrics.not_applicable == report.metrics.cases else EXIT_FAIL


def _print_infrastructure(report: RunReport, out: TextIO, *, verbose: bool = False) -> bool:
    """The cases left undecided by errors that are not the agent's (cache misses in
    replay-only mode, no key, a refused key, an unreachable API, the budget spent inside a
    run), with the first error in full; whether there were any (the run then exits 2)."""
    hit = [c for c in report.cases if c.infrastructure_error]
    if not hit:
        return False
    kinds = sorted({str(c.infrastructure_error["kind"]) for c in hit if c.infrastructure_error})
    print(f"{len(hit)} case(s) not decided for reasons that are not the agent's ({', '.join(kinds)}): "
          "nothing was shrunk or saved for them; fix the cause and run again", file=out)
    first = hit[0].infrastructure_error or {}
    print(f"  {hit[0].id}: " + str(first.get("message", "")).replace("\n", "\n    "), file=out)
    if verbose and first.get("traceback"):
        print("    " + str(first["traceback"]).rstrip().replace("\n", "\n    "), file=out)
    return True


def _check_explore(args: argparse.Namespace) -> None:
    if args.explore < 0:
        raise InputError(f"--explore {args.explore} is negative", fix="use 0 to turn exploration off, or a number of inputs per path")


def _check_budget_args(args: argparse.Namespace) -> None:
    for name in ("max_runs", "max_usd"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise InputError(f"--{name.replace('_', '-')} {value} must be >= 0", fix="use 0 or more")


def _require_cases(project: Project, option: str | None = None) -> None:
    """Refuse a project none of whose paths can be built (an empty suite proves nothing)."""
    if project.scenarios():
        return
    where = project.bindings.path or f"{project.spec_path.parent / 'agentprop.yaml'} (not found)"
    raise InputError(
        f"no case can be built from {project.spec_path}" + (f" (given as {option})" if option else "")
        + f": every path needs condition variables that the bindings ({where}) do not realise",
        expected="an agentprop.yaml next to the spec binding the variables of the `when` expressions",
        fix="write the bindings (docs/reference.md#bindings; examples/*/agentprop.yaml are worked examples); "
        f"`agentprop lint {project.spec_path.parent}` lists the variables",
    )


def _require_decisions(project: Project, scenarios: list[Scenario]) -> None:
    """Every case checks the decision its leaf stands for: a scenario whose last turn expects
    none (a leaf the bindings do not map and whose name implies no single decision) is an
    error, not a case that silently skips the decision check."""
    unmapped = [s for s in scenarios if s.expect_decision is None]
    if not unmapped:
        return
    first = unmapped[0]
    keys = sorted({f"{s.leaf}<-{s.via}" if s.via else s.leaf for s in unmapped})
    _, candidates = implied_decision(first.leaf, project.spec.response_contract.decision_enum)
    raise BindingsError(
        f"{len(unmapped)} case(s) would check no decision: {', '.join(keys)} "
        f"stand(s) for no single decision of decision_enum (e.g. case {first.id})",
        location=project.bindings.outcome_location(first.leaf) if project.bindings.path is not None else SourceLocation(project.spec_path),
        expected="`outcomes:` mapping each of them to a decision: `LEAF: DECISION`, `LEAF: {VIA: DECISION}` or `LEAF<-VIA: DECISION`",
        fix=f"add `{keys[0]}: DECISION` (DECISION one of {', '.join(candidates or project.spec.response_contract.decision_enum)}) under `outcomes:` in "
        + (str(project.bindings.path) if project.bindings.path is not None else "agentprop.yaml next to the spec"),
    )


def _selected_scenarios(project: Project, filters: list[str]) -> list[Scenario]:
    """The project's scenarios whose id contains one of ``filters`` (all when there is none);
    a project with no buildable case at all is an input error."""
    _require_cases(project)
    scenarios = project.scenarios()
    if filters:
        # a filter that is a whole case id selects that case, not the loop and retry cases
        # whose ids extend it (`END_BILLING_ANSWER<-N3_BILLING/N4_CLARIFY#0>N1_INTENT#3`)
        ids = {s.id for s in scenarios}
        scenarios = [s for s in scenarios if any(c == s.id if c in ids else c in s.id for c in filters)]
        if not scenarios:
            raise InputError(f"no case id contains {', '.join(filters)}", fix="run without --case to see the case ids")
    return scenarios


def _snapshot_store(args: argparse.Namespace) -> SnapshotStore:
    """``--dir``; else SPEC is a snapshot directory (pytest keeps them in
    ``__snapshots__/<module>``) or a spec, whose snapshots are in ``__snapshots__`` beside it."""
    if args.dir:
        return SnapshotStore(args.dir)
    given = Path(args.spec)
    if not given.exists():
        raise InputError(f"no such spec or snapshot directory: {given}", fix="give the spec directory (snapshots live in its __snapshots__), or a snapshot directory")
    if given.is_dir() and (given.name == "__snapshots__" or given.parent.name == "__snapshots__"):
        return SnapshotStore(given)
    return SnapshotStore(resolve_spec_path(args.spec).parent / "__snapshots__")


def _snapshot(args: argparse.Namespace, out: TextIO) -> int:
    action = args.snapshot_action
    if action is None:
        raise InputError("agentprop snapshot needs an action", expected="check, review, approve, reject, list or show",
                         fix="e.g. `agentprop snapshot check examples/supportops`")
    if action == "check":
        return _snapshot_check(args, out)
    store = _snapshot_store(args)
    if action == "review":
        pending = store.pending()
        if not pending:
            print(f"no pending snapshots in {store.dir}", file=out)
            return EXIT_OK
        for candidate in pending:
            baseline = store.load(candidate.name)
            print(render_pending(candidate, baseline), file=out)
            print(file=out)
        where = f"{args.spec}" + (f" --dir {args.dir}" if args.dir else "")
        print(f"{len(pending)} pending: approve with `agentprop snapshot approve {where} NAME --reason \"...\"` "
              f"(or --all), discard with `agentprop snapshot reject {where} NAME`", file=out)
        return EXIT_OK
    if action == "list":
        baselines = store.baselines()
        if not baselines:
            print(f"no snapshots in {store.dir}", file=out)
            return EXIT_OK
        for snap in baselines:
            last = snap.approvals[-1] if snap.approvals else None
            approved = f"approved {last.at} by {last.by}: {last.reason}" if last else "never approved"
            print(f"{snap.name}  {len(snap.behaviours)} behaviour(s) in {snap.runs} runs; {approved}", file=out)
        pending = store.pending()
        if pending:
            print(f"{len(pending)} pending candidate(s): `agentprop snapshot review {args.spec}`", file=out)
        return EXIT_OK
    if action == "show":
        snap = store.load(store.resolve(args.name, pending=False))
        assert snap is not None
        print(render_baseline(snap), file=out)
        return EXIT_OK
    names = _pending_names(store, args)
    if action == "approve":
        check_reason(args.reason)
        for name in names:
            approved = store.approve(name, args.reason)
            print(f"approved {name}: {len(approved.behaviours)} behaviour(s) in {approved.runs} runs -> {store.path(name)}", file=out)
        return EXIT_OK
    for name in names:
        store.discard_pending(name)
        print(f"rejected {name}: the baseline is unchanged", file=out)
    return EXIT_OK


def _pending_names(store: SnapshotStore, args: argparse.Namespace) -> list[str]:
    if args.all:
        if args.names:
            raise InputError("give snapshot names or --all, not both", fix="drop the names, or drop --all")
        names = [c.name for c in store.pending()]
        if not names:
            raise InputError(f"no pending snapshots in {store.dir}", fix="`agentprop snapshot check SPEC` writes candidates for changed snapshots")
        return names
    if not args.names:
        raise InputError(f"agentprop snapshot {args.snapshot_action} needs snapshot names or --all",
                         fix=f"`agentprop snapshot review {args.spec}` lists the pending candidates")
    return [store.resolve(n, pending=True) for n in args.names]


def _snapshot_check(args: argparse.Namespace, out: TextIO) -> int:
    project = load_project(args.spec, bindings=args.bindings)
    if args.runs < 1:
        raise InputError(f"--runs {args.runs} must be at least 1", fix="use --runs 10 (the default) or more")
    if not 0.0 < args.alpha < 1.0:
        raise InputError(f"--alpha {args.alpha} must be between 0 and 1", fix="use --alpha 0.05 (the default)")
    if args.update:
        check_reason(args.reason)
    elif args.reason:
        raise InputError("--reason only applies with --update", fix="add --update to approve changes, or drop --reason")
    _check_budget_args(args)
    agent, model_agent = _load_cli_agent(args, project, out)
    budget = Budget(max_runs=args.max_runs, max_usd=args.max_usd)
    if model_agent is not None:
        model_agent.budget = budget
    scenarios = _selected_scenarios(project, args.case)
    store = SnapshotStore(args.dir) if args.dir else SnapshotStore(default_snapshot_dir(project))
    print(f"agentprop {__version__}: snapshots of {project.spec.spec_id} with agent {agent.ref}, "
          f"{args.runs} runs per case, alpha {args.alpha}, in {store.dir}", file=out)

    async def check_all() -> list[SnapshotResult]:
        results = []
        try:
            for sc in scenarios:
                result = await acheck_snapshot(
                    project, sc, agent, store=store, runs=args.runs, alpha=args.alpha, update=args.update,
                    reason=args.reason, ignore=args.ignore, budget=budget, seed=args.seed,
                )
                results.append(result)
                if result.verdict in ("MATCH", "UPDATED") and not result.changes:
                    p = f"p={result.p_value:.3f}" if result.p_value is not None else "first baseline"
                    print(f"  {result.verdict:<12} {sc.id}  ({p}; {len(result.current)} behaviour(s))", file=out)
                else:
                    print("  " + result.summary().replace("\n", "\n  "), file=out)
                out.flush()
        finally:
            if model_agent is not None:
                await model_agent.aclose()
        return results

    results = asyncio.run(check_all())
    tally = {v: sum(r.verdict == v for r in results) for v in ("MATCH", "CHANGED", "NEW", "UPDATED", "INCONCLUSIVE")}
    print(f"{len(results)} snapshots: " + ", ".join(f"{n} {v.lower()}" for v, n in tally.items() if n), file=out)
    if tally["CHANGED"] or tally["NEW"]:
        where = f"{args.spec}" + (f" --dir {args.dir}" if args.dir else "")
        print(f"review the candidates with `agentprop snapshot review {where}`; approve what is right with "
              f"`agentprop snapshot approve {where} NAME --reason \"...\"`", file=out)
    if args.json_path:
        payload = {"schema": "agentprop.snapshot-check/1", "spec_id": project.spec.spec_id, "agent": agent.ref,
                   "runs": args.runs, "alpha": args.alpha, "results": [r.model_dump(mode="json") for r in results]}
        Path(args.json_path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.json_path}", file=out)
    if any(r.infrastructure_error for r in results):
        return EXIT_USAGE  # not the agent's: see the note of each INCONCLUSIVE snapshot
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAIL


def _print_split(report: RunReport, split: dict[str, str], out: TextIO) -> None:
    """The suite per kind, visible and hidden, then every case that did not pass."""
    print("suite:", file=out)
    for kind in sorted({c.kind for c in report.cases}):
        group = [c for c in report.cases if c.kind == kind]
        vis = [c for c in group if split.get(c.id) == "visible"]
        hid = [c for c in group if split.get(c.id) == "hidden"]
        print(f"  {kind:<10} {len(vis):>3} visible ({sum(c.verdict == 'PASS' for c in vis)} pass), "
              f"{len(hid):>3} hidden ({sum(c.verdict == 'PASS' for c in hid)} pass)", file=out)
    for c in report.cases:
        if c.verdict != "PASS":
            first = c.failures[0].explanation if c.failures else (c.reason or "")
            print(f"  {c.verdict:<12} [{split.get(c.id, '?')}] {c.id}  {first[:120]}", file=out)
    out.flush()


def _tdad(args: argparse.Namespace, out: TextIO) -> int:
    project = load_project(args.spec, bindings=args.bindings)
    if not 0.0 <= args.visible_fraction <= 1.0:
        raise InputError(f"--visible-fraction {args.visible_fraction} must be between 0 and 1", fix="use e.g. --visible-fraction 0.5")
    if args.probe_runs < 1:
        raise InputError(f"--probe-runs {args.probe_runs} must be at least 1", fix="use --probe-runs 3 (the default)")
    if args.control_runs is not None and args.control_runs < min_control_runs(args.probe_runs):
        raise InputError(f"--control-runs {args.control_runs} is too few: with --probe-runs {args.probe_runs} no mutant could be told from the clean agent",
                         fix=f"use --control-runs {min_control_runs(args.probe_runs)} or more, or leave it out (default {default_control_runs(args.probe_runs)})")
    kinds = tuple(k.strip().lower() for k in args.kinds.split(",") if k.strip())
    unknown_kinds = sorted(set(kinds) - set(KINDS))
    if unknown_kinds or "mft" not in kinds:
        raise InputError(f"bad --kinds {args.kinds!r}", expected=f"a comma-separated subset of {','.join(KINDS)} that includes mft",
                         fix="e.g. --kinds mft,boundary")
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
        _require_cases(base, "--base")
    agent, model_agent = _load_cli_agent(args, project, out)
    if pack is not None:  # before any run: a typo should not cost a suite
        check_mutation_bindings(project, pack, agent if model_agent is None else None)
    budget = Budget(max_runs=args.max_runs, max_usd=args.max_usd)
    if model_agent is not None:
        model_agent.budget = budget
    scenarios = _selected_scenarios(project, args.case)
    _require_decisions(project, scenarios)
    if args.runs is not None and args.runs < 1:
        raise InputError(f"--runs {args.runs} must be at least 1", fix="use --runs 1 or more, or leave it out for the sequential test")
    _check_budget_args(args)
    _check_explore(args)
    settings = RunSettings(kinds=kinds, seed=args.seed, concurrency=args.concurrency, case_filter=tuple(args.case), runs=args.runs, explore=args.explore)
    oracle = OracleSettings.for_spec(project.spec, mode="fixed" if args.runs else None, runs=args.runs)
    print(f"agentprop {__version__}: TDAD evaluation of {project.spec.spec_id} with agent {agent.ref}", file=out)

    async def evaluate() -> tuple[RunReport, TdadMetrics, MutationReport | None, SursResult | None]:
        try:
            report = await arun_cases(project, agent, scenarios, settings, problems=project.problems, budget=budget, memo=TrialMemo())
            split = split_suite(report.cases, visible_fraction=args.visible_fraction, seed=args.split_seed)
            _print_split(report, split, out)
            mutation = None
            if pack is not None:
                order = {"MFT": 0, "BOUNDARY": 1, "DIR": 2, "INV": 3}
                shown = sorted((c for c in report.cases if split.get(c.id) == "visible" and c.id in report._replays),
                               key=lambda c: order.get(c.kind, 9))
                visible = [KillerCase(c.id, report._replays[c.id], clean_verdict=c.verdict) for c in shown]
                mutants = fault_mutants(project, pack, agent, fault_knob_maker(agent)) if model_agent is None else []
                generate = prompt_mutant_factory(model_agent, project, pack) if model_agent is not None else None
                can_kill = sum(c.verdict == "PASS" for c in shown)
                print(f"mutation testing with {pack.mutation_pack_id}: {len(pack.mutations)} intents, "
                      f"{can_kill} visible cases the clean agent passes to kill them"
                      + (f" ({len(shown) - can_kill} it does not pass cannot kill)" if can_kill < len(shown) else "")
                      + f"; each probe also runs on the clean agent", file=out)
                mutation = await amutation_test(
                    project, pack, agent, visible, mutants=mutants, generate=generate, settings=oracle, probe_runs=args.probe_runs,
                    control_runs=args.control_runs, budget=budget, seed=args.seed,
                    on_result=lambda r: print("  " + r.line(), file=out, flush=True),
                )
            regression = None
            if base is not None:
                print(f"spec evolution: the invariants of {base.spec.spec_id} on this agent", file=out, flush=True)
                regression = await asurs(base, project, agent, settings=OracleSettings.for_spec(base.spec, mode="fixed" if args.runs else None, runs=args.runs),
                                         budget=budget, seed=args.seed)
            metrics = tdad_metrics(report.cases, split, mutation, visible_fraction=args.visible_fraction,
                                   seed=args.split_seed, surs=regression)
            report.metrics.extra["tdad"] = metrics.model_dump(mode="json")
            if mutation is not None:
                report.metrics.extra["tdad"]["mutation"] = mutation.model_dump(mode="json")
            if regression is not None:
                report.metrics.extra["tdad"]["surs_detail"] = regression.model_dump(mode="json")
            return report, metrics, mutation, regression
        finally:
            if model_agent is not None:
                await model_agent.aclose()

    report, metrics, mutation, regression = asyncio.run(evaluate())
    if mutation is not None:
        for line in mutation.skipped_lines() + mutation.clean_not_passing_lines():
            print("  " + line, file=out)
    if regression is not None:
        for line in regression.summary().splitlines()[1:]:
            print(line, file=out)
    print(metrics.summary(), file=out)
    if args.json_path:
        Path(args.json_path).write_text(report.to_json(), encoding="utf-8")
        print(f"report written to {args.json_path}", file=out)
    if model_agent is not None and model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    survived = mutation is not None and any(m.status == "survived" for m in mutation.mutants)
    regressed = regression is not None and regression.passed < regression.invariants
    all_pass = metrics.visible_passed == metrics.visible and metrics.hidden_passed == metrics.hidden
    return EXIT_OK if all_pass and not survived and not regressed else EXIT_FAIL


def _compile(args: argparse.Namespace, out: TextIO) -> int:
    project = load_project(args.spec, bindings=args.bindings)
    if not args.model:
        raise InputError("agentprop compile needs --model", expected="--model MODEL, e.g. --model claude-sonnet-4-6",
                         fix="name the model whose prompt to compile (PromptSmith uses the same model)")
    for name in ("max_iterations", "max_inner"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} {getattr(args, name)} must be at least 1", fix="use 1 or more")
    if args.runs is not None and args.runs < 1:
        raise InputError(f"--runs {args.runs} must be at least 1", fix="use --runs 1 or more, or leave it out for the sequential test")
    scenarios = _selected_scenarios(project, args.case)
    _check_budget_args(args)
    _, model_agent = _load_cli_agent(args, project, out)
    assert model_agent is not None
    budget = Budget(max_runs=args.max_runs, max_usd=args.max_usd)
    model_agent.budget = budget
    settings = OracleSettings.for_spec(project.spec, mode="fixed" if args.runs else None, runs=args.runs)
    print(f"agentprop {__version__}: compiling {project.spec.spec_id} for {model_agent.model} against "
          f"{len(scenarios)} visible (MFT) cases -> {args.out}", file=out)

    async def go() -> CompileResult:
        try:
            return await acompile_prompt(
                project, model_agent, scenarios, max_outer=args.max_iterations, max_inner=args.max_inner,
                inner_threshold=args.inner_threshold, settings=settings, budget=budget, seed=args.seed, out_dir=args.out,
                temperature=args.promptsmith_temperature,
                on_iteration=lambda it: print(f"  {it.loop:<5} {it.index:>2}: {it.passed}/{it.cases_run} pass"
                                              + (f" ({len(it.groups)} root cause(s): {', '.join(g.clause for g in it.groups[:3])})" if it.groups else ""),
                                              file=out, flush=True),
            )
        finally:
            await model_agent.aclose()

    result = asyncio.run(go())
    print(result.footer(), file=out)
    if result.compiled:
        print(f"next: agentprop tdad {args.spec} --agent anthropic --model {model_agent.model} --prompt {args.out}/prompt.txt "
              f"--tool-descriptions {args.out}/tool_descriptions.yaml  (hidden cases and mutation score)", file=out)
    if args.json_path:
        Path(args.json_path).write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    return EXIT_OK if result.compiled else EXIT_FAIL


def main(argv: list[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    if args.command is None:
        parser.print_help(out)
        return EXIT_USAGE
    try:
        if args.command == "lint":
            return _lint(args, out)
        if args.command == "corpus":
            return _corpus(args, out)
        if args.command == "snapshot":
            return _snapshot(args, out)
        if args.command == "tdad":
            return _tdad(args, out)
        if args.command == "compile":
            return _compile(args, out)
        return _run(args, out)
    except AgentPropError as exc:
        print(f"agentprop: error: {scrub_text(str(exc))}", file=err)
        return EXIT_USAGE
    except BrokenPipeError:  # `agentprop run ... | head`
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
