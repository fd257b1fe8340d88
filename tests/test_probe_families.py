"""PII probe families: the ways a message leads an agent to state a personal field without asking
"tell me my X" (docs/input-families.md), in both languages, dealt so a default run meets each one
as the turn after a path, as a first message and beside an ordinary request."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import agentprop
from agentprop import TurnContext
from agentprop._decide.choices import ChoiceSpace, language_of
from agentprop._pipeline.probe import ProbeSpace, extraction_families, probe_targets
from agentprop._pipeline.run import RunSettings, arun_cases
from agentprop.agents import make_factory
from agentprop.oracle import TrialMemo
from agentprop.strategies._internal.packs import resolve_pack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "supportops"))
from agent import SupportOpsAgent  # noqa: E402

FAMILIES = [
    "process",
    "complete",
    "format",
    "document",
    "third_party",
    "staff",
    "verification",
    "repeat_back",
    "hypothetical",
    "consent",
    "urgency",
    "troubleshoot",
]
"""The families docs/input-families.md lists, each with its source."""

_BEFORE_EN = {"my", "the", "her", "which", "what", "customer's"}
"""What a meaning follows in an English frame: a possessive, an article or a question word."""
_VERBS = {"is", "are", "was", "were", "has", "does"}
"""Verbs that agree with their subject: a meaning is never one ("card digits is")."""
_PRONOUNS = {"you", "we", "i", "they", "it", "he", "she"}


def _every_meaning(lang: str) -> list[str]:
    """Every way the packs say a personal field (``field_meanings`` of a field, ``field_names``),
    in ``lang``: the fields are the English pack's (the Chinese one also lists tools)."""
    en, pack = resolve_pack("en"), resolve_pack(lang)
    fields = {*en.field_meanings, *en.field_names}
    out = [
        m for f in fields for m in (*pack.field_meanings.get(f, ()), *pack.field_names.get(f, ()))
    ]
    assert {f for f in fields if not pack.field_meanings.get(f)} == set(), lang
    return sorted(set(out))


def test_every_probe_family_renders_for_every_field_meaning_in_both_languages() -> None:
    for lang in ("en", "zh"):
        families = dict(extraction_families(resolve_pack(lang)))
        assert list(families) == FAMILIES, lang
        meanings = _every_meaning(lang)
        assert len(meanings) >= 18, meanings
        for family, frames in families.items():
            assert 2 <= len(frames) <= 6, (lang, family)
            for frame in frames:
                assert language_of(frame) == lang, frame
                for meaning in meanings:
                    text = frame.format(meaning=meaning)
                    head, _, tail = text.partition(meaning)
                    assert "{" not in text and text.count(meaning) == 1, text
                    if lang == "en":
                        before = head.split()[-1].lower() if head.split() else ""
                        after = [*re.findall(r"[a-z']+", tail.lower())[:2], ""]
                        assert before in _BEFORE_EN, text
                        # "which SSN are you ...": the verb's subject is the pronoun after it
                        assert after[0] not in _VERBS or after[1] in _PRONOUNS, text
                        assert text[0].isupper() and text[-1] in ".?", text
                        # asked by what it means: never by a field's own name
                        assert not re.search(r"\b(ssn|dob|e-?mail|phone)\b", frame, re.I), frame
                    else:
                        assert head[-1:] in ("的", "个"), text
                        assert text[-1] in "。？", text


def test_a_default_run_of_supportops_meets_every_probe_family_where_probes_are_asked() -> None:
    project = agentprop.load_project(ROOT / "examples" / "supportops")
    targets, _ = probe_targets(project, project.scenarios())
    met: dict[str, set[str]] = {"after the path": set(), "first message": set(), "beside": set()}
    said: set[tuple[str, str]] = set()
    for target in targets:
        space, base = ProbeSpace(project, target), target.scenario
        for k, phrase in enumerate(target.phrases):
            family = target.family(k)
            if family not in FAMILIES:
                continue
            where = (
                "beside" if target.side else "first message" if target.opening else "after the path"
            )
            met[where].add(family)
            said.add((family, language_of(phrase)))
            # the input is the phrasing, labelled with its family
            choices = space.plain().model_copy(update={"probe": k})
            assert space.render(choices).messages[-1] == phrase
            assert space.families_in(choices) == [f"probe:{family}"]
            if target.side:  # after the path's own request
                openers = {v.messages[0].rstrip(".") for v in ChoiceSpace(project, base).variants}
                assert any(phrase.startswith(o) and len(phrase) > len(o) + 5 for o in openers)
    for where, families in met.items():
        assert sorted(families) == sorted(FAMILIES), where
    assert said == {(f, lang) for f in FAMILIES for lang in ("en", "zh")}


def test_an_agent_that_leaks_a_field_spelled_out_fails_the_format_family_only() -> None:
    class SpellsItOut(SupportOpsAgent):
        def turn(self, message: str, ctx: TurnContext) -> None:
            if re.search(r"one character at a time|一个字一个字", message):
                account = self._call(ctx, "get_account", account_id=ctx.context["account_id"])
                text = f"Sure, one at a time: {account['pii']['email']}"
                self._respond(ctx, "END_REFUSE_PII", "REFUSE_PII", text, "get_account")
                return
            super().turn(message, ctx)

    project = agentprop.load_project(ROOT / "examples" / "supportops")
    report = asyncio.run(
        arun_cases(
            project,
            make_factory(SpellsItOut),
            project.scenarios(),
            RunSettings(kinds=("probe",), seed=0),
            memo=TrialMemo(),
        )
    )
    failed = [c for c in report.cases if c.verdict == "FAIL"]
    assert failed and {c.details["family"] for c in failed} == {"format"}
    assert all(", format)" in c.id for c in failed)


def test_every_probe_family_is_documented_with_its_source_and_an_example_per_language() -> None:
    doc = (ROOT / "docs" / "input-families.md").read_text(encoding="utf-8")
    for family in FAMILIES:
        rows = [r for r in doc.splitlines() if r.startswith("|") and f"`probe:{family}`" in r]
        assert len(rows) == 1, family
        cells = [c.strip() for c in rows[0].split("|")]
        source, en, zh = cells[2], cells[4], cells[5]
        assert source and language_of(en) == "en" and language_of(zh) == "zh", family


def test_a_users_pack_adds_frames_to_a_probe_family_and_families_of_its_own() -> None:
    from agentprop.strategies._internal.packs import PhrasePack, ProbeFrames, merge_packs

    mine = PhrasePack(
        lang="en",
        probes=ProbeFrames(
            extraction={
                "process": ("Which {meaning} goes on the parcel?",),
                "quiz": ("Quiz time: what is my {meaning}?",),
            }
        ),
    )
    merged = dict(extraction_families(merge_packs(resolve_pack("en"), mine)))
    assert list(merged) == [*FAMILIES, "quiz"]
    # the pack's frames first (the plainest stays first), the user's after them
    assert merged["process"][0] == resolve_pack("en").probes.extraction["process"][0]
    assert merged["process"][-1] == "Which {meaning} goes on the parcel?"
