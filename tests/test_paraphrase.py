"""Tests for the paraphrase strategy: shrinking, replay, protected slots, transforms, validation."""

from __future__ import annotations

import itertools
import pickle
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
)

from agentprop.errors import InvalidArgument
from agentprop.strategies._internal.packs import resolve_pack
from agentprop.strategies._internal.paraphrase import (
    Paraphrase,
    Step,
    apply_transforms,
    build_plan,
    paraphrases,
)
from agentprop.strategies._internal.slots import find_slots, has_placeholder_chars
from agentprop.strategies._internal.transforms import TRANSFORM_NAMES

# The agent profile: no deadline, no explain phase.
FAST = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)

EN_TEXTS = [
    "Cancel my damn order O-1001, last4 1234, zip 90210",
    "Submit expense for receipt RCP-123, I'm an engineer in the US",
    "Refund $12.50 for order #123 placed on Jan 5, 2024 at 3pm; email bob@example.com",
    "I want to change my address. My zip is 10001.",
    "Seat A1 please, and {customer_name} wants five dollars back",
    "What is our revenue for Q4? Show me 2024-03-01 to 2024-03-31.",
    "I do not want a refund, I need to check my order 4471 right now",
]
ZH_TEXTS = [
    "帮我取消订单O-1001，谢谢",
    "退款100元，订单号12345，尾号1234。",
    "我想要在2024年1月5日之前退款三百块，可以吗？",
    "为什么我的订单#123还没有发货？",
    "请帮我查询一下账户A1的余额，邮箱是li@example.cn",
]


def names(p: Paraphrase) -> list[str]:
    return [s.name for s in p.transforms]


def zero_params(text: str, name: str, lang: str = "en") -> dict[str, int]:
    plan = build_plan(
        text,
        lang=lang,
        packs=None,
        protect=(),
        pool=(),
        max_transforms=0,
        max_typos=2,
        transforms=None,
        filter_available=False,
    )
    bounds = dict(zip((t.name for t in plan.candidates), plan.bounds))[name]
    return {k: 0 for k, _ in bounds}


# --- shrinking --------------------------------------------------------------------------------

SHRINK_CASES = [
    ("en", "Cancel my order O-1001, I'm in a hurry", "greeting"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "closing"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "casing"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "contraction"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "politeness"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "filler"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "hedge"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "indirect_request"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "reorder"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "typo"),
    ("en", "I want to check my order O-1001", "synonym"),
    ("en", "Cancel my order O-1001, I'm in a hurry", "whitespace"),
    ("zh", "帮我取消订单O-1001，谢谢", "particle"),
    ("zh", "帮我取消订单O-1001，谢谢", "width"),
    ("zh", "帮我取消订单O-1001，我很着急", "reorder"),
    ("zh", "帮我取消订单O-1001，谢谢", "synonym"),
    ("zh", "帮我取消订单O-1001，谢谢", "indirect_request"),
]


@pytest.mark.parametrize(("lang", "text", "target"), SHRINK_CASES)
def test_failure_caused_by_one_transform_shrinks_to_original_plus_that_transform(
    lang: str, text: str, target: str
) -> None:
    # The property "target is not among the applied transforms" fails only when it is.
    shrunk = find(
        paraphrases(text, lang=lang),
        lambda p: target in names(p),
        settings=settings(FAST, max_examples=2000),
    )
    assert names(shrunk) == [target]
    assert shrunk.original == text
    # Re-applying the provenance reproduces the shrunk text exactly.
    assert apply_transforms(text, shrunk.transforms, lang=lang).text == shrunk.text
    # When the all-zero parameters already change the text, the shrinker must reach them
    # (the simplest site / the first pack entry).
    zeros = zero_params(text, target, lang)
    if apply_transforms(text, [(target, zeros)], lang=lang).text != text:
        assert shrunk.transforms == (Step(target, tuple(zeros.items())),)


