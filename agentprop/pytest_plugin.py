"""pytest plugin for agentprop, registered through the ``pytest11`` entry point.

Adds the ``--agentprop-*`` options, the ``agentprop`` marker, the fixtures (``agentprop_agent``,
``agentprop_project``, ``agentprop_snapshot``, ``messages_server`` ...) and the Hypothesis profiles
``agentprop-smoke|ci|release``; docs/reference.md lists them all. One session lives in
``config.stash``; under pytest-xdist every worker books the same budget and the controller
writes the whole run's ``--agentprop-json`` record.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy
import pytest

# nothing heavier than this at import: the plugin loads in every project where agentprop is
# installed, most of which never call it (benchmarks/startup.py measures what it costs)
from agentprop._util.scope import (
    reset_session_provider,
    session_var,
    set_session_provider,
    settings_scope,
)
from agentprop.errors import (
    AgentPropertyViolation,
    AgentPropWarning,
    InputError,
    InvalidArgument,
    MemoFileError,
)

if TYPE_CHECKING:
    from hypothesis import settings

    from agentprop._agents.loading import LoadedAgent
    from agentprop._agents.project import Project
    from agentprop._decide.corpus import Corpus, ProjectCorpora
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.session import Session
    from agentprop._decide.settings import settings as AgentSettings
    from agentprop._decide.snapshot import SnapshotResult
    from agentprop._modelapi.budget import Budget
    from agentprop._modelapi.ledger import Ledger
    from agentprop._scenario.world import World


def __getattr__(name: str) -> Any:
    if name == "PROFILES":  # loaded on first use, like everything heavier than the hooks
        from agentprop._decide.settings import PROFILES

        return PROFILES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_hypothesis_profiles() -> None:
    """Register ``agentprop-smoke``, ``agentprop-ci`` and ``agentprop-release`` with Hypothesis
    (once; on first use, or at configure time when ``--hypothesis-profile`` names one)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.errors import InvalidArgument as HypothesisInvalidArgument

    from agentprop._decide.settings import PROFILES

    with contextlib.suppress(HypothesisInvalidArgument):
        settings.get_profile("agentprop-release")
        return
    for name, p in PROFILES.items():
        settings.register_profile(
            f"agentprop-{name}",
            deadline=None,
            max_examples=p["max_examples"],
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
            suppress_health_check=[HealthCheck.too_slow],
            derandomize=False,
        )


SESSION_KEY = pytest.StashKey["Session"]()
"""The agentprop session of a pytest run (``config.stash[SESSION_KEY]``)."""
_ACTIVATION_KEY = pytest.StashKey[contextlib.ExitStack]()
_LEDGER_DIR_KEY = pytest.StashKey[tempfile.TemporaryDirectory[str]]()
_PROVIDER_KEY = pytest.StashKey[Any]()
_HIDDEN_KEY = pytest.StashKey[Any]()
_SHRUNK_KEY = pytest.StashKey[str]()
"""The reproducer text of a test's failure, shrunk inside the test call (for its report)."""
_LEDGER_INPUT = "agentprop_budget_ledger"
"""The pytest-xdist ``workerinput`` key naming the shared budget ledger's file."""
_STORE_RUN_INPUT = "agentprop_store_run"
"""The pytest-xdist ``workerinput`` key naming the run the workers book under on
the shared store."""
_STORE_RUN_KEY = pytest.StashKey[str]()
_RECORDS_KEY = pytest.StashKey[contextlib.ExitStack]()
"""Closes this process's ``--agentprop-records`` recorder (and leaves its recording scope)."""
_DRAWS_KEY = pytest.StashKey[dict[str, list[str]]]()
"""The Hypothesis tests of a recorded session whose examples depend on more than the test:
``unseeded`` (Hypothesis's process-wide random: a shard cannot draw what the unsharded session
draws) and ``database`` (saved examples replayed first: a shard replays its own database's)."""
_RANKS_KEY = pytest.StashKey[dict[str, int]]()
"""The place in the collection of each test that found a bug (pytest-xdist: sent by the
workers), so the controller keeps the shrink an unsharded session makes."""


