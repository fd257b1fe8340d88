"""Issue #27's second attack, part B: damaged state, disks, special files, names, the HTTP token.

Each category is a function ``(workdir) -> Tally`` that attacks agentprop as a user would meet
the problem (the command line, or the public store classes) and classifies each case:
``ok`` (a clear error, or the work kept), ``traceback`` (an exception escaped), ``data_lost``
(results the run produced are nowhere), ``silent_wrong`` (a wrong answer with no error: a
damaged row returned as a response, an unauthenticated session served, a foreign file changed,
a control character printed raw). ``hangs`` and ``oom`` are decided by the caller, which runs
each category in a forked worker under a timeout and a memory limit (``benchmarks/robustness.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import sqlite3
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUPPORTOPS = REPO / "examples" / "supportops"
SPEC = (SUPPORTOPS / "spec.yaml").read_text(encoding="utf-8")
BINDINGS = (SUPPORTOPS / "agentprop.yaml").read_text(encoding="utf-8")
CASE = ("--case", "N7_CANCEL", "--kinds", "mft", "--runs", "2")
ONE = ("--case", "END_CANCELLED<-N7_CANCEL", "--kinds", "mft", "--shrink-budget", "40")


@dataclass
class Tally:
    """What one category found: cases tried and how each ended (see the module docstring)."""

    cases: int = 0
    ok: int = 0
    tracebacks: int = 0
    data_lost: int = 0
    silent_wrong: int = 0
    notes: list[str] = field(default_factory=list)

    def check(self, name: str, attack: Callable[[], str | None]) -> None:
        """Run one case: ``attack`` returns ``None`` (ok) or ``"data_lost: ..."`` /
        ``"silent_wrong: ..."``; an exception that escapes is a traceback."""
        self.cases += 1
        try:
            problem = attack()
        except Exception:  # noqa: BLE001 - anything that escapes is what is counted
            self.tracebacks += 1
            self.notes.append(
                f"{name}: traceback: {traceback.format_exc().strip().splitlines()[-1][:300]}"
            )
            return
        if problem is None:
            self.ok += 1
        elif problem.startswith("data_lost"):
            self.data_lost += 1
            self.notes.append(f"{name}: {problem}")
        else:
            self.silent_wrong += 1
            self.notes.append(f"{name}: {problem}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "ok": self.ok,
            "tracebacks": self.tracebacks,
            "data_lost": self.data_lost,
            "silent_wrong": self.silent_wrong,
            "notes": self.notes[:10],
        }


def cli(*args: str) -> tuple[int, str, str]:
    from agentprop._cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def project(
    root: Path, *, spec: str = SPEC, bindings: str = BINDINGS, extra: dict[str, str] | None = None
) -> Path:
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(
        SUPPORTOPS,
        root,
        ignore=shutil.ignore_patterns("__snapshots__", "test_*.py", ".agentprop", "__pycache__"),
    )
    (root / "spec.yaml").write_text(spec, encoding="utf-8")
    (root / "agentprop.yaml").write_text(bindings, encoding="utf-8")
    for name, text in (extra or {}).items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def clear_error(code: int, err: str) -> str | None:
    """``None`` when the command stopped with a clear error (exit 2, a fix), else the problem."""
    if code == 2 and "fix:" in err and "Traceback" not in err:
        return None
    return f"silent_wrong: exit {code}, not a clear error: {err[:200]!r}"


# --------------------------------------------------------------------------- item 5


HOSTILE_AGENTS = """
from agent import SupportOpsAgent


class ReplySurrogate(SupportOpsAgent):
    def _respond(self, ctx, node, decision, message, evidence=""):
        super()._respond(ctx, node, decision, message + "\\ud83d", evidence)


class ArgSurrogate(SupportOpsAgent):
    def _call(self, ctx, tool, **args):
        args = {k: (v + "\\udc80" if isinstance(v, str) else v) for k, v in args.items()}
        return super()._call(ctx, tool, **args)
