"""Text that cannot be written, numbers that cannot be printed, files that are not files.

Issue #27 items 5, 14 and 16: a lone surrogate (``"\\ud83d"``) in a spec, an agent's reply or
tool argument, or a corpus entry; an integer in hex or sexagesimal past the digit limit; a
corpus entry, snapshot or record of trials that is a FIFO, a link to ``/dev/zero``, a directory,
not UTF-8 or holds ``reproducer_rate: NaN``. Each is a clear error naming the file, or (what an
agent produced) kept with U+FFFD so the run is still judged and reported; never a traceback,
a hang or an exhausted memory.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._decide.corpus import Corpus
from agentprop._decide.snapshot import SnapshotStore
from agentprop._pipeline.report.model import RunReport
from agentprop._spec.load import load_spec_text
from agentprop._util.files import read_json
from agentprop._util.text import printable, valid_unicode
from agentprop.errors import InputError, SpecError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
SPEC = (EXAMPLE / "spec.yaml").read_text(encoding="utf-8")

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


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the SupportOps example with two agents that produce lone surrogates."""
    target = tmp_path / "project"
    shutil.copytree(
        EXAMPLE,
        target,
        ignore=shutil.ignore_patterns("__snapshots__", "test_*.py", ".agentprop", "__pycache__"),
    )
    (target / "hostile.py").write_text(HOSTILE_AGENTS, encoding="utf-8")
    return target


# --------------------------------------------------------------------------- lone surrogates


def test_a_lone_surrogate_in_a_spec_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = SPEC.replace("title: SupportOps Agent", 'title: "\\ud83d"')
    with pytest.raises(SpecError) as info:
        load_spec_text(text, name="spec.yaml")
    message = str(info.value)
    assert (
        "spec.yaml:3:8: a lone surrogate U+D83D" in message
        and "fix:" in message
        and "\\U0001F600" in message
    )
    (tmp_path / "spec.yaml").write_text(text, encoding="utf-8")
    code, out, err = cli("lint", str(tmp_path / "spec.yaml"))
    assert code == 2 and "lone surrogate" in err and "Traceback" not in out + err


def test_a_lone_surrogate_as_a_mapping_key_is_an_error_too() -> None:
    with pytest.raises(SpecError, match=r"lone surrogate U\+DE00"):
        load_spec_text(
            SPEC.replace("risk_level: medium", 'risk_level: medium\n"\\ude00": 1'), name="spec.yaml"
        )


@pytest.mark.parametrize("agent", ["ReplySurrogate", "ArgSurrogate"])
def test_an_agents_lone_surrogate_is_kept_as_a_replacement_and_the_run_reported(
    project: Path, tmp_path: Path, agent: str
) -> None:
    report_path = tmp_path / "report.json"
    code, out, err = cli(
        "run",
        str(project),
        "--agent",
        f"hostile:{agent}",
        "--case",
        "N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "2",
        "--corpus",
        "none",
        "--json",
        str(report_path),
    )
    assert code in (0, 1), err
    assert "Traceback" not in out + err
    report = RunReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    assert report.cases and all(c.runs > 0 for c in report.cases)
    assert "\ufffd" in report_path.read_text(encoding="utf-8")  # kept, visibly, not dropped


def test_a_corpus_entry_with_a_lone_surrogate_is_damaged_not_blocking(tmp_path: Path) -> None:
    folder = tmp_path / "corpus" / "supportops_v1"
    folder.mkdir(parents=True)
    (folder / "bad.json").write_text(
        '{"id": "bad", "spec_id": "supportops_v1", "original_messages": ["hi \\ud83d"]}',
        encoding="utf-8",
    )
    corpus = Corpus(tmp_path / "corpus")
    assert corpus.entries() == []
    assert len(corpus.damaged) == 1 and "lone surrogate U+D83D at original_messages.0" in str(
        corpus.damaged[0]
    )


def test_valid_unicode_and_printable() -> None:
    assert valid_unicode("ok \ud83d end") == "ok \ufffd end"
    assert valid_unicode("😀 fine") == "😀 fine"
    assert (
        printable("a\x1b]0;owned\x07b\x1b[2Jc\x00\td\n")
        == "a\\x1b]0;owned\\x07b\\x1b[2Jc\\x00\td\n"
    )