def agent_settings(profile: str | None = None, **overrides: Any) -> settings:
    """Hypothesis settings for a test that runs an agent: no deadline, no explain phase, few
    examples, database on. ``profile`` defaults to the session's ``--agentprop-profile``
    (``ci``); ``overrides`` pass through to :class:`hypothesis.settings`."""
    from hypothesis import settings

    from agentprop._decide.session import current_session
    from agentprop._decide.settings import PROFILES
    from agentprop._decide.settings import settings as AgentSettings
    from agentprop._util.refs import did_you_mean

    register_hypothesis_profiles()
    profile = profile or current_session().profile
    if profile in PROFILES:
        return settings(settings.get_profile(f"agentprop-{profile}"), **overrides)
    try:
        chosen = AgentSettings.get_profile(profile)
    except Exception:
        hint = did_you_mean(profile, PROFILES).strip()
        raise InputError(
            f"unknown agentprop profile {profile!r}" + (f"; {hint}" if hint else ""),
            fix=f"use one of {', '.join(PROFILES)}, or register it with "
            "agentprop.settings.register_profile",
        ) from None
    base = settings(
        settings.get_profile("agentprop-ci"),
        max_examples=chosen.max_examples or PROFILES["ci"]["max_examples"],
    )
    return settings(base, **overrides)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentprop", "agentprop: statistical tests of LLM agents")
    group.addoption(
        "--agentprop-profile",
        default=None,
        metavar="NAME",
        help="smoke, ci (default), release, or a profile registered with "
        "agentprop.settings.register_profile (e.g. in conftest.py)",
    )
    group.addoption("--agentprop-seed", type=int, default=None, help="trial namespace (default 0)")
    group.addoption(
        "--agentprop-fresh",
        action="store_true",
        default=False,
        help="re-sample agent runs instead of reusing memoised runs",
    )
    group.addoption(
        "--agentprop-memo",
        default=None,
        help="memo file of agent runs (default .agentprop/trials.sqlite, or the "
        "--agentprop-store's; 'none' for memory only)",
    )
    group.addoption(
        "--agentprop-max-runs", type=int, default=None, help="session budget: most agent runs"
    )
    group.addoption(
        "--agentprop-max-usd", type=float, default=None, help="session budget: most dollars"
    )
    group.addoption(
        "--agentprop-store",
        default=None,
        metavar="URL",
        help="shared store redis://host:port/db[?run=NAME]: one budget for every process and "
        "machine of the run, and the trial memo, the API cache and the corpus kept there (the "
        "memo file, cache file and corpus directory read-only beneath) (default $AGENTPROP_STORE; "
        "run name: "
        "?run=, else $AGENTPROP_RUN_ID, else one per pytest run)",
    )
    group.addoption(
        "--agentprop-cache-mode",
        choices=["off", "read", "write", "read-write", "replay-only"],
        default=None,
        help="API cache mode of model-backed agents (default: replay-only when CI is "
        "set, else read-write)",
    )
    group.addoption(
        "--agentprop-shrink-budget",
        type=int,
        default=200,
        metavar="RUNS",
        help="runs spent shrinking a failing agent property to a minimal reproducer (default "
        "200; 0 turns it off)",
    )
    group.addoption(
        "--agentprop-corpus",
        default=None,
        metavar="DIR",
        help="keep shrunk reproducers here and replay them first (default .agentprop/corpus when "
        "agentprop is configured; 'none' to turn off)",
    )
    group.addoption(
        "--agentprop-snapshot-update",
        action="store_true",
        default=False,
        help="approve NEW or CHANGED behaviour snapshots instead of failing (needs "
        "--agentprop-snapshot-reason; refused when CI is set)",
    )
    group.addoption(
        "--agentprop-snapshot-reason",
        default=None,
        metavar="TEXT",
        help="why the new behaviour is right; kept in each approved snapshot's history",
    )
    group.addoption(
        "--agentprop-json",
        default=None,
        metavar="PATH",
        help="write what the session decided (checks, shrunk bugs, corpus replays, "
        "snapshots) as JSON to PATH",
    )
    group.addoption(
        "--agentprop-shard",
        default=None,
        metavar="i/N",
        help="run only shard i of N (1-based) of the collected tests, by the hash of each test's "
        "node id (the others are deselected)",
    )
    group.addoption(
        "--agentprop-records",
        default=None,
        metavar="DIR",
        help="write every trial of the session's checks to DIR as it ends (trials.jsonl; under "
        "pytest-xdist, trials-gwN.jsonl per worker) and the session's record at the end "
        "(report.json); with --agentprop-shard, the DIR `agentprop merge` takes; DIR may not "
        "hold an earlier session's records",
    )
    group.addoption(
        "--agentprop-replace-records",
        action="store_true",
        default=False,
        help="with --agentprop-records DIR: delete the records an earlier session left in DIR "
        "first",
    )
    group.addoption(
        "--agentprop-input-model",
        default=None,
        metavar="PROVIDER:MODEL",
        help="the strategies that draw from templates (aps.paraphrases, aps.conversations) also "
        "draw texts this model wrote (anthropic:..., openai:..., openai-responses:...), "
        "validated, cached in the API cache and replayed offline (--agentprop-cache-mode "
        "replay-only) (default $AGENTPROP_INPUT_MODEL, else the agentprop_input_model ini option; "
        "docs/model-written-inputs.md)",
    )
    group.addoption(
        "--agentprop-simulated-user",
        action="store_true",
        default=False,
        help="with --agentprop-input-model: the follow-up turns aps.conversations draws (the "
        "user's answers) are also written by a simulated user with a persona (patient, "
        "hurried, confused, adversarial); its rejected turns are counted, never sent",
    )
    group.addoption(
        "--agentprop-agent", default=None, help="MODULE:ATTR loaded by the agentprop_agent fixture"
    )
    group.addoption(
        "--agentprop-spec",
        default=None,
        help="spec (directory) loaded by the agentprop_project fixture",
    )
    parser.addini(
        "agentprop_agent", "MODULE:ATTR loaded by the agentprop_agent fixture", default=""
    )
    parser.addini(
        "agentprop_spec", "spec (directory) loaded by the agentprop_project fixture", default=""
    )
    parser.addini("agentprop_memo", "memo file of agent runs ('none' for memory only)", default="")
    parser.addini(
        "agentprop_input_model",
        "PROVIDER:MODEL that also writes the inputs the strategies draw from templates",
        default="",
    )
    parser.addini(
        "agentprop_simulated_user",
        "with an input model: follow-up turns also written by a simulated user",
        type="bool",
        default=False,
    )


def _opt(config: pytest.Config, name: str) -> Any:
    return config.getoption(name)


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's, which loads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentprop(tau=None, n=None, risk=None, mode=None, max_runs=None): oracle settings for "
        "the agent checks in this test",
    )
    if (_opt(config, "--agentprop-shrink-budget") or 0) < 0:
        raise pytest.UsageError("--agentprop-shrink-budget must be 0 (off) or a number of runs")
    if _opt(config, "--agentprop-snapshot-update"):
        from agentprop._decide.snapshot import check_reason

        try:
            check_reason(
                _opt(config, "--agentprop-snapshot-reason"), option="--agentprop-snapshot-reason"
            )
        except InputError as exc:
            raise pytest.UsageError(f"--agentprop-snapshot-update: {exc}") from None
    elif _opt(config, "--agentprop-snapshot-reason"):
        raise pytest.UsageError(
            "--agentprop-snapshot-reason only applies with --agentprop-snapshot-update"
        )
    if _opt(config, "--agentprop-profile"):  # the one registry: built-ins and the conftest's own
        from agentprop._decide.settings import settings as AgentSettings

        name = _opt(config, "--agentprop-profile")
        if name not in AgentSettings.profile_names():
            raise pytest.UsageError(
                f"--agentprop-profile {name}: no such profile; registered: "
                f"{', '.join(AgentSettings.profile_names())} (register one with "
                "agentprop.settings.register_profile in a conftest.py)"
            )
    if not hasattr(config, "workerinput"):  # the controller, before any worker records
        _check_records_dir(config)
    if str(config.getoption("hypothesis_profile", None) or "").startswith("agentprop-"):
        register_hypothesis_profiles()
    # a session current around this run (pytest run in-process by a test) is not this run's
    config.stash[_HIDDEN_KEY] = session_var.set(None)
    config.stash[_PROVIDER_KEY] = set_session_provider(lambda: _session(config))
    # the user asked for agentprop: a memo file that cannot be used is a usage error now
    if _configured(config):
        _session(config)
    _start_input_model(config)


