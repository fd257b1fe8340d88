"""List the failing cases of an ``agentprop run --json`` report that no frozen adjudication judges.

What a blind adjudicator is given to judge: ``python benchmarks/_support/unjudged.py --spec NAME
--seed S REPORT.json [--out LIST.json]`` writes each failing case (not PASS or NOT APPLICABLE)
that :class:`adjudicated.Adjudications` finds no verdict for, as :func:`failure_record` writes
it; ``NAME`` is the key the benchmarks file the spec's failures under (its folder's name).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _support.adjudicated import (  # noqa: E402
    ADJUDICATION,
    Adjudications,
    failure_of,
    failure_record,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--spec", required=True, help="the spec's key (its folder's name)")
    parser.add_argument("--seed", type=int, required=True, help="the run's --seed")
    parser.add_argument("report", help="the run's --json report")
    parser.add_argument("--out", help="write the list here (default: standard output)")
    parser.add_argument(
        "--adjudications", default=str(ADJUDICATION), help="the folder of frozen verdicts"
    )
    args = parser.parse_args(argv)
    judged = Adjudications.load(Path(args.adjudications))
    report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    todo: list[dict[str, object]] = []
    done = 0
    for case in report["cases"]:
        if case["verdict"] in ("PASS", "NOT APPLICABLE"):
            continue
        clauses = (f.get("clause") for f in case.get("failures") or [])
        failure = failure_of(args.spec, args.seed, case["id"], case["messages"], clauses)
        if judged.verdict(failure) is None:
            todo.append(failure_record(failure))
        else:
            done += 1
    print(
        f"{args.spec} seed {args.seed}: {len(todo) + done} failing case(s), {done} already "
        f"judged, {len(todo)} to judge",
        file=sys.stderr,
    )
    text = json.dumps(todo, indent=1, ensure_ascii=False)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
