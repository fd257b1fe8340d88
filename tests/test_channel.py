"""The bindings' ``channel:`` block: what the input channel guarantees switches off exactly the
input families it rules out, the run says which, and a bad declaration is an input error."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import pytest

import agentprop
from agentprop._decide.choices import Choices, ChoiceSpace
from agentprop._pipeline.explore import DEFAULT_PER_PATH, channel_lines, channel_summary
from agentprop._spec.bindings import ChannelBinding
from agentprop.strategies._internal.families import (
    NOTATION_FORMS,
    channel_allows,
    channel_allows_form,
)

ROOT = Path(__file__).resolve().parents[1]


def _met(
    project: agentprop.Project, draws: int = DEFAULT_PER_PATH
) -> tuple[set[str], set[str], set[str]]:
    """(turn families that apply, families met, entity forms used) over every path's draws."""
    applies: set[str] = set()
    met: set[str] = set()
    forms: set[str] = set()
    for scenario in project.scenarios():
        space = ChoiceSpace(project, scenario)
        for i, ts in enumerate(space.turn_spaces[0]):
            applies |= {f"turn{i + 1}:{f}" for f in ts.families}
        rng, decks = random.Random(0), {}  # type: ignore[var-annotated]
        drawn: list[Choices] = [space.draw(rng, decks=decks) for _ in range(draws)]
        met |= {f for c in drawn for f in c.families()}
        forms |= {e.form for c in drawn for t in c.turns for e in t.entities}
    return applies, met, forms


def _project(name: str, channel: ChannelBinding | None = None) -> agentprop.Project:
    project = agentprop.load_project(ROOT / "examples" / name)
    if channel is not None:
        project.bindings.channel = channel
    return project


def test_nothing_is_guaranteed_by_default() -> None:
    channel = ChannelBinding()
    assert channel.declared() == {} and channel_summary(channel) == {} and channel_lines({}) == []
    assert all(channel_allows_form(channel, "2026-11-20", f) for f in NOTATION_FORMS)
    assert all(
        channel_allows(channel, f) for f in ("correction", "typo", "codeswitch", "traditional")
    )


def test_each_guarantee_rules_out_exactly_its_forms() -> None:
    iso = ChannelBinding(dates="iso")
    # a date the template writes otherwise arrives ISO
    assert channel_allows_form(iso, "20 November 2026", "date_iso")
    assert not any(
        channel_allows_form(iso, "2026-11-20", f)
        for f in ("date_day_month", "date_zh", "relative", "relative_zh")
    )
    assert channel_allows_form(iso, "2400", "kilo") and channel_allows_form(iso, "O-1001", "lower")
    written = ChannelBinding(
        dates="as_written", numbers="as_written", ids="as_written", places="as_written", typos=False
    )
    assert not any(channel_allows_form(written, "2026-11-20", f) for f in NOTATION_FORMS)
    assert not any(channel_allows_form(written, "RCP-123", f) for f in ("id_space", "id_joined"))
    assert not channel_allows_form(written, "4242", "card_masked")
    assert not channel_allows_form(written, "US", "country_dotted")
    case_only = ChannelBinding(ids="any_case")
    assert channel_allows_form(case_only, "RCP-123", "lower")
    assert not channel_allows_form(case_only, "RCP-123", "id_space")
    assert not channel_allows_form(written, "O-1001", "lower") and channel_allows_form(
        written, "engineer", "capitalized"
    )
    assert not channel_allows_form(written, "engineer", "swap") and not channel_allows(
        written, "typo"
    )
    assert channel_allows(written, "correction") and channel_allows(written, "codeswitch")


def test_a_declared_guarantee_removes_exactly_its_families_from_the_deal() -> None:
    # 20 draws a path: a family only another template variant has (turn3:width) comes up by
    # chance in 12, with or without the guarantee, as the draws before it fall
    applies, met, forms = _met(_project("supportops"), 20)
    assert any(f.endswith(":correction") for f in met) and applies <= met  # the test can fail
    channel = ChannelBinding(corrections=False, typos=False)
    applies_off, met_off, forms_off = _met(_project("supportops", channel), 20)
    assert {f for f in applies if not f.endswith(":correction")} == applies_off
    assert applies_off <= met_off  # every other family is still dealt to every path
    assert not any(f.endswith((":correction", ":typo", ":spelling")) for f in met_off)
    # everything else the default deals is still dealt, and nothing new
    assert met_off == {f for f in met if not f.endswith((":correction", ":typo", ":spelling"))}


def test_dates_guaranteed_by_the_channel_are_not_re_written() -> None:
    _, _, forms = _met(_project("datainsights"), draws=2 * DEFAULT_PER_PATH)
    assert "relative" in forms  # "last year" for 2025 (datainsights fixes today)
    for dates in ("iso", "as_written"):
        _, _, forms_off = _met(
            _project("datainsights", ChannelBinding(dates=dates)), draws=2 * DEFAULT_PER_PATH
        )
        assert not forms_off & {"relative", "relative_zh"}
        # letter case and slips still dealt
        assert forms - {"relative"} <= forms_off | {"relative_zh"}