def _check_records_dir(config: pytest.Config) -> None:
    """``--agentprop-records DIR`` may not hold an earlier session's records unless
    ``--agentprop-replace-records`` says to delete them, which it does here: the CLI's check
    (:func:`agentprop._decide.records.check_records_dir`), with this plugin's option names."""
    where = _opt(config, "--agentprop-records")
    replace = bool(_opt(config, "--agentprop-replace-records"))
    if not where and not replace:
        return  # and import nothing: a session that does not use agentprop stays light
    from agentprop._decide.records import RecordsOptions, check_records_dir, delete_records

    options = RecordsOptions("--agentprop-records", "--agentprop-replace-records", "session")
    try:
        delete_records(check_records_dir(where, replace=replace, options=options), options)
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None


def _configured(config: pytest.Config) -> bool:
    """Whether any agentprop option or ini option is set (else the session waits for a check)."""
    options = (
        "--agentprop-memo",
        "--agentprop-corpus",
        "--agentprop-max-runs",
        "--agentprop-max-usd",
        "--agentprop-cache-mode",
        "--agentprop-seed",
        "--agentprop-records",
    )
    return (
        _uses_agentprop(config)
        or bool(config.getini("agentprop_memo"))
        or any(_opt(config, o) for o in options)
        or bool(_input_model(config))
    )


INPUT_MODEL_ENV = "AGENTPROP_INPUT_MODEL"
"""The environment variable ``--agentprop-input-model`` defaults to."""
_REALISER_KEY = pytest.StashKey[Any]()
_WRITER_KEY = pytest.StashKey[Any]()
_WRITTEN_KEY = pytest.StashKey[list[dict[str, Any]]]()
"""The input model's summaries the pytest-xdist workers sent (the controller writes none)."""


def _input_model(config: pytest.Config) -> str:
    """``--agentprop-input-model``, else ``$AGENTPROP_INPUT_MODEL``, else the ini option."""
    return str(
        _opt(config, "--agentprop-input-model")
        or os.environ.get(INPUT_MODEL_ENV, "")
        or config.getini("agentprop_input_model")
        or ""
    ).strip()


def _start_input_model(config: pytest.Config) -> None:
    """With ``--agentprop-input-model``: the session's input writer, checked now (a bad name, a
    missing key or an endpoint that cannot be reached is a usage error naming the option), made
    the strategies' realiser until unconfigure."""
    model = _input_model(config)
    simulated = bool(
        _opt(config, "--agentprop-simulated-user") or config.getini("agentprop_simulated_user")
    )
    if not model:
        if simulated:
            raise pytest.UsageError(
                "--agentprop-simulated-user needs a model to play the user: add "
                "--agentprop-input-model PROVIDER:MODEL (or set $AGENTPROP_INPUT_MODEL, or the "
                "agentprop_input_model ini option)"
            )
        return
    from pydantic import ValidationError

    from agentprop._decide.written import InputModelOptions, InputWriter, SessionRealiser
    from agentprop.strategies._internal.model_written import set_realiser

    session = _session(config)
    try:
        options = InputModelOptions(
            model=model,
            simulated_user=simulated,
            seed=session.seed,
            option="--agentprop-input-model",
        )
    except ValidationError as exc:
        reason = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        reason = reason.replace("--input-model", "--agentprop-input-model")
        raise pytest.UsageError(reason) from None
    writer = InputWriter(options)
    if not hasattr(config, "workerinput"):  # once, in the controller, not in every worker
        _check_reachable(writer)
    config.stash[_WRITER_KEY] = writer
    config.stash[_REALISER_KEY] = set_realiser(SessionRealiser(writer))


def _check_reachable(writer: Any) -> None:
    """A usage error unless the input model can answer: in replay-only mode nothing is needed
    (a text never recorded is an error when drawn); else a key (for the provider's own host)
    and an endpoint that accepts a connection. No request is sent."""
    import socket
    from urllib.parse import urlsplit

    from agentprop._modelapi.cache import CacheMode
    from agentprop.errors import MissingApiKey

    client = writer.client
    if client.cache.mode is CacheMode.REPLAY_ONLY:
        return
    try:
        client.api_key()
    except MissingApiKey as exc:
        raise pytest.UsageError(f"--agentprop-input-model {writer.model}: {exc}") from None
    base = client.resolved_base_url() or f"https://{client.provider.official_hosts[0]}"
    parts = urlsplit(base)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    import urllib.request

    if urllib.request.getproxies().get(parts.scheme) and not urllib.request.proxy_bypass(host):
        return  # the SDK goes through the proxy: a direct connection proves nothing either way
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        raise pytest.UsageError(
            f"--agentprop-input-model {writer.model}: cannot reach the model at {base} "
            f"({exc.strerror or exc}); start its server or point "
            f"{client.provider.base_url_env} at it, or replay recorded texts offline with "
            "--agentprop-cache-mode replay-only"
        ) from None


def _start_session(config: pytest.Config) -> Session:
    """The session of this pytest run, made and made current (for the whole run: pytest runs
    tests in this thread and context; left at unconfigure)."""
    from agentprop._decide.memo import TrialMemo
    from agentprop._decide.session import Session
    from agentprop._modelapi.budget import Budget
    from agentprop._modelapi.cache import CacheMode
    from agentprop._modelapi.ledger import SharedLedger

    memo_opt = _opt(config, "--agentprop-memo") or config.getini("agentprop_memo") or ""
    seed = _opt(config, "--agentprop-seed") or 0
    if _opt(config, "--agentprop-fresh"):
        # new trial indices: new samples from simulated agents, the API cache and the memo
        import secrets  # here, not at the top: hmac and _hashlib cost every pytest run a few ms

        seed = secrets.randbelow(2**31) + 1
    namespace = ""
    # the same with or without --agentprop-profile: on disk once agentprop is configured (an
    # ini option, or the option itself), else in memory
    if memo_opt.lower() != "none" and not memo_opt and _store(config):
        # shared by every process and machine of the store
        memo = _open_store_memo(config, namespace)
    elif memo_opt.lower() == "none" or not memo_opt and not _uses_agentprop(config):
        memo = TrialMemo(namespace=namespace)
    else:
        path = (
            Path(memo_opt)
            if memo_opt
            else Path(str(config.rootpath)) / ".agentprop" / "trials.sqlite"
        )
        memo = _open_memo(config, path, namespace)
    max_runs = _opt(config, "--agentprop-max-runs")
    max_usd = _opt(config, "--agentprop-max-usd")
    # a pytest-xdist worker books against the controller's shared ledger: one budget per run;
    # with --agentprop-store, against the store's (every process and machine of the run)
    store_ledger = _store_ledger(config)
    if store_ledger is not None:
        budget = Budget(max_runs=max_runs, max_usd=max_usd, ledger=store_ledger)
    else:
        ledger_path = getattr(config, "workerinput", {}).get(_LEDGER_INPUT)
        ledger = SharedLedger(ledger_path) if ledger_path else None
        budget = (
            Budget(max_runs=max_runs, max_usd=max_usd, ledger=ledger)
            if (max_runs or max_usd)
            else Budget()
        )
    corpus_opt = _opt(config, "--agentprop-corpus") or ""
    corpus: Corpus | ProjectCorpora | None = None
    if corpus_opt.lower() != "none" and (corpus_opt or _uses_agentprop(config)):
        corpus = _store_corpus(config, corpus_opt)
    mode = _opt(config, "--agentprop-cache-mode")
    session = Session(
        memo=memo,
        budget=budget,
        corpus=corpus,
        cache_mode=CacheMode.parse(mode) if mode else None,
        profile=_opt(config, "--agentprop-profile") or "ci",
        seed=seed,
        store=_store(config),
    )
    config.stash[SESSION_KEY] = session
    activation = contextlib.ExitStack()
    activation.enter_context(session.activate())
    config.stash[_ACTIVATION_KEY] = activation
    return session


