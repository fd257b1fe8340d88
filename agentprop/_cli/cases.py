"""``agentprop cases PROJECT``: the case ids ``agentprop run`` would decide, with their kind,
node path and a short description; nothing is run. ``--kinds`` selects kinds as ``run``'s does."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from agentprop._cli.common import EXIT_OK, parse_kinds, require_cases
from agentprop._cli.options import BINDINGS_HELP, DEFAULT_KINDS, SPEC_HELP
from agentprop._pipeline.defaults import DEFAULT_PER_PATH


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cases = sub.add_parser(
        "cases",
        help="list the case ids `agentprop run` would decide (kind, path, "
        "description); runs nothing",
    )
    cases.add_argument("spec", metavar="PROJECT", help=SPEC_HELP)
    cases.add_argument("--bindings", help=BINDINGS_HELP)
    cases.add_argument(
        "--kinds",
        default=DEFAULT_KINDS,
        help="case kinds to list, comma-separated, as `agentprop run --kinds` (default all)",
    )
    cases.add_argument(
        "--explore",
        type=int,
        default=DEFAULT_PER_PATH,
        metavar="N",
        help=f"inputs explored per path, as run's (default {DEFAULT_PER_PATH})",
    )
    cases.add_argument(
        "--seed", type=int, default=0, help="run's --seed (it picks the INV paraphrases; default 0)"
    )
    cases.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of {id, kind, path, description} instead of a table",
    )
    cases.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._pipeline.caselist import list_cases

    kinds = parse_kinds(args.kinds)
    project = load_project(args.spec, bindings=args.bindings)
    require_cases(project)
    listed = list_cases(
        project, project.scenarios(), kinds, explore=max(0, args.explore), seed=args.seed
    )
    if args.json:
        print(
            json.dumps(
                [
                    {"id": c.id, "kind": c.kind, "path": c.path, "description": c.description}
                    for c in listed
                ],
                indent=2,
            ),
            file=out,
        )
        return EXIT_OK
    counts: dict[str, int] = {}
    for c in listed:
        counts[c.kind] = counts.get(c.kind, 0) + 1
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "none"
    print(
        f"{project.spec.spec_id}: {len(listed)} case(s) ({summary}); `agentprop run {args.spec} "
        "--case ID` runs those whose id contains ID",
        file=out,
    )
    for c in listed:
        print(f"{c.kind:<8} {c.id}", file=out)
        print(f"         path: {c.path}", file=out)
        print(f"         {c.description}", file=out)
    return EXIT_OK