# --------------------------------------------------------------------------- integers


@pytest.mark.parametrize(
    "number",
    [
        "0x" + "F" * 5000,
        "0x" + "F" * 3700,
        "0" + "7" * 5000,
        "0b" + "1" * 15000,
        ":".join(["1"] + ["59"] * 3000),
        "9" * 4301,
    ],
    ids=[
        "hex 5000",
        "hex 3700 (4,455 decimal digits)",
        "octal",
        "binary",
        "sexagesimal",
        "decimal 4301",
    ],
)
def test_an_integer_past_the_digit_limit_in_any_notation_is_an_error(number: str) -> None:
    with pytest.raises(SpecError, match="4,300") as info:
        load_spec_text(
            SPEC.replace("max_tool_calls_per_turn: 4", f"max_tool_calls_per_turn: {number}"),
            name="spec.yaml",
        )
    assert "spec.yaml:16:30" in str(info.value)


def test_integers_within_the_limit_still_load() -> None:
    for number, value in [("0x4", 4), ("04", 4), ("0b100", 4), ("1:0", 60), ("4", 4)]:
        spec = load_spec_text(
            SPEC.replace("max_tool_calls_per_turn: 4", f"max_tool_calls_per_turn: {number}"),
            name="spec.yaml",
        )
        assert spec.defaults.limits.max_tool_calls_per_turn == value


# --------------------------------------------------------------------------- special files


def _specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    return {"fifo": fifo, "/dev/zero": zero, "directory": folder}


def test_read_json_opens_only_regular_files_of_a_bounded_size(tmp_path: Path) -> None:
    for kind, path in _specials(tmp_path).items():
        with pytest.raises(InputError, match="not a test file") as info:
            read_json(path, what="a test file", fix="delete it")
        assert str(path) in str(info.value), kind
    big = tmp_path / "big.json"
    big.write_text('"' + "x" * 2000 + '"')
    with pytest.raises(InputError, match="more than 1,000 bytes"):
        read_json(big, what="a test file", fix="delete it", limit=1000)


def test_a_special_file_in_the_corpus_or_snapshots_is_damaged_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "corpus" / "supportops_v1"
    folder.mkdir(parents=True)
    for kind, path in _specials(tmp_path).items():
        path.rename(folder / f"{kind.strip('/').replace('/', '_')}.json")
    corpus = Corpus(tmp_path / "corpus")
    assert corpus.entries() == [] and len(corpus.damaged) == 3
    snapshots = tmp_path / "snaps"
    snapshots.mkdir()
    (snapshots / "x.json").symlink_to("/dev/zero")
    with pytest.raises(InputError, match="is a device"):
        SnapshotStore(snapshots).load("x")


def test_a_spec_that_is_a_fifo_or_a_device_is_an_error(tmp_path: Path) -> None:
    for kind, path in _specials(tmp_path).items():
        code, out, err = cli("lint", str(path))
        assert code == 2 and str(path) in err and "Traceback" not in err, (kind, err)


def test_a_corpus_entry_with_a_nan_rate_is_damaged_not_blocking(tmp_path: Path) -> None:
    folder = tmp_path / "corpus" / "supportops_v1"
    folder.mkdir(parents=True)
    entry = {"id": "x", "spec_id": "supportops_v1", "reproducer_rate": float("nan")}
    (folder / "x.json").write_text(json.dumps(entry), encoding="utf-8")
    corpus = Corpus(tmp_path / "corpus")
    assert corpus.entries() == [] and len(corpus.damaged) == 1


@pytest.mark.parametrize("damage", ["not utf-8", "directory", "fifo"])
def test_a_damaged_record_of_trials_is_an_error_naming_it(tmp_path: Path, damage: str) -> None:
    pytest.importorskip("mcp")
    from agentprop._pipeline.serve import _read_record

    record = tmp_path / "trials.jsonl"
    if damage == "not utf-8":
        record.write_bytes(b'{"case_id": "\xff"}\n')
    elif damage == "directory":
        record.mkdir()
    else:
        os.mkfifo(record)
    with pytest.raises(InputError) as info:
        _read_record(record, "supportops_v1", "c")
    assert str(record) in str(info.value) and "fix:" in str(info.value)
