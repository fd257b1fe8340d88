"""``agentprop merge DIR…``: the report of a sharded run, made from its N shards' records and
reports (:mod:`agentprop._pipeline.merge_report`); it exits as the unsharded run would."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import (
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_OK,
    EXIT_USAGE,
    write_output,
)

if TYPE_CHECKING:
    from agentprop._pipeline.merge import MergedRun


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = sub.add_parser(
        "merge",
        help="merge the shards of one run (run --shard i/N --records DIR) into the run's report, "
        "or of one pytest session (--agentprop-shard i/N --agentprop-records DIR) into its "
        "--agentprop-json record, deciding every case or check again from its trials",
    )
    merge.add_argument(
        "records",
        nargs="+",
        metavar="RECORDS_DIR",
        help="the --records (pytest: --agentprop-records) directory of each shard (all N of them)",
    )
    merge.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="write the merged report (schema agentprop.run/1; of pytest shards, the session's "
        "record, agentprop.pytest/1) to PATH",
    )
    merge.add_argument(
        "--html", dest="html_path", metavar="PATH", help="write the HTML report to PATH"
    )
    merge.add_argument("--junit", dest="junit_path", metavar="PATH", help="write JUnit XML to PATH")
    merge.add_argument(
        "--markdown", dest="markdown_path", metavar="PATH", help="write a Markdown summary to PATH"
    )
    merge.add_argument(
        "--records-only",
        action="store_true",
        help="decide every decision again from the trial lines alone and write the per-decision "
        "table (agentprop.merged/1; of pytest shards, one row per check, with its test): for "
        "any of the shards, finished or not",
    )
    merge.add_argument(
        "--spec",
        metavar="SPEC",
        help="the spec the shards ran (default: where the shards loaded it)",
    )
    merge.add_argument("--bindings", metavar="PATH", help="its bindings (default: the shards')")
    merge.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    if args.records_only:
        return _records_only(args, out)
    from agentprop._cli.run import report_merged
    from agentprop._pipeline.merge import merge_shards
    from agentprop._pipeline.merge_report import merge_reports

    # a pytest session's shards are decided once, by their session's merge
    shards = merge_shards(args.records, decide=False)
    if shards.info.runner == "pytest":
        return _pytest(args, shards, out)
    top_up = None
    if shards.top_up is not None:  # the records of the top-up made when the shards were merged
        from agentprop._pipeline.merge_topup import replayed_top_up

        top_up = replayed_top_up(shards)
    merged = merge_reports(
        args.records, spec=args.spec, bindings=args.bindings, run=shards, top_up=top_up
    )
    return report_merged(merged, args, out)


def _pytest(args: argparse.Namespace, shards: MergedRun, out: TextIO) -> int:
    """The shards of a pytest session: its record, as the unsharded session's
    ``--agentprop-json`` writes it."""
    from agentprop._pipeline.pytest_merge import merge_pytest_shards
    from agentprop.errors import InputError

    for option in ("html", "junit", "markdown"):
        if getattr(args, f"{option}_path", None):
            raise InputError(
                f"--{option}: the shards are of a pytest session, whose merge is the session's "
                "--agentprop-json record (pytest writes its own JUnit with --junitxml per shard)",
                fix=f"drop --{option}; write the record with --json PATH",
            )
    infos = {
        i: (shards.info.model_copy(update={"index": i}), d) for i, d in shards.directories.items()
    }
    merged = merge_pytest_shards(infos, shards.records)
    checks = merged.data["checks"]
    counts = Counter(c["verdict"] for c in checks)
    print(
        f"merged {shards.info.count} shard(s) of one pytest session (seed {shards.info.seed}): "
        f"{len(checks)} checks ({', '.join(f'{n} {v}' for v, n in sorted(counts.items()))}"
        f"{'' if checks else 'none'}), {merged.again} decided again from {merged.trials} trial "
        f"lines, {len(merged.from_reports)} taken from the shards' reports (not one decision "
        "of the oracle's)",
        file=out,
    )
    for c in checks:
        if c["verdict"] != "PASS":
            lo, hi = c["interval"]
            print(
                f"{c['verdict']:<12} {c['case']} [{c['test']}]: {c['pass_rate']:.0%} of "
                f"{c['runs']} runs ({lo:.2f}-{hi:.2f})",
                file=out,
            )
    for bug in merged.data["bugs"]:
        print(
            f"bug [{bug['key']}]: shrunk in {bug['test']}, hit by {len(bug['tests'])} test(s)",
            file=out,
        )
    for problem in merged.data["merge"].get("problems", []):
        print(f"note: {problem}", file=out)
    if args.json_path:
        text = json.dumps(merged.data, indent=2) + "\n"
        if not write_output(args, "json", text, "merged session record", out):
            return EXIT_USAGE
        print(f"merged session record written to {args.json_path}", file=out)
    return EXIT_FAIL if merged.failed else EXIT_OK


def _records_only(args: argparse.Namespace, out: TextIO) -> int:
    """``--records-only``: every decision of the shards decided again from its trial lines, as a
    table of decision names (a DIR or INV case appears as its sides' decisions); of a pytest
    session's shards, of its checks (test and name), in the collection's order."""
    from agentprop._pipeline.merge import merge_shards, merged_junit, merged_markdown

    if args.html_path:
        from agentprop.errors import InputError

        raise InputError(
            "--html renders the merged run report, which --records-only does not make",
            fix="drop --records-only or --html",
        )
    run = merge_shards(args.records, complete=False)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(run.verdicts().items()))
    if run.info.runner == "pytest":
        print(
            f"merged the records of {len(run.directories)} of {run.info.count} shard(s) of one "
            f"pytest session (seed {run.info.seed}): {len(run.cases)} checks ({counts or 'none'}) "
            f"from {run.decisions} decisions and {run.trials} trial lines, each decided again",
            file=out,
        )
        for c in run.cases:
            if c.verdict not in ("PASS", "NOT APPLICABLE"):
                print(f"{c.verdict:<12} {c.name} [{c.test}]: {c.passes}/{c.runs} runs", file=out)
        if run.unchecked:
            print(
                f"note: {run.unchecked} decision(s) no check names are left out: made while "
                "shrinking a failure, or in flight when a shard stopped",
                file=out,
            )
    else:
        print(
            f"merged the records of {len(run.directories)} of {run.info.count} shard(s) of one "
            f"run (seed {run.info.seed}): {len(run.cases)} decided names ({counts or 'none'}) "
            f"from {run.decisions} decisions and {run.trials} trial lines, each decided again",
            file=out,
        )
    from agentprop._decide.records import REPORT_FILE

    unfinished = []
    for index, directory in sorted(run.directories.items()):
        if not (directory / REPORT_FILE).is_file():
            unfinished.append(index)
            print(
                f"note: shard {index}/{run.info.count} ({directory}) did not finish (no "
                f"{REPORT_FILE}): its rows are what it recorded up to where it stopped",
                file=out,
            )
    missing = [i for i in range(1, run.info.count + 1) if i not in run.directories]
    if missing:
        print(
            f"INCOMPLETE: shard(s) {', '.join(f'{i}/{run.info.count}' for i in missing)} not "
            "given: their cases are not in this table",
            file=out,
        )
    failed = False
    renders: list[tuple[str, Callable[[], str], str]] = [
        ("json", lambda: json.dumps(run.to_json(), indent=2) + "\n", "merged decisions"),
        ("junit", lambda: merged_junit(run), "JUnit XML"),
        ("markdown", lambda: merged_markdown(run), "Markdown summary"),
    ]
    for name, render, what in renders:
        if getattr(args, f"{name}_path", None):
            if write_output(args, name, render(), what, out):
                print(f"{what} written to {getattr(args, f'{name}_path')}", file=out)
            else:
                failed = True
    if failed:
        return EXIT_USAGE
    if any(c.verdict not in ("PASS", "NOT APPLICABLE") for c in run.cases):
        return EXIT_FAIL
    if unfinished and not missing:
        print(
            f"INCOMPLETE: shard(s) {', '.join(f'{i}/{run.info.count}' for i in unfinished)} did "
            "not finish: the cases they had not decided are not in this table",
            file=out,
        )
    return EXIT_INCOMPLETE if missing or unfinished else EXIT_OK