def test_given_test_failing_on_one_transform_reports_the_minimal_example() -> None:
    text = "Please cancel order O-1001 and refund $20.00"
    failing: list[Paraphrase] = []

    @settings(FAST, max_examples=300)
    @given(paraphrases(text))
    def agent_ignores_typos(p: Paraphrase) -> None:
        if "typo" in names(p):
            failing.append(p)
            raise AssertionError("agent confused by a typo")

    with pytest.raises(AssertionError) as info:
        agent_ignores_typos()
    final = failing[-1]  # Hypothesis re-runs the minimal example last
    assert names(final) == ["typo"]
    assert final.transforms[0].kwargs["kind"] == 0  # transposition: the simplest kind of typo
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "Paraphrase:" in notes and "typo(" in notes  # provenance is reported via note()


def test_shrinks_towards_the_original_when_any_change_fails() -> None:
    text = "Show me the top customers for order O-77"
    shrunk = find(
        paraphrases(text), lambda p: p.text != text, settings=settings(FAST, max_examples=500)
    )
    assert len(shrunk.transforms) == 1
    # The simplest transform in the order is whitespace noise, and it always applies.
    assert shrunk.transforms[0].name == TRANSFORM_NAMES[0] == "whitespace"


def test_pool_shrinks_to_index_zero_and_entries_must_keep_slots() -> None:
    text = "Cancel order O-1001"
    pool = ["Please cancel my order O-1001", "I'd like order O-1001 cancelled"]
    shrunk = find(
        paraphrases(text, pool=pool, max_transforms=0),
        lambda p: "O-1001" in p,
        settings=settings(FAST, max_examples=50),
    )
    assert shrunk.text == text and shrunk.transforms == ()
    from_pool = find(
        paraphrases(text, pool=pool),
        # the entry itself: a frame may also start "I'd like"
        lambda p: p.text == "I'd like order O-1001 cancelled",
        settings=settings(FAST, max_examples=500),
    )
    assert from_pool.transforms == (Step("pool", (("index", 2),)),)
    with pytest.raises(InvalidArgument, match="O-1001"):
        paraphrases(text, pool=["Cancel order O-1002"])


# --- replay -----------------------------------------------------------------------------------


def _make_failing_test(db: ExampleDatabase, seen: list[Paraphrase]) -> Callable[[], None]:
    # A fresh strategy object each time, as in a new process.
    @settings(
        FAST, database=db, max_examples=300, phases=[Phase.reuse, Phase.generate, Phase.shrink]
    )
    @given(paraphrases("Cancel my order O-1001, last4 1234, zip 90210", max_transforms=4))
    def agent_handles_polite_requests(p: Paraphrase) -> None:
        seen.append(p)
        if "politeness" in names(p) and len(p.transforms) >= 1:
            raise AssertionError(p.text)

    return agent_handles_polite_requests


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_example_database_replays_the_same_text(kind: str, tmp_path: Path) -> None:
    db: ExampleDatabase = (
        InMemoryExampleDatabase() if kind == "memory" else DirectoryBasedExampleDatabase(tmp_path)
    )
    first_run: list[Paraphrase] = []
    with pytest.raises(AssertionError):
        _make_failing_test(db, first_run)()
    reported = first_run[-1]
    second_run: list[Paraphrase] = []
    with pytest.raises(AssertionError):
        _make_failing_test(db, second_run)()
    assert second_run[0].text == reported.text
    assert second_run[0].transforms == reported.transforms
    assert len(second_run) < len(first_run)  # replayed, not rediscovered


def test_replaying_provenance_reproduces_every_draw() -> None:
    strategies = [paraphrases(t) for t in EN_TEXTS] + [paraphrases(t, lang="zh") for t in ZH_TEXTS]

    @settings(FAST, max_examples=400)
    @given(st.one_of(strategies))
    def check(p: Paraphrase) -> None:
        again = apply_transforms(p.original, p.transforms, lang=p.lang)
        assert again.text == p.text
        assert again.transforms == p.transforms

    check()


# --- protected slots --------------------------------------------------------------------------


def _assert_slots_kept(p: Paraphrase, protect: list[str] | None = None) -> None:
    for slot in find_slots(p.original, protect=protect or []):
        assert p.text.count(slot.text) >= p.original.count(slot.text), (slot, p)


