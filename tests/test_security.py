"""Security (issue #15): names never escape their directory, secrets never reach a file or the
terminal, a generated regression test never runs text from a corpus entry as code."""

from __future__ import annotations

import ast
import io
import json
import shutil
from pathlib import Path

import pytest

from agentprop._agents.project import load_project
from agentprop._cli import main
from agentprop._decide.corpus import Corpus, CorpusEntry, pytest_regression
from agentprop._util.files import path_component
from agentprop._util.scrub import REDACTED, register_secret, scrub_text
from agentprop.testing import MessagesServer, error_reply

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
MODEL = "claude-sonnet-4-6"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- path components


@pytest.mark.parametrize(
    "name",
    ["../../X", "..", ".", "/etc/passwd", "a/b", "a\\b", "-rf", ".hidden", "", "a\x00b", "retired"],
)
def test_a_name_that_would_leave_its_directory_is_made_safe(tmp_path: Path, name: str) -> None:
    component = path_component(name, reserved=("retired",))
    assert component and "/" not in component and "\\" not in component and "\x00" not in component
    assert not component.startswith((".", "-")) and component != "retired"
    assert (tmp_path / component).resolve().parent == tmp_path.resolve()


def test_ordinary_names_are_kept_and_different_names_stay_different() -> None:
    assert path_component("supportops_v1") == "supportops_v1"
    assert path_component("expense-guard.v2") == "expense-guard.v2"
    assert len({path_component(n) for n in ["../X", "__X", "_.X", "X", "..X", "/X"]}) == 6


def _project_with_spec_id(tmp_path: Path, spec_id: str) -> Path:
    root = tmp_path / "deep" / "down" / "project"
    root.mkdir(parents=True)
    text = (
        (SUPPORTOPS / "spec.yaml")
        .read_text()
        .replace("spec_id: supportops_v1", f"spec_id: {json.dumps(spec_id)}")
    )
    (root / "spec.yaml").write_text(text)
    shutil.copy(SUPPORTOPS / "agentprop.yaml", root / "agentprop.yaml")
    shutil.copy(SUPPORTOPS / "agent.py", root / "agent.py")
    return root


@pytest.mark.parametrize(
    "spec_id",
    ["../../X", "/tmp/agentprop-escape-test", "../.."],
    ids=["../../X", "absolute", "../.."],
)
def test_corpus_entries_of_any_spec_id_stay_inside_the_corpus(tmp_path: Path, spec_id: str) -> None:
    root = _project_with_spec_id(tmp_path, spec_id)
    corpus = tmp_path / "deep" / "corpus"
    code, out, err = cli(
        "run",
        str(root),
        "--fault",
        "wrong_order=1",
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "3",
        "--shrink-budget",
        "20",
        "--corpus",
        str(corpus),
    )
    assert code == 1, out + err
    written = [p for p in tmp_path.rglob("*.json")]
    assert written and all(corpus.resolve() in p.resolve().parents for p in written), written
    assert not Path("/tmp/agentprop-escape-test").exists()
    entries = Corpus(corpus).entries(spec_id=spec_id)
    assert len(entries) == 1 and entries[0].spec_id == spec_id


def test_a_spec_id_of_dot_dot_does_not_read_the_parent_as_a_corpus_folder(tmp_path: Path) -> None:
    corpus = Corpus(tmp_path / "corpus")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "stray.json").write_text('{"not": "an entry"}')
    assert corpus.entries(spec_id="..") == [] and corpus.damaged == []


# --------------------------------------------------------------------------- secrets


SECRET = "sk-ant-api03-TOPSECRETkeyvalue0123456789"
LOCAL_SECRET = "local-gateway-credential-8841"


