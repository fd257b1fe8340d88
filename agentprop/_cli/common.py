"""What several commands share: exit codes, the agent named on the command line, the cases
selected, and checks of numeric options."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agentprop._cli.options import MODEL_AGENTS, MODEL_OPTIONS
from agentprop.errors import BindingsError, InputError, InvalidArgument, SourceLocation

if TYPE_CHECKING:
    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.model_agent import ModelAgent
    from agentprop._agents.project import Project
    from agentprop._decide.corpus import Corpus
    from agentprop._modelapi.budget import Budget
    from agentprop._modelapi.ledger import Ledger
    from agentprop._pipeline.report.model import RunReport, SnapshotCheckReport
    from agentprop._scenario.build import Scenario


EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3
"""0: every case passed (lint: no error); 1: a case failed (lint: an error); 2: usage or input
error (bad spec, bindings, agent or arguments) or a run that could not be carried out; 3 (run):
every case passed but something the spec describes was not tested (a branch, path, decision,
policy or retry no case reached, or ``min_branch_coverage`` not met over all branches)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT), as a shell reports it: after the partial report is written."""
EXIT_TERMINATED = 143
"""SIGTERM (128 + SIGTERM, a CI runner cancelling the job): as Ctrl-C, with its own code."""


def parse_kinds(value: str, *, need_mft: bool = False) -> tuple[str, ...]:
    """``--kinds``: a comma-separated subset of the case kinds (with ``mft`` when ``need_mft``)."""
    from agentprop._pipeline.defaults import KINDS

    kinds = tuple(k.strip().lower() for k in value.split(",") if k.strip())
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds or (need_mft and "mft" not in kinds):
        problem = (
            f"unknown case kind(s) {', '.join(unknown)}"
            if unknown
            else ("no case kind given" if not kinds else "--kinds must include mft")
        )
        raise InputError(
            f"bad --kinds {value!r}: {problem}",
            expected=f"a comma-separated subset of {','.join(KINDS)}"
            + (" that includes mft" if need_mft else ""),
            fix="e.g. --kinds mft,inv",
        )
    return kinds


def check_positive_runs(
    runs: int | None, *, fix: str = "use --runs 1 or more, or leave it out for the sequential test"
) -> None:
    if runs is not None and runs < 1:
        raise InputError(f"--runs {runs} must be at least 1", fix=fix)


_EXAMPLE_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-mini"}


def model_agent_for(
    kind: str, args: argparse.Namespace, project: Project, out: TextIO
) -> ModelAgent:
    """The model agent of ``--agent anthropic`` / ``--agent openai`` and the model options."""
    from agentprop._agents.anthropic import AnthropicAgent
    from agentprop._agents.openai import OpenAIAgent
    from agentprop._agents.prompt import find_seed_artifacts
    from agentprop._modelapi.cache import CacheMode
    from agentprop._modelapi.client import DEFAULT_API_CACHE_PATH, default_cache_mode
    from agentprop._modelapi.ledger import STORE_ENV

    if args.fault:
        raise InputError(
            f"--fault applies to Python agents with fault knobs, not to --agent {kind}",
            fix="drop --fault",
        )
    if not args.model:
        raise InputError(
            f"--agent {kind} needs --model",
            expected=f"--model MODEL, e.g. --model {_EXAMPLE_MODELS[kind]}",
            fix="name the model to call with --model",
        )
    openai_only = [
        f"--{name}" for name in ("api", "stream") if getattr(args, name, None) is not None
    ]
    if kind != "openai" and openai_only:
        raise InputError(
            f"{', '.join(openai_only)} only apply to --agent openai",
            fix="drop them, or pass --agent openai",
        )
    seed_prompt, seed_tools = find_seed_artifacts(project.spec_path.parent)
    prompt = Path(args.prompt) if args.prompt else seed_prompt
    tools = Path(args.tool_descriptions) if args.tool_descriptions else seed_tools
    mode = CacheMode.parse(args.cache_mode) if args.cache_mode else default_cache_mode()
    cache: Path | bool = (
        False
        if (args.cache or "").lower() == "none"
        else Path(args.cache or DEFAULT_API_CACHE_PATH)
    )
    options: dict[str, object] = {
        "temperature": args.temperature,
        "max_tokens": 1024 if args.max_tokens is None else args.max_tokens,
        "max_steps": 10 if args.max_steps is None else args.max_steps,
        "timeout": 120.0 if args.timeout is None else args.timeout,
        "base_url": args.base_url,
        # a dry run writes nothing, not even an empty cache
        "cache": False if getattr(args, "dry_run", False) else cache,
        "cache_mode": mode,
    }
    if kind == "openai":
        options.update(api=args.api or "chat", stream=bool(args.stream))
    if getattr(args, "tool_choice", None) is not None:
        options["tool_choice"] = args.tool_choice
    agent_type = OpenAIAgent if kind == "openai" else AnthropicAgent
    try:
        agent: ModelAgent = agent_type.from_files(args.model, prompt, tools, **options)
    except InvalidArgument as exc:
        raise InputError(str(exc), fix="correct the option's value") from None
    agent.check_spec(project.spec)
    # a missing SDK is a usage error now, naming the extra, not an errored run per case
    agent.provider.sdk()
    api = f" through {agent.provider.label}" + (
        " (streamed)" if kind == "openai" and args.stream else ""
    )
    # the API cache's entries live there (None: $AGENTPROP_STORE)
    agent.store = getattr(args, "store", None) or None
    try:
        # a damaged cache or no way to call the model: one error now, not a failure per case
        agent.preflight()
    except InvalidArgument as exc:  # the shared store cannot be used
        source = "--store" if agent.store else f"${STORE_ENV}"
        raise InputError(
            f"{source}: {exc}",
            fix="give a reachable redis://host:port/db, or drop the option to keep the "
            "API cache in its file",
        ) from None
    where = (
        agent.cache.store.describe()
        if cache is not False and agent.cache.store is not None
        else cache
    )
    print(
        f"model {args.model}{api}; prompt {prompt or '(written from the spec)'}; tool "
        f"descriptions {tools or '(the spec)'}; cache {where if cache is not False else 'off'} "
        f"({mode.value if cache is not False else 'off'})",
        file=out,
    )
    return agent


def resolve_settings(args: argparse.Namespace) -> None:
    """Resolve the command's settings in one place, through :class:`agentprop.settings`: the
    default profile, then ``--profile`` (a built-in, or one the agent's module registered: call
    this after loading the agent), then the flags given (``--mode``, ``--tau``, ``--runs``,
    ``--max-runs-per-case``, ``--seed``). The resolved values are written back to ``args``, so the
    plan, the dry run and the run read the same ones."""
    from agentprop._decide.profiles import get_profile
    from agentprop._decide.settings import suite_settings

    profile = get_profile(getattr(args, "profile", None))  # an unknown name: InputError, exit 2
    flags = {
        "mode": getattr(args, "mode", None),
        "tau": getattr(args, "tau", None),
        "runs": getattr(args, "runs", None),
        "max_runs": getattr(args, "max_runs_per_case", None),
        "seed": getattr(args, "seed", None) or None,
    }
    names = {
        "mode": "--mode",
        "tau": "--tau",
        "runs": "--runs",
        "max_runs": "--max-runs-per-case",
        "seed": "--seed",
    }
    for key, value in flags.items():  # each flag on its own first, so an error names the flag
        try:
            suite_settings(profile.name, **{key: value})
        except InvalidArgument as exc:
            reason = str(exc).split("): ", 1)[-1]
            raise InputError(
                f"{names[key]} {value}: {reason}",
                fix=f"give {names[key]} a valid value, or leave it out",
            ) from None
    _, resolved = suite_settings(profile.name, **flags)
    args.profile = profile.name
    args.mode, args.tau, args.runs = resolved.mode, resolved.tau, resolved.runs
    args.max_runs_per_case = resolved.max_runs
    args.seed = resolved.seed or 0
    # a profile may write inputs by a model (agentprop.settings(input_model=...)); the flags win
    if hasattr(args, "input_model"):
        args.input_model = args.input_model or resolved.input_model
        args.simulated_user = bool(
            getattr(args, "simulated_user", False) or resolved.simulated_user
        )


def load_cli_agent(
    args: argparse.Namespace, project: Project, out: TextIO
) -> tuple[LoadedAgent, ModelAgent | None]:
    """The agent named by --agent (or the bindings' `agent:`), and the model agent behind it
    when it is `anthropic` or `openai` (the caller closes it)."""
    from agentprop._agents.loading import load_agent, parse_faults

    ref = args.agent or project.bindings.agent
    if not ref and project.bindings.path is None:
        missing = project.spec_path.parent / "agentprop.yaml"
        raise InputError(
            f"no agent to run: there is no bindings file {missing} (and no --bindings FILE), so "
            "nothing names the agent",
            expected="agentprop.yaml next to the spec with `agent: MODULE:ATTR`, or --bindings "
            "FILE, or --agent MODULE:ATTR",
            fix=f"write the bindings (`agentprop init {project.spec_path.parent}` drafts them), "
            "pass --bindings PATH/agentprop.yaml, or pass --agent path/to/agent.py:MyAgent",
        )
    if not ref:
        raise InputError(
            f"no agent to run: {project.bindings.path} has no `agent:`",
            expected="--agent MODULE:ATTR, or `agent: MODULE:ATTR` in the bindings file",
            fix="pass --agent MODULE:ATTR, where MODULE.py sits next to the spec or is importable "
            "(e.g. --agent agent:SupportOpsAgent for examples/supportops/agent.py), or add "
            "`agent:` to agentprop.yaml",
        )
    model_agent: ModelAgent | None = None
    if ref in MODEL_AGENTS:
        model_agent = model_agent_for(ref, args, project, out)
        agent = model_agent.loaded()
    else:
        # the API cache is also the input model's (--input-model)
        shared = ("cache", "cache_mode") if getattr(args, "input_model", None) else ()
        given = [
            f"--{name.replace('_', '-')}"
            for name in MODEL_OPTIONS
            if getattr(args, name, None) is not None and name not in shared
        ]
        if given:
            raise InputError(
                f"{', '.join(given)} only apply to a model agent (--agent "
                "anthropic or --agent openai)",
                fix="drop them, or pass --agent anthropic / --agent openai",
            )
        # --agent is typed relative to where the command runs, then to the project; the
        # bindings' `agent:` to the bindings file
        search = [Path.cwd()] if args.agent else []
        agent = load_agent(ref, project.base_dir, parse_faults(args.fault), search=search)
    return agent, model_agent


def cli_corpus(args: argparse.Namespace, directory: str | Path) -> Corpus:
    """The failure corpus in ``directory``; with ``--store URL`` (else ``$AGENTPROP_STORE``), the
    store's, over that directory read-only. A store that cannot be used is a usage error."""
    from agentprop._decide.corpus import Corpus, open_store_corpus
    from agentprop._modelapi.ledger import STORE_ENV

    option = getattr(args, "store", None)
    store = option or os.environ.get(STORE_ENV, "")
    if not store:
        return Corpus(directory)
    try:
        return open_store_corpus(store, Corpus(directory))
    except InvalidArgument as exc:
        source = "--store" if option else f"${STORE_ENV}"
        raise InputError(
            f"{source}: {exc}",
            fix="give a reachable redis://host:port/db, or drop the option to keep the "
            "corpus in its directory",
        ) from None


def cli_ledger(args: argparse.Namespace) -> Ledger | None:
    """The shared budget ledger of ``--store URL`` (else ``$AGENTPROP_STORE``), or ``None``; a
    store that cannot be used is a usage error naming it."""
    from agentprop._modelapi.ledger import STORE_ENV, open_ledger

    option = getattr(args, "store", None)
    store = option or os.environ.get(STORE_ENV, "")
    if not store:
        return None
    try:
        return open_ledger(store)
    except InvalidArgument as exc:
        source = "--store" if option else f"${STORE_ENV}"
        raise InputError(
            f"{source}: {exc}",
            fix="give a reachable redis://host:port/db, or drop the option to keep the "
            "budget in this process",
        ) from None


def cli_budget(args: argparse.Namespace, model_agent: ModelAgent | None) -> Budget:
    """The one budget of a command (``--max-runs``, ``--max-usd``, ``--prices``, shared by
    ``--store``), given to the
    model agent; a dollar limit on a model without a price is refused before anything runs."""
    from agentprop._modelapi.budget import Budget, load_prices

    prices = load_prices(args.prices) if getattr(args, "prices", None) else None
    budget = Budget(
        max_runs=args.max_runs, max_usd=args.max_usd, prices=prices, ledger=cli_ledger(args)
    )
    if model_agent is not None:
        budget.check_priced(model_agent.model)
        model_agent.budget = budget
    return budget


def model_summary(stats: dict[str, Any], snapshot: Any) -> str:
    """The model agent's line after the table: calls, replays, retries, money."""
    refused = (
        f", {stats['refused_calls']} refused by the budget" if stats.get("refused_calls") else ""
    )
    line = (
        f"model calls: {stats['model_calls']} ({stats['cache_hits']} from the cache, "
        f"{stats['live_calls']} to the API, {stats['retries']['retries']} retries{refused}); "
        f"spent ${snapshot.usd:.4f}"
    )
    if getattr(snapshot, "abandoned_calls", 0):
        line += (
            f" (${snapshot.abandoned_usd:.4f} of it on {snapshot.abandoned_calls} abandoned in "
            "flight (charged their worst case))"
        )
    if snapshot.unpriced_calls:
        line += (
            f" on priced calls, and an unknown amount on {snapshot.unpriced_calls} call(s) of "
            f"{', '.join(snapshot.unpriced_models)} (no price: give one with --prices FILE)"
        )
    return line + f", saved ${snapshot.usd_saved:.4f} by replays"


def check_explore(args: argparse.Namespace) -> None:
    if args.explore < 0:
        raise InputError(
            f"--explore {args.explore} is negative",
            fix="use 0 to turn exploration off, or a number of inputs per path",
        )


def check_budget_args(args: argparse.Namespace) -> None:
    for name in ("max_runs", "max_usd"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise InputError(
                f"--{name.replace('_', '-')} {value} must be >= 0", fix="use 0 or more"
            )


def require_cases(project: Project, option: str | None = None) -> None:
    """Refuse a project none of whose paths can be built (an empty suite proves nothing)."""
    if project.scenarios():
        return
    where = project.bindings.path or f"{project.spec_path.parent / 'agentprop.yaml'} (not found)"
    raise InputError(
        f"no case can be built from {project.spec_path}"
        + (f" (given as {option})" if option else "")
        + f": every path needs condition variables that the bindings ({where}) do not realise",
        expected="an agentprop.yaml next to the spec binding the variables of "
        "the `when` expressions",
        fix="write the bindings (docs/reference.md#bindings; examples/*/agentprop.yaml are "
        f"worked examples); `agentprop lint {project.spec_path.parent}` lists the variables",
    )


def require_decisions(project: Project, scenarios: list[Scenario]) -> None:
    """Every case checks the decision its leaf stands for: a scenario whose last turn expects
    none (a leaf the bindings do not map and whose name implies no single decision) is an
    error, not a case that silently skips the decision check."""
    from agentprop._spec.implied import implied_decision

    unmapped = [s for s in scenarios if s.expect_decision is None]
    if not unmapped:
        return
    first = unmapped[0]
    keys = sorted({f"{s.leaf}<-{s.via}" if s.via else s.leaf for s in unmapped})
    _, candidates = implied_decision(first.leaf, project.spec.response_contract.decision_enum)
    raise BindingsError(
        f"{len(unmapped)} case(s) would check no decision: {', '.join(keys)} stand(s) for no "
        f"single decision of decision_enum (e.g. case {first.id})",
        location=project.bindings.outcome_location(first.leaf)
        if project.bindings.path is not None
        else SourceLocation(project.spec_path),
        expected="`outcomes:` mapping each of them to a decision: `LEAF: DECISION`, `LEAF: {VIA: "
        "DECISION}` or `LEAF<-VIA: DECISION`",
        fix=f"add `{keys[0]}: DECISION` (DECISION one of "
        f"{', '.join(candidates or project.spec.response_contract.decision_enum)}) "
        "under `outcomes:` in "
        + (
            str(project.bindings.path)
            if project.bindings.path is not None
            else "agentprop.yaml next to the spec"
        ),
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
        scenarios = [
            s for s in scenarios if any(c == s.id if c in ids else c in s.id for c in filters)
        ]
        if not scenarios:
            raise InputError(
                f"no case id contains {', '.join(filters)}",
                fix="`agentprop cases PROJECT` lists the case ids",
            )
    return scenarios


OUTPUTS = ("json", "html", "junit", "markdown")
"""The output options (``--json PATH`` ...) of the commands that run cases."""


def check_report_outputs(args: argparse.Namespace) -> None:
    """Before anything runs, so that no results are lost after the work: ``--html`` needs
    jinja2, and each output path must be writable. Missing directories are created; each path
    is made absolute (an agent that changes directory must not move the report)."""
    if getattr(args, "html_path", None):
        from agentprop._pipeline.report import require_jinja2

        require_jinja2()
    resolved: dict[str, Path] = {}
    for name in OUTPUTS:
        typed = getattr(args, f"{name}_path", None)
        if not typed or typed == "-":
            continue
        path = Path(typed).absolute()
        fix = f"give --{name} a file path in a directory you can write to"
        if path.is_dir():
            raise InputError(f"--{name} {typed} is a directory", expected="a file path", fix=fix)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"--{name} {typed}: cannot create its directory {path.parent}: "
                f"{exc.strerror or exc}",
                fix=fix,
            ) from None
        if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise InputError(
                f"--{name} {typed}: {path if path.exists() else path.parent} is not writable",
                fix=fix,
            )
        resolved[name] = path
    args.resolved_outputs = resolved


def write_output(
    args: argparse.Namespace,
    name: str,
    text: str | Callable[[], str | Iterable[str]],
    what: str,
    out: TextIO,
) -> bool:
    """Write ``text`` (or what ``text()`` returns: the text, or its pieces, e.g.
    :meth:`RunReport.json_chunks`) to the ``--NAME`` path (made absolute by
    :func:`check_report_outputs`).
    On a failure (a full or read-only disk) the text goes to a file in the temporary directory
    instead and the message says where; ``False`` then, so the command can exit 2."""
    typed = str(getattr(args, f"{name}_path"))
    path = getattr(args, "resolved_outputs", {}).get(name) or Path(typed).absolute()

    def pieces() -> Iterable[str]:
        made = text() if callable(text) else text
        return (made,) if isinstance(made, str) else made

    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(pieces())
        return True
    except OSError as exc:
        problem = exc.strerror or str(exc)
    fd, spare = tempfile.mkstemp(
        prefix=f"agentprop-{name}-",
        suffix={"json": ".json", "html": ".html", "junit": ".xml"}.get(name, ".md"),
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(pieces())
    except OSError as exc:
        print(
            f"error: cannot write the {what} to {typed} ({problem}), nor to {spare} "
            f"({exc.strerror or exc}): it is lost",
            file=out,
        )
        return False
    print(
        f"error: cannot write the {what} to {typed} ({problem}); it was written to {spare} instead",
        file=out,
    )
    return False


def write_report_outputs(
    report: RunReport | SnapshotCheckReport,
    args: argparse.Namespace,
    out: TextIO,
    *,
    json: Callable[[], str | Iterable[str]] | None = None,
    noun: str = "report",
) -> list[str]:
    """Render and write the outputs asked for (``--html``, ``--junit``, ``--markdown``; ``-``
    is standard output), after ``json`` to ``--json`` when it is given (said as "NOUN written
    to PATH"); returns the paths written (but the JSON's)."""
    from agentprop._pipeline import report as renderers  # each imported when asked for
    from agentprop._pipeline.report.model import SnapshotCheckReport

    written: list[str] = []
    failed = False
    if json is not None and getattr(args, "json_path", None):
        if write_output(args, "json", json, "JSON report", out):
            print(f"{noun} written to {args.json_path}", file=out)
        else:
            failed = True
    for name, what in (
        ("html", "HTML report"),
        ("junit", "JUnit XML"),
        ("markdown", "Markdown summary"),
    ):
        path = getattr(args, f"{name}_path", None)
        if not path:
            continue
        if isinstance(report, SnapshotCheckReport) and name != "html":
            raise InputError(
                f"--{name} renders run reports (agentprop.run/1); a snapshot "
                "check renders as --html",
                fix="use --html PATH for a snapshot check",
            )
        # only HTML renders both
        text = (
            renderers.render_html(report)
            if isinstance(report, SnapshotCheckReport)
            else getattr(renderers, f"render_{name}")(report)
        )
        if path == "-":
            out.write(text)
            out.flush()
            continue
        if write_output(args, name, text, what, out):
            written.append(path)
            print(f"{what} written to {path}", file=out)
        else:
            failed = True
    args.output_failed = failed or getattr(args, "output_failed", False)
    return written


def announce_plan(
    project: Project,
    scenarios: list[Scenario],
    kinds: tuple[str, ...],
    args: argparse.Namespace,
    out: TextIO,
    *,
    model_agent: ModelAgent | None,
    repeats: str = "",
) -> None:
    """Before a long command starts: the cases it will decide, the most agent runs its MFT and
    EXPLORE cases can take (each stops once decided, usually far sooner), and for a model
    agent the price per million tokens and the dollar cap. Only figures known before running:
    the other kinds' cases are counted once built, the cost as calls are made. ``repeats``
    names what multiplies the suite (tdad's mutants): such a command, or one calling a model,
    is announced as taking minutes."""
    from agentprop._decide.check import scenario_settings
    from agentprop._scenario.piecemeal import piecemeal_scenarios

    explicit = {name: getattr(args, name, None) for name in ("mode", "tau", "runs")}
    if explicit["runs"] is not None and explicit["mode"] is None:
        explicit["mode"] = "fixed"  # --runs alone selects fixed mode
    per_case = []
    for s in scenarios:
        settings = scenario_settings(
            project, s, max_runs=getattr(args, "max_runs_per_case", None), explicit=explicit
        ).settings
        per_case.append(settings.make_test().max_runs or settings.runs)
    mft = len(scenarios) if "mft" in kinds else 0
    per_path = getattr(args, "explore", 0) if "explore" in kinds else 0
    # exploration also continues the paths that ask for a detail past the question
    answered = piecemeal_scenarios(project.bindings, scenarios) if per_path else []
    for s in answered:
        settings = scenario_settings(
            project, s, max_runs=getattr(args, "max_runs_per_case", None), explicit=explicit
        ).settings
        per_case.append(settings.make_test().max_runs or settings.runs)
    own = sum(per_case[: len(scenarios)])
    bound = (own if mft else 0) + per_path * sum(per_case)
    parts = [f"{mft} MFT case(s)"] if mft else []
    if per_path:
        parts.append(f"up to {per_path * (len(scenarios) + len(answered))} EXPLORE case(s)")
    others = [k.upper() for k in kinds if k not in ("mft", "explore")]
    if others:
        parts.append(f"the {'/'.join(others)} cases (counted once built)")
    line = f"plan: {', '.join(parts) or 'no case'}"
    if mft or per_path:
        line += (
            f"; the MFT and EXPLORE cases take at most {bound:,} agent runs (a case stops once "
            "decided, most far sooner)"
        )
    if model_agent is not None:
        from agentprop._modelapi.budget import price_for

        price = price_for(model_agent.model, load_prices_of(args))
        line += (
            f"; {model_agent.model} costs ${price.input_per_mtok:g} in / "
            f"${price.output_per_mtok:g} out per million tokens, counted as calls are made"
            if price is not None
            else f"; {model_agent.model} has no known price (--prices FILE gives one)"
        )
        max_usd = getattr(args, "max_usd", None)
        line += (
            f", capped at ${max_usd:g} (--max-usd)"
            if max_usd is not None
            else "; --max-usd X caps the spend"
        )
    if repeats:
        line += f"; {repeats}"
    if repeats or model_agent is not None:
        line += (
            "; this can take minutes: progress is shown on stderr, and --kinds mft or "
            "--case ID narrows it"
        )
    print(line, file=out, flush=True)


def load_prices_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """The price table of ``--prices`` merged over the bundled one, or ``None`` for the bundled."""
    from agentprop._modelapi.budget import DEFAULT_PRICES, load_prices

    path = getattr(args, "prices", None)
    return {**DEFAULT_PRICES, **load_prices(path)} if path else None
