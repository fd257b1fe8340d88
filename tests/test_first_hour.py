"""What a newcomer types in the first hour (issue 32): every spelling of ``--agent`` works from
any working directory, and every unknown name gets "did you mean" and the fix."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

from agentprop._cli import main

ROOT = Path(__file__).resolve().parents[1]
SUPPORTOPS = ROOT / "examples" / "supportops"
CASE = ("--kinds", "mft", "--case", "END_CANCELLED<-N7_CANCEL", "--shrink-budget", "0")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the repository: the agent lives in a folder whose name
    holds a dot, and a package of the user's is importable."""
    cwd = tmp_path / "work"
    (cwd / "my.agents" / "so").mkdir(parents=True)
    shutil.copy(SUPPORTOPS / "agent.py", cwd / "my.agents" / "so" / "agent.py")
    shutil.copy(SUPPORTOPS / "agent.py", cwd / "agent.py")
    (cwd / "mypkg").mkdir()
    (cwd / "mypkg" / "__init__.py").write_text("")
    shutil.copy(SUPPORTOPS / "agent.py", cwd / "mypkg" / "support.py")
    monkeypatch.chdir(cwd)
    monkeypatch.syspath_prepend(str(cwd))
    return cwd


@pytest.mark.parametrize(
    "ref",
    [
        "agent.py:SupportOpsAgent",
        "agent:SupportOpsAgent",
        "./my.agents/so/agent.py:SupportOpsAgent",
        "my.agents/so/agent:SupportOpsAgent",
        "{cwd}/my.agents/so/agent:SupportOpsAgent",
        "{cwd}/my.agents/so/agent.py:SupportOpsAgent",
        "mypkg.support:SupportOpsAgent",
    ],
)
def test_every_spelling_of_agent_runs_from_another_directory(elsewhere: Path, ref: str) -> None:
    code, out, err = cli(
        "run",
        str(SUPPORTOPS),
        "--agent",
        ref.format(cwd=elsewhere),
        "--fault",
        "skip_auth=1",
        *CASE,
    )
    assert code == 1, err  # the fault knob reached the agent: the case fails
    assert "END_CANCELLED<-N7_CANCEL" in out and "FAIL" in out


