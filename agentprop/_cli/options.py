"""Options shared by several commands, as argparse parent parsers (one definition each)."""

from __future__ import annotations

import argparse

from agentprop._pipeline.defaults import DEFAULT_PER_PATH, KINDS

SPEC_HELP = "spec directory (spec.yaml + agentprop.yaml) or spec file"
CASE_HELP = "only cases whose id contains ID, or is ID exactly (repeatable)"
BINDINGS_HELP = "bindings file (default: agentprop.yaml next to the spec)"
DEFAULT_KINDS = ",".join(k for k in KINDS)

TOOL_CHOICES = ("auto", "required", "none")
"""The values of ``ToolChoice`` (here so that building the parser loads no model code; a test
checks they agree)."""

CACHE_MODES = ("off", "read", "write", "read-write", "replay-only")
"""The values of ``CacheMode`` (kept here so that building the parser loads no model code;
a test checks they agree)."""

MODEL_OPTIONS = (
    "model",
    "prompt",
    "tool_descriptions",
    "base_url",
    "api",
    "stream",
    "temperature",
    "max_tokens",
    "max_steps",
    "tool_choice",
    "timeout",
    "cache",
    "cache_mode",
    "prices",
)
"""The ``dest`` of every option of :func:`model_parent` (they only apply to a model agent)."""

MODEL_AGENTS = ("anthropic", "openai")
"""The model agents ``--agent`` names."""


def _parent() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


def agent_parent() -> argparse.ArgumentParser:
    """--agent, --fault, --bindings: which agent runs, with which fault knobs, on which bindings."""
    p = _parent()
    p.add_argument(
        "--agent",
        help="the agent as FILE:ATTR (agent.py:MyAgent, ./so/agent.py:MyAgent) or MODULE:ATTR "
        "(mypkg.agents:build), or a model agent: `anthropic` (the Messages API) or `openai` (the "
        "OpenAI API or any OpenAI-compatible server) (default: `agent:` in the bindings)",
    )
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=P",
        help="turn on a fault knob of the agent with probability P (repeatable)",
    )
    p.add_argument("--bindings", help=BINDINGS_HELP)
    return p


def selection_parent(
    *, seed_help: str = "trial namespace: change it to draw fresh samples (default 0)"
) -> argparse.ArgumentParser:
    """--case and --seed: which cases, and which samples of the agent."""
    p = _parent()
    p.add_argument("--case", action="append", default=[], metavar="ID", help=CASE_HELP)
    p.add_argument("--seed", type=int, default=0, help=seed_help)
    return p


def profile_parent() -> argparse.ArgumentParser:
    """--profile: how deep each case is decided (a profile of :class:`agentprop.settings`)."""
    p = _parent()
    p.add_argument(
        "--profile",
        default=None,
        metavar="NAME",
        help="how deep each case is decided: smoke (1 clean run a case), ci (2; the default), "
        "release (each case certified on its own: the SPRT, 59 clean runs for a safety case), or "
        "a profile registered with agentprop.settings.register_profile in the agent's module; a "
        "failure is always confirmed by the case's own test, and flags such as --runs "
        "override the profile",
    )
    return p


def suite_parent() -> argparse.ArgumentParser:
    """--kinds, --explore, --concurrency: how the suite of a spec is built and run."""
    p = _parent()
    p.add_argument(
        "--kinds",
        default=DEFAULT_KINDS,
        help="case kinds, comma-separated: mft (every path), explore (every path written many "
        "ways), probe (requests for planted PII fields and invitations of forbidden tools), "
        "boundary (both sides of numeric edges), dir (one flipped condition), inv "
        "(paraphrases); default all",
    )
    p.add_argument(
        "--explore",
        type=int,
        default=DEFAULT_PER_PATH,
        metavar="N",
        help="inputs explored per path: templates and phrase-pack paraphrases on every turn, the "
        f"search weighted towards what failed (default {DEFAULT_PER_PATH}; 0 "
        "turns exploration off)",
    )
    p.add_argument("--concurrency", type=int, default=8, help="runs in flight at once (default 8)")
    return p


