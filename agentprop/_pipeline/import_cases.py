"""Imported traces as cases and corpus entries, one per distinct behaviour.

A trace that took a path becomes that path's case, with its messages and recorded tool outputs;
one case per behaviour (path and failure signatures), its id holding the behaviour's digest, so
re-importing rewrites nothing. Cases go to ``<bindings dir>/.agentprop/cases/<spec_id>/``,
where ``agentprop run`` reads them (:func:`imported_cases`); ``--to-corpus`` also keeps broken
behaviours as corpus entries.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from agentprop._agents.project import Project
from agentprop._decide.corpus import Corpus, CorpusEntry, clause_of, entry_id, now
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._util.files import describe_validation, path_component, write_atomic
from agentprop.errors import InputError, SourceLocation

if TYPE_CHECKING:  # `agentprop run` reads cases and never imports logs
    from agentprop._pipeline.importing import ImportSummary, JudgedTrace

__all__ = [
    "CASES_DIR",
    "ImportedCase",
    "Written",
    "cases_dir",
    "imported_cases",
    "to_cases",
    "to_corpus",
]

CASES_DIR = Path(".agentprop") / "cases"
"""Where imported cases are kept, relative to the bindings' directory."""

IMPORTED = "IMPORTED"
IMPORTED_AGENT = "imported"
"""The agent fingerprint of corpus entries made from traces (no agent code was run)."""


class ImportedCase(BaseModel):
    """One case made from an imported trace: the scenario and where it came from."""

    id: str
    spec_id: str
    source: str
    """The log and the trace (``log.jsonl line 3``, ``spans.json trace 5b8e...``)."""
    signatures: list[str]
    """What the trace broke (empty: it kept every contract)."""
    traces: int
    """Traces of the import that showed this behaviour."""
    scenario: Scenario


@dataclass
class Written:
    """What :func:`to_cases` / :func:`to_corpus` wrote and what they skipped, with why."""

    new: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    """Already there (the same behaviour imported before)."""
    skipped: list[str] = field(default_factory=list)


def cases_dir(project: Project) -> Path:
    return project.base_dir / CASES_DIR


def _digest(path: str, signatures: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps([path, list(signatures)]).encode()).hexdigest()[:10]


def case_of(project: Project, base: Scenario, trace: Trace, case_id: str) -> Scenario:
    """``base`` (the path the trace took) with the trace's user messages and recorded world."""
    turns = [
        t.model_copy(update={"user_message": trace.turns[i].user_message, "marked": None})
        for i, t in enumerate(base.turns)
    ]
    overrides = {tool: dict(fields) for tool, fields in base.world.overrides.items()}
    failures: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    known = {t.name: t for t in project.spec.tools}
    for turn in trace.turns:
        for call in turn.tool_calls:
            tool = known.get(call.name)
            if tool is None:
                continue
            counts[call.name] = counts.get(call.name, 0) + 1
            if call.error is not None:
                if call.error_kind in tool.failure_modes:
                    failures.append(
                        {"tool": call.name, "mode": call.error_kind, "calls": [counts[call.name]]}
                    )
            elif isinstance(call.result, dict):
                overrides[call.name] = {**overrides.get(call.name, {}), **call.result}
    world = base.world.model_copy(
        update={"overrides": overrides, "failures": failures or list(base.world.failures)}
    )
    return base.model_copy(update={"id": case_id, "turns": turns, "world": world})


def _guessed(group: list[JudgedTrace], path: str) -> str:
    return (
        f"{len(group)} trace(s) ({group[0].trace.case_id}, ...) on {path}: answered in text, "
        "so the path is told by their tool calls alone, and a case of it would expect a "
        "decision they may never have made (log the agent's decision, e.g. as a respond "
        "tool call, to import them)"
    )


def _groups(summary: ImportSummary) -> list[tuple[str, tuple[str, ...], list[JudgedTrace]]]:
    return [
        (path, sigs, group) for (path, sigs), group in summary.groups.items() if path is not None
    ]


def to_cases(
    project: Project, summary: ImportSummary, log: str, directory: Path | None = None
) -> Written:
    """One case per behaviour that took a path, written where ``agentprop run`` reads them."""
    by_id = {s.id: s for s in project.scenarios()}
    folder = (directory or cases_dir(project)) / path_component(project.spec.spec_id)
    written = Written()
    for (path, sigs), group in summary.groups.items():
        if path is None:
            written.skipped.append(
                f"{len(group)} trace(s) ({group[0].trace.case_id}, ...): no case of the spec ends "
                "where they responded"
            )
            continue
        told = [j.trace for j in group if not j.in_text]
        if not told:
            written.skipped.append(_guessed(group, path))
            continue
        digest = _digest(path, sigs)
        target = folder / f"{digest}.json"
        case_id = f"{IMPORTED} {digest} {path}"
        if target.exists():
            written.kept.append(case_id)
            continue
        first = told[0]
        case = ImportedCase(
            id=case_id,
            spec_id=project.spec.spec_id,
            source=f"{log} {first.case_id}",
            signatures=list(sigs),
            traces=len(group),
            scenario=case_of(project, by_id[path], first, case_id),
        )
        write_atomic(target, case.model_dump_json(indent=2))
        written.new.append(case_id)
    return written


def to_corpus(project: Project, summary: ImportSummary, log: str, corpus: Corpus) -> Written:
    """One corpus entry per behaviour that broke a contract on a path (its first signature)."""
    by_id = {s.id: s for s in project.scenarios()}
    on_path: dict[str, int] = {}
    for (path, _), group in summary.groups.items():
        if path is not None:
            on_path[path] = on_path.get(path, 0) + len(group)
    agent = project.bindings.agent or ""  # the ref `agentprop run` loads by default
    written = Written()
    for path, sigs, group in _groups(summary):
        if not sigs:
            continue
        told = [j.trace for j in group if not j.in_text]
        if not told:
            written.skipped.append(_guessed(group, path))
            continue
        signature = sigs[0]
        first = told[0]
        scenario = case_of(project, by_id[path], first, path)
        entry = CorpusEntry(
            id=entry_id(project.spec.spec_id, agent, signature, path),
            spec_id=project.spec.spec_id,
            spec_path=str(project.spec_path.parent),
            scenario_id=path,
            signature=signature,
            clause=clause_of(signature),
            agent_ref=agent,
            agent_fingerprint=IMPORTED_AGENT,
            scenario=scenario,
            original_messages=scenario.messages,
            original_rate=len(group) / on_path[path],
            confirmed=False,
            created=now(),
        )
        _, new = corpus.record(entry)
        (written.new if new else written.kept).append(
            f"{entry.id} {signature} ({log} {first.case_id})"
        )
    return written


def imported_cases(project: Project, filters: list[str] | None = None) -> list[Scenario]:
    """The imported cases of ``project``'s spec (``.agentprop/cases/<spec_id>/*.json`` beside
    the bindings) whose id contains one of ``filters`` (all without filters), in name order.
    A damaged file is an input error naming it."""
    folder = cases_dir(project) / path_component(project.spec.spec_id)
    out: list[Scenario] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            case = ImportedCase.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError) as exc:
            raise InputError(
                f"imported case {path.name} cannot be read: "
                f"{describe_validation(exc) if isinstance(exc, ValidationError) else exc}",
                location=SourceLocation(path),
                fix=f"delete it and import the log again with --to-cases (or remove {folder})",
            ) from None
        if not filters or any(f in case.scenario.id for f in filters):
            out.append(case.scenario)
    return out
