"""``agentprop compile``: PromptSmith edits a model agent's prompt until the spec's visible
cases pass."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentprop._cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    check_budget_args,
    check_positive_runs,
    cli_budget,
    load_cli_agent,
    selected_scenarios,
)
from agentprop._cli.options import (
    BINDINGS_HELP,
    MODEL_AGENTS,
    SPEC_HELP,
    budget_parent,
    model_parent,
    selection_parent,
)
from agentprop._version import __version__
from agentprop.errors import InputError

if TYPE_CHECKING:
    from agentprop._pipeline.promptsmith import CompileResult


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    comp = sub.add_parser(
        "compile",
        help="PromptSmith: edit a model agent's prompt until the spec's visible cases pass",
        parents=[
            selection_parent(seed_help="trial namespace (default 0)"),
            budget_parent(unfinished="compiling stops"),
            model_parent(always=True),
        ],
    )
    comp.add_argument("spec", help=SPEC_HELP)
    comp.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where the compiled prompt.txt, tool_descriptions.yaml and compile_log.json go "
        "(rewritten after every iteration)",
    )
    comp.add_argument(
        "--agent",
        default="anthropic",
        choices=list(MODEL_AGENTS),
        help="the model agent whose prompt is compiled: anthropic (default) or openai",
    )
    comp.add_argument("--fault", action="append", default=[], help=argparse.SUPPRESS)
    comp.add_argument("--bindings", help=BINDINGS_HELP)
    comp.add_argument(
        "--max-iterations",
        type=int,
        default=6,
        metavar="N",
        help="outer iterations: full runs of the visible cases (default 6)",
    )
    comp.add_argument(
        "--max-inner",
        type=int,
        default=8,
        metavar="N",
        help="inner iterations on the failing cases once fewer than "
        "--inner-threshold fail (default 8)",
    )
    comp.add_argument(
        "--inner-threshold",
        type=int,
        default=10,
        metavar="N",
        help="switch to the inner loop below this many failing cases (default 10)",
    )
    comp.add_argument(
        "--runs",
        type=int,
        help="decide each case on a fixed N runs instead of the sequential test "
        "(cheaper, less sure)",
    )
    comp.add_argument(
        "--promptsmith-temperature",
        type=float,
        help="sampling temperature of PromptSmith's edits (default: the API's)",
    )
    comp.add_argument("--json", dest="json_path", help="also write the compile log to this file")
    comp.set_defaults(handler=command)


def command(args: argparse.Namespace, out: TextIO) -> int:
    from agentprop._agents.project import load_project
    from agentprop._decide.oracle import OracleSettings
    from agentprop._pipeline.promptsmith import acompile_prompt

    project = load_project(args.spec, bindings=args.bindings)
    if not args.model:
        raise InputError(
            "agentprop compile needs --model",
            expected="--model MODEL, e.g. --model claude-sonnet-4-6",
            fix="name the model whose prompt to compile (PromptSmith uses the same model)",
        )
    for name in ("max_iterations", "max_inner", "inner_threshold"):
        if getattr(args, name) < 1:
            raise InputError(
                f"--{name.replace('_', '-')} {getattr(args, name)} must be at least 1",
                fix="use 1 or more",
            )
    check_positive_runs(args.runs)
    scenarios = selected_scenarios(project, args.case)
    check_budget_args(args)
    _, model_agent = load_cli_agent(args, project, out)
    assert model_agent is not None
    budget = cli_budget(args, model_agent)
    settings = OracleSettings.for_spec(
        project.spec, mode="fixed" if args.runs else None, runs=args.runs
    )
    print(
        f"agentprop {__version__}: compiling {project.spec.spec_id} for {model_agent.model} "
        f"against {len(scenarios)} visible (MFT) cases -> {args.out}",
        file=out,
    )

    async def go() -> CompileResult:
        try:
            return await acompile_prompt(
                project,
                model_agent,
                scenarios,
                max_outer=args.max_iterations,
                max_inner=args.max_inner,
                inner_threshold=args.inner_threshold,
                settings=settings,
                budget=budget,
                seed=args.seed,
                out_dir=args.out,
                temperature=args.promptsmith_temperature,
                on_iteration=lambda it: print(
                    f"  {it.loop:<5} {it.index:>2}: {it.passed}/{it.cases_run} pass"
                    + (
                        f" ({len(it.groups)} root cause(s): "
                        f"{', '.join(g.clause for g in it.groups[:3])})"
                        if it.groups
                        else ""
                    ),
                    file=out,
                    flush=True,
                ),
            )
        finally:
            await model_agent.aclose()

    result = asyncio.run(go())
    print(result.footer(), file=out)
    if result.compiled:
        print(
            f"next: agentprop tdad {args.spec} --agent {args.agent} --model {model_agent.model} "
            f"--prompt {args.out}/prompt.txt --tool-descriptions "
            f"{args.out}/tool_descriptions.yaml  (hidden cases and mutation score)",
            file=out,
        )
    if args.json_path:
        Path(args.json_path).write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if model_agent.missing_key_error is not None:
        raise model_agent.missing_key_error
    return EXIT_OK if result.compiled else EXIT_FAIL