"""


def lone_surrogates(workdir: Path) -> Tally:
    """Lone surrogates from a YAML escape, an agent's reply and tool argument, a corpus entry."""
    tally = Tally()
    for where, old, new in [
        ("spec title", "title: SupportOps Agent", 'title: "\\ud83d"'),
        (
            "spec tool description",
            "description: Verify user identity",
            'description: "\\udc80 Verify user identity',
        ),
    ]:

        def spec_case(old: str = old, new: str = new) -> str | None:
            text = SPEC.replace(old, new, 1)
            if new.count('"') == 1:
                text = text.replace(
                    "any account-changing action.", 'any account-changing action."', 1
                )
            code, _, err = cli("lint", str(project(workdir / "p", spec=text)))
            return clear_error(code, err)

        tally.check(where, spec_case)
    for agent in ("ReplySurrogate", "ArgSurrogate"):

        def agent_case(agent: str = agent) -> str | None:
            root = project(workdir / "p", extra={"hostile.py": HOSTILE_AGENTS})
            report = workdir / "report.json"
            report.unlink(missing_ok=True)
            code, out, err = cli(
                "run",
                str(root),
                "--agent",
                f"hostile:{agent}",
                *CASE,
                "--corpus",
                "none",
                "--json",
                str(report),
            )
            if code not in (0, 1) or not report.is_file():
                return f"data_lost: exit {code}, no report: {err[-200:]!r}"
            return (
                None
                if "\ufffd" in report.read_text(encoding="utf-8")
                else "silent_wrong: the bad text vanished from the report"
            )

        tally.check(f"agent {agent}", agent_case)

    def corpus_case() -> str | None:
        from agentprop._decide.corpus import Corpus

        folder = workdir / "corpus" / "supportops_v1"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bad.json").write_text(
            '{"id": "bad", "spec_id": "supportops_v1", "original_messages": ["\\ud83d"]}',
            encoding="utf-8",
        )
        corpus = Corpus(workdir / "corpus")
        return (
            None
            if corpus.entries() == [] and len(corpus.damaged) == 1
            else "silent_wrong: the entry was not reported damaged"
        )

    tally.check("corpus entry", corpus_case)
    return tally


# --------------------------------------------------------------------------- items 6 and 17


def _cache_with_row(path: Path, damage: str) -> dict[str, Any]:
    from agentprop._modelapi.cache import ApiCache

    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}
    for stale in path.parent.glob(path.name + "*"):
        stale.unlink()
    with ApiCache(path, mode="read-write") as cache:
        cache.put(
            request,
            trial=0,
            response={
                "content": [{"type": "text", "text": "hello"}],
                "usage": {"input_tokens": 1, "output_tokens": 2},
            },
        )
    cols = (
        "key, model, trial, request_json, response_json, input_tokens, output_tokens, usage_json, "
        "created_at, checksum"
    )
    db = sqlite3.connect(path)
    db.executescript(
        f"ALTER TABLE responses RENAME TO old; CREATE TABLE responses ({cols}, PRIMARY KEY (key));"
        f"INSERT INTO responses SELECT {cols} FROM old; DROP TABLE old; UPDATE "
        f"responses SET {damage};"
    )
    db.commit()
    db.close()
    return request