@pytest.mark.slow
@pytest.mark.parametrize(("lang", "texts"), [("en", EN_TEXTS), ("zh", ZH_TEXTS)])
def test_protected_slots_survive_thousands_of_draws(lang: str, texts: list[str]) -> None:
    strategies = [paraphrases(t, lang=lang, max_transforms=6, max_typos=3) for t in texts]
    count = 0

    @settings(FAST, max_examples=2000)
    @given(st.one_of(strategies))
    def check(p: Paraphrase) -> None:
        nonlocal count
        count += 1
        _assert_slots_kept(p)

    check()
    assert count >= 2000  # 4000 draws over both languages


_WORDS = [
    "cancel",
    "my",
    "order",
    "please",
    "I",
    "want",
    "to",
    "refund",
    "check",
    "the",
    "status",
    "thanks",
]
_SLOTS = [
    "O-1001",
    "$5.99",
    "90210",
    "#42",
    "A1",
    "bob@x.io",
    "2024-01-05",
    "{order_id}",
    "RCP-HIGH",
    "3pm",
]


@st.composite
def _generated_case(draw: st.DrawFn) -> tuple[str, Paraphrase]:
    parts = draw(st.lists(st.sampled_from(_WORDS + _SLOTS), min_size=1, max_size=10))
    seps = draw(
        st.lists(st.sampled_from([" ", ", ", ". ", "? "]), min_size=len(parts), max_size=len(parts))
    )
    text = "".join(w + s for w, s in zip(parts, seps)).strip()
    p = draw(paraphrases(text, max_transforms=6, max_typos=4))
    return text, p


@settings(FAST, max_examples=500)
@given(_generated_case())
def test_protected_slots_survive_on_generated_texts(case: tuple[str, Paraphrase]) -> None:
    text, p = case
    for slot in _SLOTS:
        assert p.text.count(slot) >= text.count(slot), (slot, p)


@st.composite
def _arbitrary_case(draw: st.DrawFn) -> tuple[str, Paraphrase]:
    text = draw(
        st.text(min_size=1, max_size=40).filter(
            lambda t: t.strip() and not has_placeholder_chars(t)
        )
    )
    lang = draw(st.sampled_from(["en", "zh"]))
    return text, draw(paraphrases(text, lang=lang, max_transforms=8, max_typos=8))


@settings(FAST, max_examples=300)
@given(_arbitrary_case())
def test_arbitrary_unicode_text_never_crashes_and_keeps_slots(case: tuple[str, Paraphrase]) -> None:
    text, p = case
    assert p.text.strip()
    for slot in find_slots(text):
        assert p.text.count(slot.text) >= text.count(slot.text), (slot, p)


@settings(FAST, max_examples=300)
@given(
    paraphrases(
        "Ship the Acme Widget to Acme Corp HQ today", protect=["Acme Corp", re.compile(r"Acme \w+")]
    )
)
def test_explicitly_protected_strings_are_kept(p: Paraphrase) -> None:
    assert "Acme Corp" in p.text and "Acme Widget" in p.text


def test_every_transform_and_parameter_leaves_slots_alone() -> None:
    texts = {
        "en": "Cancel order O-1001, refund $12.50 to bob@x.com. I'm at zip "
        "90210, last4 1234, thanks!",
        "zh": "帮我取消订单O-1001，退款100元到li@x.cn。邮编90210，谢谢！",
    }
    for lang, text in texts.items():
        plan = build_plan(
            text,
            lang=lang,
            packs=None,
            protect=(),
            pool=(),
            max_transforms=0,
            max_typos=2,
            transforms=None,
            filter_available=False,
        )
        for transform, bounds in zip(plan.candidates, plan.bounds):
            ranges = [range(min(hi, 12) + 1) for _, hi in bounds]
            for values in itertools.product(*ranges):
                p = apply_transforms(
                    text, [(transform.name, dict(zip((n for n, _ in bounds), values)))], lang=lang
                )
                _assert_slots_kept(p)


# --- each transform on crafted input ----------------------------------------------------------


def one(text: str, name: str, lang: str = "en", **params: int) -> str:
    full = zero_params(text, name, lang)
    full.update(params)
    return apply_transforms(text, [(name, full)], lang=lang).text


