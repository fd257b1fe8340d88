"""Tests for phrase packs: shipped packs, validation errors with locations, user extension."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, settings

from agentprop.errors import InputError, InvalidArgument
from agentprop.strategies._internal.packs import (
    PhrasePack,
    builtin_languages,
    builtin_pack_dir,
    load_pack,
    load_pack_text,
    merge_packs,
    resolve_pack,
)
from agentprop.strategies._internal.paraphrase import apply_transforms, paraphrases

FAST = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate, Phase.shrink],
)
REPO_PACKS = Path(__file__).resolve().parents[1] / "agentprop" / "strategies" / "packs"


def write(tmp_path: Path, text: str, name: str = "pack.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, needle: str) -> int:
    """1-based line number of the first line containing ``needle``."""
    for i, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in text")


# --- shipped packs ----------------------------------------------------------------------------


def test_shipped_packs_are_the_repository_strategies_folder() -> None:
    shipped = sorted(p.name for p in builtin_pack_dir().glob("*.yaml"))
    in_repo = sorted(p.name for p in REPO_PACKS.glob("*.yaml"))
    assert shipped == in_repo and {"en.yaml", "zh.yaml"} <= set(shipped)
    assert {"en", "zh"} <= set(builtin_languages())


@pytest.mark.parametrize("file", sorted(REPO_PACKS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_pack_loads_and_is_consistent(file: Path) -> None:
    pack = load_pack(file)
    assert pack.lang == file.stem
    assert pack.greetings and pack.closings and pack.synonyms
    assert pack.politeness.widest and pack.indirect_requests.widest and pack.fillers.widest
    for template in (
        *pack.politeness.for_mood("imperative"),
        *pack.indirect_requests.for_mood("imperative"),
        *pack.fillers.for_mood("statement"),
        *pack.hedges.for_mood("imperative"),
    ):
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
        assert sum(f in ("S", "s") for f in fields) == 1
    for key, alternatives in pack.synonyms.items():
        assert alternatives and all(a.lower() != key.lower() for a in alternatives)
        # Shipped rewrites never introduce digits (they would look like new slots).
        assert not any(c.isdigit() for a in alternatives for c in a)


def test_english_pack_has_a_full_keyboard_and_chinese_pack_its_particles() -> None:
    en, zh = resolve_pack("en"), resolve_pack("zh")
    assert set(en.keyboard) == set(string.ascii_lowercase)
    for key, neighbours in en.keyboard.items():
        assert key not in neighbours
    assert en.resolved_script == "latin" and zh.resolved_script == "cjk"
    assert {"吧", "呢", "啊"} <= set(zh.particles.all)
    assert zh.punctuation_widths["，"] == ","


# --- malformed packs --------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    text = 'lang: en\ngreetings:\n  - "Hi,"\n  - "Hello\nclosings: []\n'
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    err = info.value
    assert err.location is not None and err.location.path == path
    assert err.location.line is not None and err.location.line >= 4
    assert "YAML syntax error" in str(err) and "fix:" in str(err)


def test_wrong_type_names_the_key_line_and_fix(tmp_path: Path) -> None:
    text = "lang: en\ngreetings:\n  - Hi,\n  - 42\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    err = info.value
    assert err.location is not None and err.location.path == path
    assert err.location.line == line_of(text, "- 42")
    assert "greetings[1]" in str(err) and "a string" in str(err)
    assert err.fix is not None and "quote" in err.fix


def test_unquoted_yaml_boolean_gets_a_quoting_hint(tmp_path: Path) -> None:
    text = "lang: en\ntypo_exempt: [not, no, never]\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    assert info.value.location is not None and info.value.location.line == 2
    assert "typo_exempt[1]" in str(info.value) and "'no'" in str(info.value)


def test_list_where_mapping_expected(tmp_path: Path) -> None:
    text = "lang: en\nsynonyms:\n  - cancel\n  - call off\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    assert info.value.location is not None and info.value.location.line == line_of(text, "- cancel")
    assert "synonyms" in str(info.value) and "mapping" in str(info.value)


def test_unknown_key_names_the_key_its_line_and_a_suggestion(tmp_path: Path) -> None:
    text = "lang: en\n\ngreeting:\n  - Hi,\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    err = info.value
    assert err.location is not None and err.location.path == path and err.location.line == 3
    assert "unknown key 'greeting'" in str(err)
    assert err.fix is not None and "did you mean 'greetings'" in err.fix


def test_unknown_nested_key_lists_the_moods(tmp_path: Path) -> None:
    text = (
        "lang: en\npoliteness:\n  imperative: ['Please {s}{p}']\n  imperitive: ['Kindly {s}{p}']\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    err = info.value
    assert err.location is not None and err.location.line == 4
    assert "imperitive" in str(err) and err.expected is not None and "statement" in err.expected


def test_bad_template_is_explained(tmp_path: Path) -> None:
    text = (
        "lang: en\nhedges:\n  imperative:\n    - '{S} if possible{p}'\n    - "
        "'{sentence}, if you can'\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_pack(path)
    err = info.value
    assert err.location is not None and err.location.line == 5
    assert "hedges.imperative[1]" in str(err) and "{S}" in (err.fix or "")


def test_missing_lang_duplicate_key_and_wrong_top_level(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing required key 'lang'"):
        load_pack(write(tmp_path, "greetings: [Hi]\n", "a.yaml"))
    dup = "lang: en\ngreetings: [Hi]\ngreetings: [Hello]\n"
    with pytest.raises(InputError, match="duplicate key 'greetings'") as info:
        load_pack(write(tmp_path, dup, "b.yaml"))
    assert info.value.location is not None and info.value.location.line == 3
    with pytest.raises(InputError, match="mapping at the top level"):
        load_pack(write(tmp_path, "- lang: en\n", "c.yaml"))
    with pytest.raises(InputError, match="empty file"):
        load_pack(write(tmp_path, "", "d.yaml"))
    with pytest.raises(InputError, match="not a language code"):
        load_pack(write(tmp_path, "lang: English\n", "e.yaml"))
    with pytest.raises(InputError, match="one of"):
        load_pack(write(tmp_path, "lang: en\nreplace: [greeting]\n", "f.yaml"))
    with pytest.raises(InputError, match="keyboard"):
        load_pack(write(tmp_path, "lang: en\nkeyboard:\n  'A': qs\n", "g.yaml"))


def test_malformed_user_pack_fails_when_the_strategy_is_created(tmp_path: Path) -> None:
    path = write(tmp_path, "lang: en\nsynonyms:\n  cancel: call off\n")
    with pytest.raises(InputError) as info:
        paraphrases("Cancel order O-1", packs=[path])
    assert info.value.location is not None and info.value.location.path == path
    assert info.value.location.line == 3 and "synonyms.cancel" in str(info.value)


# --- extension --------------------------------------------------------------------------------


def test_user_pack_adds_domain_synonyms_used_by_the_strategy(tmp_path: Path) -> None:
    path = write(
        tmp_path, "lang: en\nsynonyms:\n  widget: [Acme Widget Pro]\n  my order: [my shipment]\n"
    )
    merged = resolve_pack("en", [path])
    base = resolve_pack("en")
    assert merged.synonyms["widget"] == ("Acme Widget Pro",)
    assert merged.synonyms["my order"] == ("my shipment",)  # overrides the shipped entry
    assert base.synonyms["my order"] != ("my shipment",)  # shipped pack untouched
    assert merged.greetings == base.greetings  # other sections inherited
    found = find(
        paraphrases("Return the widget from my order O-9", packs=[path]),
        lambda p: "Acme Widget Pro" in p,
        settings=settings(FAST, max_examples=1000),
    )
    assert found.text == "Return the Acme Widget Pro from my order O-9"


def test_replace_and_removal(tmp_path: Path) -> None:
    path = write(
        tmp_path, "lang: en\nreplace: [greetings]\ngreetings: ['Yo,']\nsynonyms:\n  problem: []\n"
    )
    merged = resolve_pack("en", [path])
    assert merged.greetings == ("Yo,",)
    assert "problem" not in merged.synonyms
    assert (
        apply_transforms("Fix it O-1", [("greeting", {"choice": 0})], packs=[path]).text
        == "Yo, fix it O-1"
    )


def test_list_sections_extend_without_duplicates() -> None:
    base = resolve_pack("en")
    extra = PhrasePack(lang="en", greetings=("Hi,", "Howdy,"))
    merged = merge_packs(base, extra)
    assert merged.greetings == (*base.greetings, "Howdy,")


def test_new_language_from_a_user_pack(tmp_path: Path) -> None:
    text = (
        "lang: de\nscript: latin\ngreetings: ['Hallo,']\nimperative_starts: [storniere]\n"
        "politeness:\n  imperative: ['Bitte {s}{p}']\n"
    )
    path = write(tmp_path, text)
    with pytest.raises(InvalidArgument, match="unknown lang='de'"):
        paraphrases("Storniere Bestellung O-1", lang="de")
    p = apply_transforms(
        "Storniere Bestellung O-1", [("politeness", {"choice": 0})], lang="de", packs=[path]
    )
    assert p.text == "Bitte storniere Bestellung O-1"
    # packs for other languages are ignored, so one list can serve every language
    assert apply_transforms(
        "取消订单O-1", [("greeting", {"choice": 0})], lang="zh", packs=[path]
    ).text.startswith(resolve_pack("zh").greetings[0])


def test_pack_objects_and_text_are_accepted() -> None:
    pack = load_pack_text(
        "lang: en\nclosings: ['Cheers.']\nreplace: [closings]\n", name="inline.yaml"
    )
    p = apply_transforms("Cancel order O-1", [("closing", {"choice": 0})], packs=[pack])
    assert p.text == "Cancel order O-1. Cheers."
    with pytest.raises(InputError) as info:
        load_pack_text("lang: en\nclosings: 5\n", name="inline.yaml")
    assert info.value.location is not None and str(info.value.location.path) == "inline.yaml"