def damaged_cache(workdir: Path) -> Tally:
    """Cache rows with NULL or mistyped columns, read in each mode, and verify(); a SQLite file
    of another application given as the cache."""
    from agentprop._modelapi.cache import ApiCache
    from agentprop.errors import InfrastructureError

    tally = Tally()
    for damage in (
        "response_json = NULL",
        "usage_json = NULL",
        "trial = NULL",
        "checksum = NULL",
        "created_at = 'x'",
        "model = NULL",
    ):
        for mode in ("read-write", "read", "replay-only"):

            def row_case(damage: str = damage, mode: str = mode) -> str | None:
                path = workdir / "cache.sqlite"
                request = _cache_with_row(path, damage)
                try:
                    got = ApiCache(path, mode=mode).get(request, trial=0)
                except InfrastructureError:
                    return None  # not the agent's fault: never a FAIL that is shrunk and saved
                return (
                    f"silent_wrong: a damaged row ({damage}) was returned as a "
                    f"response: {got!r:.100}"
                )

            tally.check(f"row {damage} ({mode})", row_case)

    def verify_case() -> str | None:
        path = workdir / "cache.sqlite"
        _cache_with_row(path, "input_tokens = 'many'")
        problems = ApiCache(path, mode="read").verify()
        return None if problems else "silent_wrong: verify() passed text in a token column"

    tally.check("verify token column", verify_case)
    for mode in ("read-write", "write", "read", "replay-only"):

        def foreign_case(mode: str = mode) -> str | None:
            from agentprop.errors import CacheError

            path = workdir / "notes.sqlite"
            for stale in workdir.glob("notes.sqlite*"):
                stale.unlink()
            db = sqlite3.connect(path)
            db.execute("CREATE TABLE notes (body TEXT)")
            db.execute("INSERT INTO notes VALUES ('mine')")
            db.commit()
            db.close()
            before = path.read_bytes()
            cache = ApiCache(path, mode=mode)
            try:
                cache.put(
                    {"model": "m", "messages": []}, trial=0, response={"usage": {}}
                ) if mode in ("read-write", "write") else cache.get(
                    {"model": "m", "messages": []}, trial=0
                )
            except CacheError:
                pass
            finally:
                cache.close()
            return (
                None
                if path.read_bytes() == before
                else "data_lost: another application's SQLite file was changed"
            )

        tally.check(f"foreign sqlite ({mode})", foreign_case)
    return tally


# --------------------------------------------------------------------------- item 7


def disks(workdir: Path) -> Tally:
    """Outputs on a full disk (/dev/full), in a missing directory, under a file; a corpus that
    cannot be written; an agent that changes directory."""
    tally = Tally()
    if not Path("/dev/full").exists():
        tally.notes.append("/dev/full is absent: the full-disk cases were not run")
    else:
        for command, option in [
            ("run", "--json"),
            ("run", "--junit"),
            ("run", "--markdown"),
            ("tdad", "--json"),
            ("snapshot check", "--json"),
        ]:

            def full_case(command: str = command, option: str = option) -> str | None:
                root = project(workdir / "p")
                args = [*command.split(), str(root), "--case", "N7_CANCEL", option, "/dev/full"]
                if command == "run":
                    args += ["--kinds", "mft", "--runs", "2", "--corpus", "none"]
                if command == "tdad":
                    args += ["--runs", "2"]
                code, out, err = cli(*args)
                found = re.search(r"it was written to (\S+) instead", out)
                if not found:
                    return (
                        f"data_lost: {command} {option} /dev/full: exit {code}, no spare file "
                        f"named: {(out + err)[-300:]!r}"
                    )
                spare = Path(found.group(1))
                kept = spare.is_file() and spare.stat().st_size > 0
                spare.unlink(missing_ok=True)
                if code != 2:
                    return f"silent_wrong: {command} exit {code} although an output was not written"
                return None if kept else "data_lost: the spare file is empty"

            tally.check(f"{command} {option} /dev/full", full_case)

    def missing_dir_case() -> str | None:
        target = workdir / "new" / "dir" / "report.json"
        code, _, err = cli(
            "run", str(project(workdir / "p")), *CASE, "--corpus", "none", "--json", str(target)
        )
        return (
            None
            if code in (0, 1) and target.is_file()
            else f"data_lost: exit {code}: {err[-200:]!r}"
        )

    def under_a_file_case() -> str | None:
        (workdir / "afile").write_text("x")
        code, out, err = cli(
            "run",
            str(project(workdir / "p")),
            *CASE,
            "--corpus",
            "none",
            "--json",
            str(workdir / "afile" / "r.json"),
        )
        if "cases:" in out:
            return "silent_wrong: the run went ahead with an output path that cannot be written"
        return clear_error(code, err)

    def corpus_case() -> str | None:
        (workdir / "afile").write_text("x")
        report = workdir / "r.json"
        code, _, err = cli(
            "run",
            str(project(workdir / "p")),
            "--fault",
            "skip_auth=1",
            *CASE,
            "--corpus",
            str(workdir / "afile" / "c"),
            "--json",
            str(report),
        )
        if code != 1 or not report.is_file():
            return f"data_lost: exit {code}: {err[-200:]!r}"
        data = json.loads(report.read_text(encoding="utf-8"))
        return (
            None
            if any(e["action"] == "not-saved" for e in data["corpus"])
            else "silent_wrong: no not-saved event"
        )

    wanderer = (
        "import os\nfrom agent import SupportOpsAgent\n\n\nclass W(SupportOpsAgent):\n    def "
        "turn(self, m, ctx):\n        os.chdir(os.environ['WANDER_TO'])\n        return "
        "super().turn(m, ctx)\n"
    )

    def wander_case() -> str | None:
        root = project(workdir / "p", extra={"wanderer.py": wanderer})
        elsewhere = workdir / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        here = Path.cwd()
        os.chdir(workdir)
        os.environ["WANDER_TO"] = str(elsewhere)
        try:
            code, _, err = cli(
                "run",
                str(root),
                "--agent",
                "wanderer:W",
                *CASE,
                "--corpus",
                "none",
                "--json",
                "wander.json",
            )
        finally:
            os.chdir(here)
        return (
            None
            if (workdir / "wander.json").is_file()
            else f"data_lost: exit {code}, the report is not where asked: {err[-200:]!r}"
        )

    for name, case in [
        ("missing directory", missing_dir_case),
        ("output under a file", under_a_file_case),
        ("unwritable corpus", corpus_case),
        ("agent changes directory", wander_case),
    ]:
        tally.check(name, case)
    return tally


