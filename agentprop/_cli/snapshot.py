"""``agentprop snapshot``: check, review, approve, reject, list and show behaviour snapshots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_USAGE,
    check_budget_args,
    check_report_outputs,
    cli_budget,
    load_cli_agent,
    selected_scenarios,
    write_report_outputs,
)
from agentprop._cli.options import (
    SPEC_HELP,
    agent_parent,
    budget_parent,
    model_parent,
    report_outputs_parent,
    selection_parent,
)
from agentprop._util import aio
from agentprop._version import __version__
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._decide.snapshot import SnapshotResult, SnapshotStore


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    snap = sub.add_parser(
        "snapshot",
        help="check, review and approve behaviour snapshots (approved baselines of "
        "what the agent does)",
    )
    snap.set_defaults(handler=command)
    actions = snap.add_subparsers(dest="snapshot_action", metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="run every case and compare its behaviour with the approved baseline",
        parents=[
            agent_parent(),
            selection_parent(seed_help="trial namespace (default 0)"),
            budget_parent(unfinished="unfinished cases are INCONCLUSIVE"),
            model_parent(),
            report_outputs_parent(junit=False, markdown=False),
        ],
    )
    check.add_argument("spec", help=SPEC_HELP)
    check.add_argument("--runs", type=int, default=10, help="runs per case (default 10)")
    check.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance of the two-sample test that calls a behaviour changed (default 0.05)",
    )
    check.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out response fields or tool arguments: response.FIELD, tools.TOOL.ARG, globs "
        "allowed (repeatable)",
    )
    check.add_argument(
        "--update",
        action="store_true",
        help="approve every NEW or CHANGED snapshot instead of failing (needs --reason; "
        "refused when CI is set)",
    )
    check.add_argument(
        "--reason",
        help="why the new behaviour is right (required with --update; kept in "
        "the snapshot's history)",
    )
    check.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")
    check.add_argument(
        "--json", dest="json_path", help="also write the results as JSON to this file"
    )
    for name, text in (
        ("review", "show every pending candidate with its diff against the baseline"),
        ("list", "list the approved baselines and their latest approval"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "spec",
            help="spec directory or file (snapshots live in __snapshots__ next to it), or "
            "a snapshot directory",
        )
        action.add_argument(
            "--dir", help="snapshot directory (default: __snapshots__ next to the spec)"
        )
    for name, text, verb in (
        ("approve", "make pending candidates the baselines, with a reason", "approve"),
        ("reject", "discard pending candidates; the baselines stay as they are", "discard"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("spec", help="spec directory or file, or a snapshot directory")
        action.add_argument(
            "names", nargs="*", metavar="NAME", help="snapshot names (a unique part is enough)"
        )
        action.add_argument("--all", action="store_true", help=f"{verb} every pending candidate")
        if name == "approve":
            action.add_argument(
                "--reason",
                help="why the new behaviour is right (required; kept in the snapshot's history)",
            )
        action.add_argument(
            "--dir", help="snapshot directory (default: __snapshots__ next to the spec)"
        )
    show = actions.add_parser(
        "show", help="print a baseline: its behaviours and its approval history"
    )
    show.add_argument("spec", help="spec directory or file, or a snapshot directory")
    show.add_argument("name", help="snapshot name (a unique part is enough)")
    show.add_argument("--dir", help="snapshot directory (default: __snapshots__ next to the spec)")


def _snapshot_store(args: argparse.Namespace) -> SnapshotStore:
    """``--dir``; else SPEC is a snapshot directory (pytest keeps them in
    ``__snapshots__/<module>``) or a spec, whose snapshots are in ``__snapshots__`` beside it."""
    from agentprop._decide.snapshot import SnapshotStore
    from agentprop._spec.load import resolve_spec_path

    if args.dir:
        return SnapshotStore(args.dir)
    given = Path(args.spec)
    if not given.exists():
        raise InputError(
            f"no such spec or snapshot directory: {given}",
            fix="give the spec directory (snapshots live in its __snapshots__), or "
            "a snapshot directory",
        )
    if given.is_dir() and (given.name == "__snapshots__" or given.parent.name == "__snapshots__"):
        return SnapshotStore(given)
    return SnapshotStore(resolve_spec_path(args.spec).parent / "__snapshots__")


def _pending_stores(args: argparse.Namespace, primary: SnapshotStore) -> list[SnapshotStore]:
    """``primary`` and every folder below the path given that holds pending candidates (the
    pytest fixture keeps its snapshots in ``__snapshots__/<test module>``); with ``--dir``,
    that directory alone. Hidden folders (``.agentprop``, ``.git``) are not searched."""
    from agentprop._decide.snapshot import SnapshotStore

    if args.dir:
        return [primary]
    given = Path(args.spec)
    root = given if given.is_dir() else given.parent
    found = sorted(
        {
            p.parent
            for p in root.rglob("*.pending.json")
            if not any(part.startswith(".") for part in p.relative_to(root).parts[:-1])
        }
    )
    seen = {primary.dir.resolve()}
    stores = [primary]
    for folder in found:
        if folder.resolve() not in seen:
            seen.add(folder.resolve())
            stores.append(SnapshotStore(folder))
    return stores


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._decide.snapshot import check_reason, render_baseline, render_pending

    action = args.snapshot_action
    if action is None:
        raise InputError(
            "agentprop snapshot needs an action",
            expected="check, review, approve, reject, list or show",
            fix="e.g. `agentprop snapshot check examples/supportops`",
        )
    if action == "check":
        return _snapshot_check(args, out)
    store = _snapshot_store(args)
    stores = _pending_stores(args, store)
    if action == "review":
        pending = [(s, c) for s in stores for c in s.pending()]
        if not pending:
            print(
                f"no pending snapshots in {store.dir}"
                + (" or below " + args.spec if len(stores) == 1 and not args.dir else ""),
                file=out,
            )
            return EXIT_OK
        for holder, candidate in pending:
            baseline = holder.load(candidate.name)
            if holder is not store:
                print(f"in {holder.dir}:", file=out)
            print(render_pending(candidate, baseline), file=out)
            print(file=out)
        where = f"{args.spec}" + (f" --dir {args.dir}" if args.dir else "")
        print(
            f"{len(pending)} pending: approve with `agentprop snapshot approve {where} "
            'NAME --reason "..."` '
            f"(or --all), discard with `agentprop snapshot reject {where} NAME`",
            file=out,
        )
        return EXIT_OK
    if action == "list":
        baselines = store.baselines()
        if not baselines:
            print(f"no snapshots in {store.dir}", file=out)
        for snap in baselines:
            last = snap.approvals[-1] if snap.approvals else None
            approval = (
                f"approved {last.at} by {last.by}: {last.reason}" if last else "never approved"
            )
            print(
                f"{snap.name}  {len(snap.behaviours)} behaviour(s) in {snap.runs} runs; {approval}",
                file=out,
            )
        waiting = [c for s in stores for c in s.pending()]
        if waiting:
            print(
                f"{len(waiting)} pending candidate(s): `agentprop snapshot review {args.spec}`",
                file=out,
            )
        return EXIT_OK
    if action == "show":
        shown = store.load(store.resolve(args.name, pending=False))
        assert shown is not None
        print(render_baseline(shown), file=out)
        return EXIT_OK
    names = _pending_names(stores, args)
    if action == "approve":
        check_reason(args.reason)
        for holder, name in names:
            approved = holder.approve(name, args.reason)
            print(
                f"approved {name}: {len(approved.behaviours)} behaviour(s) in {approved.runs} "
                f"runs -> {holder.path(name)}",
                file=out,
            )
        return EXIT_OK
    for holder, name in names:
        holder.discard_pending(name)
        print(f"rejected {name}: the baseline is unchanged", file=out)
    return EXIT_OK


def _pending_names(
    stores: list[SnapshotStore], args: argparse.Namespace
) -> list[tuple[SnapshotStore, str]]:
    """The pending candidates named (or ``--all``), each with the store that holds it."""
    store = stores[0]
    if args.all:
        if args.names:
            raise InputError(
                "give snapshot names or --all, not both", fix="drop the names, or drop --all"
            )
        names = [(s, c.name) for s in stores for c in s.pending()]
        if not names:
            raise InputError(
                f"no pending snapshots in {store.dir}",
                fix="`agentprop snapshot check SPEC` writes candidates for changed snapshots",
            )
        return names
    if not args.names:
        raise InputError(
            f"agentprop snapshot {args.snapshot_action} needs snapshot names or --all",
            fix=f"`agentprop snapshot review {args.spec}` lists the pending candidates",
        )
    out: list[tuple[SnapshotStore, str]] = []
    for n in args.names:
        holders = [s for s in stores if s.pending()] or [store]
        errors: list[InputError] = []
        for holder in holders:
            try:
                out.append((holder, holder.resolve(n, pending=True)))
                break
            except InputError as exc:
                errors.append(exc)
        else:
            raise errors[0]
    return out


def _snapshot_check(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._decide.snapshot import (
        SnapshotStore,
        acheck_snapshot,
        check_reason,
        default_snapshot_dir,
    )
    from agentprop._pipeline.report.model import SnapshotCheckReport

    check_report_outputs(args)
    project = load_project(args.spec, bindings=args.bindings)
    if args.runs < 1:
        raise InputError(
            f"--runs {args.runs} must be at least 1", fix="use --runs 10 (the default) or more"
        )
    if not 0.0 < args.alpha < 1.0:
        raise InputError(
            f"--alpha {args.alpha} must be between 0 and 1", fix="use --alpha 0.05 (the default)"
        )
    if args.update:
        check_reason(args.reason)
    elif args.reason:
        raise InputError(
            "--reason only applies with --update",
            fix="add --update to approve changes, or drop --reason",
        )
    check_budget_args(args)
    agent, model_agent = load_cli_agent(args, project, out)
    budget = cli_budget(args, model_agent)
    scenarios = selected_scenarios(project, args.case)
    store = SnapshotStore(args.dir) if args.dir else SnapshotStore(default_snapshot_dir(project))
    print(
        f"agentprop {__version__}: snapshots of {project.spec.spec_id} with agent {agent.ref}, "
        f"{args.runs} runs per case, alpha {args.alpha}, in {store.dir}",
        file=out,
    )

    async def check_all() -> list[SnapshotResult]:
        results = []
        try:
            for sc in scenarios:
                result = await acheck_snapshot(
                    project,
                    sc,
                    agent,
                    store=store,
                    runs=args.runs,
                    alpha=args.alpha,
                    update=args.update,
                    reason=args.reason,
                    ignore=args.ignore,
                    budget=budget,
                    seed=args.seed,
                )
                results.append(result)
                if result.verdict in ("MATCH", "UPDATED") and not result.changes:
                    p = (
                        f"p={result.p_value:.3f}"
                        if result.p_value is not None
                        else "first baseline"
                    )
                    print(
                        f"  {result.verdict:<12} {sc.id}  ({p}; "
                        f"{len(result.current)} behaviour(s))",
                        file=out,
                    )
                else:
                    print("  " + result.summary().replace("\n", "\n  "), file=out)
                out.flush()
        finally:
            if model_agent is not None:
                await model_agent.aclose()
        return results

    results = aio.run(check_all())  # not asyncio.run: see agentprop._util.aio
    tally = {
        v: sum(r.verdict == v for r in results)
        for v in ("MATCH", "CHANGED", "NEW", "UPDATED", "INCONCLUSIVE")
    }
    print(
        f"{len(results)} snapshots: "
        + ", ".join(f"{n} {v.lower()}" for v, n in tally.items() if n),
        file=out,
    )
    if tally["CHANGED"] or tally["NEW"]:
        where = f"{args.spec}" + (f" --dir {args.dir}" if args.dir else "")
        print(
            f"review the candidates with `agentprop snapshot review {where}`; "
            "approve what is right with "
            f'`agentprop snapshot approve {where} NAME --reason "..."`',
            file=out,
        )
    checked = SnapshotCheckReport(
        spec_id=project.spec.spec_id,
        agent=agent.ref,
        runs=args.runs,
        alpha=args.alpha,
        results=list(results),
    )
    write_report_outputs(checked, args, out, json=checked.to_json, noun="results")
    if getattr(args, "output_failed", False):
        # the results are kept where the message says; the exit code shows the loss
        return EXIT_USAGE
    if any(r.infrastructure_error for r in results):
        return EXIT_USAGE  # not the agent's: see the note of each INCONCLUSIVE snapshot
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAIL
