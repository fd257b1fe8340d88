"""A seeded synthetic run report of any size, for the viewer's benchmark and browser tests.

It has what a real report of a large suite has: a decision tree with loop and unrealisable
branches, cases of every kind and verdict whose runs add up to the total asked for, failures
grouped into bugs with shrunk reproducers, the kept traces of each case (by the same rule as
:func:`agentprop._decide.oracle.sample_runs`: failing runs of each signature and a passing one) and
the TDAD metrics with mutants. A pure function of its arguments.
"""

from __future__ import annotations

import random
from typing import Any

from agentprop._pipeline.report.model import (
    AgentInfo,
    BugReport,
    CaseReport,
    CaseVerdict,
    DecisionTree,
    FailureRate,
    FailureSummary,
    Metrics,
    RunReport,
    RunTrace,
    SpecInfo,
    TraceSampling,
    TreeBranch,
    TreeNode,
)
from agentprop._scenario.trace import ToolCall, Trace, Turn

_WORDS = (
    "please",
    "cancel",
    "my",
    "order",
    "refund",
    "the",
    "address",
    "card",
    "billing",
    "plan",
    "now",
    "thanks",
    "account",
    "change",
    "shipping",
    "why",
    "was",
    "I",
    "charged",
    "twice",
    "zip",
    "last4",
    "help",
    "ticket",
)
_TOOLS = (
    "verify_identity",
    "get_account",
    "get_plan_rules",
    "cancel_order",
    "update_address",
    "create_ticket",
    "lookup_invoice",
)
_DECISIONS = (
    "ASK_CONFIRM_CANCEL",
    "CANCELLED",
    "CANCEL_DENIED",
    "REFUSE_AUTH",
    "BILLING_ANSWER",
    "CREATE_TICKET",
    "CLARIFY",
)
_KINDS = (("MFT", 0.15), ("EXPLORE", 0.45), ("BOUNDARY", 0.15), ("DIR", 0.15), ("INV", 0.10))
_VERDICTS: tuple[tuple[CaseVerdict, float], ...] = (
    ("PASS", 0.62),
    ("FAIL", 0.2),
    ("UNSTABLE", 0.1),
    ("INCONCLUSIVE", 0.03),
    ("NOT APPLICABLE", 0.05),
)


def _tree(rng: random.Random, n_nodes: int) -> DecisionTree:
    kinds = ("INTENT", "AUTH", "BILLING", "CLARIFY", "ELIGIBILITY", "CONFIRM", "UPDATE", "ROUTE")
    ids = [f"N{i + 1}_{rng.choice(kinds)}" for i in range(n_nodes)]
    ends = [f"END_{d}" for d in _DECISIONS]
    nodes = []
    for i, nid in enumerate(ids):
        later = ids[i + 1 : i + 4]
        targets = later + rng.sample(ends, 2) if later else rng.sample(ends, 3)
        branches = []
        for k, nxt in enumerate(targets):
            branches.append(
                TreeBranch(
                    id=f"{nid}#{k}",
                    index=k,
                    when=f"var{i}_{k} == value_{k}",
                    next=nxt,
                    status="unrealisable" if rng.random() < 0.06 else "taken",
                )
            )
        if i > 2 and rng.random() < 0.15:  # a loop back to an earlier node
            k = len(branches)
            branches.append(
                TreeBranch(
                    id=f"{nid}#{k}",
                    index=k,
                    when=f"var{i} == again",
                    next=ids[rng.randrange(i)],
                    status="taken",
                    loop=True,
                )
            )
        nodes.append(
            TreeNode(id=nid, description=f"step {i + 1} of the synthetic tree", branches=branches)
        )
    return DecisionTree(root=ids[0], nodes=nodes + [TreeNode(id=e, terminal=True) for e in ends])