# --------------------------------------------------------------------------- item 10


def corpus_revival(workdir: Path) -> Tally:
    """A bug that comes back after its corpus entry was retired: show, rm, and an old corpus
    holding both copies."""
    tally = Tally()
    corpus = workdir / "corpus"

    def case() -> str | None:
        if corpus.exists():
            shutil.rmtree(corpus)
        root = project(workdir / "p")
        cli("run", str(root), "--fault", "skip_auth=1", *ONE, "--corpus", str(corpus))
        live = sorted(p for p in corpus.glob("*/*.json") if p.parent.name != "retired")
        if len(live) != 1:
            return f"silent_wrong: {len(live)} entries saved, expected 1"
        buggy = (root / "agent.py").read_text(encoding="utf-8")
        (root / "agent.py").write_text(
            buggy.replace('self._fault("skip_auth", ctx)', "False", 1), encoding="utf-8"
        )
        # its code fixed: retired
        cli("run", str(root), "--fault", "skip_auth=1", *ONE, "--corpus", str(corpus))
        if not list((corpus / "retired").glob("*/*.json")):
            return "silent_wrong: the fixed bug's entry was not retired"
        (root / "agent.py").write_text(buggy, encoding="utf-8")
        # the bug is back
        cli("run", str(root), "--fault", "skip_auth=1", *ONE, "--corpus", str(corpus))
        if list((corpus / "retired").glob("*/*.json")):
            return "silent_wrong: the returned bug's retired copy was kept beside its live entry"
        (corpus / "retired" / live[0].parent.name).mkdir(parents=True, exist_ok=True)
        # as an older agentprop left it
        shutil.copy(live[0], corpus / "retired" / live[0].parent.name / live[0].name)
        code, _, err = cli("corpus", "show", live[0].stem, "--dir", str(corpus))
        if code != 0:
            return f"silent_wrong: corpus show refused the returned bug: {err[:200]!r}"
        code, _, err = cli("corpus", "rm", live[0].stem, "--dir", str(corpus))
        return (
            None
            if code == 0 and not list(corpus.glob(f"**/{live[0].name}"))
            else f"silent_wrong: corpus rm: {err[:200]!r}"
        )

    tally.check("retired then back", case)
    return tally


# --------------------------------------------------------------------------- items 14, 15, 18