def test_the_projects_own_agent_file_is_found_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for ref in ("agent.py:SupportOpsAgent", "agent:SupportOpsAgent"):
        code, out, err = cli("run", str(SUPPORTOPS), "--agent", ref, *CASE)
        assert code == 0, err
        assert "1 cases: 1 passed" in out or "1 case: 1 passed" in out


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["--agent", "agent.py:SupportOpsAgnt"],
            ["has no 'SupportOpsAgnt'", "did you mean 'SupportOpsAgent'?", "fix:"],
        ),
        (["--agent", "agent:SupportOpsAgnt"], ["did you mean 'SupportOpsAgent'?"]),
        (
            ["--agent", "agnet.py:SupportOpsAgent"],
            ["no file 'agnet.py'", "did you mean 'agent.py'?", "fix:"],
        ),
        (
            ["--agent", "agnet:SupportOpsAgent"],
            ["cannot import module 'agnet'", "did you mean 'agent'?"],
        ),
        (["--agent", "./nowhere/agent.py:X"], ["no file './nowhere/agent.py'", "looked for"]),
        (["--agent", "agent.py"], ["`agent.py:MyAgent`"]),
        (
            ["--fault", "skip_ath=1"],
            ["unknown fault knob(s) skip_ath", "did you mean 'skip_auth'?", "fix:"],
        ),
    ],
    ids=["class in file", "class in module", "file", "module", "folder", "no colon", "knob"],
)
def test_a_misspelt_name_gets_did_you_mean(
    elsewhere: Path, argv: list[str], words: list[str]
) -> None:
    code, _, err = cli("run", str(SUPPORTOPS), *argv, *CASE)
    assert code == 2
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(
    "argv, words",
    [
        (
            ["run", str(SUPPORTOPS), "--sede", "3"],
            ["--sede: did you mean '--seed'?", "agentprop run --help"],
        ),
        (["rn", str(SUPPORTOPS)], ["invalid choice: 'rn'", "did you mean 'run'?"]),
        (["run", str(SUPPORTOPS), "--mode", "sprrt"], ["did you mean 'sprt'?"]),
    ],
    ids=["option", "command", "choice"],
)
def test_a_misspelt_option_gets_did_you_mean(
    argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(*argv)[0] == 2
    err = capsys.readouterr().err  # argparse writes usage errors to sys.stderr itself
    for word in words:
        assert word in err, err


def test_a_misspelt_profile_gets_did_you_mean() -> None:
    from agentprop import agent_settings
    from agentprop.errors import InputError

    with pytest.raises(
        InputError, match=r"unknown agentprop profile 'smok'; did you mean 'smoke'\?"
    ):
        agent_settings("smok")


def test_a_misspelt_requirement_key_is_a_lint_error(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(
        SUPPORTOPS,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    spec = project / "spec.yaml"
    spec.write_text(
        spec.read_text().replace("must_call_tools_in_order", "must_call_tool_in_order", 1)
    )
    code, out, _ = cli("lint", str(project))
    assert code == 1
    assert (
        "error L007: unknown requirement key 'must_call_tool_in_order' in node N2_AUTH; did you "
        "mean 'must_call_tools_in_order'?" in out
    )
    assert "fix: rename 'must_call_tool_in_order' to 'must_call_tools_in_order'" in out
    code, _, err = cli("run", str(project), *CASE)  # the requirement is not dropped: nothing runs
    assert code == 2 and "must_call_tool_in_order" in err


def test_a_misspelt_key_deep_in_the_spec_gets_did_you_mean(tmp_path: Path) -> None:
    project = tmp_path / "p"
    shutil.copytree(
        SUPPORTOPS,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    spec = project / "spec.yaml"
    spec.write_text(spec.read_text().replace("reruns:", "rerunz:", 1))
    code, out, _ = cli("lint", str(project))
    assert "unknown key 'rerunz' in defaults.reliability; did you mean 'reruns'?" in out


def test_run_without_bindings_names_agentprop_yaml_and_bindings(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    shutil.copy(SUPPORTOPS / "spec.yaml", tmp_path / "p" / "spec.yaml")
    code, _, err = cli("run", str(tmp_path / "p"))
    assert code == 2
    assert (
        str(tmp_path / "p" / "agentprop.yaml") in err and "--bindings" in err and "--agent" in err
    )


def test_the_bindings_agent_may_be_a_file_in_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "p"
    shutil.copytree(
        SUPPORTOPS,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    bindings = project / "agentprop.yaml"
    bindings.write_text(
        bindings.read_text().replace(
            "agent: agent:SupportOpsAgent", "agent: agent.py:SupportOpsAgent", 1
        )
    )
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("run", str(project), *CASE)
    assert code == 0, err
    assert "with agent agent.py:SupportOpsAgent" in out


# -------------------------------------------------------------- the corpus keeps each agent's finds


def test_a_clean_run_between_two_fault_runs_keeps_the_faults_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._decide.corpus import CorpusEntry
    from agentprop._pipeline.report.model import RunReport

    project = tmp_path / "p"
    shutil.copytree(
        SUPPORTOPS,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    monkeypatch.chdir(tmp_path)
    corpus = project / ".agentprop" / "corpus"

    def run(*argv: str) -> tuple[int, str, RunReport]:
        report = tmp_path / "report.json"
        argv = (
            "--kinds",
            "mft",
            "--case",
            "END_CANCELLED<-N7_CANCEL",
            "--profile",
            "release",
            "--corpus",
            str(corpus),
            "--json",
            str(report),
            *argv,
        )
        code, out, err = cli("run", str(project), *argv)
        assert code in (0, 1), err
        return code, out, RunReport.model_validate_json(report.read_text())

    code, _, first = run("--fault", "skip_auth=0.3", "--shrink-budget", "40")
    assert code == 1
    saved = sorted(p for p in corpus.glob("*/*.json"))
    assert saved and all(e.action == "saved" for e in first.corpus)
    assert all(
        CorpusEntry.model_validate_json(p.read_text()).agent_faults == {"skip_auth": 0.3}
        for p in saved
    )

    # another agent: the entries are neither replayed nor retired
    code, out, clean = run("--shrink-budget", "0")
    assert code == 0
    assert [c.kind for c in clean.cases] == ["MFT"] and clean.corpus == []
    assert sorted(p for p in corpus.glob("*/*.json")) == saved and not (corpus / "retired").exists()
    assert (
        f"note: {len(saved)} corpus entr" in out
        and "agent:SupportOpsAgent --fault skip_auth=0.3" in out
    )
    assert "--replay-corpus all" in out

    # the faulty agent: regressions
    code, _, again = run("--fault", "skip_auth=0.3", "--shrink-budget", "0")
    assert code == 1
    replays = [c for c in again.cases if c.kind in ("REGRESSION", "CORPUS")]
    assert {c.details["corpus_entry"] for c in replays} == {p.stem for p in saved}
    assert any(c.kind == "REGRESSION" for c in replays)

    # asked: replayed, never retired
    code, _, asked = run("--replay-corpus", "all", "--shrink-budget", "0")
    assert code == 0
    assert {c.kind for c in asked.cases if c.id != "END_CANCELLED<-N7_CANCEL"} == {"CORPUS"}
    assert all(c.details["replay"] == "kept" for c in asked.cases if c.kind == "CORPUS")
    assert sorted(p for p in corpus.glob("*/*.json")) == saved


# --------------------------------------------------------------------------- pytest failures


def test_a_pytest_failure_starts_with_the_verdict_and_hides_agentprops_frames(
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "test_cancel.py").write_text(
        "import agentprop\n"
        f"project = agentprop.load_project({str(SUPPORTOPS)!r})\n"
        f"AGENT = agentprop.load_agent('agent.py:SupportOpsAgent', {str(SUPPORTOPS)!r}, "
        "'skip_auth=1')\ndef test_cancel():\n    agentprop.check(project, "
        "'END_CANCELLED<-N7_CANCEL', AGENT)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--agentprop-shrink-budget=30",
            "test_cancel.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert (
        "E       agentprop.errors.AgentPropertyViolation: FAIL "
        "END_CANCELLED<-N7_CANCEL — pass rate 0%" in out
    )
    assert "test_cancel.py:5: AgentPropertyViolation" in out  # the test's own line, not agentprop's
    assert (
        "Decide ``prop``" not in out and "def check(" not in out and "_raise_or_return" not in out
    )
    assert "minimal: nothing to remove" in out and "minimal: minimal:" not in out


# --------------------------------------------------------------------------- public names only


def _private_uses(code: str) -> list[str]:
    """Imports of private agentprop names in ``code``: ``agentprop._x``, ``from agentprop import
    _x``, ``from agentprop.mod import _x``, and attribute uses ``agentprop._x``."""
    import ast

    found: list[str] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [
                a.name
                for a in node.names
                if a.name.split(".")[0] == "agentprop"
                and any(p.startswith("_") for p in a.name.split("."))
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "agentprop":
            parts = (node.module or "").split(".")
            if any(p.startswith("_") for p in parts):
                found.append(node.module or "")
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "agentprop"
            and node.attr.startswith("_")
        ):
            # __version__, __file__ are public
            if not (node.attr.startswith("__") and node.attr.endswith("__")):
                found.append(f"agentprop.{node.attr}")
    return found


def _snippets() -> list[tuple[str, str]]:
    import re

    out = [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "examples").rglob("*.py"))
    ]
    out += [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "docs" / "examples").rglob("*.py"))
    ]
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S):
            out.append(
                (f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
            )
    return out


def test_docs_snippets_and_examples_import_only_public_names() -> None:
    import re

    snippets = _snippets()
    assert len(snippets) > 20  # the collector finds the files and the fenced blocks
    bad = []
    for where, code in snippets:
        try:
            uses = _private_uses(code)
        except SyntaxError:  # a fragment (`...` in a signature): its dotted names are read as text
            uses = re.findall(r"\bagentprop(?:\.\w+)*\._\w+", code)
        bad += [f"{where}: {u}" for u in uses]
    assert bad == [], (
        "docs and examples must use public names (re-export what they need from agentprop):\n"
        + "\n".join(bad)
    )


def test_the_private_import_check_finds_private_imports() -> None:
    code = (
        "import agentprop._spec\nfrom agentprop._agents.loading import parse_faults\nfrom "
        "agentprop import _x, check\nagentprop._y()\n"
    )
    assert _private_uses(code) == [
        "agentprop._spec",
        "agentprop._agents.loading",
        "agentprop._x",
        "agentprop._y",
    ]


def test_load_agent_takes_fault_knobs_as_text() -> None:
    import agentprop

    assert agentprop.load_agent(
        "agent:SupportOpsAgent", SUPPORTOPS, "skip_auth=0.3, leak_pii"
    ).faults == {"skip_auth": 0.3, "leak_pii": 1.0}
    assert agentprop.load_agent("agent:SupportOpsAgent", SUPPORTOPS, "").faults == {}


# --------------------------------------------------------------------------- snapshot review


def test_snapshot_review_finds_candidates_below_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._decide.snapshot import SnapshotStore

    monkeypatch.chdir(tmp_path)
    project = tmp_path / "p"
    shutil.copytree(
        SUPPORTOPS,
        project,
        ignore=shutil.ignore_patterns(".agentprop", "__pycache__", "__snapshots__"),
    )
    # NEW: one pending candidate
    code, _, err = cli("snapshot", "check", str(project), "--case", "END_TICKET<-N7")
    assert code == 1, err
    # where the pytest fixture keeps them: __snapshots__/<test module>/
    [candidate] = (project / "__snapshots__").glob("*.pending.json")
    (project / "__snapshots__" / "test_snapshots").mkdir()
    candidate.rename(project / "__snapshots__" / "test_snapshots" / candidate.name)

    code, out, _ = cli("snapshot", "review", str(project))
    assert code == 0 and "1 pending" in out and "END_TICKET<-N7_CANCEL" in out
    assert f"in {project / '__snapshots__' / 'test_snapshots'}" in out
    code, out, _ = cli("snapshot", "list", str(project))
    assert "1 pending candidate(s)" in out
    code, out, err = cli(
        "snapshot",
        "approve",
        str(project),
        "END_TICKET<-N7",
        "--reason",
        "the ticket path as it is now",
    )
    assert code == 0, err
    store = SnapshotStore(project / "__snapshots__" / "test_snapshots")
    assert [s.name for s in store.baselines()] == [
        "END_TICKET<-N7_CANCEL"
    ] and store.pending() == []
    assert cli("snapshot", "review", str(project))[1].startswith("no pending snapshots")


# --------------------------------------------------------------------------- INV bugs in words


def test_an_inv_bug_is_a_pair_of_variants_with_one_rate_in_every_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    argv = [
        "run",
        str(SUPPORTOPS),
        "--fault",
        "skip_auth_impatient=0.5",
        "--kinds",
        "mft,inv",
        "--case",
        "END_CANCELLED<-N7_CANCEL",
        "--profile",
        "release",
    ]
    code, out, err = cli(
        *argv,
        "--shrink-budget",
        "10",
        "--corpus",
        "none",
        "--json",
        "r.json",
        "--junit",
        "j.xml",
        "--markdown",
        "r.md",
    )
    assert code == 1, err
    report = json.loads((tmp_path / "r.json").read_text())
    [inv] = [c for c in report["cases"] if c["kind"] == "INV"]
    [bug] = [b for b in report["bugs"] if b["representative"] == inv["id"]]
    variants = inv["details"]["variants"]
    changed = sum(v["differs"] for v in variants)
    assert inv["pass_rate"] == (len(variants) - changed) / len(variants)
    words = (
        f"{inv['pass_rate']:.0%} ({len(variants) - changed}/{len(variants)} variants kept the "
        "original's behaviour)"
    )
    assert inv["rate_text"] == words
    assert (
        bug["rate_text"].startswith(f"fails {changed}/{len(variants)} variants")
        and bug["rate_of"] == "variants"
    )
    # a pair of variants, not a two-turn conversation; distributions in words, not a dict
    assert bug["diff"][0].startswith("original: 'Please cancel my order O-1001") and bug["diff"][
        1
    ].startswith("variant: ")
    assert "/20 ASK_CONFIRM_CANCEL then CANCELLED" in bug["diff"][0]
    assert (
        "{'" not in inv["failures"][0]["explanation"]
        and "the original: 20/20" in inv["failures"][0]["explanation"]
    )
    bugs_block = out.split("\ncase ")[0]
    assert (
        "turn 1:" not in bugs_block
        and "reproducer: [" not in bugs_block
        and bug["rate_text"] in bugs_block
    )
    junit = (tmp_path / "j.xml").read_text()
    assert f"pass rate {words}" in junit and bug["rate_text"] in junit and "turn 1:" not in junit
    markdown = (tmp_path / "r.md").read_text()
    assert "turn 1:" not in markdown and f"fails {changed}/{len(variants)} variants" in markdown


def test_a_dir_bug_is_its_pair_of_sides_with_one_rate_in_every_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DIR bug (the agent ignores the plan rules: flipping `can_cancel` does not change its
    decision) reads as the pair it is, in every output: the base and the perturbed side with
    their messages and the decision each must reach, the decision the agent made in words, and
    one rate (the runs of both sides) that the terminal, JSON, Markdown, HTML and JUnit repeat."""
    import json

    pytest.importorskip("jinja2")
    monkeypatch.chdir(tmp_path)
    argv = [
        "run",
        str(SUPPORTOPS),
        "--fault",
        "ignore_plan_rules=1",
        "--kinds",
        "dir",
        "--case",
        "END_CANCEL_DENIED<-N5",
        "--corpus",
        "none",
    ]
    code, out, err = cli(
        *argv, "--json", "r.json", "--junit", "j.xml", "--markdown", "r.md", "--html", "r.html"
    )
    assert code == 1, err
    report = json.loads((tmp_path / "r.json").read_text())
    [bug] = report["bugs"]
    [case] = [c for c in report["cases"] if c["id"] == bug["representative"]]
    assert case["kind"] == "DIR" and case["verdict"] == "FAIL" and case["id"] in bug["cases"]
    assert (
        case["rate_text"]
        == f"{case['pass_rate']:.0%} ({case['passes']}/{case['runs']} runs of both sides)"
    )
    failed = case["runs"] - case["passes"]
    assert bug["rate_of"] == "pair" and bug["rate_text"].startswith(
        f"fails {failed}/{case['runs']} runs of the pair (both sides)"
    )
    # the pair: its two sides, each with its messages, the decision it must reach and what its
    # runs decided, in words (not turns, not a dict); the sides' runs add up to the pair's rate
    details = case["details"]
    base, perturbed = bug["diff"]
    assert (
        base
        == f"base ({details['base_verdict']}, expects CANCEL_DENIED; {details['base_decided']}): "
        f"{details['base_messages']!r}"
    )
    assert (
        perturbed == f"perturbed ({details['perturbed_verdict']}, expects CANCELLED; "
        f"{details['perturbed_decided']}): {case['messages']!r}"
    )
    # what the agent did, in words
    decided = "turn 1 decided ASK_CONFIRM_CANCEL; the spec expects CANCEL_DENIED"
    assert case["failures"][0]["explanation"] == decided and "{'" not in base + perturbed
    sides = [
        re.match(r"(\d+)/(\d+) runs reached it", details[f"{side}_decided"])
        for side in ("base", "perturbed")
    ]
    assert (
        all(sides)
        and sum(int(m.group(1)) for m in sides if m) == case["passes"]
        and sum(int(m.group(2)) for m in sides if m) == case["runs"]
    )
    assert (
        f": {decided}" in details["base_decided"]
        and "ASK_CONFIRM_CANCEL" not in details["perturbed_decided"]
    )
    bugs_block = out.split("\ncase ")[0]
    assert base in bugs_block and perturbed in bugs_block and bug["rate_text"] in bugs_block
    assert "turn 1:" not in bugs_block and "reproducer: [" not in bugs_block
    row = next(line for line in out.splitlines() if line.startswith(case["id"][:40]))
    assert f"FAIL {case['pass_rate']:.0%}" in " ".join(row.split()) and decided in row
    junit = (tmp_path / "j.xml").read_text()
    assert (
        f"pass rate {case['rate_text']}" in junit
        and bug["rate_text"] in junit
        and base in junit
        and perturbed in junit
    )
    markdown = (tmp_path / "r.md").read_text().replace("\\", "")
    assert (
        bug["rate_text"] in markdown
        and base in markdown
        and perturbed in markdown
        and "turn 1:" not in markdown
    )
    assert f"| DIR | FAIL | {case['pass_rate']:.0%} |" in markdown
    html = (tmp_path / "r.html").read_text()
    for text in (
        case["rate_text"],
        bug["rate_text"],
        f"base ({details['base_verdict']}, expects CANCEL_DENIED; {details['base_decided']})",
        decided,
    ):
        assert text in html, text


def test_behaviour_keys_read_as_words() -> None:
    from agentprop._decide.metamorphic import distribution_words

    counts = {
        "A>B": 11,
        "A>B !calls_in_order:decision_tree.N2_AUTH.requirements.x@turn0:missing=verify_identity": 9,
    }
    assert distribution_words(counts) == (
        "11/20 A then B; 9/20 A then B, failing "
        "calls_in_order:decision_tree.N2_AUTH.requirements.x (missing=verify_identity)"
    )
    assert distribution_words({}) == "no runs"


# ----------------------------------------------------------------------- long commands say so first


def test_run_and_tdad_announce_their_plan_before_they_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from agentprop._agents.project import load_project
    from agentprop._cli.common import announce_plan
    from agentprop._scenario.piecemeal import piecemeal_scenarios

    monkeypatch.chdir(tmp_path)
    code, out, err = cli("run", str(SUPPORTOPS), *CASE, "--corpus", "none")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == (
        "plan: 1 MFT case(s); the MFT and EXPLORE cases take at most 59 agent runs (a case stops "
        "once decided, most far sooner)"
    )
    assert "1 case: 1 passed" in out or "1 cases: 1 passed" in out
    project = load_project(SUPPORTOPS)
    scenarios = project.scenarios()
    args = argparse.Namespace(mode=None, tau=None, runs=None, max_runs_per_case=None, explore=4)
    buf = io.StringIO()
    announce_plan(
        project,
        scenarios,
        ("mft", "explore", "inv"),
        args,
        buf,
        model_agent=None,
        repeats="then 7 mutation intents rerun",
    )
    text = buf.getvalue()
    # explored: every path, and each stop continued past its question
    explored = len(scenarios) + len(piecemeal_scenarios(project.bindings, scenarios))
    assert text.startswith(
        f"plan: {len(scenarios)} MFT case(s), up to {4 * explored} EXPLORE case(s), the INV "
        "cases (counted once built)"
    )
    assert "then 7 mutation intents rerun; this can take minutes" in text


# ------------------------------------------------------------------- repeated runs widen the search


def test_each_run_explores_new_inputs_outside_ci_and_prints_the_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import secrets

    from agentprop._pipeline.report.model import RunReport

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTPROP_SEED", raising=False)
    monkeypatch.delenv("CI", raising=False)
    drawn = iter([100, 200])
    monkeypatch.setattr(secrets, "randbelow", lambda n: next(drawn))

    def explored(*extra: str) -> tuple[str, list[list[str]]]:
        argv = (
            "run",
            str(SUPPORTOPS),
            "--kinds",
            "explore",
            "--explore",
            "3",
            "--case",
            "END_CANCELLED<-N7_CANCEL",
            "--corpus",
            "none",
        )
        code, out, err = cli(*argv, "--json", "r.json", *extra)
        assert code in (0, 3), err
        report = RunReport.model_validate(json.loads((tmp_path / "r.json").read_text()))
        return out, [c.messages for c in report.cases if c.kind == "EXPLORE"]

    first_out, first = explored()
    assert "explored inputs: --explore-seed 101 (a new seed each run outside CI" in first_out
    second_out, second = explored()
    # a rerun widens the search
    assert "explored inputs: --explore-seed 201 (" in second_out and second != first
    assert explored("--explore-seed", "101")[1] == first  # the printed seed repeats the inputs
    monkeypatch.setenv("CI", "true")
    ci_out, ci_inputs = explored()
    assert "explored inputs: --explore-seed 0 (fixed because CI is set)" in ci_out
    assert explored("--seed", "0", "--explore-seed", "0")[1] == ci_inputs
