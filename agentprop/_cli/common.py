"""What several commands share: exit codes, the agent named on the command line, the cases
selected, and checks of numeric options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.options import MODEL_OPTIONS
from agentprop.errors import BindingsError, InputError, InvalidArgument, SourceLocation

if TYPE_CHECKING:
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.project import Project
    from agentprop._scenario.build import Scenario


EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
"""0: every case passed (lint: no error); 1: a case failed (lint: an error); 2: usage or input
error (bad spec, bindings, agent or arguments) or a run that could not be carried out."""


def parse_kinds(value: str, *, need_mft: bool = False) -> tuple[str, ...]:
    """``--kinds``: a comma-separated subset of the case kinds (with ``mft`` when ``need_mft``)."""
    from agentprop._pipeline.defaults import KINDS

    kinds = tuple(k.strip().lower() for k in value.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds or (need_mft and "mft" not in kinds):
        problem = f"unknown case kind(s) {', '.join(unknown)}" if unknown else ("no case kind given" if not kinds else "--kinds must include mft")
        raise InputError(f"bad --kinds {value!r}: {problem}", expected=f"a comma-separated subset of {','.join(KINDS)}" + (" that includes mft" if need_mft else ""),
                         fix="e.g. --kinds mft,inv")
    return kinds


def check_positive_runs(runs: int | None, *, fix: str = "use --runs 1 or more, or leave it out for the sequential test") -> None:
    if runs is not None and runs < 1:
        raise InputError(f"--runs {runs} must be at least 1", fix=fix)


def anthropic_agent(args: argparse.Namespace, project: Project, out: TextIO) -> AnthropicAgent:
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._modelapi.cache import CacheMode
    from agentprop._agents.anthropic import DEFAULT_API_CACHE_PATH
    from agentprop._agents.anthropic import default_cache_mode
    from agentprop._agents.prompt import find_seed_artifacts

    if args.fault:
        raise InputError("--fault applies to Python agents with fault knobs, not to --agent anthropic", fix="drop --fault")
    if not args.model:
        raise InputError(
            "--agent anthropic needs --model",
            expected="--model MODEL, e.g. --model claude-sonnet-4-6",
            fix="name the model to call with --model",
        )
    seed_prompt, seed_tools = find_seed_artifacts(project.spec_path.parent)
    prompt = Path(args.prompt) if args.prompt else seed_prompt
    tools = Path(args.tool_descriptions) if args.tool_descriptions else seed_tools
    mode = CacheMode.parse(args.cache_mode) if args.cache_mode else default_cache_mode()
    cache: Path | bool = False if (args.cache or "").lower() == "none" else Path(args.cache or DEFAULT_API_CACHE_PATH)
    max_tokens = 1024 if args.max_tokens is None else args.max_tokens
    max_steps = 10 if args.max_steps is None else args.max_steps
    timeout = 120.0 if args.timeout is None else args.timeout
    try:
        agent = AnthropicAgent.from_files(
            args.model,
            prompt,
            tools,
            temperature=args.temperature,
            max_tokens=max_tokens,
            max_steps=max_steps,
            timeout=timeout,
            base_url=args.base_url,
            cache=cache,
            cache_mode=mode,
        )
    except InvalidArgument as exc:
        raise InputError(str(exc), fix="correct the option's value") from None
    agent.check_spec(project.spec)
    print(
        f"model {args.model}; prompt {prompt or '(written from the spec)'}; tool descriptions {tools or '(the spec)'}; "
        f"cache {cache if cache is not False else 'off'} ({mode.value if cache is not False else 'off'})",
        file=out,
    )
    return agent


def load_cli_agent(args: argparse.Namespace, project: Project, out: TextIO) -> tuple[LoadedAgent, AnthropicAgent | None]:
    """The agent named by --agent (or the bindings' `agent:`), and the model agent behind it
    when it is `anthropic` (the caller closes it)."""
    from agentprop._agents.loading import load_agent
    from agentprop._agents.loading import parse_faults

    ref = args.agent or project.bindings.agent
    if not ref:
        raise InputError(
            "no agent to run",
            expected="--agent MODULE:ATTR, or `agent: MODULE:ATTR` in the bindings file",
            fix="pass --agent MODULE:ATTR, where MODULE.py sits next to the spec or is importable "
            "(e.g. --agent agent:SupportOpsAgent for examples/supportops/agent.py), or add `agent:` to agentprop.yaml",
        )
    model_agent: AnthropicAgent | None = None
    if ref == "anthropic":
        model_agent = anthropic_agent(args, project, out)
        agent = model_agent.loaded()
    else:
        given = [f"--{name.replace('_', '-')}" for name in MODEL_OPTIONS if getattr(args, name) is not None]
        if given:
            raise InputError(f"{', '.join(given)} only apply to --agent anthropic", fix="drop them, or pass --agent anthropic")
        base = project.base_dir if not args.agent else Path.cwd()
        agent = load_agent(ref, base if (base / (ref.split(':')[0].replace('.', '/') + '.py')).is_file() else project.base_dir, parse_faults(args.fault))
    return agent, model_agent


def check_explore(args: argparse.Namespace) -> None:
    if args.explore < 0:
        raise InputError(f"--explore {args.explore} is negative", fix="use 0 to turn exploration off, or a number of inputs per path")


def check_budget_args(args: argparse.Namespace) -> None:
    for name in ("max_runs", "max_usd"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise InputError(f"--{name.replace('_', '-')} {value} must be >= 0", fix="use 0 or more")


def require_cases(project: Project, option: str | None = None) -> None:
    """Refuse a project none of whose paths can be built (an empty suite proves nothing)."""
    if project.scenarios():
        return
    where = project.bindings.path or f"{project.spec_path.parent / 'agentprop.yaml'} (not found)"
    raise InputError(
        f"no case can be built from {project.spec_path}" + (f" (given as {option})" if option else "")
        + f": every path needs condition variables that the bindings ({where}) do not realise",
        expected="an agentprop.yaml next to the spec binding the variables of the `when` expressions",
        fix="write the bindings (docs/reference.md#bindings; examples/*/agentprop.yaml are worked examples); "
        f"`agentprop lint {project.spec_path.parent}` lists the variables",
    )


def require_decisions(project: Project, scenarios: list[Scenario]) -> None:
    """Every case checks the decision its leaf stands for: a scenario whose last turn expects
    none (a leaf the bindings do not map and whose name implies no single decision) is an
    error, not a case that silently skips the decision check."""
    from agentprop._spec.lint import implied_decision

    unmapped = [s for s in scenarios if s.expect_decision is None]
    if not unmapped:
        return
    first = unmapped[0]
    keys = sorted({f"{s.leaf}<-{s.via}" if s.via else s.leaf for s in unmapped})
    _, candidates = implied_decision(first.leaf, project.spec.response_contract.decision_enum)
    raise BindingsError(
        f"{len(unmapped)} case(s) would check no decision: {', '.join(keys)} "
        f"stand(s) for no single decision of decision_enum (e.g. case {first.id})",
        location=project.bindings.outcome_location(first.leaf) if project.bindings.path is not None else SourceLocation(project.spec_path),
        expected="`outcomes:` mapping each of them to a decision: `LEAF: DECISION`, `LEAF: {VIA: DECISION}` or `LEAF<-VIA: DECISION`",
        fix=f"add `{keys[0]}: DECISION` (DECISION one of {', '.join(candidates or project.spec.response_contract.decision_enum)}) under `outcomes:` in "
        + (str(project.bindings.path) if project.bindings.path is not None else "agentprop.yaml next to the spec"),
    )


def selected_scenarios(project: Project, filters: list[str]) -> list[Scenario]:
    """The project's scenarios whose id contains one of ``filters`` (all when there is none);
    a project with no buildable case at all is an input error."""
    require_cases(project)
    scenarios = project.scenarios()
    if filters:
        # a filter that is a whole case id selects that case, not the loop and retry cases
        # whose ids extend it (`END_BILLING_ANSWER<-N3_BILLING/N4_CLARIFY#0>N1_INTENT#3`)
        ids = {s.id for s in scenarios}
        scenarios = [s for s in scenarios if any(c == s.id if c in ids else c in s.id for c in filters)]
        if not scenarios:
            raise InputError(f"no case id contains {', '.join(filters)}", fix="run without --case to see the case ids")
    return scenarios
