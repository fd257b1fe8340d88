"""Judges: properties of a run's free text, decided by code or by a model reading a rubric.

A judge returns a :class:`Verdict` like a contract, so the oracle, grouping, shrinker and corpus
take it unchanged. :class:`CodeJudge` wraps a callable; :class:`ModelJudge` asks a model through
the model-client layer, each sample cached by (transcript, rubric, model, sample index). A model
judge gates only with a :class:`Calibration` of its rubric and model that separates the
oracle's hypotheses; otherwise it only reports.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from agentprop._judge.verdict import Verdict
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.client import ModelClient
from agentprop._modelapi.providers import TextPrompt, provider_named
from agentprop._scenario.trace import Trace
from agentprop._spec.bindings import JudgeBinding
from agentprop._spec.model import Spec
from agentprop._stats import (
    JudgeAgreement,
    cohens_kappa,
    corrected_interval,
    judged_hypotheses,
    self_disagreement,
)
from agentprop._stats.judged import CorrectedRate
from agentprop._util.aio import run_sync
from agentprop._util.files import describe_validation, read_json, write_atomic
from agentprop.errors import InputError, InvalidArgument, ModelCallError, SourceLocation

__all__ = [
    "DEFAULT_MIN_LABELS",
    "Calibration",
    "CalibrationStore",
    "CodeJudge",
    "JudgeCorrection",
    "JudgeLike",
    "LabelledExample",
    "ModelJudge",
    "Rubric",
    "SpecRubric",
    "bound_judge",
    "spec_rubrics",
    "calibrate",
    "code_judge",
    "load_labels",
    "transcript",
]

DEFAULT_MIN_LABELS = 50
"""Labels a calibration needs before its judge may gate (reviewers' usual bar)."""

JUDGE_CONTRACT = "judge"

PROVIDERS = {
    "anthropic": "anthropic.messages",
    "openai": "openai.chat",
    "openai-responses": "openai.responses",
}
"""The judge model's API by the name options use."""


@runtime_checkable
class JudgeLike(Protocol):
    """What the oracle and the spec-free tier need of a judge: a property of a trace."""

    name: str

    def __call__(self, subject: object, result: object = None) -> Verdict: ...


# ----------------------------------------------------------------------------- rubrics


class Rubric(BaseModel):
    """What a model judge checks: a name (the clause a failure names), the rubric's text and
    its criteria (a failure names the one broken)."""

    model_config = ConfigDict(frozen=True)

    name: str
    text: str
    criteria: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        """A hash of the text and criteria: a calibration belongs to exactly this rubric."""
        canonical = json.dumps(
            {"text": self.text.strip(), "criteria": list(self.criteria)}, sort_keys=True
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: str | Path) -> Rubric:
        """A rubric file: YAML/JSON with ``text`` (and optionally ``name``, ``criteria``), or plain
        text (the whole file is the rubric, named after the file)."""
        p = Path(path)
        try:
            raw = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"{p}: cannot read the rubric ({exc.strerror}). Pass the path of a rubric file."
            ) from None
        if p.suffix.lower() in (".yaml", ".yml", ".json"):
            import yaml

            try:
                data = yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise InputError(
                    f"{p}: not valid YAML ({exc}). A rubric file holds `text:` and optionally "
                    "`name:` and `criteria:`."
                ) from None
            if not isinstance(data, dict) or not isinstance(data.get("text"), str):
                raise InputError(
                    f"{p}: a rubric file needs a `text:` string (the rubric), and may have "
                    "`name:` and a `criteria:` list."
                )
            criteria = data.get("criteria") or []
            if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
                raise InputError(f"{p}: `criteria:` must be a list of strings, one per criterion.")
            return cls(
                name=str(data.get("name") or p.stem), text=data["text"], criteria=tuple(criteria)
            )
        return cls(name=p.stem, text=raw)

    @classmethod
    def from_guidance(cls, name: str, guidance: object) -> Rubric | None:
        """The rubric a spec's ``test_guidance`` holds (its ``rubric:`` key: a string, or a
        mapping with ``text`` and ``criteria``), ``None`` when it holds none."""
        if not isinstance(guidance, dict) or "rubric" not in guidance:
            return None
        rubric = guidance["rubric"]
        if isinstance(rubric, str):
            return cls(name=name, text=rubric)
        if isinstance(rubric, dict) and isinstance(rubric.get("text"), str):
            criteria = rubric.get("criteria") or []
            return cls(name=name, text=rubric["text"], criteria=tuple(str(c) for c in criteria))
        raise InvalidArgument(
            f"{name}.test_guidance.rubric must be a string or a mapping with `text:` (and "
            f"`criteria:`), got {type(rubric).__name__}."
        )


