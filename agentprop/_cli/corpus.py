"""``agentprop corpus``: list, show, remove and prune the shrunk reproducers
``agentprop run`` keeps."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import EXIT_OK, cli_corpus
from agentprop._cli.options import BINDINGS_HELP, MODEL_AGENTS
from agentprop.errors import AgentPropError, InputError

if TYPE_CHECKING:
    from agentprop._agents.project import Project
    from agentprop._decide.corpus import Corpus, CorpusEntry


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    corpus = sub.add_parser(
        "corpus", help="list, show, remove and prune the shrunk reproducers kept by agentprop run"
    )
    corpus.set_defaults(handler=command)
    actions = corpus.add_subparsers(dest="corpus_action", metavar="ACTION")

    def where(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--spec",
            help="spec directory or file: its corpus is .agentprop/corpus beside its bindings "
            "(the default location)",
        )
        p.add_argument("--bindings", help=BINDINGS_HELP)
        p.add_argument(
            "--dir", help="corpus directory (overrides --spec; default ./.agentprop/corpus)"
        )
        p.add_argument(
            "--store",
            metavar="URL",
            help="a shared store, redis://host:port/db: the corpus kept there, over the directory "
            "read-only (default $AGENTPROP_STORE)",
        )

    lst = actions.add_parser(
        "list", help="one line per entry: id, spec, case, failure rate, last seen, signature"
    )
    lst.add_argument("--retired", action="store_true", help="list the retired entries instead")
    where(lst)
    show = actions.add_parser(
        "show", help="print one entry (JSON), or with --pytest as a ready regression test"
    )
    show.add_argument("id", help="entry id (a unique prefix is enough)")
    show.add_argument(
        "--pytest",
        action="store_true",
        help="print the entry as a self-contained pytest regression test",
    )
    show.add_argument(
        "--out",
        metavar="FILE",
        help="with --pytest: write the test to FILE, finding the spec relative to FILE (else it "
        "is printed with the spec's absolute path)",
    )
    where(show)
    rm = actions.add_parser("rm", help="delete entries")
    rm.add_argument("ids", nargs="+", metavar="ID", help="entry ids (unique prefixes are enough)")
    where(rm)
    prune = actions.add_parser(
        "prune", help="remove entries whose spec or case is gone, and retire those that now pass"
    )
    prune.add_argument(
        "--no-replay",
        action="store_true",
        help="only remove entries whose spec or case is gone; run no agent",
    )
    prune.add_argument(
        "--seed", type=int, default=0, help="trial namespace of the replays (default 0)"
    )
    prune.add_argument(
        "--yes",
        action="store_true",
        help="also remove entries whose spec is not found or does not load, without asking (it "
        "never asks when CI is set)",
    )
    where(prune)
    clear = actions.add_parser("clear", help="delete every entry, retired ones included")
    clear.add_argument(
        "--yes",
        action="store_true",
        help="do it without asking (required when not on a terminal or when CI is set)",
    )
    where(clear)


def _corpus_dir(args: argparse.Namespace) -> Path:
    """``--dir``; else the corpus beside ``--spec``'s bindings; else ./.agentprop/corpus
    (the default corpus of the bindings in the current directory)."""
    from agentprop._agents.project import load_project
    from agentprop._decide import corpus as corpus_module
    from agentprop._decide.corpus import DEFAULT_DIR as DEFAULT_CORPUS_DIR

    if args.dir:
        return Path(args.dir)
    if args.spec:
        return corpus_module.default_corpus_dir(load_project(args.spec, bindings=args.bindings))
    return DEFAULT_CORPUS_DIR


def _entry_line(e: CorpusEntry) -> str:
    rate = f"{e.reproducer_rate:.0%}" if e.reproducer_rate is not None else "?"
    when = f"retired {e.retired}" if e.retired else f"last seen {e.last_seen or e.created}"
    return (
        f"{e.id}  {e.spec_id}  {e.scenario_id}  fails {rate}  seen {e.seen}x, {when}  {e.signature}"
    )


def command(args: argparse.Namespace, out: TextIO, stdin: TextIO | None = None) -> int:
    from agentprop._decide.corpus import PLAIN_SPEC_ID, pytest_regression

    action = args.corpus_action
    if action is None:
        raise InputError(
            "agentprop corpus needs an action",
            expected="list, show, rm, prune or clear",
            fix="e.g. `agentprop corpus list --spec examples/supportops`",
        )
    root = _corpus_dir(args)
    corpus = cli_corpus(args, root)
    if action == "list":
        entries = corpus.entries(retired=args.retired)
        if not entries:
            print(
                f"no {'retired ' if args.retired else ''}entries in {corpus.describe()}"
                + (
                    ""
                    if args.dir or args.spec
                    else " (give --spec SPEC or --dir DIR for another corpus)"
                ),
                file=out,
            )
        for e in entries:
            print(_entry_line(e), file=out)
            print(f"    {e.scenario.messages!r}", file=out)
            if e.retired_reason:
                print(f"    {e.retired_reason}", file=out)
        _print_damaged(corpus, out)
        return EXIT_OK
    if action == "show":
        entry = corpus.get(args.id)
        if args.out and not args.pytest:
            raise InputError(
                "agentprop corpus show --out needs --pytest",
                fix=f"`agentprop corpus show {entry.id} --pytest --out {args.out}`",
            )
        if not args.pytest:
            print(entry.model_dump_json(indent=2), file=out)
            return EXIT_OK
        if entry.spec_id == PLAIN_SPEC_ID:
            raise InputError(
                f"corpus entry {entry.id} is a spec-free check's ({entry.scenario_id}): there is "
                "no spec to write a regression test against",
                fix="the check that found it replays it first on every run; `agentprop corpus "
                f"show {entry.id}` prints its messages",
            )
        code = pytest_regression(entry, spec_path=corpus.spec_location(entry), test_file=args.out)
        if args.out:
            from agentprop._util.files import write_atomic

            write_atomic(Path(args.out), code)
            print(f"wrote {args.out}: the regression test of corpus entry {entry.id}", file=out)
        else:
            print(code, file=out)
        return EXIT_OK
    if action == "rm":
        chosen = [corpus.get(i) for i in args.ids]  # every id is checked before anything is deleted
        for entry in chosen:
            corpus.remove(entry)
            print(f"removed {entry.id} ({entry.scenario_id}: {entry.signature})", file=out)
        return EXIT_OK
    if action == "prune":
        return _corpus_prune(corpus, args, out, stdin or sys.stdin)
    entries = corpus.entries() + corpus.entries(retired=True)
    if not entries:
        print(f"no entries in {root}", file=out)
        return EXIT_OK
    if not args.yes:
        stdin = stdin or sys.stdin
        interactive = bool(getattr(stdin, "isatty", lambda: False)()) and not os.environ.get("CI")
        if not interactive:
            raise InputError(
                f"agentprop corpus clear would delete {len(entries)} entries in {root}",
                fix="pass --yes to delete them (it never asks when CI is set or "
                "input is not a terminal)",
            )
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


def _interactive(stdin: TextIO) -> bool:
    return bool(getattr(stdin, "isatty", lambda: False)()) and not os.environ.get("CI")


def _corpus_prune(corpus: Corpus, args: argparse.Namespace, out: TextIO, stdin: TextIO) -> int:
    """Remove entries whose case no longer exists in their spec; replay the rest with the agent
    that made them (`agent_ref` and its faults) and retire those that pass (:func:`judge_replay`).

    An entry whose spec is not found or does not load may be a path problem (a moved project,
    a legacy entry written from another directory, a spec being edited), not a deleted spec:
    those are removed only with ``--yes`` or when someone at a terminal says yes; otherwise
    they are kept and listed."""
    from agentprop._agents.loading import load_agent
    from agentprop._agents.project import load_project
    from agentprop._decide.check import decide_scenario
    from agentprop._decide.corpus import PLAIN_SPEC_ID, judge_replay
    from agentprop._decide.oracle import OracleSettings
    from agentprop._util.aio import run_sync

    removed = retired = kept = 0
    projects: dict[str, Project | str] = {}
    unsure: list[tuple[CorpusEntry, str]] = []
    for entry in corpus.entries():
        # no spec to prune against: its own check replays and retires it
        if entry.spec_id == PLAIN_SPEC_ID:
            kept += 1
            print(
                f"kept {entry.id}: a spec-free check's entry ({entry.scenario_id}); the check "
                "replays it first and retires it",
                file=out,
            )
            continue
        where = corpus.spec_location(entry)
        spec_path = str(where) if where is not None else ""
        if spec_path not in projects:
            if where is None:
                projects[spec_path] = "no spec path is recorded"
            elif not where.exists():
                projects[spec_path] = f"its spec {where} is not found"
            else:
                try:
                    projects[spec_path] = load_project(where)
                except AgentPropError as exc:
                    projects[spec_path] = (
                        f"its spec {where} does not load ({str(exc).splitlines()[0]})"
                    )
        project = projects[spec_path]
        gone = None
        if isinstance(project, str):
            unsure.append((entry, project))
            continue
        if project.spec.spec_id != entry.spec_id:
            gone = f"{spec_path} is now spec {project.spec.spec_id}, not {entry.spec_id}"
        elif entry.scenario_id.split("/")[0] not in {
            s.id.split("/")[0] for s in project.scenarios()
        }:
            gone = f"case {entry.scenario_id} is no longer in {entry.spec_id}"
        if gone is not None:
            corpus.remove(entry)
            removed += 1
            print(f"removed {entry.id}: {gone}", file=out)
            continue
        if args.no_replay:
            kept += 1
            continue
        kind = entry.agent_ref.split(":", 1)[0]
        if kind in MODEL_AGENTS:
            kept += 1
            print(
                f"kept {entry.id}: not replayed (a model agent; `agentprop run --agent {kind} "
                "...` replays and retires it)",
                file=out,
            )
            continue
        try:
            agent = load_agent(entry.agent_ref, project.base_dir, entry.agent_faults)
        except AgentPropError as exc:
            kept += 1
            print(
                f"kept {entry.id}: not replayed, its agent {entry.agent_ref} does not load "
                f"({str(exc).splitlines()[0]})",
                file=out,
            )
            continue
        oracle = OracleSettings.for_spec(project.spec)
        result = run_sync(
            decide_scenario(
                project,
                entry.scenario,
                agent,
                settings=oracle,
                seed=args.seed,
                name=f"corpus {entry.id}",
            )
        )
        verdict, message = judge_replay(entry, result, confidence=oracle.confidence)
        if verdict == "retired":
            corpus.retire(entry, message)
            retired += 1
        else:
            kept += 1
        print(message if verdict == "retired" else f"kept {entry.id}: {message}", file=out)
    if unsure:
        for entry, why in unsure:
            print(f"{entry.id}: {why}", file=out)
        remove = args.yes
        if not remove and _interactive(stdin):
            print(
                f"remove these {len(unsure)} entries (if the spec moved, answer no)? [y/N] ",
                end="",
                file=out,
                flush=True,
            )
            remove = stdin.readline().strip().lower() in ("y", "yes")
        for entry, why in unsure:
            if remove:
                corpus.remove(entry)
                removed += 1
                print(f"removed {entry.id}: {why}", file=out)
            else:
                kept += 1
        if not remove:
            print(
                f"kept {len(unsure)} entries whose spec was not found or did not load: a wrong "
                "directory or a moved project is not a deleted spec; fix the path (run from the "
                "project, or --spec), or pass --yes to remove them",
                file=out,
            )
    _print_damaged(corpus, out)
    print(
        f"pruned {corpus.describe()}: {removed} removed, {retired} retired, {kept} kept", file=out
    )
    return EXIT_OK