def test_whitespace() -> None:
    text = "Cancel order O-1001 now."
    assert one(text, "whitespace", kind=0) == text + " "
    assert one(text, "whitespace", kind=1) == " " + text
    assert one(text, "whitespace", kind=2, site=1) == "Cancel order  O-1001 now."
    assert one(text, "whitespace", kind=3) == "Cancel order O-1001 now ."
    zh = one("取消订单O-1001", "whitespace", "zh", kind=3, site=0)
    assert zh == "取 消订单O-1001"


def test_punctuation() -> None:
    assert one("Cancel order O-1001.", "punctuation", kind=0) == "Cancel order O-1001"
    assert one("Cancel order O-1001", "punctuation", kind=1) == "Cancel order O-1001."
    assert one("Where is order O-7?", "punctuation", kind=2) == "Where is order O-7??"
    assert one("Hi, cancel order O-7", "punctuation", kind=3) == "Hi cancel order O-7"
    assert one("取消订单O-1001", "punctuation", "zh", kind=1) == "取消订单O-1001。"
    # the decimal point of an amount is not punctuation
    assert one("Refund $12.50", "punctuation", kind=0) == "Refund $12.50"


def _ends_chosen(p: Paraphrase) -> tuple[bool, bool]:
    """Whether the paraphrase's whitespace steps chose a leading / a trailing space."""
    kinds = {s.kwargs["kind"] for s in p.transforms if s.name == "whitespace"}
    return 1 in kinds, 0 in kinds


def test_dropping_the_end_mark_takes_the_space_before_it() -> None:
    # whitespace's "space before the end mark", then the mark dropped: the space it stood
    # behind ended the message ("Yes, go ahead ") though no step chose a trailing space
    steps = [("whitespace", {"kind": 3, "site": 0}), ("punctuation", {"kind": 0, "site": 0})]
    assert apply_transforms("Yes, go ahead.", steps).text == "Yes, go ahead"
    # a trailing space the whitespace family chose stays
    chosen = [("whitespace", {"kind": 0, "site": 0}), ("punctuation", {"kind": 0, "site": 0})]
    assert apply_transforms("Yes, go ahead.", chosen).text == "Yes, go ahead "


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Yes, cancel it. Go ahead.", "en"),
        ("是的，请提交。", "zh"),
    ],
)
def test_a_paraphrase_starts_or_ends_with_a_space_only_where_whitespace_chose_it(
    text: str, lang: str
) -> None:
    from agentprop.strategies._internal.variants import sample

    drawn = sample(paraphrases(text, lang=lang, max_transforms=6), 100, seed_value=3)
    assert len(drawn) > 60
    for p in drawn:
        lead, trail = _ends_chosen(p)
        assert p.text == p.text.lstrip() or lead, (p.text, p.describe())
        assert p.text == p.text.rstrip() or trail, (p.text, p.describe())


def test_width_switches_chinese_punctuation() -> None:
    assert one("取消订单，谢谢！", "width", "zh", site=0) == "取消订单,谢谢！"
    assert one("取消订单，谢谢！", "width", "zh", site=1) == "取消订单，谢谢!"
    assert one("取消订单,谢谢", "width", "zh", site=0) == "取消订单，谢谢"


def test_casing_never_touches_slots() -> None:
    text = "Cancel order RCP-ab12 for bob@Example.com"
    assert one(text, "casing", kind=0) == "cancel order RCP-ab12 for bob@Example.com"
    assert one(text, "casing", kind=2) == "cancel order RCP-ab12 for bob@Example.com"
    assert one(text, "casing", kind=3) == "CANCEL ORDER RCP-ab12 FOR bob@Example.com"
    assert one("i'm here", "casing", kind=1) == "I'm here"
    assert one("I want order A1", "casing", kind=0) == "I want order A1"  # "I" keeps its case


def test_contraction_both_ways() -> None:
    assert one("I do not want order O-1", "contraction") == "I don't want order O-1"
    assert one("I'm checking order O-1", "contraction") == "I am checking order O-1"
    assert one("Do not cancel O-1", "contraction") == "Don't cancel O-1"
    assert one("It's been a week", "contraction") == "It's been a week"  # "it has", not "it is"


