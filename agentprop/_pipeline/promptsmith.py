"""PromptSmith: compile a model agent's prompt against the visible cases of its spec.

Run the visible cases, ask a model for the smallest edit that fixes the largest group of
failures, repeat. It sees the visible failures only, never the hidden cases; every case is
decided by the oracle; the artifact is written atomically after every iteration, so the best
prompt so far is always on disk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field

from agentprop._agents.project import Project
from agentprop._agents.prompt import check_tool_descriptions
from agentprop._decide.check import decide_scenario
from agentprop._decide.corpus import clause_of
from agentprop._decide.memo import TrialMemo
from agentprop._decide.oracle import CheckResult, OracleSettings
from agentprop._modelapi.budget import Budget
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES, Provider, TextPrompt
from agentprop._scenario.build import Scenario
from agentprop._util.files import write_atomic
from agentprop.errors import AgentPropError, InvalidArgument

PROMPTSMITH_ROLE = (
    "You are PromptSmith. You edit the system prompt and tool descriptions of a tool-using agent "
    "so that it behaves as its behavioural spec requires."
)

RULES = (
    "Fix the largest group of failures first, with the smallest change that fixes it.",
    "Every rule you add must follow from the spec; never mention test cases, test ids "
    "or expected outputs.",
    "Keep everything that already works; do not remove the response contract (the respond tool).",
    (
        "Return the complete new system prompt between <prompt> and </prompt>. Optionally, return "
        "changed tool descriptions as YAML (tool name: description) between <tool_descriptions> "
        "and </tool_descriptions>; tools you leave out keep their current description."
    ),
)


class FailureGroup(BaseModel):
    """Visible failures with one root cause: the spec clause that broke."""

    clause: str
    explanation: str
    cases: list[str]
    example_messages: list[str]


class CompileIteration(BaseModel):
    index: int
    loop: Literal["outer", "inner"]
    cases_run: int
    passed: int
    failing: list[str] = Field(default_factory=list)
    groups: list[FailureGroup] = Field(default_factory=list)
    prompt_digest: str
    runs: int = 0
    cost_usd: float = 0.0
    note: str | None = None


class CompileResult(BaseModel):
    compiled: bool
    stop_reason: str
    visible: int
    visible_passed: int
    prompt: str
    tool_descriptions: dict[str, str] = Field(default_factory=dict)
    iterations: list[CompileIteration] = Field(default_factory=list)
    runs: int = 0
    cost_usd: float = 0.0
    out_dir: str | None = None

    @property
    def vpr(self) -> float | None:
        return self.visible_passed / self.visible if self.visible else None

    def summary(self) -> str:
        lines = []
        for it in self.iterations:
            tail = (
                f"; failing: {', '.join(it.failing[:4])}{' …' if len(it.failing) > 4 else ''}"
                if it.failing
                else ""
            )
            note = f" ({it.note})" if it.note else ""
            lines.append(
                f"  {it.loop:<5} {it.index:>2}: {it.passed}/{it.cases_run} pass, prompt "
                f"{it.prompt_digest}{tail}{note}"
            )
        return "\n".join([*lines, self.footer()])

    def footer(self) -> str:
        """The outcome, without the per-iteration lines."""
        state = "compiled" if self.compiled else "NOT compiled"
        vpr = f"{self.vpr:.0%}" if self.vpr is not None else "n/a"
        lines = [
            (
                f"{state}: VPR {vpr} ({self.visible_passed}/{self.visible} visible cases) after "
                f"{len(self.iterations)} iteration(s), {self.runs} runs, "
                f"${self.cost_usd:.4f}; {self.stop_reason}"
            )
        ]
        if self.out_dir:
            lines.append(
                f"artifact: {self.out_dir}/prompt.txt, {self.out_dir}/tool_descriptions.yaml, "
                f"{self.out_dir}/compile_log.json"
            )
        return "\n".join(lines)


def spec_for_promptsmith(project: Project) -> str:
    """The spec as PromptSmith sees it: everything but its ``tests`` section."""
    raw = yaml.safe_load(project.spec_path.read_text(encoding="utf-8"))
    if isinstance(raw, dict):
        raw.pop("tests", None)
    return yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=100)


def group_failures(results: Sequence[tuple[Scenario, CheckResult]]) -> list[FailureGroup]:
    """Failing cases grouped by the clause that broke, largest group first."""
    groups: dict[str, FailureGroup] = {}
    for scenario, result in results:
        if result.verdict == "PASS":
            continue
        first = result.failures[0] if result.failures else None
        clause = (clause_of(first.signature) if first is not None else None) or (
            first.signature if first else "no verdict"
        )
        group = groups.get(clause)
        if group is None:
            groups[clause] = FailureGroup(
                clause=clause,
                explanation=first.explanation if first else result.verdict,
                cases=[scenario.id],
                example_messages=list(scenario.messages),
            )
        else:
            group.cases.append(scenario.id)
    return sorted(groups.values(), key=lambda g: (-len(g.cases), g.clause))


def promptsmith_prompt(
    spec_text: str,
    prompt: str,
    descriptions: dict[str, str],
    groups: Sequence[FailureGroup],
    *,
    iteration: int,
    temperature: float | None = None,
) -> TextPrompt:
    """What PromptSmith is asked for one edit, in any provider's terms."""
    failures = "\n".join(
        f"{n}. {len(g.cases)} case(s) break {g.clause}: {g.explanation}\n   e.g. the user said: "
        + " / ".join(repr(m) for m in g.example_messages)
        for n, g in enumerate(groups, 1)
    )
    described = (
        yaml.safe_dump(descriptions, sort_keys=True, allow_unicode=True) if descriptions else "{}"
    )
    user = (
        f"The spec (the single source of truth):\n<spec>\n{spec_text}</spec>\n\n"
        f"The current system prompt:\n<prompt>\n{prompt}\n</prompt>\n\n"
        f"The current tool descriptions:\n<tool_descriptions>\n"
        f"{described}</tool_descriptions>\n\n"
        f"Iteration {iteration}. Failures on the visible checks, grouped by root cause:\n{failures}"
    )
    system = PROMPTSMITH_ROLE + "\n\nRules:\n" + "\n".join(f"- {r}" for r in RULES)
    return TextPrompt(system=system, user=user, max_tokens=8192, temperature=temperature)