def _store(config: pytest.Config) -> str:
    """``--agentprop-store`` (else ``$AGENTPROP_STORE``): a shared store URL, or ``""``."""
    from agentprop._modelapi.ledger import STORE_ENV

    return str(_opt(config, "--agentprop-store") or os.environ.get(STORE_ENV, ""))


def _store_run(config: pytest.Config) -> str:
    """The run name the processes of this pytest run book under on the shared store: a
    worker's is its controller's; the controller's is ``$AGENTPROP_RUN_ID``, else fresh (a
    ``?run=`` in the store URL overrides both)."""
    given = getattr(config, "workerinput", {}).get(_STORE_RUN_INPUT)
    if given:
        return str(given)
    if _STORE_RUN_KEY not in config.stash:
        import secrets  # here, not at the top: hmac and _hashlib cost every pytest run a few ms

        from agentprop._modelapi.ledger import RUN_ENV

        config.stash[_STORE_RUN_KEY] = os.environ.get(RUN_ENV, "") or secrets.token_hex(16)
    return config.stash[_STORE_RUN_KEY]


def _store_ledger(config: pytest.Config) -> Ledger | None:
    """The shared store's budget ledger, or ``None`` without a store; a store that cannot be
    used is a usage error naming it."""
    from agentprop._modelapi.ledger import open_ledger

    store = _store(config)
    if not store:
        return None
    try:
        return open_ledger(store, run=_store_run(config))
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--agentprop-store: {exc}") from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The pytest-xdist controller gives every worker the same budget ledger when a limit is
    set (``--agentprop-max-runs``, ``--agentprop-max-usd``): the limits hold for the whole run,
    not per worker."""
    config = node.config
    # the shared store is the ledger; the workers book under the controller's run name
    if _store(config):
        node.workerinput[_STORE_RUN_INPUT] = _store_run(config)
        return
    if not (_opt(config, "--agentprop-max-runs") or _opt(config, "--agentprop-max-usd")):
        return
    directory = config.stash.get(_LEDGER_DIR_KEY, None)
    if directory is None:
        directory = tempfile.TemporaryDirectory(prefix="agentprop-budget-")
        config.stash[_LEDGER_DIR_KEY] = directory
        from agentprop._modelapi.ledger import SharedLedger

        SharedLedger(Path(directory.name) / "budget.sqlite")
    node.workerinput[_LEDGER_INPUT] = str(Path(directory.name) / "budget.sqlite")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker sends what its agentprop session recorded to the controller, which
    merges it (:func:`pytest_testnodedown`) and prints one summary for the whole run."""
    records = session.config.stash.get(_RECORDS_KEY, None)
    if records is not None:
        records.close()
        del session.config.stash[_RECORDS_KEY]
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and SESSION_KEY in session.config.stash:
        exported = _session(session.config).export()
        found = {b["test"] for b in exported["bugs"]}
        exported["ranks"] = {
            item.nodeid: i for i, item in enumerate(session.items) if item.nodeid in found
        }
        exported["draws"] = session.config.stash.get(_DRAWS_KEY, {})
        workeroutput["agentprop"] = json.dumps(exported)
    writer = session.config.stash.get(_WRITER_KEY, None)
    if workeroutput is not None and writer is not None:
        workeroutput["agentprop_input_model"] = json.dumps(writer.summary())
    path = _opt(session.config, "--agentprop-json")
    if workeroutput is None and path:  # the controller (or a run without workers): the whole run's
        _write_json(session.config, Path(path))
    where = _opt(session.config, "--agentprop-records")
    if workeroutput is None and where:
        from agentprop._decide.records import REPORT_FILE
        from agentprop._util.files import write_atomic

        data = _session_data(session.config)
        data["exitstatus"] = int(session.exitstatus)
        draws: dict[str, list[str]] = session.config.stash.get(_DRAWS_KEY, {})
        data["unseeded_hypothesis"] = sorted(set(draws.get("unseeded", [])))
        data["hypothesis_database"] = sorted(set(draws.get("database", [])))
        write_atomic(Path(where) / REPORT_FILE, json.dumps(data, indent=2) + "\n")


JSON_SCHEMA = "agentprop.pytest/1"


def _write_json(config: pytest.Config, path: Path) -> None:
    """``--agentprop-json``: the session's record (:meth:`Session.export`: every decided check,
    the bugs shrunk with their reproducers and corpus entries, the corpus replays, the
    snapshots), with the profile and seed; an empty record when no check ran."""
    from agentprop._util.files import write_atomic

    write_atomic(path, json.dumps(_session_data(config), indent=2) + "\n")


def _session_data(config: pytest.Config) -> dict[str, Any]:
    """The session's record as ``--agentprop-json`` writes it."""
    session = config.stash.get(SESSION_KEY, None)
    data: dict[str, Any] = {"schema": JSON_SCHEMA}
    if session is None:
        data.update(
            profile=None,
            seed=None,
            checks=[],
            results=[],
            corpus_notes=[],
            bugs=[],
            snapshots=[],
            memo_hits=0,
        )
    else:
        latest: dict[tuple[str, str], Any] = {}
        # as the summary's table: the last decision of each (test, case)
        for r in session.recorded_results():
            latest[(r.test, r.result.name)] = r.result
        checks = [
            {
                "test": test,
                "case": case,
                "verdict": res.verdict,
                "pass_rate": res.pass_rate,
                "interval": list(res.interval),
                "runs": res.runs,
            }
            for (test, case), res in latest.items()
        ]
        data.update(profile=session.profile, seed=session.seed, checks=checks, **session.export())
        data["memo_hits"] = session.memo_hits
    written = _input_model_summary(config)
    if written is not None:
        data["input_model"] = written
    return data