def _quickstart(tmp_path: Path, channel: str) -> Path:
    dest = tmp_path / "quickstart"
    shutil.copytree(
        ROOT / "examples" / "quickstart",
        dest,
        ignore=shutil.ignore_patterns("skeleton", "__pycache__", ".agentprop"),
    )
    with (dest / "agentprop.yaml").open("a", encoding="utf-8") as f:
        f.write(channel)
    return dest


def test_a_run_says_which_families_the_channel_switched_off(tmp_path: Path) -> None:
    from agentprop._cli import main

    project = _quickstart(tmp_path, "channel:\n  corrections: false\n  dates: iso\n")
    out, report = io.StringIO(), tmp_path / "report.json"
    args = [
        "run",
        str(project),
        "--corpus",
        "none",
        "--seed",
        "0",
        "--explore-seed",
        "0",
        "--explore",
        "4",
        "--json",
        str(report),
    ]
    code = main(args, out=out, err=io.StringIO())
    printed = out.getvalue().splitlines()
    assert code == 0, printed
    line = (
        "not tried (the bindings' channel: guarantees): date notations other than ISO, relative "
        "dates (channel: dates iso); corrections (channel: corrections false)"
    )
    assert line in printed
    # docs/input-families.md shows this line: it must be what the run prints
    docs = (Path(__file__).resolve().parents[1] / "docs" / "input-families.md").read_text("utf-8")
    assert f"```text\n{line}\n```" in docs
    extra = json.loads(report.read_text(encoding="utf-8"))["metrics"]["extra"]
    assert extra["channel"]["declared"] == {"dates": "iso", "corrections": False}
    assert [e["because"] for e in extra["channel"]["not_tried"]] == [
        "channel: dates iso",
        "channel: corrections false",
    ]
    tried = {f for entry in extra["exploration"].values() for f in entry["families"]}
    # the channel switches off corrections only: the request's other wrapping families are dealt
    wrapping = {"authority", "stated_fact", "several_intents", "distractor", "emotion"}
    assert "correction" not in tried and tried & wrapping


@pytest.mark.parametrize(
    ("block", "line", "said"),
    [
        ("channel:\n  dates: european\n", 2, "'any', 'iso' or 'as_written'"),
        ("channel:\n  corrections: maybe\n", 2, "boolean"),
        ("channel:\n  date: iso\n", 2, "remove or rename 'date'"),
    ],
)
def test_a_bad_channel_declaration_exits_2_with_its_file_and_line(
    tmp_path: Path, block: str, line: int, said: str
) -> None:
    from agentprop._cli import main

    project = _quickstart(tmp_path, block)
    first = len(
        (ROOT / "examples" / "quickstart" / "agentprop.yaml")
        .read_text(encoding="utf-8")
        .splitlines()
    )
    err = io.StringIO()
    code = main(["run", str(project), "--corpus", "none"], out=io.StringIO(), err=err)
    text = err.getvalue()
    assert code == 2, text
    assert f"agentprop.yaml:{first + line}" in text and said in text, text


def test_the_templates_own_notation_keeps_half_of_the_notation_deck(tmp_path: Path) -> None:
    # a date written ISO in the template stays ISO on half of the draws of the template that
    # holds it; each other notation comes up once per round, as often as any other (the order
    # id's separators are kept, so the date's notations are the only cards of the deck)
    project_dir = _quickstart(tmp_path, "channel:\n  ids: any_case\n")
    text = (project_dir / "agentprop.yaml").read_text(encoding="utf-8")
    text = text.replace("  order_id: O-1001\n", '  order_id: O-1001\n  placed: "2026-11-20"\n')
    text = text.replace(
        '"Where is my order {order_id}?"',
        '"Where is my order {order_id}? I placed it on {placed}."',
    )
    (project_dir / "agentprop.yaml").write_text(text, encoding="utf-8")
    project = agentprop.load_project(project_dir)
    scenario = next(
        s
        for s in project.scenarios()
        if "{placed}" not in s.messages[0] and "2026-11-20" in s.messages[0]
    )
    space = ChoiceSpace(project, scenario)
    [(_, _, forms)] = [e for e in space.turn_spaces[0][0].entities if e[0] == "placed"]
    assert len(forms) == 6  # six other notations of 2026-11-20 (ISO is the template's own)
    rng, decks = random.Random(7), {}  # type: ignore[var-annotated]
    written: list[str] = []
    while len(written) < 4 * 2 * len(forms):  # four rounds of the deck
        c = space.draw(rng, decks=decks)
        if c.turns[0].template == 0:  # the template that writes the date
            written += [
                next((e.form for e in c.turns[0].entities if e.slot == "placed"), "as written")
            ]
    counts = {f: written.count(f) for f in set(written)}
    assert counts == {"as written": 4 * len(forms), **{f: 4 for f in forms}}, counts