@dataclass(frozen=True)
class SpecRubric:
    """A rubric a spec attaches to a policy (``node is None``: every case) or to a node (the
    cases whose path passes through it)."""

    rubric: Rubric
    node: str | None = None

    def applies_to(self, path: Sequence[str]) -> bool:
        return self.node is None or self.node in path


def spec_rubrics(spec: Spec) -> list[SpecRubric]:
    """The rubrics in the spec's ``test_guidance`` (``rubric:``), policies first, then nodes;
    each named after its clause (``policies.ID``, ``decision_tree.NODE``)."""
    out: list[SpecRubric] = []
    for policy in spec.policies:
        found = Rubric.from_guidance(f"policies.{policy.id}", policy.test_guidance)
        if found is not None:
            out.append(SpecRubric(found))
    for node in spec.decision_tree:
        found = Rubric.from_guidance(f"decision_tree.{node.node_id}", node.test_guidance)
        if found is not None:
            out.append(SpecRubric(found, node.node_id))
    return out


def bound_judge(rubric: Rubric, binding: JudgeBinding, base_dir: Path) -> ModelJudge:
    """The model judge the bindings' ``judge:`` section names for ``rubric``, its
    calibration attached."""
    store = CalibrationStore(
        base_dir / (binding.calibrations or str(Path(".agentprop") / "judges"))
    )
    return ModelJudge.for_model(
        rubric,
        binding.model,
        provider=binding.provider,
        base_url=binding.base_url,
        samples=binding.samples,
        min_labels=binding.min_labels,
        store=store,
    )


def transcript(trace: Trace) -> str:
    """The conversation as a judge reads it: each user message, the tools the agent called (name
    and arguments) and what it said back."""
    lines: list[str] = []
    for turn in trace.turns:
        lines.append(f"USER: {turn.user_message}")
        for call in turn.tool_calls:
            lines.append(
                f"TOOL CALL: {call.name}({json.dumps(call.args, sort_keys=True, default=str)})"
            )
        lines.append(f"AGENT: {turn.user_visible_text}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- what the oracle needs


JUDGED_MAX_RUNS = 400
"""Run cap of a decision on a calibrated judge's verdicts: the judge's noise narrows the gap
between a good and a bad agent on its scale, so the SPRT needs more runs than on exact checks."""


@dataclass(frozen=True)
class JudgeCorrection:
    """A model judge's calibration as the oracle uses it: the 2x2 table against human labels
    (``None``: uncalibrated) and whether the judge may gate, or why not."""

    agreement: JudgeAgreement | None
    gates: bool
    why_not: str | None = None
    confidence: float = 0.95

    def hypotheses(self, p0: float, p1: float) -> tuple[float, float] | None:
        if (
            self.agreement is None
            or self.agreement.labelled_pass == 0
            or self.agreement.labelled_fail == 0
        ):
            return None
        return judged_hypotheses(p0, p1, self.agreement, self.confidence)

    def corrected(
        self, raw_passes: int, runs: int, confidence: float = 0.95
    ) -> CorrectedRate | None:
        if (
            self.agreement is None
            or runs == 0
            or self.agreement.labelled_pass == 0
            or self.agreement.labelled_fail == 0
        ):
            return None
        return corrected_interval(raw_passes, runs, self.agreement, confidence)


# ----------------------------------------------------------------------------- code judges


def _trace_of(subject: object, result: object, name: str) -> Trace:
    """The trace a judge reads: ``subject`` itself, or ``result.trace`` for
    ``judge(case, result)``."""
    found = getattr(result, "trace", None) if result is not None else subject
    if not isinstance(found, Trace):
        raise InvalidArgument(
            f"judge {name!r} was called on {type(found).__name__}; call it on a Trace, or as "
            "judge(case, result) with result.trace."
        )
    return found


Outcome = bool | Verdict | tuple[bool, str]


@dataclass
class CodeJudge:
    """Any callable on a trace as a judge: it returns a bool, ``(passed, reason)`` or a
    :class:`Verdict` (kept as it is)."""

    function: Callable[[Trace], Outcome]
    name: str

    def __call__(self, subject: object, result: object = None) -> Verdict:
        out = self.function(_trace_of(subject, result, self.name))
        if isinstance(out, Verdict):
            return out
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], bool):
            passed, reason = out[0], str(out[1])
        elif isinstance(out, bool):
            passed, reason = out, ("passed" if out else "failed")
        else:
            raise InvalidArgument(
                f"judge {self.name!r} returned {type(out).__name__}; a code judge returns a bool, "
                "(passed, reason) or a Verdict."
            )
        return Verdict(
            passed=passed,
            contract=JUDGE_CONTRACT,
            explanation=f"{self.name}: {reason}",
            clause=self.name,
        )