def numbers_names_templates(workdir: Path) -> Tally:
    """Integers in every notation past the digit limit; names with NUL or escapes; titles with
    terminal escapes; templates that cannot be rendered; megabyte templates and slots."""
    tally = Tally()
    limit = "max_tool_calls_per_turn: 4"
    spec_edits = [
        ("hex 5,000 digits", limit, "max_tool_calls_per_turn: 0x" + "F" * 5000),
        ("hex 3,700 digits", limit, "max_tool_calls_per_turn: 0x" + "F" * 3700),
        ("sexagesimal", limit, "max_tool_calls_per_turn: " + ":".join(["1"] + ["59"] * 3000)),
        ("binary", limit, "max_tool_calls_per_turn: 0b" + "1" * 15000),
        ("NUL in spec_id", "spec_id: supportops_v1", 'spec_id: "support\\0ops"'),
        ("escape in a tool name", "- name: verify_identity", '- name: "verify\\e[2Jidentity"'),
        ("escape in a node id", "- node_id: N1_INTENT", '- node_id: "N1\\e]0;x\\aINTENT"'),
    ]
    for name, old, new in spec_edits:

        def spec_case(old: str = old, new: str = new) -> str | None:
            code, _, err = cli(
                "run",
                str(project(workdir / "p", spec=SPEC.replace(old, new, 1))),
                *CASE,
                "--corpus",
                "none",
            )
            return clear_error(code, err)

        tally.check(name, spec_case)

    def title_case() -> str | None:
        text = SPEC.replace("title: SupportOps Agent", 'title: "\\e]0;owned\\a\\e[2JX"')
        code, out, err = cli(
            "run", str(project(workdir / "p", spec=text)), *CASE, "--corpus", "none"
        )
        return (
            "silent_wrong: an escape sequence reached the terminal"
            if "\x1b" in out + err or "\x07" in out + err
            else None
        )

    tally.check("escape sequences in the title", title_case)
    binding_edits = [
        ("undefined slot", "utterances: []", 'utterances: ["hi {nope}"]'),
        (
            "nested brackets",
            "utterances: []",
            'utterances: ["Please [cancel [my] order] {order_id}"]',
        ),
        ("1 MB slot", '  zip: "94107"', '  zip: "' + "9" * 1_000_000 + '"'),
        ("3 MB slot", '  zip: "94107"', '  zip: "' + "9" * 3_000_000 + '"'),
        ("1 MB template", "utterances: []", 'utterances: ["' + "x" * 1_000_000 + '"]'),
    ]
    for name, old, new in binding_edits:

        def bindings_case(old: str = old, new: str = new) -> str | None:
            code, _, err = cli(
                "run",
                str(project(workdir / "p", bindings=BINDINGS.replace(old, new, 1))),
                *CASE,
                "--corpus",
                "none",
            )
            return clear_error(code, err)

        tally.check(name, bindings_case)

    def empty_list_case() -> str | None:
        lines = BINDINGS.splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip() == "billing_question:")
        end = next(i for i in range(at + 1, len(lines)) if not lines[i].strip().startswith("- "))
        text = "\n".join([*lines[:at], lines[at] + " []", *lines[end:]]) + "\n"
        code, _, err = cli(
            "run",
            str(project(workdir / "p", bindings=text)),
            "--kinds",
            "mft",
            "--runs",
            "2",
            "--corpus",
            "none",
        )
        return clear_error(code, err)

    tally.check("empty template list", empty_list_case)
    return tally


# --------------------------------------------------------------------------- item 16


