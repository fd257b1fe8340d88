"""Names that are not printable and templates that cannot be rendered (issue #27 items 15, 18).

A NUL or an escape sequence in the spec id, a node id or a tool name is an error at its line;
a spec's free text (its title) is printed with its control characters escaped, so it cannot
retitle or clear the terminal. A template that uses an undefined slot, nests its optional parts
or is an empty list, and a template or slot value of a megabyte, are errors in the bindings at
their line, found by lint, never a ``KeyError``, ``ZeroDivisionError`` or a run of minutes.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._spec.load import load_spec_text
from agentprop.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "supportops"
SPEC = (EXAMPLE / "spec.yaml").read_text(encoding="utf-8")
BINDINGS = (EXAMPLE / "agentprop.yaml").read_text(encoding="utf-8")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def project(tmp_path: Path, *, spec: str = SPEC, bindings: str = BINDINGS) -> Path:
    target = tmp_path / "project"
    shutil.copytree(
        EXAMPLE,
        target,
        ignore=shutil.ignore_patterns("__snapshots__", "test_*.py", ".agentprop", "__pycache__"),
    )
    (target / "spec.yaml").write_text(spec, encoding="utf-8")
    (target / "agentprop.yaml").write_text(bindings, encoding="utf-8")
    return target


@pytest.mark.parametrize(
    "old, new, where",
    [
        ("spec_id: supportops_v1", 'spec_id: "support\\0ops"', "spec.yaml:1:10"),
        ("- name: verify_identity", '- name: "verify\\e[2Jidentity"', "spec.yaml:18:9"),
    ],
    ids=["NUL in spec_id", "escape in a tool name"],
)
def test_a_control_character_in_a_name_is_an_error_at_its_line(
    old: str, new: str, where: str, tmp_path: Path
) -> None:
    text = SPEC.replace(old, new, 1)
    with pytest.raises(SpecError, match="control character") as info:
        load_spec_text(text, name="spec.yaml")
    assert str(info.value).startswith(where)
    code, out, err = cli(
        "run",
        str(project(tmp_path, spec=text)),
        "--case",
        "N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "1",
        "--corpus",
        "none",
    )
    assert code == 2 and "control character" in err and "Traceback" not in out + err


def test_escape_sequences_in_a_title_are_printed_escaped(tmp_path: Path) -> None:
    text = SPEC.replace("title: SupportOps Agent", 'title: "\\e]0;owned\\a\\e[2JX"')
    code, out, err = cli(
        "run",
        str(project(tmp_path, spec=text)),
        "--case",
        "N7_CANCEL",
        "--kinds",
        "mft",
        "--runs",
        "1",
        "--corpus",
        "none",
    )
    assert code == 0, out + err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "(\\x1b]0;owned\\x07\\x1b[2JX)" in out.splitlines()[0]


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "utterances: []",
            'utterances: ["hi {nope}"]',
            "uses slot {nope}, which `slots:` does not define",
        ),
        (
            "utterances: []",
            'utterances: ["Please [cancel [my] order] {order_id}"]',
            "optional parts [ ... ] are nested",
        ),
        (
            '  zip: "94107"',
            '  zip: "' + "9" * 1_000_000 + '"',
            "slot 'zip' is 1,000,000 characters long (agentprop's limit is 65,536)",
        ),
        (
            "utterances: []",
            'utterances: ["' + "x" * 1_000_000 + '"]',
            "a template of 1,000,000 characters",
        ),
    ],
    ids=["undefined slot", "nested brackets", "1 MB slot", "1 MB template"],
)
def test_templates_and_slots_that_cannot_be_rendered_are_lint_errors(
    old: str, new: str, message: str, tmp_path: Path
) -> None:
    assert old in BINDINGS
    code, out, err = cli("lint", str(project(tmp_path, bindings=BINDINGS.replace(old, new, 1))))
    assert code == 2 and message in err and "agentprop.yaml:" in err and "fix:" in err, err


def test_an_empty_list_of_templates_is_a_lint_error(tmp_path: Path) -> None:
    lines = BINDINGS.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "billing_question:")
    end = next(i for i in range(at + 1, len(lines)) if not lines[i].strip().startswith("- "))
    text = "\n".join([*lines[:at], lines[at] + " []", *lines[end:]]) + "\n"
    code, _, err = cli("lint", str(project(tmp_path, bindings=text)))
    assert code == 2 and "utterance for value 'billing_question' is an empty list" in err, err
