"""``agentprop merge DIR…``: one report from the records of the shards of one run (:mod:`agentprop._pipeline.merge`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TextIO

from agentprop._cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, write_output


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = sub.add_parser(
        "merge",
        help="merge the trial records of the shards of one run (run --shard i/N --records DIR) into one report, deciding every case again",
    )
    merge.add_argument("records", nargs="+", metavar="RECORDS_DIR", help="the --records directory of each shard (all N of them)")
    merge.add_argument("--json", dest="json_path", metavar="PATH", help="write the merged report (schema agentprop.merged/1) to PATH")
    merge.add_argument("--junit", dest="junit_path", metavar="PATH", help="write JUnit XML to PATH")
    merge.add_argument("--markdown", dest="markdown_path", metavar="PATH", help="write a Markdown summary to PATH")
    merge.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._pipeline.merge import merge_shards, merged_junit, merged_markdown

    run = merge_shards(args.records)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(run.verdicts().items()))
    print(
        f"merged {run.info.count} shard(s) of one run (seed {run.info.seed}, settings {run.info.settings_digest}): "
        f"{len(run.cases)} decided names ({counts or 'none'}) from {run.decisions} decisions and {run.trials} trial lines, each decided again",
        file=out,
    )
    failed = False
    renders: list[tuple[str, Callable[[], str], str]] = [
        ("json", lambda: json.dumps(run.to_json(), indent=2) + "\n", "merged report"),
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
    return EXIT_FAIL if any(c.verdict not in ("PASS", "NOT APPLICABLE") for c in run.cases) else EXIT_OK