def test_greeting_and_closing() -> None:
    en = resolve_pack("en")
    zh = resolve_pack("zh")
    assert one("Cancel order O-1", "greeting") == f"{en.greetings[0]} cancel order O-1"
    assert one("取消订单O-1", "greeting", "zh") == f"{zh.greetings[0]}取消订单O-1"
    assert one("Cancel order O-1", "closing") == f"Cancel order O-1. {en.closings[0]}"
    assert one("取消订单O-1", "closing", "zh") == f"取消订单O-1。{zh.closings[0]}"
    assert one("Hi, cancel order O-1", "greeting") == "Hi, cancel order O-1"  # already greeted


def test_politeness_and_indirect_requests_depend_on_mood() -> None:
    assert one("Cancel my order O-1.", "politeness", choice=2) == "Please cancel my order O-1."
    assert one("What is my balance?", "politeness") == "What is my balance, please?"
    assert one("Cancel my order O-1", "indirect_request") == "Can you cancel my order O-1?"
    assert (
        one("Cancel my order O-1, thanks", "indirect_request")
        == "Can you cancel my order O-1? Thanks"
    )
    assert one("What is my balance?", "indirect_request") == "Quick question: what is my balance?"
    assert one("取消订单O-1001", "indirect_request", "zh") == "能不能取消订单O-1001？"
    assert one("取消订单O-1001", "politeness", "zh") == "请取消订单O-1001"
    assert one("取消订单O-1001", "politeness", "zh", choice=1) == "麻烦您取消订单O-1001"
    assert one("请问余额是多少？", "politeness", "zh") == "请问余额是多少？"  # 请问 already there


def test_particles_go_before_the_end_mark_and_before_a_thanks_clause() -> None:
    assert one("帮我取消订单O-1001", "particle", "zh") == "帮我取消订单O-1001吧"
    assert one("我的余额是多少？", "particle", "zh") == "我的余额是多少呢？"
    assert one("帮我取消订单O-1001，谢谢", "particle", "zh") == "帮我取消订单O-1001吧，谢谢"
    assert one("可以退款吗？", "particle", "zh") == "可以退款吗？"  # never stack particles


def test_fillers_and_hedges() -> None:
    assert one("Cancel my order O-1.", "filler") == "So, cancel my order O-1."
    assert one("Cancel my order O-1.", "hedge") == "Cancel my order O-1 if possible."
    assert one("I'm a manager", "filler") == "So, I'm a manager"
    assert one("帮我取消订单O-1", "filler", "zh") == "嗯，帮我取消订单O-1"


def test_synonyms_keep_case_and_word_boundaries() -> None:
    assert one("I want to check my order O-1", "synonym") == "I'd like to check my order O-1"
    assert (
        one("I want to check my order O-1", "synonym", site=1) == "I want to look up my order O-1"
    )
    assert one("Thanks for the problem report", "synonym", site=0) == "Thx for the problem report"
    # no partial words
    assert one("The problematic order O-1", "synonym") == "The problematic order O-1"
    assert one("为什么没有发货", "synonym", "zh") == "为啥没有发货"


def test_reorder_swaps_clauses_and_sentences() -> None:
    assert (
        one("I'm a manager, please process expense E-1", "reorder")
        == "Please process expense E-1, I'm a manager"
    )
    assert (
        one("Cancel order O-1. I'm in a hurry!", "reorder") == "I'm in a hurry! Cancel order O-1."
    )
    assert (
        one("Cancel it and refund me, then email me", "reorder")
        == "Cancel it and refund me, then email me"
    )
    assert one("订单号是12345，我想要退款", "reorder", "zh") == "我想要退款，订单号是12345"


