"""The case ids ``agentprop run`` would decide, listed without running any agent.

Each id is built by the same functions ``run`` uses, so ``--case ID`` selects it. EXPLORE is
listed as one row per path (its inputs are drawn while running); corpus replays and JUDGE cases
are not listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentprop._agents.project import Project
from agentprop._pipeline.kinds import boundary_case_ids, dir_pairs, invariance_variants
from agentprop._pipeline.probe import probe_case_id, probe_targets
from agentprop._scenario.build import Scenario
from agentprop.strategies._internal.boundary import boundary_values

__all__ = ["CaseListing", "list_cases", "short"]


@dataclass(frozen=True)
class CaseListing:
    """One case: its id (what ``--case`` matches), kind, node path and a one-line description."""

    id: str
    kind: str
    path: str
    description: str


def short(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _expects(scenario: Scenario) -> str:
    decisions = [t.expect_decision or "-" for t in scenario.turns]
    return "expects " + " then ".join(decisions)


def _mft(scenario: Scenario) -> str:
    turns = f"{len(scenario.turns)} turns, " if len(scenario.turns) > 1 else ""
    failures = (
        f", {len(scenario.world.failures)} injected failure(s)" if scenario.world.failures else ""
    )
    first = short(scenario.messages[0]) if scenario.messages else ""
    return f"{_expects(scenario)}{failures}: {turns}{first!r}"


def list_cases(
    project: Project,
    scenarios: list[Scenario],
    kinds: tuple[str, ...],
    *,
    explore: int,
    seed: int = 0,
) -> list[CaseListing]:
    """The cases of ``kinds`` built on ``scenarios`` (PROBE targets are chosen among all of the
    project's, as ``run`` does), in the order ``run`` builds them: MFT, EXPLORE, PROBE,
    BOUNDARY, DIR, INV. ``seed`` is ``run``'s ``--seed`` (it picks the INV paraphrases)."""
    spec, bindings = project.spec, project.bindings
    out: list[CaseListing] = []
    if "mft" in kinds:
        out += [CaseListing(s.id, "MFT", " > ".join(s.path), _mft(s)) for s in scenarios]
    if "explore" in kinds and explore > 0:
        last = f" … ~{explore - 1}" if explore > 1 else ""
        out += [
            CaseListing(
                f"EXPLORE {s.id} ~0{last}",
                "EXPLORE",
                " > ".join(s.path),
                f"up to {explore} inputs drawn while running; {_expects(s)}",
            )
            for s in scenarios
        ]
    if "probe" in kinds:
        targets, _notes = probe_targets(project, project.scenarios())
        for target in targets:
            for k, phrase in enumerate(target.phrases):
                case_id = probe_case_id(target, k)
                out.append(
                    CaseListing(
                        case_id,
                        "PROBE",
                        " > ".join(target.scenario.path),
                        f"{target.clause}: {short(phrase)!r}",
                    )
                )
    if "boundary" in kinds:
        realisable = [case for case in boundary_values(spec, bindings) if case.scenario is not None]
        for case, case_id in zip(realisable, boundary_case_ids(realisable)):
            assert case.scenario is not None  # realisable
            side = "holds" if case.holds else "fails"
            out.append(
                CaseListing(
                    case_id,
                    "BOUNDARY",
                    " > ".join(case.scenario.path),
                    f"{case.comparison.source} {side}; {_expects(case.scenario)}",
                )
            )
    if "dir" in kinds:
        seen: set[tuple[str, str]] = set()
        for pair, base, perturbed in dir_pairs(project):
            key = (base.model_dump_json(), perturbed.model_dump_json())
            if key in seen:
                continue
            seen.add(key)
            case_id = (
                f"DIR {pair.variable}: {pair.base_value!r} -> {pair.perturbed_value!r} "
                f"@{pair.node}#{pair.branch}"
            )
            out.append(
                CaseListing(
                    case_id,
                    "DIR",
                    " > ".join(perturbed.path),
                    f"{pair.base.decision} becomes {pair.perturbed.decision}",
                )
            )
    if "inv" in kinds:
        for s in scenarios:
            if s.messages and invariance_variants(project, s, seed):
                out.append(
                    CaseListing(
                        f"INV {s.id}",
                        "INV",
                        " > ".join(s.path),
                        f"two paraphrases of the first message; {_expects(s)}",
                    )
                )
    return out