def test_scrub_text_removes_registered_environment_and_key_shaped_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", LOCAL_SECRET)
    register_secret("another-registered-secret-42")
    text = (
        f"401: invalid x-api-key {SECRET}; env {LOCAL_SECRET}; registered "
        "another-registered-secret-42; Bearer abcdefghijklmnopqrstuv"
    )
    scrubbed = scrub_text(text)
    for secret in (SECRET, LOCAL_SECRET, "another-registered-secret-42", "abcdefghijklmnopqrstuv"):
        assert secret not in scrubbed
    assert scrubbed.count(REDACTED) == 4
    assert (
        scrub_text("authentication_error: the request was refused")
        == "authentication_error: the request was refused"
    )


@pytest.mark.parametrize("key", [SECRET, LOCAL_SECRET], ids=["sk-ant key", "other key"])
@pytest.mark.parametrize(
    "status", [401, 400], ids=["refused (not the agent's)", "bad request (the agent's)"]
)
def test_an_api_error_echoing_the_key_reaches_no_report_snapshot_or_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, status: int
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    for name in ("ANTHROPIC_BASE_URL", "AGENTPROP_CACHE_MODE", "CI"):
        monkeypatch.delenv(name, raising=False)

    def echo(request: object) -> object:
        return error_reply(status, message=f"invalid x-api-key {key} for this request")

    spec = tmp_path / "project"
    shutil.copytree(SUPPORTOPS, spec, ignore=shutil.ignore_patterns("__snapshots__", ".agentprop"))
    with MessagesServer(handler=echo) as server:
        common = [
            "--agent",
            "anthropic",
            "--model",
            MODEL,
            "--base-url",
            server.base_url,
            "--cache",
            "none",
        ]
        code, out, err = cli(
            "run",
            str(spec),
            *common,
            "--kinds",
            "mft",
            "--runs",
            "1",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--json",
            str(tmp_path / "r.json"),
            "-v",
            "--corpus",
            str(tmp_path / "corpus"),
        )
        assert code in (1, 2), out + err
        code2, out2, err2 = cli(
            "snapshot",
            "check",
            str(spec),
            *common,
            "--runs",
            "2",
            "--case",
            "END_BILLING_ANSWER<-N3_BILLING",
            "--json",
            str(tmp_path / "s.json"),
        )
    assert len(server.requests) >= 2
    texts = [
        out,
        err,
        out2,
        err2,
        (tmp_path / "r.json").read_text(),
        (tmp_path / "s.json").read_text(),
    ]
    texts += [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix in (".json", ".txt")
    ]
    assert all(key not in t for t in texts)
    assert REDACTED in (tmp_path / "r.json").read_text()


LEAKY_AGENT = """
import os

from agent import SupportOpsAgent
from agentprop import ToolError


class Leaky(SupportOpsAgent):
    def turn(self, message, ctx):
        key = os.environ["ANTHROPIC_API_KEY"]
        try:
            ctx.call("get_account", account_id="A1", note=f"auth {key}")
        except ToolError:
            pass
        super().turn(message, ctx)

    def _respond(self, ctx, node, decision, message, evidence=""):
        super()._respond(ctx, node, decision, message + " (session " + os.environ["ANTHROPIC_API_KEY"] + ")", evidence)

    def close_conversation(self):
        raise RuntimeError("could not close the session of " + os.environ["ANTHROPIC_API_KEY"])
"""  # noqa: E501