def promptsmith_request(
    model: str,
    spec_text: str,
    prompt: str,
    descriptions: dict[str, str],
    groups: Sequence[FailureGroup],
    *,
    iteration: int,
    temperature: float | None = None,
    provider: Provider = ANTHROPIC_MESSAGES,
) -> dict[str, Any]:
    """The request body for one PromptSmith edit in ``provider``'s API (what the
    API cache keys on)."""
    return provider.text_body(
        model,
        promptsmith_prompt(
            spec_text, prompt, descriptions, groups, iteration=iteration, temperature=temperature
        ),
    )


def _between(text: str, tag: str) -> str | None:
    start, end = f"<{tag}>", f"</{tag}>"
    if start not in text or end not in text:
        return None
    return text.split(start, 1)[1].rsplit(end, 1)[0].strip("\n")


def parse_edit(
    response: str | dict[str, Any], project: Project
) -> tuple[str | None, dict[str, str] | None, str | None]:
    """``(prompt, tool descriptions, note)`` from PromptSmith's reply (its text, or a Messages
    API response); ``None`` where it gave none (or something unusable, explained in the note)."""
    text = response if isinstance(response, str) else ANTHROPIC_MESSAGES.text_of(response)
    prompt = _between(text, "prompt")
    note = None if prompt else "the reply had no <prompt>…</prompt>; prompt kept"
    raw = _between(text, "tool_descriptions")
    descriptions = None
    if raw is not None:
        try:
            data = yaml.safe_load(raw) or {}
            if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in data.items()
            ):
                raise ValueError("not a mapping of tool name to description")
            check_tool_descriptions(data, project.spec)
            descriptions = data
        except (yaml.YAMLError, ValueError, AgentPropError) as exc:
            note = (
                (note + "; ") if note else ""
            ) + f"tool descriptions ignored ({str(exc).splitlines()[0]})"
    return prompt, descriptions, note


