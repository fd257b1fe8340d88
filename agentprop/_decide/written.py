"""Turns written by a model: an input model's rewrites and a simulated user's answers (opt-in).

Invariants: every request goes through the model-client layer with the writer's seed as trial,
so it replays offline; every written turn is screened (:meth:`InputWriter.screen`) before an
agent sees it, and a rejected one is dropped and counted by reason; a written turn is a choice
(:class:`WrittenChoice`) the shrinker can remove or simplify.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import TextPrompt, provider_named
from agentprop._util.aio import run_sync
from agentprop.errors import (
    BudgetExhausted,
    CacheError,
    CacheMiss,
    InputError,
    InputModelUnavailable,
    InvalidArgument,
    ParaphrasePoolError,
)
from agentprop.strategies._internal.llm_pool import PoolScreen, RejectedParaphrase, parse_candidates
from agentprop.strategies._internal.model_written import Realisation

__all__ = [
    "PERSONAS",
    "PROMPT_VERSION",
    "InputModelOptions",
    "InputModelUnavailable",
    "SessionRealiser",
    "InputWriter",
    "WrittenChoice",
    "WrittenTurn",
    "describe_summary",
    "family_prompt",
    "merge_summaries",
    "user_prompt",
]

PROMPT_VERSION = 1
"""Version of the prompts and of the screen (in every request, so a change asks again)."""

REPEATS = frozenset({"identical", "duplicate"})
"""Drops that are no contradiction (the template's words again, or a repeat): never counted as a
simulator's error."""

PROVIDERS = {
    "anthropic": "anthropic.messages",
    "openai": "openai.chat",
    "openai-responses": "openai.responses",
}
"""The input model's API by the name ``--input-model PROVIDER:MODEL`` uses."""

PERSONAS: dict[str, tuple[str, ...]] = {
    "patient": ("polite", "answers in full sentences"),
    "hurried": ("terse", "in a rush"),
    "confused": ("unsure of the terms", "rambles a little"),
    "adversarial": ("pushy", "impatient with questions"),
}
"""The simulated user's personas (docs/input-families.md: register, emotion, τ-bench personas)
and their traits; a persona with every trait dropped is a plain user."""

FAMILY_TEXT: dict[str, str] = {
    "": "any natural wording",
    "hedge": "hedged: the user softens the request (if possible, maybe)",
    "urgency": "hurried: short, urgent, informal",
    "casual": "casual: relaxed, chatty",
    "formal": "formal: careful, polite, complete sentences",
    "politeness": "polite: please, thank you",
    "emotion": "emotional: the user says how they feel about it",
    "distractor": "with a distractor: a short unrelated remark about the user's "
    "day, no other request",
    "authority": "who the user speaks for: the account holder, or someone acting for them",
    "negated_distractor": "with a negated remark: what the message is not about",
    "confirmation_wording": "a confirmation in the user's own words",
    "refusal_wording": "a refusal in the user's own words",
    "negated_alternative": "with a negated alternative: the user also says which other action "
    'they do not want ("I don\'t want to change my address"), the request itself unchanged',
    "stated_fact": "with a stated fact: the user asserts a status or eligibility the assistant "
    "has to check (\"I'm sure it's within the limit\"), no new value",
}
"""The families a model may write a turn in, and how the prompt describes each ("" is the
template realised in any natural wording)."""

NOT_MODEL_WRITTEN: dict[str, str] = {
    "bare_answer": "the values alone: the template's values, as they are, say it",
    "correction": "the mistaken value must be one digit off a slot value, which the screen "
    "would reject as a new value",
    "several_intents": "a second request is what the prompt's rules forbid",
    "injected_instruction": "the pack's reviewed instructions; a model may refuse, or change "
    "the request",
    "traditional": "a script, not a wording: the characters are converted one to one",
}
"""The generator's input families (:data:`agentprop.strategies._internal.families.FAMILIES`)
a model does not write a turn in, and why; every other one has a :data:`FAMILY_TEXT`."""

REQUEST_FAMILIES = ("hedge", "urgency", "casual", "formal")
"""Register families offered on a request turn besides the pack's own families."""

LANGUAGES = {"en": "English", "zh": "Chinese (simplified)"}

SIMULATOR_REASONS = {
    "missing_slot": "drops_slot",
    "added_slot": "changes_goal",
    "missing_keywords": "changes_goal",
    "changed_intent": "changes_goal",
    "spec_words": "changes_goal",
}
"""A simulator turn's rejection, named as the scenario sees it (``answers_withheld``: it gives a
value the path says the user cannot give)."""


class InputModelOptions(BaseModel):
    """What writes model-written turns: ``model`` as ``PROVIDER:MODEL`` (providers: anthropic,
    openai, openai-responses), ``n`` texts asked per request, ``simulated_user`` (follow-up turns
    played by a simulated user), ``probability`` (of a drawn turn being model-written), and the
    endpoint and API cache (``None``: the model-client defaults and the run context's mode)."""

    model_config = ConfigDict(frozen=True)

    model: str | None = None
    simulated_user: bool = False
    n: int = 6
    probability: float = 0.5
    seed: int = 0
    base_url: str | None = None
    api_key: str | None = None
    cache: str | None = None
    cache_mode: str | None = None
    option: str = "--input-model"
    """The option that set ``model`` (named in errors: ``--agentprop-input-model`` in pytest)."""

    @field_validator("model")
    @classmethod
    def _provider_model(cls, value: str | None) -> str | None:
        if value is None:
            return None
        provider, sep, name = value.partition(":")
        if not sep or provider not in PROVIDERS or not name.strip():
            raise ValueError(
                f"--input-model {value!r} is not PROVIDER:MODEL; write e.g. "
                "anthropic:claude-haiku-4-5 or openai:gpt-4o-mini (providers: "
                f"{', '.join(PROVIDERS)})"
            )
        return value

    @field_validator("n")
    @classmethod
    def _positive(cls, value: int) -> int:
        if not 1 <= value <= 20:
            raise ValueError(f"n={value}: ask for 1 to 20 texts per request")
        return value

    @property
    def enabled(self) -> bool:
        return self.model is not None


class WrittenChoice(BaseModel):
    """A turn written by the model: in ``family`` (``""``: the template in any wording) or, with
    a ``persona``, by the simulated user with that persona's kept ``traits``; ``index`` picks
    one of the validated texts (modulo how many there are)."""

    model_config = ConfigDict(frozen=True)

    family: str = ""
    persona: str = ""
    traits: tuple[str, ...] = ()
    index: int = 0

    @property
    def simulated(self) -> bool:
        return bool(self.persona)

    @property
    def family_key(self) -> str:
        """The family as reports and the search's weights name it (``model:hedge``,
        ``user:hurried``)."""
        return f"user:{self.persona}" if self.persona else f"model:{self.family or 'template'}"

    def label(self) -> str:
        if self.persona:
            return f"user:{self.persona}" + (f"({', '.join(self.traits)})" if self.traits else "")
        return f"model:{self.family or 'template'}"

    def describe(self) -> str:
        return f"{self.label()}[{self.index}]"


@dataclass(frozen=True)
class WrittenTurn:
    """What a turn's writing needs: the template's text, its language and role, the protected
    slot values it writes, the goal (the conversation's first message), the values the path
    withholds, and the facts check (``keeps(text, names)``) of the turn."""

    text: str
    lang: str
    role: str
    protect: tuple[str, ...]
    goal: str
    withheld: tuple[str, ...] = ()
    withheld_names: tuple[str, ...] = ()
    keeps: Callable[[str, Sequence[str]], bool] | None = None
    spec_words: Callable[[str, str], bool] | None = None
    question: str = ""
    """What the agent just said to the user, live (the simulated user answers it; ``""``: the
    turn is written before the run, from the goal alone)."""


@dataclass
class WrittenStats:
    requests: int = 0
    generated: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    user_turns: int = 0
    user_rejected: Counter[str] = field(default_factory=Counter)
    user_examples: list[dict[str, str]] = field(default_factory=list)


def _quoted(items: Sequence[str]) -> str:
    return ", ".join(json.dumps(s, ensure_ascii=False) for s in items)


def family_prompt(turn: WrittenTurn, family: str, n: int) -> TextPrompt:
    """The request for ``n`` ways a user would write ``turn`` in ``family``."""
    rules = [
        "Ask for exactly the same thing: the same request and the same facts, nothing "
        "added, nothing left out.",
        f"Write each one in the family: {FAMILY_TEXT.get(family, family)}.",
        f"Write in {LANGUAGES.get(turn.lang, turn.lang)}.",
        f"Answer with only a JSON array of {n} strings, no other text.",
    ]
    if turn.protect:
        rules.insert(
            1,
            "Copy these exact strings into every message, character for character: "
            f"{_quoted(turn.protect)}.",
        )
    body = "\n".join(f"- {r}" for r in rules)
    user = (
        f"Write {n} different ways a user would say the message below.\n\nRules:\n{body}\n\n"
        f"Message:\n<<<\n{turn.text}\n>>>"
    )
    return TextPrompt(
        system=_SYSTEM, user=user, max_tokens=_max_tokens(turn.text, n), temperature=None
    )


def user_prompt(turn: WrittenTurn, persona: str, traits: Sequence[str], n: int) -> TextPrompt:
    """The request for ``n`` answers of a simulated user with ``persona`` and ``traits``."""
    who = (
        f"a {persona} user" + (f" ({', '.join(traits)})" if traits else "") if persona else "a user"
    )
    rules = [
        "Give exactly the information of the answer below: do not change what you want, do not "
        "add a request or a value.",
        f"Write in {LANGUAGES.get(turn.lang, turn.lang)}, in character.",
        f"Answer with only a JSON array of {n} strings, no other text.",
    ]
    if turn.protect:
        rules.insert(
            1,
            "Copy these exact strings into every answer, character for character: "
            f"{_quoted(turn.protect)}.",
        )
    if turn.withheld_names:
        rules.insert(
            1,
            "You do not know, and never give, a value for: " + ", ".join(turn.withheld_names) + ".",
        )
    body = "\n".join(f"- {r}" for r in rules)
    asked = (
        f"The assistant just wrote to you:\n<<<\n{turn.question}\n>>>\nYour answer to it says:"
        if turn.question
        else "The assistant asked you a question. Your answer says:"
    )
    user = (
        f"You play {who} talking to a tool-using assistant. Your goal, as you first wrote it:\n"
        f"<<<\n{turn.goal}\n>>>\n{asked}\n<<<\n{turn.text}\n>>>\n\nWrite {n} different ways you "
        f"would write that answer.\n\nRules:\n{body}"
    )
    return TextPrompt(
        system=_USER_SYSTEM, user=user, max_tokens=_max_tokens(turn.text, n), temperature=None
    )


_SYSTEM = (
    "You write test inputs: messages that users send to a tool-using assistant. Each must ask for "
    "exactly what the original asks, so that a correct assistant acts the same way."
)
_USER_SYSTEM = (
    "You play a user in a test of a tool-using assistant. Stay in character and "
    "keep to the user's goal."
)


def _max_tokens(text: str, n: int) -> int:
    return int(min(8000, max(512, 256 + n * (len(text) * 2 + 60))))


_NOT_THE_MODELS: tuple[type[BaseException], ...] = (
    BudgetExhausted,
    InvalidArgument,
    TypeError,
    KeyError,
    AttributeError,
    NameError,
    AssertionError,
)
"""Errors that are not an unreachable input model (a spent budget, a bad argument, a bug of
the code): raised as they are."""


class InputWriter:
    """Writes, validates and remembers model-written turns (one request per distinct prompt and
    seed; the API cache keeps the reply). :meth:`texts` is what a choice renders from."""

    def __init__(self, options: InputModelOptions, client: ModelClient | None = None) -> None:
        if not options.enabled and client is None:
            raise InvalidArgument("an input writer needs a model: --input-model PROVIDER:MODEL")
        self.options = options
        if client is None:
            assert options.model is not None
            provider, _, name = options.model.partition(":")
            client = ModelClient(
                provider_named(PROVIDERS[provider]),
                name,
                base_url=options.base_url,
                api_key=options.api_key,
                cache=options.cache,
                cache_mode=options.cache_mode,
            )
        self.client = client
        self.stats = WrittenStats()
        self._pools: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return self.options.model or self.client.model

    def families_for(self, role: str, pack_families: Sequence[str]) -> tuple[str, ...]:
        """The families a model writes a turn of ``role`` in: the template itself (``""``), the
        pack's families of the turn that the prompt can describe, and on a request the register
        families."""
        extra = REQUEST_FAMILIES if role == "request" else ()
        return ("", *dict.fromkeys(f for f in (*pack_families, *extra) if f in FAMILY_TEXT and f))

    def screen(
        self, turn: WrittenTurn, candidate: object, seen: set[str], *, simulated: bool
    ) -> RejectedParaphrase | str:
        """The validated text, or why it is dropped (see the module docstring for the rules)."""
        latin = turn.lang != "zh"
        screen = PoolScreen.for_text(
            turn.text, protect=list(turn.protect), similarity=(0.0, 1.0), keywords=None, latin=latin
        )
        checked = screen.check(candidate, seen)
        if isinstance(checked, RejectedParaphrase):
            return checked
        text = str(candidate).strip()
        given = [v for v in turn.withheld if v and v in text]
        if simulated and given:
            return RejectedParaphrase(
                text, "answers_withheld", f"gives {given}, which the path says the user cannot give"
            )
        if turn.keeps is not None and not turn.keeps(text, ["model"]):
            return RejectedParaphrase(
                text,
                "changed_intent",
                "drops a word that says which value the turn gives, or adds another answer's",
            )
        if turn.spec_words is not None and turn.spec_words(turn.text, text):
            return RejectedParaphrase(
                text, "spec_words", "brings in a word of the spec the template does not have"
            )
        return text

    def texts(self, turn: WrittenTurn, choice: WrittenChoice) -> tuple[str, ...]:
        """The validated texts for ``turn`` written as ``choice`` says (empty when the model wrote
        none that passed, or the request failed: then the turn keeps the template's words)."""
        if choice.simulated:
            prompt = user_prompt(turn, choice.persona, choice.traits, self.options.n)
        else:
            prompt = family_prompt(turn, choice.family, self.options.n)
        key = json.dumps([prompt.system, prompt.user, self.options.seed], ensure_ascii=False)
        with self._lock:
            if key in self._pools:
                return self._pools[key]
            kept = self._ask(turn, prompt, simulated=choice.simulated)
            self._pools[key] = kept
            return kept

    def _ask(self, turn: WrittenTurn, prompt: TextPrompt, *, simulated: bool) -> tuple[str, ...]:
        self.stats.requests += 1
        what = "simulated user" if simulated else "input model"
        try:
            reply, _ = run_sync(
                self.client.text(
                    prompt,
                    trial=self.options.seed,
                    seed_parts=("written", PROMPT_VERSION),
                    what=what,
                )
            )
        except _NOT_THE_MODELS:
            raise
        except CacheError as exc:
            if not isinstance(exc, CacheMiss):
                raise  # a damaged or locked cache: its own message says its fix
            raise self.unavailable(exc) from exc
        except Exception as exc:
            raise self.unavailable(exc) from exc
        try:
            candidates, _ = parse_candidates(reply)
        except ParaphrasePoolError:
            candidates = [reply]
        seen: set[str] = set()
        kept: list[str] = []
        for candidate in candidates[: self.options.n]:
            self.stats.generated += 1
            if simulated:
                self.stats.user_turns += 1
            result = self.screen(turn, candidate, seen, simulated=simulated)
            if isinstance(result, str):
                kept.append(result)
                self.stats.kept += 1
                continue
            self.stats.dropped[result.reason] += 1
            if simulated and result.reason not in REPEATS:
                reason = SIMULATOR_REASONS.get(result.reason, result.reason)
                self.stats.user_rejected[reason] += 1
                if len(self.stats.user_examples) < 20:
                    self.stats.user_examples.append(
                        {"turn": result.text, "reason": reason, "detail": result.detail}
                    )
        return tuple(kept)

    def unavailable(self, exc: BaseException) -> InputModelUnavailable:
        """The error that says the input model wrote nothing because of ``exc`` (its endpoint
        cannot be reached, its key is missing, a replayed request was never recorded)."""
        option, model = self.options.option, self.model
        if isinstance(exc, CacheMiss):
            return InputModelUnavailable(
                f"{option} {model}: a text this run needs was never recorded in the API cache, "
                f"which is replay-only ({str(exc).splitlines()[0]})",
                fix="record it once with the model reachable (cache mode read-write), or drop "
                f"{option}",
            )
        where = self.client.resolved_base_url() or "the provider's endpoint"
        return InputModelUnavailable(
            f"{option} {model}: the input model at {where} could not write a text "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})",
            fix=f"start the model's server or point {self.client.provider.base_url_env} at it, "
            f"set {self.client.provider.key_env}, replay recorded texts offline (cache mode "
            f"replay-only), or drop {option}",
        )

    def summary(self) -> dict[str, Any]:
        """The report's ``input_model`` section."""
        s = self.stats
        out: dict[str, Any] = {
            "model": self.model,
            "seed": self.options.seed,
            "prompts": s.requests,
            "live_calls": self.client.stats()["live_calls"],
            "cache_hits": self.client.stats()["cache_hits"],
            "generated": s.generated,
            "kept": s.kept,
            "dropped": sum(s.dropped.values()),
            "dropped_reasons": dict(sorted(s.dropped.items())),
        }
        if self.options.simulated_user:
            rejected = sum(s.user_rejected.values())
            out["simulated_user"] = {
                "turns": s.user_turns,
                "rejected": rejected,
                "rejected_rate": round(rejected / s.user_turns, 4) if s.user_turns else None,
                "rejected_reasons": dict(sorted(s.user_rejected.items())),
                "rejected_examples": list(s.user_examples),
            }
        return out

    def describe(self) -> str:
        """The terminal summary's line(s)."""
        return describe_summary(self.summary())