def _input_model_summary(config: pytest.Config) -> dict[str, Any] | None:
    """What the input model wrote in this run (this process's and every worker's), or ``None``
    without ``--agentprop-input-model``."""
    writer = config.stash.get(_WRITER_KEY, None)
    if writer is None:
        return None
    from agentprop._decide.written import merge_summaries

    return merge_summaries([writer.summary(), *config.stash.get(_WRITTEN_KEY, [])])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    written = getattr(node, "workeroutput", {}).get("agentprop_input_model")
    if written:
        node.config.stash.setdefault(_WRITTEN_KEY, []).append(json.loads(written))
    data = getattr(node, "workeroutput", {}).get("agentprop")
    if data:
        got = json.loads(data)
        ranks = node.config.stash.setdefault(_RANKS_KEY, {})
        ranks.update(got.get("ranks", {}))
        draws = node.config.stash.setdefault(_DRAWS_KEY, {})
        for kind, tests in got.get("draws", {}).items():
            draws.setdefault(kind, []).extend(tests)
        _session(node.config).merge(got, rank=lambda test: ranks.get(test, len(ranks)))


def pytest_unconfigure(config: pytest.Config) -> None:
    realiser = config.stash.get(_REALISER_KEY, None)
    if realiser is not None:
        from agentprop.strategies._internal.model_written import reset_realiser

        reset_realiser(realiser)
        del config.stash[_REALISER_KEY]
    ledger_dir = config.stash.get(_LEDGER_DIR_KEY, None)
    if ledger_dir is not None:
        ledger_dir.cleanup()
        del config.stash[_LEDGER_DIR_KEY]
    activation = config.stash.get(_ACTIVATION_KEY, None)
    if activation is not None:
        activation.close()
        del config.stash[_ACTIVATION_KEY]
    token = config.stash.get(_PROVIDER_KEY, None)
    if token is not None:
        reset_session_provider(token)
        del config.stash[_PROVIDER_KEY]
    hidden = config.stash.get(_HIDDEN_KEY, None)
    if hidden is not None:
        session_var.reset(hidden)
        del config.stash[_HIDDEN_KEY]


def _store_corpus(config: pytest.Config, corpus_opt: str) -> Corpus | ProjectCorpora:
    """The session's corpus: ``--agentprop-corpus DIR``, else each project's own; with a shared
    store, the store's over it (read-only). A store that cannot be used is a usage error."""
    from agentprop._decide.corpus import Corpus, ProjectCorpora, open_store_corpus

    store = _store(config) or None
    try:
        if corpus_opt:
            return (
                open_store_corpus(store, Corpus(Path(corpus_opt)))
                if store
                else Corpus(Path(corpus_opt))
            )
        return ProjectCorpora(
            plain=Path(str(config.rootpath)) / ".agentprop" / "corpus", store=store
        )
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--agentprop-store: {exc}") from None


def _open_store_memo(config: pytest.Config, namespace: str) -> TrialMemo:
    """The memo on the shared store, over the project's memo file read-only when there is one
    (``.agentprop/trials.sqlite``: its runs are replayed, new runs go to the store only); a
    store that cannot be used is a usage error naming it, a file that cannot be read a warning."""
    from agentprop._decide.memo import (
        FrozenFileMemoStore,
        LayeredMemoStore,
        MemoStore,
        TrialMemo,
        open_memo_store,
    )

    try:
        store: MemoStore = open_memo_store(_store(config))
    except InvalidArgument as exc:
        raise pytest.UsageError(f"--agentprop-store: {exc}") from None
    below = Path(str(config.rootpath)) / ".agentprop" / "trials.sqlite"
    if below.is_file():
        try:
            store = LayeredMemoStore(store, FrozenFileMemoStore(below))
        except MemoFileError as exc:
            config.issue_config_time_warning(
                AgentPropWarning(f"agentprop memo: {exc} (the store's memo is used alone)"),
                stacklevel=2,
            )
    return TrialMemo(namespace=namespace, store=store)


