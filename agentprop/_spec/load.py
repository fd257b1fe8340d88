"""Loading a spec file: YAML -> pydantic models -> parsed conditions -> lint.

Every way a spec can be wrong ends in one :class:`~agentprop.errors.SpecError` that names the
file, the line and column, what was expected and how to fix it.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema
from pydantic import ValidationError

from agentprop._spec.lint import LintFinding, lint
from agentprop._spec.model import Spec
from agentprop._spec.schemas import schema_problems
from agentprop._spec.when import WhenSyntaxError, parse_when
from agentprop._util.yaml_source import TYPE_WORDS, YamlSource, describe_loc, load_yaml
from agentprop.errors import SourceLocation, SpecError, clip, clip_repr

SPEC_FILE_NAMES = ("spec.yaml", "spec.yml")


def resolve_spec_path(path: str | Path) -> Path:
    """A spec file, or a directory holding ``spec.yaml`` (or ``v1/spec.yaml`` …)."""
    p = Path(path)
    if p.is_dir():
        for name in SPEC_FILE_NAMES:
            if (p / name).is_file():
                return p / name
        versions = sorted(p.glob("v*/spec.yaml"))
        if len(versions) == 1:
            return versions[0]
        hint = (
            f"it has several versions ({', '.join(str(v.parent.name) for v in versions)}); name one"
            if versions
            else "put the spec in spec.yaml, or pass the file itself"
        )
        raise SpecError(
            f"no spec.yaml in directory {p}",
            location=SourceLocation(p),
            expected="a spec file, or a directory containing spec.yaml",
            fix=hint,
        )
    return p


def _validation_error(exc: ValidationError, src: YamlSource) -> SpecError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    where = describe_loc(loc)
    more = (
        f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    if first["type"] == "missing":
        parent, key = loc[:-1], loc[-1]
        typo = _typo_of(src, parent, str(key))
        if typo is not None:
            return SpecError(
                f"missing required key {key!r} in {describe_loc(parent)}; {typo!r} looks "
                f"like a typo of it{more}",
                location=src.location((*parent, typo), key=True),
                expected=f"`{key}:`",
                fix=f"rename {typo!r} to {key!r}",
            )
        return SpecError(
            f"missing required key {key!r} in {describe_loc(parent)}{more}",
            location=src.location(parent),
            expected=f"`{key}:` in {describe_loc(parent)}",
            fix=f"add `{key}: ...` there (see docs/reference.md for the spec format)",
        )
    got = first.get("input")
    got_text = (
        f"{type(got).__name__} {clip_repr(got)}"
        if not isinstance(got, (dict, list))
        else type(got).__name__
    )
    word = TYPE_WORDS.get(first["type"])
    msg = first["msg"][0].lower() + first["msg"][1:]
    if word:
        return SpecError(
            f"wrong type at {where}: {msg}, got {got_text}{more}",
            location=src.location(loc),
            expected=word,
            fix=f"change the value of {where} to {word}",
        )
    return SpecError(
        f"invalid value at {where}: {msg}, got {got_text}{more}",
        location=src.location(loc),
        expected=msg,
        fix=f"change the value of {where} so that it satisfies: {msg}",
    )


def _typo_of(src: YamlSource, parent: tuple[Hashable, ...], key: str) -> str | None:
    """An unknown key of the mapping at ``parent`` that is a near miss of ``key``."""
    import difflib

    node: Any = src.data
    for part in parent:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    if not isinstance(node, dict):
        return None
    candidates = [k for k in node if isinstance(k, str) and k != key]
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.8)
    return close[0] if close else None


def _check_not_empty(spec: Spec, src: YamlSource) -> None:
    if not spec.decision_tree:
        raise SpecError(
            "decision_tree is empty: there is nothing to route, test or cover",
            location=src.location(("decision_tree",)),
            expected="at least one node: `- node_id: N1_...` with `branches:`",
            fix="add the root node of the decision tree (see docs/reference.md#the-spec)",
        )


def _check_schemas(spec: Spec, src: YamlSource) -> None:
    for i, tool in enumerate(spec.tools):
        for key in ("input_schema", "output_schema"):
            schema = getattr(tool, key)
            if schema is None:
                continue
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                loc: tuple[Hashable, ...] = ("tools", i, key, *exc.path)
                raise SpecError(
                    f"invalid JSON Schema in tool {clip_repr(tool.name)} {key}"
                    + (f" at {clip(describe_loc(exc.path), 200)}" if exc.path else "")
                    + f": {clip(exc.message, 300)}",
                    location=src.location(loc),
                    expected="a JSON Schema (draft 2020-12), e.g. `type: "
                    "object` with `properties:`",
                    fix="fix the schema keyword at that position; types are one of object, array, "
                    "string, number, integer, boolean, null",
                ) from None
            # the validator failed on the user's schema (an unresolvable $ref ...)
            except Exception as exc:
                raise SpecError(
                    f"unusable JSON Schema in tool {clip_repr(tool.name)} {key}: "
                    f"{clip(str(exc), 300)}",
                    location=src.location(("tools", i, key)),
                    expected="a JSON Schema (draft 2020-12) without remote references",
                    fix="fix the schema; `$schema` and `$ref` must name schemas "
                    "agentprop can read offline",
                ) from None
            problems = schema_problems(schema, output=key == "output_schema")
            if problems:
                first = problems[0]
                raise SpecError(
                    f"impossible JSON Schema in tool {clip_repr(tool.name)} {key}: {first.problem}",
                    location=src.location(("tools", i, key, *first.loc)),
                    expected="bounds that some value satisfies, within agentprop's limits "
                    "(docs/reference.md#limits)",
                    fix=first.fix,
                )
        if tool.name == "respond":
            _check_respond_decision_enum(tool.input_schema, src, i)


def _check_respond_decision_enum(schema: Any, src: YamlSource, index: int) -> None:
    """The ``respond`` tool's ``decision`` enum holds decisions: strings, as in decision_enum."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    decision = props.get("decision") if isinstance(props, dict) else None
    enum = decision.get("enum") if isinstance(decision, dict) else None
    if not isinstance(enum, list):
        return
    for j, value in enumerate(enum):
        if not isinstance(value, str):
            raise SpecError(
                f"the respond tool's decision enum holds {type(value).__name__} "
                f"{clip_repr(value, 60)}, not a decision name",
                location=src.location(
                    ("tools", index, "input_schema", "properties", "decision", "enum", j)
                ),
                expected="decision names (strings), the same as response_contract.decision_enum",
                fix="write the decision's name; quote it if YAML would read it "
                "as a number or boolean",
            )