def budget_parent(
    *, unfinished: str = "undecided cases are INCONCLUSIVE"
) -> argparse.ArgumentParser:
    """--max-runs and --max-usd: the one budget of the command."""
    p = _parent()
    group = p.add_argument_group(
        f"budget (one for the whole command; when it is spent, {unfinished})"
    )
    group.add_argument(
        "--max-usd",
        type=float,
        help="stop starting agent runs, and sending model calls, once this many dollars are spent "
        "or reserved by calls in flight (overrun by at most one call's worst case)",
    )
    group.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="start at most N agent runs in all, shrinking, mutants and probes included (like "
        "--agentprop-max-runs in pytest)",
    )
    group.add_argument(
        "--store",
        metavar="URL",
        help="a shared store, redis://host:port/db[?run=NAME]: the limits hold across every "
        "process and machine booking the same run, and the API cache records there, over the "
        "--cache file read-only (run name: ?run=, else $AGENTPROP_RUN_ID; default "
        "$AGENTPROP_STORE; needs agentprop[redis])",
    )
    return p


def model_parent(*, always: bool = False) -> argparse.ArgumentParser:
    """The model agent's options; ``always``: the command only runs a model agent (compile)."""
    p = _parent()
    model = p.add_argument_group(
        "the model (its prompt is what gets compiled)"
        if always
        else "model agent (--agent anthropic or --agent openai)"
    )
    model.add_argument(
        "--model",
        help="model name, e.g. claude-sonnet-4-6 or gpt-4.1-mini (required"
        + ("" if always else " with a model agent")
        + ")",
    )
    model.add_argument(
        "--prompt",
        metavar="FILE",
        help="system prompt file (default: seed_prompt.txt next to the spec)",
    )
    model.add_argument(
        "--tool-descriptions",
        metavar="FILE",
        help="YAML of tool name -> description (default: "
        "seed_tool_descriptions.yaml next to the spec)",
    )
    model.add_argument(
        "--base-url",
        metavar="URL",
        help="API endpoint (default: ANTHROPIC_BASE_URL or OPENAI_BASE_URL, else the provider's; "
        "e.g. http://localhost:8000/v1 for vLLM); the key comes from ANTHROPIC_API_KEY or "
        "OPENAI_API_KEY, and a local endpoint needs none",
    )
    model.add_argument(
        "--api",
        choices=["chat", "responses"],
        help="--agent openai: Chat Completions (default; what compatible servers speak) "
        "or the Responses API",
    )
    model.add_argument(
        "--stream",
        action="store_true",
        default=None,
        help="--agent openai: receive replies as server-sent events (replays are the same)",
    )
    model.add_argument(
        "--temperature", type=float, help="sampling temperature (default: the API's)"
    )
    model.add_argument(
        "--max-tokens", type=int, help="most output tokens per model call (default 1024)"
    )
    model.add_argument("--max-steps", type=int, help="most model calls per turn (default 10)")
    model.add_argument(
        "--tool-choice",
        choices=TOOL_CHOICES,
        help="whether each reply may (auto), must (required) or must not (none: not even respond) "
        "call a tool (default: required for --agent openai; not sent for --agent anthropic, the "
        "API's auto); some local servers reject required",
    )
    model.add_argument("--timeout", type=float, help="seconds for one HTTP attempt (default 120)")
    model.add_argument(
        "--cache",
        metavar="PATH",
        help="API cache file (default .agentprop/api-cache.sqlite; `none` for no cache)",
    )
    model.add_argument(
        "--cache-mode",
        choices=CACHE_MODES,
        help="off, read, write, read-write or replay-only (default: replay-only when CI is "
        "set, else read-write)",
    )
    model.add_argument(
        "--prices",
        metavar="FILE",
        help='JSON price table ({"models": {MODEL: {"input": $/MTok, "output": $/MTok}}}) added '
        "to agentprop's, e.g. for a model it does not price",
    )
    return p


REPORT_OUTPUTS = (
    (
        "html",
        "a self-contained HTML report (one file, opens from file://; needs agentprop[report])",
    ),
    (
        "junit",
        "JUnit XML: a test case per case, failures with the clause, the rate and the reproducer",
    ),
    (
        "markdown",
        "a Markdown summary for a PR comment or $GITHUB_STEP_SUMMARY: bugs first, then "
        "verdicts and coverage",
    ),
)


def report_outputs_parent(*, junit: bool = True, markdown: bool = True) -> argparse.ArgumentParser:
    """--html, --junit, --markdown: the report rendered for people and for CI (``-``: stdout)."""
    p = _parent()
    for name, text in REPORT_OUTPUTS:
        if name == "html" or (name == "junit" and junit) or (name == "markdown" and markdown):
            p.add_argument(
                f"--{name}",
                dest=f"{name}_path",
                metavar="PATH",
                help=f"write {text} to PATH ('-': standard output)",
            )
    return p
