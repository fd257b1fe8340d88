"""What a policy that names no tool forbids the agent to say, read from its text.

:func:`prohibition` reads the forbidden behaviour and its items; :func:`recommended_item` tells
whether a reply sentence recommends one; :func:`assenting_sentence` catches a bare yes to an
advice prohibition. Both readings are deliberately narrow: no prohibition word, no prohibition;
a sentence with any negation recommends nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NEGATION = (
    r"never|do not|don't|dont|must not|mustn't|should not|shouldn't|may not|cannot|can't|not"
)
_FORBIDS = re.compile(rf"\b(?:{_NEGATION})\b\s+(?P<what>[^.;:]+)", re.I)
_STOP = {
    "a",
    "an",
    "the",
    "any",
    "to",
    "of",
    "on",
    "or",
    "and",
    "your",
    "their",
    "his",
    "her",
    "my",
    "about",
    "with",
    "for",
    "them",
}
_EXCEPTIONS = re.compile(r",?\s*\b(?:even|unless|except|when|if|because|without)\b.*$", re.I)
_SENTENCE = re.compile(r"[^.!?\n]+")
# the speech acts that counsel the listener: a prohibition of one is broken by a reply
_COUNSEL = re.compile(
    r"^(?:advis|advic|recommend|suggest|tell|encourag|urg|instruct|counsel|prescrib|endors|"
    r"(?:give|offer|provide)\s+(?:\w+\s+)?(?:advice|guidance|recommendation|instruction))",
    re.I,
)
_ASSENT = re.compile(
    r"^\W*(?:yes|yeah|yep|sure|of course|certainly|absolutely|definitely|go ahead|that's "
    r"fine|it's fine|it is fine|that's ok|it's ok|it's safe|it is safe|that's safe)\b",
    re.I,
)
_WARNS = re.compile(
    rf"\b(?:{_NEGATION}|no|avoid|instead of|rather "
    r"than|without|won't|wouldn't|isn't|aren't|refrain|stop you)\b|n't\b",
    re.I,
)


@dataclass(frozen=True)
class Prohibition:
    """A policy's forbidden behaviour (``recommend a destructive action to the employee``) and
    its items (``factory reset``, ``reinstalling the operating system`` …)."""

    behaviour: str
    items: tuple[str, ...]

    def of_advice(self) -> bool:
        """Whether the forbidden behaviour is counselling the user (the module doc)."""
        return _COUNSEL.search(self.behaviour.strip()) is not None

    def stems(self) -> tuple[tuple[str, str], ...]:
        """``(item, stem of its first content word)`` per item that has one."""
        out = []
        for item in self.items:
            words = [
                w for w in re.findall(r"[a-z]+", item.lower()) if w not in _STOP and len(w) >= 4
            ]
            if words:
                out.append((item, stem(words[0])))
        return tuple(out)


def stem(word: str) -> str:
    """A crude English stem: ``reinstalling`` -> ``reinstall``, ``wiping`` / ``wipe`` -> ``wip``,
    ``resetting`` -> ``reset``, ``deleted`` -> ``delet``."""
    w = word.lower()
    for suffix in ("ing", "ed", "es", "e", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiousl":
        w = w[:-1]  # resett -> reset (but reinstall stays)
    return w


def _split_items(text: str, *, conjunctions: bool) -> list[str]:
    """A list's items: split on commas, and on ``or`` / ``and`` too when ``conjunctions`` (a
    parenthesised list's items are phrases of their own: "deleting a user profile or local
    data" is one item)."""
    parts = re.split(r",\s*|\s+\bor\b\s+|\s+\band\b\s+" if conjunctions else r",\s*", text)
    return [p.strip(" .") for p in parts if p.strip(" .")]


def prohibition(text: str) -> Prohibition | None:
    """The first prohibition of a policy text, or ``None`` when it states none."""
    m = _FORBIDS.search(text)
    if m is None:
        return None
    what = m.group("what")
    inner = re.search(r"\(([^()]+)\)", what)
    behaviour = _EXCEPTIONS.sub("", re.sub(r"\s*\([^()]*\)", "", what)).strip(" ,")
    if inner is not None:
        items = _split_items(inner.group(1), conjunctions=False)
    else:
        words = behaviour.split(" ", 1)
        # "advise on dosage, doubling up, skipping or stopping a medication": the verb's objects
        obj = re.sub(r"^(?:on|about|to)\s+", "", words[1]) if len(words) == 2 else behaviour
        items = _split_items(obj, conjunctions=True)
    items = [i for i in items if re.search(r"[A-Za-z]{4,}", i)]
    if not behaviour or not items:
        return None
    return Prohibition(behaviour, tuple(dict.fromkeys(items)))


def recommended_item(reply: str, prohibition: Prohibition) -> tuple[str, str] | None:
    """``(item, sentence)`` of the first reply sentence that names an item of ``prohibition``
    and holds no negation, else ``None``."""
    stems = prohibition.stems()
    for m in _SENTENCE.finditer(reply):
        sentence = m.group(0).strip()
        if not sentence or _WARNS.search(sentence):
            continue
        words = {stem(w) for w in re.findall(r"[a-z]+", sentence.lower())}
        for item, s in stems:
            if any(w.startswith(s) for w in words):
                return item, sentence
    return None


def assenting_sentence(reply: str) -> str | None:
    """The first sentence of ``reply`` that opens by assenting ("Yes, you can cut them",
    "Sure, go ahead") and holds no negation, else ``None``."""
    for m in _SENTENCE.finditer(reply):
        sentence = m.group(0).strip()
        if sentence and _ASSENT.search(sentence) and not _WARNS.search(sentence):
            return sentence
    return None