def _open_memo(config: pytest.Config, path: Path, namespace: str) -> TrialMemo:
    from agentprop._decide.memo import TrialMemo

    """The on-disk memo; a file that cannot be used is a usage error naming it (not an
    INTERNALERROR), and the note of an old-format file's conversion is a configuration warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AgentPropWarning)
        try:
            memo = TrialMemo(path, namespace=namespace)
        except MemoFileError as exc:
            raise pytest.UsageError(f"agentprop memo: {exc}") from None
    for w in caught:
        if isinstance(w.message, AgentPropWarning):
            config.issue_config_time_warning(w.message, stacklevel=2)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return memo


def _start_records(config: pytest.Config, items: list[pytest.Item], shard: Any) -> None:
    """``--agentprop-records DIR``: record every decision this process makes from now on into
    DIR (a pytest-xdist worker into its own file), and, with ``--agentprop-shard``, which shard
    of which session they are of (:func:`agentprop._pipeline.pytest_merge.pytest_shard_info`)."""
    from agentprop._decide.records import Recorder, recording
    from agentprop._pipeline.pytest_merge import write_collection

    where = Path(_opt(config, "--agentprop-records"))
    part = str(getattr(config, "workerinput", {}).get("workerid", ""))
    try:
        recorder = Recorder(where, part)
    except OSError as exc:
        raise pytest.UsageError(
            f"--agentprop-records {where}: cannot write there ({exc.strerror or exc}); give a "
            "directory this process may create and write"
        ) from None
    if shard is not None:
        from agentprop._pipeline.pytest_merge import pytest_shard_info

        if _opt(config, "--agentprop-fresh"):
            recorder.close()
            raise pytest.UsageError(
                "--agentprop-fresh draws a new seed in every process, so the shards (and their "
                "pytest-xdist workers) would sample different runs than one session does and "
                "`agentprop merge` could not merge them; give every shard the same "
                "--agentprop-seed N instead"
            )

        options = {
            name: _opt(config, f"--agentprop-{name}")
            for name in ("profile", "max-runs", "max-usd", "cache-mode", "shrink-budget")
        }
        options["hypothesis-seed"] = config.getoption("hypothesis_seed", None)
        if _input_model(config):  # the texts its strategies draw (left out unset: digests stay)
            options["input-model"] = _input_model(config)
            options["simulated-user"] = bool(
                _opt(config, "--agentprop-simulated-user")
                or config.getini("agentprop_simulated_user")
            )
        recorder.set_shard(
            pytest_shard_info(
                [item.nodeid for item in items], shard, seed=_session(config).seed, options=options
            )
        )
    write_collection(where, [item.nodeid for item in items])
    stack = contextlib.ExitStack()
    stack.callback(recorder.close)
    stack.enter_context(recording(recorder))
    config.stash[_RECORDS_KEY] = stack


def _uses_agentprop(config: pytest.Config) -> bool:
    """Whether the user asked for anything agentprop-specific (then memo goes to disk)."""
    return bool(config.getini("agentprop_spec") or config.getini("agentprop_agent"))


def _session(config: pytest.Config) -> Session:
    session = config.stash.get(SESSION_KEY, None)
    return session if session is not None else _start_session(config)


_MARKER_ARGS = {"tau", "n", "risk", "mode", "max_runs"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every ``agentprop`` marker before anything runs: a typo is a usage error; keep
    only the shard's tests (``--agentprop-shard i/N``)."""
    shard = None
    if _opt(config, "--agentprop-shard"):
        from agentprop._pipeline.shards import parse_shard

        try:
            shard = parse_shard(_opt(config, "--agentprop-shard"), option="--agentprop-shard")
        except InputError as exc:
            raise pytest.UsageError(str(exc)) from None
    if _opt(config, "--agentprop-records"):
        _start_records(config, items, shard)
    if shard is not None:
        kept = [item for item in items if shard.keeps(item.nodeid)]
        if len(kept) < len(items):
            config.hook.pytest_deselected(
                items=[item for item in items if not shard.keeps(item.nodeid)]
            )
            items[:] = kept
    for item in items:
        for marker in item.iter_markers("agentprop"):
            unknown = set(marker.kwargs) - _MARKER_ARGS
            if unknown or marker.args:
                what = sorted(unknown) if unknown else f"positional {marker.args!r}"
                raise pytest.UsageError(
                    f"{item.nodeid}: unknown agentprop marker argument(s) {what}; use keyword "
                    f"arguments {', '.join(sorted(_MARKER_ARGS))}, e.g. "
                    "@pytest.mark.agentprop(tau=0.95)"
                )
            mode = marker.kwargs.get("mode")
            if mode is not None and mode not in ("sprt", "zero-failure", "fixed"):
                raise pytest.UsageError(
                    f"{item.nodeid}: agentprop marker mode={mode!r}; use 'sprt', "
                    "'zero-failure' or 'fixed'"
                )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, pluggy.Result[None], None]:
    # the marker's layer; the profile and the session's seed are the layers below it, applied
    # with every other layer by agentprop._decide.settings.resolve
    marker = item.get_closest_marker("agentprop")
    overrides: dict[str, Any] = {}
    if marker is not None:
        kw = dict(marker.kwargs)
        if kw.get("risk") in ("high", "critical"):
            overrides.update(mode="zero-failure", runs=kw.get("n") or 50)
        if (
            kw.get("n") is not None
            and "mode" not in kw
            and kw.get("risk") not in ("high", "critical")
        ):
            overrides.update(mode="fixed", runs=kw["n"])
        for key in ("tau", "mode", "max_runs"):
            if kw.get(key) is not None:
                overrides[key] = kw[key]
        if kw.get("n") is not None:
            overrides["runs"] = kw["n"]
    drawn = _draws(item) if _opt(item.config, "--agentprop-records") else None
    if drawn is not None:
        item.config.stash.setdefault(_DRAWS_KEY, {}).setdefault(drawn, []).append(item.nodeid)
    with settings_scope(item.nodeid, **overrides):
        outcome = yield
        # shrinking is part of the test call: its runs are the test's, in the test's settings
        excinfo = outcome.excinfo
        if excinfo is not None and isinstance(excinfo[1], AgentPropertyViolation):
            text = _shrink(item, excinfo[1])
            if text:
                item.stash[_SHRUNK_KEY] = text


def _draws(item: pytest.Item) -> str | None:
    """What ``item``'s examples depend on beyond the test, if it is a Hypothesis test:
    ``unseeded`` when it draws from Hypothesis's process-wide random (no ``@seed``,
    ``settings(derandomize=True)`` or ``--hypothesis-seed``: what it draws depends on the tests
    that ran before it in its process), else ``database`` when it replays the examples its
    database saved first; ``None`` when neither."""
    test = getattr(item, "obj", None)
    if not getattr(test, "is_hypothesis_test", False):
        return None
    from hypothesis import core

    chosen = getattr(test, "_hypothesis_internal_use_settings", None)
    if (
        getattr(test, "_hypothesis_internal_use_seed", None) is None
        and not getattr(chosen, "derandomize", False)
        and core.global_force_seed is None
    ):
        return "unseeded"
    return "database" if getattr(chosen, "database", None) is not None else None


def _shrink(item: pytest.Item, exc: AgentPropertyViolation) -> str | None:
    budget = _opt(item.config, "--agentprop-shrink-budget") or 0
    if budget <= 0:
        return None
    try:
        from agentprop._pipeline.pytest_shrink import shrink_violation

        return shrink_violation(exc, session=_session(item.config), budget=budget, test=item.nodeid)
    except Exception as err:  # shrinking must never hide the original failure
        return f"shrinking failed: {type(err).__name__}: {err}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    if call.when != "call":
        return
    text = item.stash.get(_SHRUNK_KEY, None)
    if text:
        outcome.get_result().sections.append(("agentprop: minimal reproducer", text))


@pytest.fixture(scope="session")
def agentprop_budget(request: pytest.FixtureRequest) -> Budget:
    """The session's budget (runs, tokens, dollars), shared by every check."""
    return _session(request.config).budget


@pytest.fixture(scope="session")
def agentprop_memo(request: pytest.FixtureRequest) -> TrialMemo:
    """The memo of agent runs (same input, agent and trial index -> the same run, judged
    afresh by each property)."""
    return _session(request.config).memo


@pytest.fixture(scope="session")
def agentprop_project(request: pytest.FixtureRequest) -> Project:
    """The project named by ``--agentprop-spec`` or the ``agentprop_spec`` ini option."""
    from agentprop._agents.project import load_project

    spec = _opt(request.config, "--agentprop-spec") or request.config.getini("agentprop_spec")
    if not spec:
        pytest.fail(
            "agentprop_project needs a spec: pass --agentprop-spec PATH or set "
            "`agentprop_spec` in the ini file",
            pytrace=False,
        )
    path = Path(spec)
    if not path.is_absolute():
        path = Path(str(request.config.rootpath)) / path
    return load_project(path)