def _walk(rng: random.Random, tree: DecisionTree) -> tuple[list[str], list[str], str]:
    by_id = {n.id: n for n in tree.nodes}
    node = by_id[tree.root]
    path, branches = [node.id], []
    while node.branches:
        choices = [b for b in node.branches if b.status == "taken" and not b.loop]
        if not choices:
            break
        b = rng.choice(choices)
        branches.append(b.id)
        path.append(b.next)
        node = by_id[b.next]
    return path, branches, path[-1]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize()


def _trace(
    rng: random.Random, case_id: str, trial: int, messages: list[str], fail_turn: int | None
) -> Trace:
    turns = []
    for t, message in enumerate(messages):
        calls = []
        for s in range(rng.randint(1, 4)):
            tool = rng.choice(_TOOLS)
            error = "the tool did not answer in time" if rng.random() < 0.05 else None
            calls.append(
                ToolCall(
                    name=tool,
                    args={
                        "account_id": f"A{rng.randint(1, 99)}",
                        "order_id": f"O-{rng.randint(1000, 9999)}",
                    },
                    result=None
                    if error
                    else {
                        "status": rng.choice(("ok", "processing", "canceled")),
                        "days_since_created": rng.randint(0, 60),
                    },
                    error=error,
                    error_kind="timeout" if error else None,
                    turn_index=t,
                    step=s,
                )
            )
        decision = rng.choice(_DECISIONS)
        response = {
            "node_id": f"END_{decision}",
            "decision": decision,
            "tool_actions": [c.name for c in calls],
            "evidence": f"{calls[0].name}: status {rng.choice(('ok', 'processing'))}",
            "user_message": _sentence(rng, 12),
        }
        turns.append(
            Turn(
                index=t,
                user_message=message,
                tool_calls=calls,
                response=response,
                raw_response=response,
            )
        )
    return Trace(
        case_id=case_id,
        trial=trial,
        agent="agent:Synthetic",
        spec_id="synthetic_v1",
        turns=turns,
        world_seed=rng.getrandbits(48),
        canaries={"get_account.pii.ssn": f"SSN_CANARY_{rng.getrandbits(32):08x}"},
    )


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``parts`` positive integers summing to ``total`` (total >= parts)."""
    weights = [rng.random() ** 2 + 0.02 for _ in range(parts)]
    scale = (total - parts) / sum(weights)
    out = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(out)):
        out[i % parts] += 1
    return out


def synthetic_report(
    cases: int = 2000,
    runs: int = 50_000,
    *,
    seed: int = 0,
    nodes: int = 24,
    bugs: int = 12,
    traces_per_case: int | None = None,
) -> RunReport:
    """A run report of ``cases`` cases and ``runs`` agent runs in all (seeded); each case keeps
    at most ``traces_per_case`` traces when given (fewer to build, for quick tests)."""
    rng = random.Random(seed)
    tree = _tree(rng, nodes)
    signatures = [
        f"{c}:decision_tree.N{rng.randint(1, nodes)}_X.requirements.{r}@turn0:detail{i}"
        for i, (c, r) in enumerate(
            zip(
                rng.choices(
                    ("calls_in_order", "decision_is", "args_satisfy", "no_canary_leak"), k=bugs
                ),
                rng.choices(("must_call_tools_in_order", "decision", "must_not_use"), k=bugs),
            )
        )
    ]
    bug_ids = [f"{rng.getrandbits(32):08x}" for _ in range(bugs)]
    kinds = rng.choices([k for k, _ in _KINDS], [w for _, w in _KINDS], k=cases)
    verdicts = rng.choices([v for v, _ in _VERDICTS], [w for _, w in _VERDICTS], k=cases)
    decided_cases = [i for i, v in enumerate(verdicts) if v != "NOT APPLICABLE"]
    per_case = dict.fromkeys(range(cases), 0)
    per_case.update(zip(decided_cases, _split(runs, len(decided_cases), rng)))
    out: list[CaseReport] = []
    for i in range(cases):
        kind, verdict = kinds[i], verdicts[i]
        path, branches, node = _walk(rng, tree)
        case_id = f"{kind} {node}<-{path[-2] if len(path) > 1 else path[0]} #{i}"
        messages = [_sentence(rng, rng.randint(5, 14)) for _ in range(rng.choice((1, 1, 2, 3)))]
        n = per_case[i]
        failing = verdict in ("FAIL", "UNSTABLE", "INCONCLUSIVE")
        passes = (
            0
            if verdict == "NOT APPLICABLE"
            else (n if verdict == "PASS" else rng.randint(0, max(0, n - 1)))
        )
        failures: list[FailureSummary] = []
        case_bugs: list[str] = []
        traces: list[RunTrace] = []
        if failing and n - passes > 0:
            picked = rng.sample(range(bugs), rng.choice((1, 1, 2)))
            left = n - passes
            for j, b in enumerate(picked):
                count = left if j == len(picked) - 1 else max(1, left // 2)
                left -= count
                if count <= 0:
                    continue
                clause = signatures[b].split(":")[1].split("@")[0]
                failures.append(
                    FailureSummary(
                        signature=signatures[b],
                        explanation=f"turn 1: promise {b} broken ({signatures[b]})",
                        count=count,
                        first_trial=rng.randint(0, n - 1),
                        clause=clause,
                    )
                )
                case_bugs.append(bug_ids[b])
                for k in range(min(count, 3)):
                    turn = rng.randrange(len(messages))
                    trace = _trace(rng, case_id, k, messages, turn)
                    step = rng.choice((None, 0)) if trace.turns[turn].tool_calls else None
                    traces.append(
                        RunTrace(
                            trial=k,
                            passed=False,
                            signature=signatures[b],
                            explanation=failures[-1].explanation,
                            clause=clause,
                            turn=turn,
                            step=step,
                            trace=trace,
                        )
                    )
        if passes and verdict != "NOT APPLICABLE":
            traces.append(
                RunTrace(
                    trial=n - 1, passed=True, trace=_trace(rng, case_id, n - 1, messages, None)
                )
            )
        if traces_per_case is not None:
            traces = traces[:traces_per_case]
        lo = max(0.0, passes / n - 0.2) if n else 0.0
        out.append(
            CaseReport(
                id=case_id,
                node=node,
                via=path[-2] if len(path) > 1 else None,
                path=path,
                kind=kind,
                messages=messages,
                expected_decisions=[rng.choice(_DECISIONS) for _ in messages],
                verdict=verdict,
                runs=n,
                passes=passes,
                pass_rate=passes / n if n else 0.0,
                interval=(lo, min(1.0, passes / n + 0.1)) if n else None,
                decided_by="sprt",
                rule="sprt at tau 0.9 (spec min_pass_rate 0.9)",
                reason="its base case does not pass" if verdict == "NOT APPLICABLE" else None,
                failures=failures,
                branches=branches,
                bugs=case_bugs,
                traces=traces,
                traces_omitted=max(0, n - len(traces)),
                world={
                    "overrides": {"get_account": {"account_id": "A1", "plan_id": "PLAN-BASIC"}},
                    "failures": [],
                },
            )
        )
    bug_reports = []
    for b, bid in enumerate(bug_ids):
        hit = [c.id for c in out if bid in c.bugs]
        if not hit:
            continue
        original = _sentence(rng, 10).split()
        kept = [w for w in original if rng.random() < 0.5] or original[:1]
        diff = "turn 1: " + " ".join(w if w in kept else f"[-{w}-]" for w in original)
        fails = rng.randint(3, 30)
        bug_reports.append(
            BugReport(
                id=bid,
                key=signatures[b].replace("@turn0", ""),
                signature=signatures[b],
                signatures=[signatures[b]],
                explanation=f"turn 1: promise {b} broken",
                cases=hit,
                representative=hit[0],
                shrink_runs=rng.randint(10, 60),
                minimal=True,
                reproducer_messages=[" ".join(kept)],
                diff=[diff],
                rate=FailureRate(
                    failures=fails,
                    runs=30,
                    rate=fails / 30,
                    interval=(max(0.0, fails / 30 - 0.15), min(1.0, fails / 30 + 0.15)),
                ),
                rate_of="reproducer",
            )
        )
    counts = {v: sum(c.verdict == v for c in out) for v, _ in _VERDICTS}
    all_branches = [b.id for n in tree.nodes for b in n.branches]
    covered = sorted({b for c in out for b in c.branches})
    mutants: list[dict[str, Any]] = [
        {
            "id": f"MUTANT_{k}",
            "severity": rng.choice(("critical", "major", "minor")),
            "category": "policy",
            "source": "faults",
            "status": ("killed", "killed", "survived", "vacuous", "non-activating")[k % 5],
            "probe_runs": 3,
            "probe_violations": 3,
            "control_runs": 10,
            "control_violations": 0,
            "probe_p_value": 0.003,
            "killed_by": out[k].id,
            "killing_failure": "turn 1 decided X",
        }
        for k in range(10)
    ]
    for m in mutants:
        if m["status"] != "killed":
            m["killed_by"] = m["killing_failure"] = None
    decided = cases - counts["NOT APPLICABLE"]
    metrics = Metrics(
        cases=cases,
        passed=counts["PASS"],
        failed=counts["FAIL"],
        unstable=counts["UNSTABLE"],
        inconclusive=counts["INCONCLUSIVE"],
        not_applicable=counts["NOT APPLICABLE"],
        case_pass_rate=counts["PASS"] / decided if decided else 0.0,
        runs=sum(c.runs for c in out),
        branch_coverage=len(covered) / len(all_branches),
        duration_s=321.0,
        extra={
            "coverage": {
                "capabilities": {},
                "branches": {
                    "all": all_branches,
                    "covered": covered,
                    "loop": [b.id for n in tree.nodes for b in n.branches if b.loop],
                    "unrealisable": [
                        b.id for n in tree.nodes for b in n.branches if b.status == "unrealisable"
                    ],
                    "not_run": [],
                    "enforced": 1.0,
                    "min_branch_coverage": None,
                    "met": True,
                },
            },
            "tdad": {
                "vpr": 0.8,
                "hpr": 0.7,
                "rpr": 0.9,
                "ms": 0.75,
                "surs": None,
                "visible": cases // 2,
                "hidden": cases - cases // 2,
                "visible_passed": counts["PASS"] // 2,
                "hidden_passed": counts["PASS"] - counts["PASS"] // 2,
                "split_seed": 0,
                "visible_fraction": 0.5,
                "mutants_killed": sum(m["status"] == "killed" for m in mutants),
                "mutants_activated": sum(m["status"] in ("killed", "survived") for m in mutants),
                "split": {c.id: ("visible" if i % 2 == 0 else "hidden") for i, c in enumerate(out)},
                "mutation": {
                    "pack_id": "synthetic_mutations_v1",
                    "mutants": mutants,
                    "skipped": ["NO_KNOB_FOR_THIS"],
                },
            },
        },
    )
    return RunReport(
        agentprop_version="synthetic",
        spec=SpecInfo(
            id="synthetic_v1", title="Synthetic suite", version="1.0", risk_level="medium"
        ),
        agent=AgentInfo(ref="agent:Synthetic", faults={"skip_auth": 0.3}),
        settings={"mode": "sprt", "seed": seed},
        cases=out,
        problems=[
            f"unrealisable path: {b} [..]: synthetic"
            for b in metrics.extra["coverage"]["branches"]["unrealisable"][:3]
        ],
        metrics=metrics,
        bugs=bug_reports,
        tree=tree,
        trace_sampling=TraceSampling(
            kept=sum(len(c.traces) for c in out),
            omitted=sum(c.traces_omitted for c in out),
            failing_per_signature=3,
            failing_per_case=6,
            passing_per_case=1,
        ),
    )