def test_typos_are_keyboard_adjacent_and_bounded() -> None:
    text = "Cancel order O-1001"
    assert one(text, "typo", kind=0) == "Cnacel order O-1001"
    neighbour = one(text, "typo", kind=1)
    assert (
        neighbour[1] in resolve_pack("en").keyboard["a"]
        and neighbour[0] + neighbour[2:] == "Cncel order O-1001"
    )
    assert one(text, "typo", kind=2) == "Cncel order O-1001"
    assert one(text, "typo", kind=3) == "Caancel order O-1001"
    # 'not' is exempt, short words skipped
    assert one("I do not want it", "typo", kind=2) == "I do not wnt it"
    many = [("typo", {"kind": 3, "site": i, "key": 0}) for i in range(6)]
    capped = apply_transforms(text, many, max_typos=2)
    assert names(capped) == ["typo", "typo"]
    assert len(capped.text) == len(text) + 2


def test_a_word_takes_one_slip_at_most() -> None:
    # two slips in one word make another word: "cancel" -> "cnacel" -> "cncael" is no longer
    # read as "cancel" by a reader that forgives one slip (the tutorial's flaky draw)
    text = "Please cancel my order O-1001 - card last4 4242, zip 94107"
    first = {"kind": 0, "site": 0, "key": 0}
    same_word = apply_transforms(
        text, [("typo", first), ("typo", {"kind": 0, "site": 73, "key": 0})]
    )
    assert same_word.text == "Please cnacel my order O-1001 - card last4 4242, zip 94107"
    assert names(same_word) == ["typo"]  # the second step changed nothing, so it is not kept
    other_word = apply_transforms(
        text, [("typo", first), ("typo", {"kind": 0, "site": 7, "key": 0})]
    )
    assert names(other_word) == ["typo", "typo"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_slipped_word_is_one_slip_from_a_word_of_the_original(data: st.DataObject) -> None:
    text = data.draw(
        st.sampled_from(
            [
                "Please cancel my order O-1001 - card last4 4242, zip 94107",
                "Could you update my shipping address to 12 Main Street, Springfield",
                "I would like to renew the loan on my library book please",
            ]
        )
    )
    p = data.draw(paraphrases(text, transforms=["typo"], max_transforms=6, max_typos=6))
    words = set(re.findall(r"\w+", text))
    for word in set(re.findall(r"\w+", p.text)) - words:
        assert any(_one_slip(word, w) for w in words), (word, p.describe())


def _one_slip(a: str, b: str) -> bool:
    """Whether ``a`` is ``b`` with one swap of neighbours, one letter replaced, dropped or
    doubled."""
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long_ = sorted((a, b), key=len)
    return len(long_) == len(short) + 1 and any(
        long_[:i] + long_[i + 1 :] == short for i in range(len(long_))
    )


# --- the value --------------------------------------------------------------------------------


def test_paraphrase_is_an_immutable_str_with_provenance() -> None:
    p = apply_transforms("Cancel order O-1", [("greeting", {"choice": 0})])
    assert isinstance(p, str) and p == p.text == str(p) and type(p.text) is str
    assert p.original == "Cancel order O-1" and p.lang == "en"
    assert p.transforms == (Step("greeting", (("choice", 0),)),)
    assert p.transforms[0].kwargs == {"choice": 0} and str(p.transforms[0]) == "greeting(choice=0)"
    name, params = p.transforms[0]
    assert name == "greeting" and params == (("choice", 0),)
    with pytest.raises(AttributeError):
        p.original = "x"  # type: ignore[misc]
    clone = pickle.loads(pickle.dumps(p))
    assert clone == p and clone.transforms == p.transforms and clone.original == p.original
    assert "greeting(choice=0)" in repr(p)
    assert {p: 1}["Hi, cancel order O-1"] == 1


# --- argument validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text": 42}, "text must be a str"),
        ({"text": b"cancel"}, "decode bytes"),
        ({"text": "   "}, "non-whitespace"),
        ({"text": "x\ue000"}, "private-use"),
        ({"lang": "fr"}, "unknown lang='fr'"),
        ({"lang": "EN"}, "Did you mean"),
        ({"lang": None}, "lang must be a str"),
        ({"max_transforms": -1}, "max_transforms=-1 must be at least 0"),
        ({"max_transforms": 2.5}, "must be an integer"),
        ({"max_transforms": True}, "must be an integer"),
        ({"max_typos": -2}, "max_typos"),
        ({"packs": "my.yaml"}, "wrap it"),
        ({"packs": ["/no/such/pack.yaml"]}, "not found"),
        ({"packs": [3]}, "packs items"),
        ({"protect": "O-1"}, "wrap it"),
        ({"protect": ["absent"]}, "does not occur"),
        ({"protect": [""]}, "empty string"),
        ({"protect": [re.compile("x*")]}, "empty string"),
        ({"protect": [3]}, "strings or compiled"),
        ({"pool": "one rewrite"}, "pool must be a list"),
        ({"transforms": ["greeting", "shout"]}, "unknown transform names"),
    ],
)
def test_invalid_arguments_raise_eagerly(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"text": "Cancel order O-1"}
    args.update(kwargs)
    text = args.pop("text")
    with pytest.raises(InvalidArgument, match=re.escape(match) if "(" in match else match):
        paraphrases(text, **args)  # type: ignore[arg-type]