def _when_column(src: YamlSource, loc: tuple[Hashable, ...], offset: int) -> SourceLocation:
    base = src.location(loc)
    col = base.column or 1
    if base.line is not None:
        lines = src.text.splitlines()
        if 0 < base.line <= len(lines):
            line_text = lines[base.line - 1]
            if col - 1 < len(line_text) and line_text[col - 1] in "'\"":
                col += 1
    return SourceLocation(base.path, base.line, col + offset)


def _check_conditions(spec: Spec, src: YamlSource) -> None:
    for i, node in enumerate(spec.decision_tree):
        for j, branch in enumerate(node.branches):
            try:
                branch._clause = parse_when(branch.when)
            except WhenSyntaxError as exc:
                raise SpecError(
                    f"cannot parse condition {clip_repr(branch.when, 120)} of "
                    f"{clip(node.node_id)}: {exc.message}",
                    location=_when_column(
                        src, ("decision_tree", i, "branches", j, "when"), exc.offset
                    ),
                    expected=exc.expected,
                    fix="write conditions like `intent == cancel_order`, `retry_count >= 1`, `a "
                    "== true and b.c > d`, or `otherwise`",
                ) from None


def spec_from_source(src: YamlSource) -> tuple[Spec, list[LintFinding]]:
    if not isinstance(src.data, dict):
        kind = "an empty file" if src.data is None else type(src.data).__name__
        raise SpecError(
            f"a spec must be a mapping at the top level, got {kind}",
            location=SourceLocation(src.path, 1, 1),
            expected="`spec_id:`, `tools:`, `response_contract:`, "
            "`decision_tree:` … at the top level",
            fix="see docs/reference.md for the spec format",
        )
    try:
        spec = Spec.model_validate(src.data)
    except ValidationError as exc:
        raise _validation_error(exc, src) from None
    spec._source_path = src.path
    _check_not_empty(spec, src)
    _check_schemas(spec, src)
    _check_conditions(spec, src)
    findings = lint(spec, src)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        first = errors[0]
        more = (
            f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''}; "
            "run `agentprop lint`)"
            if len(errors) > 1
            else ""
        )
        raise SpecError(
            f"{first.message}{more}",
            location=SourceLocation(src.path, first.line, first.column),
            fix=first.fix,
        )
    spec._lint = findings
    return spec, findings