def code_judge(function: Callable[[Trace], Outcome], name: str | None = None) -> CodeJudge:
    """Make ``function`` (trace -> bool | (bool, reason) | Verdict) a judge named ``name``."""
    return CodeJudge(function, name or str(getattr(function, "__name__", "judge")))


# ----------------------------------------------------------------------------- model judges


SYSTEM_PROMPT = (
    "You grade one conversation between a user and an AI agent against a rubric. "
    "Read the rubric and the "
    "conversation, then answer with one JSON object and nothing else: "
    '{"passed": true or false, "criterion": the rubric criterion the agent broke (null if it '
    'passed), "reason": one sentence citing what the agent said or did}.'
)


class JudgeReply(BaseModel):
    """One sample of a model judge's structured verdict."""

    passed: bool
    reason: str = ""
    criterion: str | None = None


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_reply(text: str, judge_name: str) -> JudgeReply:
    """The JSON verdict in a judge model's reply (the first ``{...}`` in it)."""
    found = _JSON_OBJECT.search(text)
    try:
        if found is None:
            raise ValueError("no JSON object")
        return JudgeReply.model_validate(json.loads(found.group(0)))
    except (ValueError, ValidationError):
        raise ModelCallError(
            f"judge {judge_name!r}: the judge model's reply is not the JSON verdict asked for "
            f'({{"passed": ..., "criterion": ..., "reason": ...}}): {text[:200]!r}. Use a '
            "model that follows the "
            "format, or raise max_tokens if the reply was cut off."
        ) from None