def _broken_runs(group: FailureGroup) -> bool:
    """The group failed because runs broke (agent exception, timeout, protocol), not on a clause."""
    return group.clause.startswith("no_run_errors") or group.clause == "no verdict"


def _digest(prompt: str, descriptions: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps([prompt, descriptions], sort_keys=True).encode()).hexdigest()[
        :10
    ]


def save_artifact(out_dir: Path, result: CompileResult) -> None:
    """The compiled (or best so far) prompt, tool descriptions and the log, written atomically."""
    write_atomic(out_dir / "prompt.txt", result.prompt + "\n")
    write_atomic(
        out_dir / "tool_descriptions.yaml",
        yaml.safe_dump(result.tool_descriptions, sort_keys=True, allow_unicode=True)
        if result.tool_descriptions
        else "{}\n",
    )
    write_atomic(out_dir / "compile_log.json", result.model_dump_json(indent=2) + "\n")


async def acompile_prompt(
    project: Project,
    agent: Any,
    cases: Sequence[Scenario],
    *,
    max_outer: int = 6,
    max_inner: int = 8,
    inner_threshold: int = 10,
    settings: OracleSettings | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    out_dir: str | Path | None = None,
    temperature: float | None = None,
    on_iteration: Callable[[CompileIteration], None] | None = None,
) -> CompileResult:
    """Edit ``agent``'s (a model agent: :class:`~agentprop.agents.AnthropicAgent`,
    :class:`~agentprop.agents.OpenAIAgent`) prompt until every case in ``cases`` (the visible suite)
    passes; see the module doc. PromptSmith's edits are asked of the agent's own model,
    through its client (cache, budget, retries)."""
    for name, value in (
        ("max_outer", max_outer),
        ("max_inner", max_inner),
        ("inner_threshold", inner_threshold),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InvalidArgument(f"{name}={value!r} must be a positive int")
    if not hasattr(agent, "replace") or not hasattr(agent, "complete_text"):
        raise InvalidArgument(
            "compile_prompt edits a model agent's prompt: pass an "
            f"agentprop.agents.AnthropicAgent or OpenAIAgent, not {agent!r}"
        )
    if not cases:
        raise ValueError("compile_prompt needs at least one visible case")
    settings = settings or OracleSettings.for_spec(project.spec)
    spec_text = spec_for_promptsmith(project)
    prompt = agent.system_for(project.spec, project.bindings.context)
    descriptions = dict(agent.tool_descriptions)
    out = Path(out_dir) if out_dir is not None else None
    result = CompileResult(
        compiled=False,
        stop_reason="",
        visible=len(cases),
        visible_passed=0,
        prompt=prompt,
        tool_descriptions=descriptions,
        out_dir=str(out) if out else None,
    )
    best = -1
    edits = 0

    def current() -> Any:
        return agent.replace(system_prompt=prompt, tool_descriptions=descriptions)

    async def run(
        subset: Sequence[Scenario], loop: Literal["outer", "inner"], index: int, note: str | None
    ) -> CompileIteration:
        nonlocal best
        candidate = current()
        decided: list[tuple[Scenario, CheckResult]] = []
        runs, cost = 0, 0.0
        for scenario in subset:
            r = await decide_scenario(
                project,
                scenario,
                candidate.loaded(),
                settings=settings,
                memo=TrialMemo(),
                budget=budget,
                seed=seed,
                name=f"COMPILE {scenario.id}",
            )
            decided.append((scenario, r))
            runs += r.runs
            cost += r.cost_usd
        error = getattr(candidate, "missing_key_error", None)
        if error is not None:
            raise error  # no key and nothing cached: say so now, not as a prompt to fix
        groups = group_failures(decided)
        failing = [s.id for s, r in decided if r.verdict != "PASS"]
        it = CompileIteration(
            index=index,
            loop=loop,
            cases_run=len(subset),
            passed=len(subset) - len(failing),
            failing=failing,
            groups=groups,
            prompt_digest=_digest(prompt, descriptions),
            runs=runs,
            cost_usd=cost,
            note=note,
        )
        result.iterations.append(it)
        result.runs += runs
        result.cost_usd += cost
        if loop == "outer" and it.passed > best:
            best = it.passed
            result.visible_passed = it.passed
            result.prompt, result.tool_descriptions = prompt, dict(descriptions)
        if out is not None:
            save_artifact(out, result)
        if on_iteration is not None:
            on_iteration(it)
        return it

    async def edit(groups: Sequence[FailureGroup]) -> str | None:
        nonlocal prompt, descriptions, edits
        edits += 1
        ask = promptsmith_prompt(
            spec_text, prompt, descriptions, groups, iteration=edits, temperature=temperature
        )
        text, reply = await agent.complete_text(ask, trial=seed, seed_parts=("promptsmith", edits))
        result.cost_usd += reply.cost_usd or 0.0
        new_prompt, new_descriptions, note = parse_edit(text, project)
        if new_prompt:
            prompt = new_prompt
        if new_descriptions:
            descriptions = {**descriptions, **new_descriptions}
        return note

    note: str | None = None
    for outer in range(1, max_outer + 1):
        it = await run(cases, "outer", outer, note)
        note = None
        if not it.failing:
            result.compiled, result.stop_reason = True, "every visible case passes"
            break
        if it.passed == 0 and all(_broken_runs(g) for g in it.groups):
            # a prompt cannot fix a broken connection, a missing cache entry or a crash
            result.stop_reason = (
                "every run broke before the agent could be judged "
                f"({it.groups[0].explanation}); fix that first"
            )
            break
        if budget is not None and budget.exhausted:
            result.stop_reason = f"the run budget is spent ({budget.exhausted_reason})"
            break
        if outer == max_outer:
            result.stop_reason = (
                f"{max_outer} outer iterations used and {len(it.failing)} "
                "visible case(s) still fail"
            )
            break
        note = await edit(it.groups)
        if len(it.failing) < inner_threshold:
            failing = [s for s in cases if s.id in set(it.failing)]
            for inner in range(1, max_inner + 1):
                small = await run(failing, "inner", inner, note)
                note = None
                if not small.failing:
                    break
                failing = [s for s in failing if s.id in set(small.failing)]
                if inner < max_inner:
                    note = await edit(small.groups)
    if out is not None:
        save_artifact(out, result)
    return result


def compile_prompt(
    project: Project,
    agent: Any,
    cases: Sequence[Scenario] | None = None,
    *,
    max_outer: int = 6,
    max_inner: int = 8,
    inner_threshold: int = 10,
    settings: OracleSettings | None = None,
    budget: Budget | None = None,
    seed: int = 0,
    out_dir: str | Path | None = None,
    temperature: float | None = None,
) -> CompileResult:
    """Synchronous :func:`acompile_prompt`: edit ``agent``'s (a model agent's) prompt until every
    case of ``cases`` (default: every MFT scenario) passes, at most ``max_outer`` full runs; see the
    module doc."""
    from agentprop._util.aio import run_sync

    return run_sync(
        acompile_prompt(
            project,
            agent,
            list(cases) if cases is not None else project.scenarios(),
            max_outer=max_outer,
            max_inner=max_inner,
            inner_threshold=inner_threshold,
            settings=settings,
            budget=budget,
            seed=seed,
            out_dir=out_dir,
            temperature=temperature,
        )
    )
