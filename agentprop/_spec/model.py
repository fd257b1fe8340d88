"""Pydantic models of the TDAD / SpecSuite-Core spec format.

The models accept every key the published specs use and keep unknown keys (``extra="allow"``)
so a newer spec still loads; the linter reports unknown keys that look like typos. Branch
conditions are parsed into :mod:`agentprop._spec.when` clauses at load time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from agentprop._spec.when import WhenClause, parse_when

V = TypeVar("V")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ToolRetryPolicy(_Open):
    """A spec tool's ``retry_policy`` (how often the agent may retry it, on which errors); not
    the HTTP retry policy of model calls (:class:`agentprop._modelapi.retry.RetryPolicy`)."""

    retries: int = 0
    on: list[str] = Field(default_factory=list)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _printable_name(value: Any) -> Any:
    """Names (spec id, tool names, node ids) are printed, used in file and type names: a
    control character (NUL, an escape sequence) in one is refused where it is written."""
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found:
            raise ValueError(
                f"holds the control character U+{ord(found.group()):04X} at position "
                f"{found.start()}, which no name may hold (a NUL, or a terminal escape sequence); "
                "use letters, digits, '_', '-' and '.'"
            )
    return value


class Tool(_Open):
    name: str

    _printable = field_validator("name", mode="before")(_printable_name)
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    output_schema: dict[str, Any] | None = None
    failure_modes: list[str] = Field(default_factory=list)
    retry_policy: ToolRetryPolicy | None = None


class Enforcement(_Open):
    type: str = "hard"


class Policy(_Open):
    id: str
    priority: int | None = None
    text: str
    enforcement: Enforcement = Field(default_factory=Enforcement)
    test_guidance: dict[str, Any] | None = None


class ResponseContract(_Open):
    required_json_fields: list[str]
    optional_json_fields: list[str] = Field(default_factory=list)
    decision_enum: list[str]
    field_semantics: dict[str, Any] | None = None


class Reliability(_Open):
    reruns: int = 10
    min_pass_rate: float = Field(0.9, ge=0.0, le=1.0)


class Limits(_Open):
    max_tool_calls_per_turn: int | None = Field(None, ge=1)


class Defaults(_Open):
    reliability: Reliability = Field(default_factory=Reliability)
    compile_budget: dict[str, Any] | None = None
    limits: Limits = Field(default_factory=Limits)


class Requirements(_Open):
    must_call_tools_in_order: list[str] = Field(default_factory=list)
    may_call_tools: list[str] = Field(default_factory=list)
    must_not_use: list[str] = Field(default_factory=list)
    if_missing_fields: list[str] = Field(default_factory=list)
    on_missing_fields_decision: str | None = None
    must_have: list[str] = Field(default_factory=list)

    def missing_field_outcomes(self) -> list[tuple[list[str], str]]:
        """``(fields, decision)`` pairs: what the node decides when fields are missing.

        Covers ``if_missing_fields`` + ``on_missing_fields_decision`` and ``must_have: [x]`` +
        ``on_missing_x_decision``.
        """
        out: list[tuple[list[str], str]] = []
        if self.if_missing_fields and self.on_missing_fields_decision:
            out.append((list(self.if_missing_fields), self.on_missing_fields_decision))
        extras = self.model_extra or {}
        for name in self.must_have:
            decision = extras.get(f"on_missing_{name}_decision")
            if isinstance(decision, str):
                out.append(([name], decision))
        return out


class Branch(_Open):
    when: str
    next: str
    description: str | None = None
    _clause: WhenClause | None = PrivateAttr(default=None)

    @property
    def clause(self) -> WhenClause:
        if self._clause is None:
            self._clause = parse_when(self.when)
        return self._clause


class Node(_Open):
    node_id: str

    _printable = field_validator("node_id", mode="before")(_printable_name)
    description: str = ""
    trigger: str | None = None
    requirements: Requirements = Field(default_factory=Requirements)
    branches: list[Branch] = Field(default_factory=list)
    test_guidance: dict[str, Any] | None = None

    @field_validator("requirements", mode="before")
    @classmethod
    def _none_requirements(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("branches", mode="before")
    @classmethod
    def _none_branches(cls, v: Any) -> Any:
        return [] if v is None else v

    @property
    def is_terminal(self) -> bool:
        return not self.branches


class Spec(_Open):
    """A behavioural spec. Load one with :func:`agentprop.spec.load_spec`."""

    spec_id: str
    suite: str | None = None
    title: str = ""
    risk_level: Literal["low", "medium", "high", "critical"] = "medium"
    version: str = "1.0"
    base_version: str | None = None
    assumptions: list[str] = Field(default_factory=list)
    defaults: Defaults = Field(default_factory=Defaults)
    tools: list[Tool]
    policies: list[Policy] = Field(default_factory=list)
    response_contract: ResponseContract
    decision_tree: list[Node]
    tests: dict[str, Any] | None = None

    _source_path: Path | None = PrivateAttr(default=None)
    _lint: list[Any] = PrivateAttr(default_factory=list)
    _memo: dict[str, Any] = PrivateAttr(default_factory=dict)
    """Derived objects computed once per spec (the response model, path tables)."""

    @field_validator("version", "base_version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    _printable = field_validator("spec_id", mode="before")(_printable_name)

    # ------------------------------------------------------------------ navigation

    @property
    def source_path(self) -> Path | None:
        """The file the spec was loaded from (``None`` for a spec built in code)."""
        return self._source_path

    @property
    def lint_findings(self) -> list[Any]:
        """Lint findings recorded at load time (see :func:`agentprop.spec.lint_spec`)."""
        return list(self._lint)

    @cached_property
    def tools_by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}

    @cached_property
    def nodes_by_id(self) -> dict[str, Node]:
        return {n.node_id: n for n in self.decision_tree}

    @property
    def action_tools(self) -> list[Tool]:
        """The tools an agent calls for work: every tool except ``respond``."""
        return [t for t in self.tools if t.name != "respond"]

    def tool(self, name: str) -> Tool:
        try:
            return self.tools_by_name[name]
        except KeyError:
            known = ", ".join(sorted(self.tools_by_name))
            raise KeyError(
                f"spec {self.spec_id!r} declares no tool {name!r}; its tools are: {known}"
            ) from None

    @property
    def root(self) -> Node:
        return self.decision_tree[0]

    @property
    def declared_base_version(self) -> str | None:
        return self.base_version

    @property
    def effective_base_version(self) -> str | None:
        """The version this spec evolves: ``base_version`` if declared, otherwise inferred for
        a spec whose major version is above 1 (``2.0`` evolves ``1.0``)."""
        if self.base_version:
            return self.base_version
        m = re.match(r"^(\d+)", self.version)
        if m and int(m.group(1)) > 1:
            return f"{int(m.group(1)) - 1}.0"
        return None

    def targets(self) -> set[str]:
        return {b.next for n in self.decision_tree for b in n.branches}

    def leaf_ids(self) -> list[str]:
        """Terminal nodes: defined nodes without branches plus referenced-but-undefined
        ``next`` targets (the specs use ``END_*`` names without defining them)."""
        # once per spec: a scenario asks for it, and a spec of thousands of
        # nodes made that quadratic
        return list(derived(self, "leaf_ids", self._leaf_ids))

    def _leaf_ids(self) -> tuple[str, ...]:
        out = {n.node_id: None for n in self.decision_tree if n.is_terminal}
        for n in self.decision_tree:
            for b in n.branches:
                if b.next not in self.nodes_by_id:
                    out.setdefault(b.next)
        return tuple(out)

    @property
    def max_tool_calls_per_turn(self) -> int | None:
        return self.defaults.limits.max_tool_calls_per_turn


def leaf_set(spec: Spec) -> frozenset[str]:
    """:meth:`Spec.leaf_ids` as a set, built once per spec."""
    return derived(spec, "leaf_set", lambda: frozenset(spec.leaf_ids()))


def derived(spec: Spec, key: str, build: Callable[[], V]) -> V:
    """What ``build()`` makes of ``spec``, made once per spec object and kept in its memo under
    ``key`` (a spec is not edited after loading)."""
    memo = spec_memo(spec)
    if key not in memo:
        memo[key] = build()
    found: V = memo[key]
    return found


def spec_memo(spec: Spec) -> dict[str, Any]:
    """``spec._memo`` (the spec's store of derived objects), read straight from pydantic's
    private-attribute storage when it is there: the attribute lookup itself goes through
    ``BaseModel.__getattr__`` and costs microseconds per run."""
    private = getattr(spec, "__pydantic_private__", None)
    if type(private) is dict:
        memo = private.get("_memo")
        if type(memo) is dict:
            return memo
    return spec._memo