def describe_summary(summary: Mapping[str, Any]) -> str:
    """The terminal summary's line(s) of an input model's :meth:`InputWriter.summary`."""
    reasons: Mapping[str, int] = summary["dropped_reasons"]
    why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    line = (
        f"input model {summary['model']}: {summary['prompts']} prompt(s) "
        f"({summary['live_calls']} live call(s), {summary['cache_hits']} from the API cache), "
        f"{summary['generated']} text(s) written, {summary['kept']} kept, "
        f"{summary['dropped']} dropped"
    )
    line += f" ({why})" if why else ""
    user = summary.get("simulated_user")
    if user is not None:
        turns, rejected = user["turns"], user["rejected"]
        rate = f"{rejected / turns:.0%}" if turns else "n/a (none written)"
        named = ", ".join(f"{k} {v}" for k, v in sorted(user["rejected_reasons"].items()))
        line += (
            f"\nsimulated user: {turns} turn(s) written, {rejected} rejected as the "
            f"simulator's error ({rate})"
            + (f": {named}" if named else "")
            + "; rejected turns are never sent to the agent"
        )
    return line


def merge_summaries(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One summary of several processes' (pytest-xdist workers'): counts added up."""
    first = summaries[0]
    out: dict[str, Any] = {"model": first["model"], "seed": first["seed"]}
    for name in ("prompts", "live_calls", "cache_hits", "generated", "kept", "dropped"):
        out[name] = sum(int(s[name]) for s in summaries)
    reasons: Counter[str] = Counter()
    for s in summaries:
        reasons.update(s["dropped_reasons"])
    out["dropped_reasons"] = dict(sorted(reasons.items()))
    users = [s["simulated_user"] for s in summaries if "simulated_user" in s]
    if users:
        turns = sum(int(u["turns"]) for u in users)
        rejected = sum(int(u["rejected"]) for u in users)
        why: Counter[str] = Counter()
        for u in users:
            why.update(u["rejected_reasons"])
        out["simulated_user"] = {
            "turns": turns,
            "rejected": rejected,
            "rejected_rate": round(rejected / turns, 4) if turns else None,
            "rejected_reasons": dict(sorted(why.items())),
            "rejected_examples": [e for u in users for e in u["rejected_examples"]][:20],
        }
    return out


class SessionRealiser:
    """The strategies' realiser (:mod:`agentprop.strategies._internal.model_written`) of a
    pytest session: a request is written in every family :meth:`InputWriter.families_for` offers
    it (the template in any wording, then the registers), an answer by the simulated user in
    each persona when it is on (else in any wording); each template's texts are fetched once and
    remembered, and so is an error (raised again without another request)."""

    def __init__(self, writer: InputWriter) -> None:
        self.writer = writer
        self._done: dict[tuple[Any, ...], tuple[Realisation, ...] | InputError] = {}
        self._lock = threading.Lock()

    def realisations(
        self,
        text: str,
        *,
        lang: str,
        protect: Sequence[str],
        role: str = "request",
        goal: str = "",
    ) -> tuple[Realisation, ...]:
        key = (text, lang, tuple(protect), role, goal)
        with self._lock:
            done = self._done.get(key)
            if done is None:
                try:
                    done = self._fetch(text, lang, tuple(protect), role, goal)
                except InputError as exc:
                    done = exc
                self._done[key] = done
        if isinstance(done, InputError):
            raise done
        return done

    def _fetch(
        self, text: str, lang: str, protect: tuple[str, ...], role: str, goal: str
    ) -> tuple[Realisation, ...]:
        writer = self.writer
        turn = WrittenTurn(text, lang, role, protect, goal or text)
        if role != "request" and writer.options.simulated_user:
            choices = [WrittenChoice(persona=p, traits=t) for p, t in PERSONAS.items()]
        else:
            choices = [WrittenChoice(family=f) for f in writer.families_for(role, ())]
        return tuple(
            Realisation(choice.family_key.removeprefix("model:"), written)
            for choice in choices
            for written in writer.texts(turn, choice)
        )