def special_files(workdir: Path) -> Tally:
    """Corpus entries, snapshots, records of trials and specs that are FIFOs, links to
    /dev/zero, directories, not UTF-8, or hold a NaN rate. A hang or an exhausted memory is
    counted by the caller (timeout, memory limit)."""
    from agentprop._decide.corpus import Corpus
    from agentprop._decide.snapshot import SnapshotStore
    from agentprop.errors import InputError

    tally = Tally()

    def make(path: Path, kind: str) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "/dev/zero":
            path.symlink_to("/dev/zero")
        elif kind == "directory":
            path.mkdir()
        elif kind == "not utf-8":
            path.write_bytes(b'{"id": "\xff\xfe"}')
        else:  # NaN rate
            path.write_text(
                '{"id": "x", "spec_id": "supportops_v1", "reproducer_rate": NaN}', encoding="utf-8"
            )

    for kind in ("fifo", "/dev/zero", "directory", "not utf-8", "NaN rate"):

        def corpus_case(kind: str = kind) -> str | None:
            root = workdir / "corpus"
            make(root / "supportops_v1" / "x.json", kind)
            corpus = Corpus(root)
            return (
                None
                if corpus.entries() == [] and len(corpus.damaged) == 1
                else "silent_wrong: not reported as damaged"
            )

        tally.check(f"corpus entry: {kind}", corpus_case)

        def run_case(kind: str = kind) -> str | None:
            root = workdir / "corpus"
            make(root / "supportops_v1" / "x.json", kind)
            code, out, err = cli("run", str(project(workdir / "p")), *CASE, "--corpus", str(root))
            return (
                None
                if code == 0 and "damaged" in out
                else f"silent_wrong: exit {code}: {(out + err)[-200:]!r}"
            )

        tally.check(f"run with corpus entry: {kind}", run_case)

        def snapshot_case(kind: str = kind) -> str | None:
            store = workdir / "snaps"
            make(store / "x.json", kind)
            try:
                SnapshotStore(store).load("x")
            except InputError:
                return None
            return "silent_wrong: a special snapshot file loaded"

        tally.check(f"snapshot: {kind}", snapshot_case)

        def record_case(kind: str = kind) -> str | None:
            from agentprop._pipeline.serve import _read_record

            record = workdir / "trials.jsonl"
            make(record, kind)
            try:
                _read_record(record, "supportops_v1", "c")
            except InputError:
                return None
            return "silent_wrong: a special record file was read as trials"

        if kind != "NaN rate":
            tally.check(f"record of trials: {kind}", record_case)

        def spec_case(kind: str = kind) -> str | None:
            spec = workdir / "spec.yaml"
            make(spec, kind)
            code, _, err = cli("lint", str(spec))
            return clear_error(code, err)

        if kind not in ("NaN rate",):
            tally.check(f"spec: {kind}", spec_case)
    return tally


# --------------------------------------------------------------------------- item 19


def serve_token(workdir: Path) -> Tally:
    """``serve --http``: requests without the token, with a wrong one, with the right one."""
    import urllib.error
    import urllib.request

    from agentprop._agents.project import load_project
    from agentprop._decide.oracle import OracleSettings
    from agentprop._pipeline.serve import CaseServer, HttpCaseServer

    tally = Tally()
    project_ = load_project(SUPPORTOPS)
    case = CaseServer(
        project_,
        project_.scenario("END_CANCELLED<-N7_CANCEL"),
        settings=OracleSettings(mode="fixed", runs=2),
    )
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        }
    ).encode()
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def status(url: str, extra: dict[str, str]) -> int:
        request = urllib.request.Request(
            url, data=body, headers={**headers, **extra}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    with HttpCaseServer(case) as running:
        bare = running.url.split("?")[0]
        for name, url, extra in [
            ("no token", bare, {}),
            ("wrong token in the URL", f"{bare}?token=guess", {}),
            ("wrong bearer token", bare, {"authorization": "Bearer guess"}),
            ("empty token", f"{bare}?token=", {}),
        ]:
            tally.check(
                name,
                lambda url=url, extra=extra: (
                    None
                    if status(url, extra) == 401
                    else "silent_wrong: an unauthenticated session was served"
                ),
            )
        tally.check(
            "the printed URL",
            lambda: (
                None
                if status(running.url, {}) == 200
                else "silent_wrong: the token's own client was refused"
            ),
        )
    return tally


CATEGORIES: dict[str, Callable[[Path], Tally]] = {
    "5 lone surrogates": lone_surrogates,
    "6+17 damaged and foreign cache": damaged_cache,
    "7 full disk, bad output paths": disks,
    "10 corpus entry back after retirement": corpus_revival,
    "14+15+18 numbers, names, templates": numbers_names_templates,
    "16 special files": special_files,
    "19 serve --http token": serve_token,
}
"""Issue #27's categories of part B, in the order the benchmark runs them."""