@pytest.fixture(scope="session")
def agentprop_agent(request: pytest.FixtureRequest) -> LoadedAgent:
    """The agent named by ``--agentprop-agent`` or the ``agentprop_agent`` ini option
    (``MODULE:ATTR``; with a spec set, ``MODULE.py`` next to the spec is found too)."""
    from agentprop._agents.loading import load_agent

    ref = _opt(request.config, "--agentprop-agent") or request.config.getini("agentprop_agent")
    spec = _opt(request.config, "--agentprop-spec") or request.config.getini("agentprop_spec")
    base = Path(str(request.config.rootpath))
    if not ref and spec:
        project: Project = request.getfixturevalue("agentprop_project")
        ref = project.bindings.agent or ""
        base = project.base_dir
    elif spec:
        candidate = Path(spec)
        base = candidate if candidate.is_dir() else candidate.parent
        if not base.is_absolute():
            base = Path(str(request.config.rootpath)) / base
    if not ref:
        pytest.fail(
            "agentprop_agent needs an agent: pass --agentprop-agent MODULE:ATTR or set "
            "`agentprop_agent` in the ini file",
            pytrace=False,
        )
    return load_agent(ref, base, search=[Path(str(request.config.rootpath))])


@pytest.fixture
def agentprop_world(agentprop_project: Project) -> Callable[..., World]:
    """``agentprop_world(scenario_id, seed=0)`` -> a fresh world for that scenario."""

    from agentprop._scenario.build import make_world
    from agentprop._scenario.world import stable_seed

    def make(scenario_id: str | None = None, *, seed: int = 0) -> World:
        scenario = agentprop_project.scenario(scenario_id) if scenario_id else None
        return make_world(
            agentprop_project.spec,
            agentprop_project.bindings,
            scenario,
            seed=stable_seed("world", scenario_id or "", seed),
        )

    return make


class SnapshotFixture:
    """``agentprop_snapshot.check(project, scenario, agent, ...)``, or for a plain agent
    ``agentprop_snapshot.check(agent, messages, tools=...)`` (``settings=`` as for
    :func:`agentprop.check_snapshot`): compare the agent's
    behaviour on a case with the approved baseline kept next to the test file
    (``__snapshots__/<module>/<test>.json``). NEW and CHANGED fail the test with the diff and
    leave a pending candidate; ``--agentprop-snapshot-update --agentprop-snapshot-reason TEXT``
    approves them instead."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self._calls = 0
        path = Path(str(request.node.path))
        self.directory = path.parent / "__snapshots__" / path.stem
        """Where this test's snapshots live."""

    def default_name(self) -> str:
        name = self._request.node.name
        return name if self._calls <= 1 else f"{name}-{self._calls}"

    def check(
        self,
        project: Project | Callable[..., Any],
        scenario: Any,
        agent: Any = None,
        *,
        tools: Any = None,
        name: str | None = None,
        runs: int = 10,
        alpha: float = 0.05,
        ignore: Sequence[str] = (),
        messages: Sequence[str] | None = None,
        settings: AgentSettings | None = None,
    ) -> SnapshotResult:
        __tracebackhide__ = True  # the failure is the diff, not this fixture's frame
        self._calls += 1
        from agentprop._decide.snapshot_check import check_snapshot

        config = self._request.config
        session = _session(config)
        result = check_snapshot(
            project,
            scenario,
            agent,
            name=name or self.default_name(),
            directory=self.directory,
            runs=runs,
            alpha=alpha,
            update=bool(_opt(config, "--agentprop-snapshot-update")),
            reason=_opt(config, "--agentprop-snapshot-reason"),
            ignore=ignore,
            budget=session.budget,
            messages=messages,
            tools=tools,
            raise_on_failure=False,
            settings=settings,
        )
        with session.lock:
            session.snapshots.append((self._request.node.nodeid, result))
        if not result.passed:
            raise AgentPropertyViolation(result)
        return result


@pytest.fixture
def agentprop_snapshot(request: pytest.FixtureRequest) -> SnapshotFixture:
    """Behaviour snapshots for this test; see :class:`SnapshotFixture`."""
    return SnapshotFixture(request)


@pytest.fixture
def messages_server() -> Iterator[Any]:
    """A running :class:`agentprop.testing.MessagesServer` on 127.0.0.1 with an empty script
    (stopped after the test). Script it with ``enqueue(...)`` / ``set_handler(...)``."""
    from agentprop.testing import MessagesServer

    with MessagesServer() as server:
        yield server