@pytest.mark.parametrize("key", [SECRET, LOCAL_SECRET], ids=["sk-ant key", "other key"])
def test_a_python_agent_holding_the_key_in_replies_tool_args_and_close_errors_leaks_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    # issue #27 item 2: the runtime scrubs the whole trace, whatever part of it the agent wrote
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    spec = tmp_path / "project"
    shutil.copytree(
        SUPPORTOPS,
        spec,
        ignore=shutil.ignore_patterns("__snapshots__", ".agentprop", "__pycache__"),
    )
    (spec / "leaky.py").write_text(LEAKY_AGENT)
    outputs = {name: tmp_path / f"r.{name}" for name in ("json", "html", "junit", "markdown")}
    flags = [arg for name, path in outputs.items() for arg in (f"--{name}", str(path))]
    case = ("--case", "END_BILLING_ANSWER<-N3_BILLING", "--runs", "2", "--agent", "leaky:Leaky")
    code, out, err = cli(
        "run",
        str(spec),
        "--kinds",
        "mft",
        *case,
        "-v",
        "--corpus",
        str(tmp_path / "corpus"),
        *flags,
    )
    assert code == 1, out + err  # every run errs in close_conversation(): the case fails
    code2, out2, err2 = cli(
        "snapshot",
        "check",
        str(spec),
        *case,
        "--update",
        "--reason",
        "r",
        "--dir",
        str(tmp_path / "snaps"),
    )
    texts = [out, err, out2, err2]
    texts += [
        p.read_text(errors="replace")
        for p in tmp_path.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".yaml", ".txt", ".pyc")
    ]
    assert all(key not in t for t in texts)
    report = outputs["json"].read_text()
    assert (
        "close_conversation() raised RuntimeError: could not close the session of [REDACTED]"
        in report
    )
    assert "(session [REDACTED])" in report or "(session [REDACTED])" in "".join(texts)


# --------------------------------------------------------------------------- generated code


def _hostile_entry() -> CorpusEntry:
    project = load_project(SUPPORTOPS)
    scenario = project.scenario("END_BILLING_ANSWER<-N3_BILLING")
    payload = '"""\nimport os\nINJECTED = True\n"""'
    hostile = scenario.model_copy(
        update={
            "turns": [
                t.model_copy(update={"user_message": payload + "\\'" + "'''"})
                for t in scenario.turns
            ]
        }
    )
    return CorpusEntry(
        id='abc"""\ndef x(): pass\n#',
        spec_id="supportops_v1",
        spec_path='examples/"""supportops',
        scenario_id='END """\nINJECTED = 1\n',
        signature=f"mft:x@turn0 {payload}",
        agent_ref='agent:SupportOpsAgent"""',
        agent_fingerprint="f",
        scenario=hostile,
        original_messages=[payload, "second"],
        created="now",
    )


def test_corpus_show_pytest_quotes_every_value_so_no_text_becomes_code() -> None:
    entry = _hostile_entry()
    code = pytest_regression(entry)
    tree = ast.parse(code)  # valid Python
    kinds = [type(node).__name__ for node in tree.body]
    # a docstring, imports of pathlib and agentprop's public modules only, six constants, one test
    head = [k for k in kinds if k not in ("Import", "ImportFrom")]
    assert head == [
        "Expr",
        "Assign",
        "Assign",
        "Assign",
        "Assign",
        "Assign",
        "Assign",
        "FunctionDef",
    ]
    imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert imported and all(
        name == "pathlib" or name == "agentprop" or name.startswith("agentprop.")
        for name in imported
    )
    assigned = {
        node.targets[0].id: node.value for node in tree.body if isinstance(node, ast.Assign)
    }  # type: ignore[attr-defined]
    assert "INJECTED" not in assigned and "os" not in {
        a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names
    }
    assert ast.literal_eval(assigned["ENTRY"]) == entry.id
    assert ast.literal_eval(assigned["FAILURE"]) == entry.signature
    assert ast.literal_eval(assigned["ORIGINAL_FIRST_MESSAGE"]) == entry.original_messages[0]
    assert ast.literal_eval(assigned["REPRODUCER_MESSAGES"]) == entry.scenario.messages
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert func.name.isidentifier() and func.name.startswith("test_regression_")
    docstring = ast.get_docstring(tree) or ""
    assert "INJECTED" not in docstring and "import os" not in docstring


def test_corpus_show_pytest_on_the_command_line_prints_the_quoted_test(tmp_path: Path) -> None:
    entry = _hostile_entry().model_copy(update={"id": "0123456789ab"})
    Corpus(tmp_path).save(entry)
    code, out, err = cli("corpus", "show", "0123", "--pytest", "--dir", str(tmp_path))
    assert code == 0, err
    tree = ast.parse(out)
    names = [
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    ]
    assert "INJECTED" not in names and names.count("ENTRY") == 1