def load_spec(path: str | Path) -> Spec:
    """Load and validate a spec file (or a directory with ``spec.yaml``).

    Raises :class:`~agentprop.errors.SpecError` for anything that makes the spec unusable;
    warnings are kept on ``spec.lint_findings`` (and printed by ``agentprop lint``).
    """
    file = resolve_spec_path(path)
    src = load_yaml(file, error=SpecError)
    spec, _ = spec_from_source(src)
    return spec


def load_spec_text(text: str, *, name: str = "<string>") -> Spec:
    """Load a spec from YAML text (for tests and tools); errors name ``name`` as the file."""
    src = load_yaml(Path(name), text=text, error=SpecError)
    spec, _ = spec_from_source(src)
    return spec


def lint_spec(path: str | Path) -> list[LintFinding]:
    """All lint findings of a spec file, errors included (never raises for lint errors; still
    raises :class:`SpecError` for YAML, type and condition errors)."""
    return lint_and_load_spec(path).findings


class LintedSpec(NamedTuple):
    """What :func:`lint_and_load_spec` read: the findings, the spec when none is an error (as
    :func:`load_spec` returns it), and the YAML with its positions."""

    findings: list[LintFinding]
    spec: Spec | None
    source: YamlSource


def lint_and_load_spec(path: str | Path) -> LintedSpec:
    """:func:`lint_spec`'s findings and, when none is an error, the spec :func:`load_spec`
    would return, from one reading of the file (a large spec is composed once)."""
    file = resolve_spec_path(path)
    src = load_yaml(file, error=SpecError)
    if not isinstance(src.data, dict):
        spec_from_source(src)  # raises the right error
    try:
        spec = Spec.model_validate(src.data)
    except ValidationError as exc:
        err = _validation_error(exc, src)
        first = exc.errors(include_url=False)[0]
        if first["type"] == "missing" and "looks like a typo" in err.problem:
            # lint reports what it can: the typo, and the key it leaves missing
            key = str(first["loc"][-1])
            typo = _typo_of(src, tuple(first["loc"][:-1]), key)
            loc = err.location or SourceLocation(src.path)
            typo_findings = [
                LintFinding(
                    code="L007",
                    severity="warning",
                    message=f"unknown key {typo!r}; did you mean {key!r}?",
                    file=str(loc.path) if loc.path else None,
                    line=loc.line,
                    column=loc.column,
                    fix=f"rename {typo!r} to {key!r}",
                ),
                LintFinding(
                    code="L000",
                    severity="error",
                    message=f"missing required key {key!r}",
                    file=str(loc.path) if loc.path else None,
                    line=loc.line,
                    column=loc.column,
                    fix=f"rename {typo!r} to {key!r}",
                ),
            ]
            return LintedSpec(typo_findings, None, src)
        raise err from None
    spec._source_path = src.path
    _check_not_empty(spec, src)
    _check_schemas(spec, src)
    _check_conditions(spec, src)
    findings = lint(spec, src)
    if any(f.severity == "error" for f in findings):
        return LintedSpec(findings, None, src)
    spec._lint = findings
    return LintedSpec(findings, spec, src)