@pytest.fixture
def agentprop_mcp_server(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``agentprop_mcp_server(case_id, project=None, *, http=False, **options)`` serves one
    case's world over MCP (:class:`agentprop.mcp.CaseServer`; each session is one trial,
    recorded and decided). In-process it returns the case server: ``async with
    case.connect() as client`` is one session through the SDK's client. With ``http=True`` it
    returns a running :class:`agentprop.mcp.HttpCaseServer` (``.url`` on 127.0.0.1, ``.case``),
    stopped after the test. ``project`` defaults to the ``agentprop_project`` fixture;
    ``options`` go to :class:`~agentprop.mcp.CaseServer` (``settings``, ``record``, ...)."""
    from agentprop.mcp import CaseServer, HttpCaseServer

    running: list[Any] = []

    def serve(
        case_id: str, project: Project | None = None, *, http: bool = False, **options: Any
    ) -> Any:
        chosen = project if project is not None else request.getfixturevalue("agentprop_project")
        case = CaseServer(chosen, chosen.scenario(case_id), **options)
        if not http:
            return case
        server = HttpCaseServer(case).start()
        running.append(server)
        return server

    yield serve
    for server in running:
        server.stop()


@pytest.fixture
def openai_server() -> Iterator[Any]:
    """A running :class:`agentprop.testing.OpenAIServer` on 127.0.0.1 (Chat Completions and
    Responses) with an empty script (stopped after the test)."""
    from agentprop.testing import OpenAIServer

    with OpenAIServer() as server:
        yield server


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    written = _input_model_summary(config)
    if written is not None:
        from agentprop._decide.written import describe_summary

        terminalreporter.section("agentprop input model")
        for line in describe_summary(written).splitlines():
            terminalreporter.write_line(line)
    session = config.stash.get(SESSION_KEY, None)
    if session is None:  # no check ran: nothing to say, and nothing to import
        return
    _snapshot_summary(terminalreporter, session)
    records = session.recorded_results()
    if not records:
        return
    # one line per (test, case): the last decision of each (Hypothesis calls a test many times)
    latest: dict[tuple[str, str], Any] = {}
    for r in records:
        latest[(r.test, r.result.name)] = r.result
    rows = sorted(latest.items(), key=lambda kv: (kv[1].verdict == "PASS", kv[0]))
    tr = terminalreporter
    tr.section("agentprop")
    for line in _bug_lines(latest, session):
        tr.write_line(line)
    width = max(20, min(60, max(len(f"{k[1]} [{k[0].split('::')[-1]}]") for k in latest)))
    tr.write_line(
        f"{'case [test]':<{width}}  {'verdict':<12} {'rate':>5} {'95% CI':>9} "
        f"{'runs':>5} {'cost $':>8}"
    )
    shown = rows[:20]
    for (test, case), res in shown:
        label = f"{case} [{test.split('::')[-1]}]"
        if len(label) > width:
            label = label[: width - 1] + "…"
        lo, hi = res.interval
        tr.write_line(
            f"{label:<{width}}  {res.verdict:<12} {res.pass_rate:>5.0%} {lo:.2f}-{hi:.2f} "
            f"{res.runs:>5} {res.cost_usd:>8.4f}"
        )
    if len(rows) > len(shown):
        tr.write_line(
            f"... and {len(rows) - len(shown)} more (all passed)"
            if all(r.verdict == "PASS" for _, r in rows[20:])
            else f"... and {len(rows) - len(shown)} more"
        )
    total_runs = sum(r.result.runs - r.result.memo_hits for r in records)
    cost = sum(r.result.cost_usd for r in records)
    budget = session.budget
    expected = _expected_failures(tr, latest)
    tr.write_line(
        f"{len(latest)} checks, {sum(1 for r in latest.values() if r.verdict == 'PASS')} passed; "
        f"{total_runs} new agent runs, {session.memo_hits} memo hits, ${cost:.4f}"
        + (f"; budget: {budget.exhausted_reason}" if budget.exhausted else "")
        + (
            f"; {expected} of the other checks failed inside tests that passed (the test "
            "expected the failure)"
            if expected
            else ""
        )
    )


def _expected_failures(tr: Any, latest: dict[tuple[str, str], Any]) -> int:
    """How many of the checks that did not pass ran in a test pytest reports as passed: a test
    that expects the failure (``pytest.raises``), so the count above is no failure of the suite."""
    passed = {
        rep.nodeid for rep in tr.stats.get("passed", []) if getattr(rep, "when", "call") == "call"
    }
    return sum(1 for (test, _), res in latest.items() if res.verdict != "PASS" and test in passed)


def _bug_lines(latest: dict[tuple[str, str], Any], session: Session) -> list[str]:
    """The bugs above the cases: the failing checks grouped by signature (turn left out), with
    the reproducer and rate of the one shrink each got, then what the corpus replays meant."""
    from agentprop._judge.signature import bug_id, bug_key
    from agentprop._pipeline.bugs import rates_from_shrink
    from agentprop._pipeline.report.model import BugReport, FailureRate

    groups: dict[str, list[str]] = {}
    by_hypothesis: set[str] = set()
    for (test, case), res in latest.items():
        if res.verdict in ("FAIL", "UNSTABLE"):
            for f in res.failures:
                if res.settings.get("shrunk_by") == "hypothesis":
                    by_hypothesis.add(bug_key(f.signature))
                hits = groups.setdefault(bug_key(f.signature), [])
                label = f"{case} [{test.split('::')[-1]}]"
                if label not in hits:
                    hits.append(label)
    shrunk = session.shrunk_bugs()
    lines: list[str] = []
    if groups:
        lines.append(
            f"{len(groups)} bug(s), failing checks grouped by signature (turn left "
            "out), each shrunk once:"
        )
    for i, (key, hits) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1])), 1):
        lines.append(f"bug {i} [{bug_id(key)}]  {key}")
        lines.append(
            f"    hit by {len(hits)} check(s): {', '.join(hits[:3])}"
            + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else "")
        )
        bug = shrunk.get(key)
        if bug is None and key in by_hypothesis:
            lines.append(
                "    shrunk by Hypothesis: the falsifying example in the test's report "
                "is the minimal input"
            )
            continue
        if bug is None:
            lines.append("    not shrunk (no test failed on it with shrinking on)")
            continue
        lines.append(
            f"    reproducer (shrunk once, in {bug.test.split('::')[-1]}): "
            f"{bug.shrunk.reproducer_messages!r}"
        )
        o = bug.shrunk.original_rate
        figures = BugReport(id=bug_id(key), key=key, signature=bug.shrunk.signature)
        rates_from_shrink(
            figures,
            bug.shrunk,
            FailureRate(failures=o.failures, runs=o.runs, rate=o.rate, interval=o.interval),
        )
        if figures.rate_text:
            entry = f"; corpus entry {bug.corpus_entry}" if bug.corpus_entry else ""
            lines.append(f"    {figures.rate_text}{entry}")
    for note in session.recorded_corpus_notes():
        lines.append(f"corpus: {note.message}")
    return lines


def _snapshot_summary(tr: Any, session: Session) -> None:
    with session.lock:
        results: list[tuple[str, SnapshotResult]] = list(session.snapshots)
    if not results:
        return
    tr.section("agentprop snapshots")
    for nodeid, r in results:
        if r.verdict != "MATCH":
            where = f"; candidate {r.pending_path}" if r.pending_path else ""
            test = nodeid.split("::")[-1]
            label = r.name if r.name.startswith(test) else f"{r.name} [{test}]"
            tr.write_line(f"{r.verdict:<12} {label}{where}")
    verdicts = [r.verdict for _, r in results]
    counts = ", ".join(
        f"{verdicts.count(v)} {v.lower()}"
        for v in ("MATCH", "CHANGED", "NEW", "UPDATED", "INCONCLUSIVE")
        if v in verdicts
    )
    tr.write_line(f"{len(results)} snapshots: {counts}")
    if any(v in ("CHANGED", "NEW") for v in verdicts):
        tr.write_line(
            "approve what is right with --agentprop-snapshot-update "
            '--agentprop-snapshot-reason "why"; '
            "pending candidates are left next to the baselines (*.pending.json)"
        )