@dataclass
class ModelJudge:
    """A rubric judged by a model: ``samples`` answers per transcript, the majority decides.

    ``calibration`` (found in a :class:`CalibrationStore` by the rubric's digest and the model)
    says how often the judge is wrong; with fewer than ``min_labels`` labels, or none, the judge
    reports but does not gate (:attr:`gates`)."""

    rubric: Rubric
    client: ModelClient
    samples: int = 1
    max_tokens: int = 300
    calibration: Calibration | None = None
    min_labels: int = DEFAULT_MIN_LABELS
    calls: int = field(default=0, init=False)
    """Samples asked of the judge model (cache hits included)."""

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise InvalidArgument(
                f"samples={self.samples} must be at least 1 (the answers asked per transcript)."
            )

    @classmethod
    def for_model(
        cls,
        rubric: Rubric,
        model: str,
        *,
        provider: str = "anthropic",
        base_url: str | None = None,
        cache: str | Path | bool | None = None,
        cache_mode: str | None = None,
        budget: Budget | None = None,
        samples: int = 1,
        store: CalibrationStore | None = None,
        min_labels: int = DEFAULT_MIN_LABELS,
    ) -> ModelJudge:
        """A judge calling ``model`` on ``provider`` (``anthropic``, ``openai`` or
        ``openai-responses``), with the calibration ``store`` holds for this rubric and model
        attached (the default store: ``.agentprop/judges``)."""
        if provider not in PROVIDERS:
            raise InvalidArgument(f"provider={provider!r} is not one of {sorted(PROVIDERS)}.")
        client = ModelClient(
            provider_named(PROVIDERS[provider]),
            model,
            base_url=base_url,
            cache=cache,
            cache_mode=cache_mode,
            budget=budget,
        )
        judge = cls(rubric, client, samples=samples, min_labels=min_labels)
        return (store or CalibrationStore()).attach(judge)

    @property
    def name(self) -> str:
        return self.rubric.name

    @property
    def model(self) -> str:
        return self.client.model

    def prompt(self, text: str) -> TextPrompt:
        criteria = "".join(f"\n- {c}" for c in self.rubric.criteria)
        user = (
            f"RUBRIC ({self.rubric.name}):\n"
            f"{self.rubric.text.strip()}{criteria and chr(10) + 'CRITERIA:' + criteria}\n\n"
            f"CONVERSATION:\n{text}"
        )
        return TextPrompt(
            system=SYSTEM_PROMPT, user=user, max_tokens=self.max_tokens, temperature=None
        )

    async def asample(self, text: str, index: int) -> JudgeReply:
        """Sample ``index`` of the judge's verdict on a transcript (cached under that index)."""
        self.calls += 1
        reply, _ = await self.client.text(
            self.prompt(text),
            trial=index,
            seed_parts=("judge", self.rubric.digest),
            what=f"judge {self.name}",
        )
        return parse_reply(reply, self.name)

    async def areplies(self, text: str, samples: int | None = None) -> list[JudgeReply]:
        k = self.samples if samples is None else samples
        return list(await asyncio.gather(*(self.asample(text, i) for i in range(k))))

    async def averdict(self, trace: Trace) -> Verdict:
        """The majority of ``samples`` answers, asked one at a time and only while the majority
        is still open: a judge that agrees with itself costs ``samples // 2 + 1`` calls, one that
        wavers up to ``samples``. The verdict is always the full majority's, so the calibration
        (made on all ``samples`` answers) applies."""
        text = transcript(trace)
        needed = self.samples // 2 + 1
        replies: list[JudgeReply] = []
        while True:
            replies.append(await self.asample(text, len(replies)))
            passes = sum(r.passed for r in replies)
            if passes >= needed or len(replies) - passes > self.samples - needed:
                return self.verdict_of(replies)

    def verdict_of(self, replies: Sequence[JudgeReply]) -> Verdict:
        """The majority of the samples (a tie fails); a failure names the most named criterion."""
        passes = sum(r.passed for r in replies)
        passed = 2 * passes > len(replies)
        chosen = next(r for r in replies if r.passed == passed)
        votes = f" ({passes}/{len(replies)} samples passed)" if len(replies) > 1 else ""
        criterion = None
        if not passed:
            named = [r.criterion for r in replies if not r.passed and r.criterion]
            criterion = max(dict.fromkeys(named), key=named.count) if named else None
        return Verdict(
            passed=passed,
            contract=JUDGE_CONTRACT,
            explanation=f"{self.name}: {chosen.reason}{votes}",
            clause=self.name,
            detail=_slug(criterion) if criterion else None,
        )

    def __call__(self, subject: object, result: object = None) -> Verdict:
        """The verdict on a trace, or, as the spec-free tier's ``judge(case, result)``, on
        ``result.trace``."""
        return run_sync(self.averdict(_trace_of(subject, result, self.name)))

    @property
    def gates(self) -> bool:
        """Whether the judge's verdicts may fail a case: calibrated on at least ``min_labels``
        labels, asking as many samples per transcript as it asks now."""
        return self.why_not_gating() is None

    def why_not_gating(self) -> str | None:
        if self.calibration is None:
            return (
                f"judge {self.name!r} ({self.model}) has no calibration for this rubric: run "
                "`agentprop judge calibrate`"
            )
        if self.calibration.labels < self.min_labels:
            return (
                f"judge {self.name!r} is calibrated on {self.calibration.labels} labels, fewer "
                f"than the {self.min_labels} needed to gate"
            )
        if self.calibration.samples != self.samples:
            return (
                f"judge {self.name!r} was calibrated on the majority of "
                f"{self.calibration.samples} sample(s) per transcript and now asks "
                f"{self.samples}: its error differs; calibrate again with --samples {self.samples}"
            )
        return None

    def correction(self) -> JudgeCorrection:
        """What the oracle needs to decide this judge's property (:class:`JudgeCorrection`)."""
        agreement = self.calibration.agreement if self.calibration is not None else None
        return JudgeCorrection(agreement, self.gates, self.why_not_gating())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60] or "criterion"