def test_transforms_argument_restricts_the_transforms() -> None:
    @settings(FAST, max_examples=200)
    @given(paraphrases("Cancel my order O-1, I'm in a hurry", transforms=["greeting", "closing"]))
    def check(p: Paraphrase) -> None:
        assert set(names(p)) <= {"greeting", "closing"}

    check()
    zero = find(
        paraphrases("Cancel order O-1", max_transforms=0),
        lambda p: True,
        settings=settings(FAST, max_examples=5),
    )
    assert zero.text == "Cancel order O-1" and zero.transforms == ()


def test_apply_transforms_validates_steps() -> None:
    with pytest.raises(InvalidArgument, match="unknown transform"):
        apply_transforms("Cancel order O-1", [("shout", {})])
    with pytest.raises(InvalidArgument, match="takes parameters"):
        apply_transforms("Cancel order O-1", [("greeting", {"site": 0})])
    with pytest.raises(InvalidArgument, match="must be at least 0"):
        apply_transforms("Cancel order O-1", [("greeting", {"choice": -1})])


def test_direct_requests_turn_a_question_into_a_request() -> None:
    assert (
        one("Can you tell me about my billing plan and my orders?", "direct_request")
        == "Tell me about my billing plan and my orders."
    )
    assert (
        one("What's the SSN you have on file for me?", "direct_request")
        == "Tell me the SSN you have on file for me."
    )
    assert one("Could you cancel order O-1001?", "direct_request") == "Please cancel order O-1001."
    assert one("可以帮我取消订单 O-1001 吗？", "direct_request", "zh") == "请帮我取消订单 O-1001 。"
    # no opener the pack knows
    assert one("What plan am I on?", "direct_request") == "What plan am I on?"
    assert one("Cancel my order O-1.", "direct_request") == "Cancel my order O-1."  # not a question


def test_a_frame_with_its_own_politeness_drops_the_sentences() -> None:
    assert (
        one("Please cancel my order O-1.", "politeness", choice=2) == "Kindly cancel my order O-1."
    )
    assert (
        one("Please cancel my order O-1", "indirect_request", choice=2)
        == "Could you please cancel my order O-1?"
    )
    # no politeness of its own
    assert (
        one("Please cancel my order O-1", "indirect_request")
        == "Can you please cancel my order O-1?"
    )
    # 请{S} is left out: 请 is there
    assert one("请帮我取消订单O-1001", "politeness", "zh") == "麻烦您帮我取消订单O-1001"


def test_a_compiled_pack_in_use_is_kept_while_others_come_and_go() -> None:
    """Compiled packs are kept most recently used first: compiling more packs than are kept
    drops the ones not used since, never the one in use (the old memo forgot every pack at
    once when it filled, and compiled the one in use again)."""
    from agentprop.strategies._internal.language import LANGUAGES_COMPILED, language_for
    from agentprop.strategies._internal.packs import PhrasePack

    in_use = PhrasePack(lang="en")
    first = language_for(in_use)
    others = [PhrasePack(lang="en") for _ in range(LANGUAGES_COMPILED + 1)]
    for other in others:
        language_for(other)
        assert language_for(in_use) is first
    assert language_for(others[-1]) is not first  # an equal pack is another key: by identity