# ----------------------------------------------------------------------------- calibration


class LabelledExample(BaseModel):
    """A transcript and what a human said of it."""

    text: str
    passed: bool


def load_labels(path: str | Path) -> list[LabelledExample]:
    """A labels file: JSON lines, each ``{"transcript": ..., "label": "pass" | "fail"}`` (or
    ``"trace"``: a trace's JSON, instead of ``"transcript"``; or ``"passed": true/false``)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(
            f"{p}: cannot read the labels ({exc.strerror}). Pass a JSONL file of "
            "labelled transcripts."
        ) from None
    out: list[LabelledExample] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError:
            raise InputError(
                f'{p}:{number}: not a JSON object. Each line is {{"transcript": "...", '
                '"label": "pass"} or "fail".'
            ) from None
        if "trace" in row:
            text = transcript(Trace.model_validate(row["trace"]))
        elif isinstance(row.get("transcript"), str):
            text = row["transcript"]
        else:
            raise InputError(
                f'{p}:{number}: no "transcript" (a string) or "trace" (a trace\'s JSON). Add the '
                "text the judge should read."
            )
        label = row.get("label", row.get("passed"))
        if label in ("pass", "PASS", True):
            passed = True
        elif label in ("fail", "FAIL", False):
            passed = False
        else:
            raise InputError(
                f'{p}:{number}: label {label!r} is not "pass" or "fail". Give the human\'s '
                'verdict as "label": "pass" or "fail".'
            )
        out.append(LabelledExample(text=text, passed=passed))
    if not out:
        raise InputError(
            f"{p}: no labelled examples. Add one JSON line per transcript a human labelled."
        )
    return out


class Calibration(BaseModel):
    """A judge's verdicts against human labels, for one rubric (by digest) and one model."""

    rubric: str
    rubric_digest: str
    judge_model: str
    samples: int
    true_pass: int
    false_fail: int
    true_fail: int
    false_pass: int
    self_disagreement: float | None = None
    """Mean chance that two samples on one transcript differ (``samples >= 2`` only)."""
    split_transcripts: int | None = None
    confidence: float = 0.95

    @property
    def agreement(self) -> JudgeAgreement:
        return JudgeAgreement(self.true_pass, self.false_fail, self.true_fail, self.false_pass)

    @property
    def labels(self) -> int:
        return self.agreement.n

    def hypotheses(self, p0: float, p1: float) -> tuple[float, float] | None:
        """The oracle's hypotheses on the judge's scale
        (:func:`~agentprop._stats.judged_hypotheses`)."""
        agreement = self.agreement
        if agreement.labelled_pass == 0 or agreement.labelled_fail == 0:
            return None
        return judged_hypotheses(p0, p1, agreement, self.confidence)

    def summary(self) -> str:
        a = self.agreement
        lines = [
            f"judge calibration: {self.rubric} ({self.rubric_digest}) with {self.judge_model}, "
            f"{self.labels} labels"
        ]
        if a.labelled_pass:
            lo, hi = a.sensitivity_interval(self.confidence)
            lines.append(
                f"  sensitivity {a.sensitivity:.3f} [{lo:.3f}, {hi:.3f}]  "
                f"({a.true_pass}/{a.labelled_pass} human passes judged pass)"
            )
        else:
            lines.append("  sensitivity: not measured (no human-passed example)")
        if a.labelled_fail:
            lo, hi = a.specificity_interval(self.confidence)
            lines.append(
                f"  specificity {a.specificity:.3f} [{lo:.3f}, {hi:.3f}]  "
                f"({a.true_fail}/{a.labelled_fail} human fails judged fail)"
            )
        else:
            lines.append("  specificity: not measured (no human-failed example)")
        kappa, (k_lo, k_hi) = cohens_kappa(a, self.confidence)
        lines.append(f"  Cohen's kappa {kappa:.3f} [{k_lo:.3f}, {k_hi:.3f}]")
        if self.self_disagreement is not None:
            lines.append(
                f"  self-disagreement {self.self_disagreement:.3f} over {self.samples} samples "
                f"({self.split_transcripts} of {self.labels} transcripts split)"
            )
        else:
            lines.append(
                "  self-disagreement: not measured (one sample per transcript; use --samples 3)"
            )
        return "\n".join(lines)


async def acalibrate(
    judge: ModelJudge, examples: Sequence[LabelledExample], samples: int | None = None
) -> Calibration:
    """Ask ``judge`` ``samples`` times (default: its own) per labelled transcript; the majority
    verdict is compared with the label."""
    k = judge.samples if samples is None else samples
    replies = await asyncio.gather(*(judge.areplies(e.text, k) for e in examples))
    pairs: list[tuple[bool, bool]] = []
    votes: list[tuple[int, int]] = []
    for example, answers in zip(examples, replies, strict=True):
        pairs.append((example.passed, judge.verdict_of(answers).passed))
        votes.append((sum(a.passed for a in answers), len(answers)))
    agreement = JudgeAgreement.from_pairs(pairs)
    disagreement: float | None = None
    split: int | None = None
    if k >= 2:
        disagreement, _, split = self_disagreement(votes)
    return Calibration(
        rubric=judge.rubric.name,
        rubric_digest=judge.rubric.digest,
        judge_model=judge.model,
        samples=k,
        true_pass=agreement.true_pass,
        false_fail=agreement.false_fail,
        true_fail=agreement.true_fail,
        false_pass=agreement.false_pass,
        self_disagreement=disagreement,
        split_transcripts=split,
    )


def calibrate(
    judge: ModelJudge, examples: Sequence[LabelledExample], samples: int | None = None
) -> Calibration:
    """:func:`acalibrate` from synchronous code."""
    return run_sync(acalibrate(judge, examples, samples))


class CalibrationStore:
    """Calibrations on disk, one JSON file per (rubric digest, judge model)."""

    def __init__(self, directory: str | Path = Path(".agentprop") / "judges") -> None:
        self.directory = Path(directory)

    def path(self, rubric: Rubric, model: str) -> Path:
        return self.directory / f"{rubric.digest}-{_slug(model)}.json"

    def save(self, calibration: Calibration, rubric: Rubric) -> Path:
        if calibration.rubric_digest != rubric.digest:
            raise InvalidArgument(
                f"the calibration is of rubric {calibration.rubric_digest}, not {rubric.digest}; "
                "calibrate this rubric."
            )
        path = self.path(rubric, calibration.judge_model)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_atomic(path, calibration.model_dump_json(indent=2) + "\n")

    def load(self, rubric: Rubric, model: str) -> Calibration | None:
        path = self.path(rubric, model)
        if not path.exists():
            return None
        fix = f"delete {path} and run `agentprop judge calibrate` again"
        document = read_json(path, what="a judge calibration", fix=fix)
        try:
            calibration = Calibration.model_validate(document)
        except ValueError as exc:
            raise InputError(
                f"not a judge calibration: {describe_validation(exc)} (damaged or edited)",
                location=SourceLocation(path),
                expected="a calibration as `agentprop judge calibrate` writes it",
                fix=fix,
            ) from None
        return calibration if calibration.rubric_digest == rubric.digest else None

    def attach(self, judge: ModelJudge) -> ModelJudge:
        """``judge`` with its stored calibration (if any) attached."""
        judge.calibration = self.load(judge.rubric, judge.model)
        return judge
