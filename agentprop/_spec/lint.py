"""Spec linting: inconsistencies found while a spec loads.

Errors make the spec unusable (``load_spec`` raises :class:`~agentprop.errors.SpecError`);
warnings are real inconsistencies of the kind the published specs contain (``END_*`` nodes that
are routed to but never defined, a v2 spec without ``base_version``): the spec still loads and
``agentprop lint SPEC`` lists them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Hashable, Iterable, Iterator
from typing import Any, Literal

from pydantic import BaseModel

from agentprop._spec.implied import implied_decision
from agentprop._spec.model import Spec
from agentprop._spec.when import Compare, Symbol, atoms, variables
from agentprop._spec.when import Literal as WhenLiteral
from agentprop._spec.when import Path as WhenPath
from agentprop._util.yaml_source import YamlSource
from agentprop.errors import SourceLocation

Severity = Literal["error", "warning", "info"]


class LintFinding(BaseModel):
    """One finding: a stable code, a severity, what is wrong, where, and how to fix it."""

    code: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    fix: str | None = None

    def render(self) -> str:
        where = self.file or "<spec>"
        if self.line is not None:
            where += f":{self.line}:{self.column or 1}"
        text = f"{where}: {self.severity} {self.code}: {self.message}"
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class _Linter:
    def __init__(self, spec: Spec, src: YamlSource | None) -> None:
        self.spec = spec
        self.src = src
        self.findings: list[LintFinding] = []

    def add(
        self,
        code: str,
        severity: Severity,
        message: str,
        loc: tuple[Hashable, ...] = (),
        fix: str | None = None,
        *,
        key: bool = False,
    ) -> None:
        location = self.src.location(loc, key=key) if self.src is not None else SourceLocation(None)
        self.findings.append(
            LintFinding(
                code=code,
                severity=severity,
                message=message,
                file=str(location.path) if location.path else None,
                line=location.line,
                column=location.column,
                fix=fix,
            )
        )

    def node_index(self, node_id: str) -> int:
        return next(i for i, n in enumerate(self.spec.decision_tree) if n.node_id == node_id)

    def run(self) -> list[LintFinding]:
        self.yaml_duplicates()
        self.unknown_keys()
        self.duplicate_tools_and_nodes()
        self.undefined_targets()
        self.tool_references()
        self.decisions()
        self.reachability()
        self.branch_order()
        self.base_version()
        self.respond_tool()
        self.anchors()
        self.unchecked_requirements()
        self.call_limit()
        self.retries_twice()
        self.unrouted_failures()
        self.sourceless_variables()
        self.policy_references()
        self.optional_fields()
        self.rubrics()
        self.grounding_kinds()
        return self.findings

    def yaml_duplicates(self) -> None:
        if self.src is None:
            return
        for loc, (line, col) in self.src.duplicate_keys:
            self.findings.append(
                LintFinding(
                    code="L011",
                    severity="warning",
                    message=f"key {loc[-1]!r} appears twice in the same mapping; "
                    "the later value wins",
                    file=str(self.src.path) if self.src.path else None,
                    line=line,
                    column=col,
                    fix="remove or rename one of the two keys",
                )
            )

    def _typo(self, key: str, known: set[str], loc: tuple[Hashable, ...], where: str) -> None:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        if close:
            self.add(
                "L007",
                "warning",
                f"unknown key {key!r} in {where}; did you mean {close[0]!r}?",
                loc,
                f"rename {key!r} to {close[0]!r}",
                key=True,
            )

    def unknown_keys(self) -> None:
        """L007 for a near miss of a known key at any depth (requirement keys: see
        :meth:`unchecked_requirements`)."""
        self._unknown_keys_in(self.spec, (), "the spec")

    def _unknown_keys_in(self, model: BaseModel, loc: tuple[Hashable, ...], where: str) -> None:
        from agentprop._spec.model import Node, Policy, Requirements, Tool

        if isinstance(model, Requirements):
            return
        fields = type(model).model_fields
        known = {**dict.fromkeys(fields), **{f.alias: None for f in fields.values() if f.alias}}
        for key in model.model_extra or {}:
            self._typo(key, set(known), (*loc, key), where)
        for name in fields:
            value = getattr(model, name)
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for i, item in items:
                if not isinstance(item, BaseModel):
                    continue
                label = (
                    f"node {item.node_id}"
                    if isinstance(item, Node)
                    else f"tool {item.name}"
                    if isinstance(item, Tool)
                    else f"policy {item.id}"
                    if isinstance(item, Policy)
                    else ".".join(str(p) for p in (*loc, name))
                    + (f"[{i}]" if i is not None else "")
                )
                self._unknown_keys_in(item, (*loc, name) if i is None else (*loc, name, i), label)

    def duplicate_tools_and_nodes(self) -> None:
        for first, i, name in _repeats(t.name for t in self.spec.tools):
            self.add(
                "L004",
                "error",
                f"tool {name!r} is declared twice (tools[{first}] and tools[{i}])",
                ("tools", i, "name"),
                "keep one declaration of each tool; merge their schemas if both are needed",
            )
        for first, i, name in _repeats(n.node_id for n in self.spec.decision_tree):
            self.add(
                "L010",
                "error",
                f"node {name!r} is defined twice (decision_tree[{first}] and decision_tree[{i}])",
                ("decision_tree", i, "node_id"),
                "give every node a unique node_id",
            )

    def undefined_targets(self) -> None:
        defined = set(self.spec.nodes_by_id)
        for i, node in enumerate(self.spec.decision_tree):
            for j, branch in enumerate(node.branches):
                if branch.next in defined:
                    continue
                loc = ("decision_tree", i, "branches", j, "next")
                if branch.next.startswith("END_"):
                    self.add(
                        "L001",
                        "warning",
                        f"{node.node_id} routes to {branch.next}, which is not defined; it is "
                        "treated as an implicit terminal node",
                        loc,
                        f"add `- node_id: {branch.next}` with `branches: []` and a description",
                    )
                else:
                    close = difflib.get_close_matches(branch.next, sorted(defined), n=1)
                    hint = f"did you mean {close[0]!r}? " if close else ""
                    self.add(
                        "L001",
                        "error",
                        f"{node.node_id} routes to {branch.next!r}, which is "
                        "not a node of the tree",
                        loc,
                        f"{hint}define the node, or fix the `next:` value",
                    )

    def tool_references(self) -> None:
        tools = set(self.spec.tools_by_name)
        for i, node in enumerate(self.spec.decision_tree):
            req = node.requirements
            for key in ("must_call_tools_in_order", "may_call_tools"):
                for k, name in enumerate(getattr(req, key)):
                    if name not in tools:
                        close = difflib.get_close_matches(name, sorted(tools), n=1)
                        hint = f"did you mean {close[0]!r}? " if close else ""
                        self.add(
                            "L002",
                            "error",
                            f"{node.node_id}.requirements.{key} names tool {name!r}, which the "
                            "spec does not declare",
                            ("decision_tree", i, "requirements", key, k),
                            f"{hint}declare the tool under `tools:` or fix the name",
                        )

    def decisions(self) -> None:
        enum = self.spec.response_contract.decision_enum
        enum_set = set(enum)
        for i, node in enumerate(self.spec.decision_tree):
            req = node.requirements
            for fields, decision in req.missing_field_outcomes():
                if decision not in enum_set:
                    key = (
                        "on_missing_fields_decision"
                        if req.on_missing_fields_decision == decision
                        and fields == list(req.if_missing_fields)
                        else f"on_missing_{fields[0]}_decision"
                    )
                    self.add(
                        "L003",
                        "error",
                        f"{node.node_id} decides {decision!r} when {', '.join(fields)} is "
                        "missing, but decision_enum does not contain it",
                        ("decision_tree", i, "requirements", key),
                        f"add {decision} to response_contract.decision_enum, or "
                        "use one of its values",
                    )
        for leaf in self.spec.leaf_ids():
            implied, candidates = implied_decision(leaf, enum)
            loc = self._first_reference(leaf)
            if implied is None and not candidates:
                self.add(
                    "L003",
                    "warning",
                    f"terminal node {leaf} implies no decision of "
                    f"decision_enum ({', '.join(enum)})",
                    loc,
                    f"add the decision it stands for to response_contract.decision_enum, or map "
                    f"{leaf} to a decision under `outcomes:` in the bindings file",
                )
            elif implied is None:
                self.add(
                    "L012",
                    "info",
                    f"terminal node {leaf} may mean any of {', '.join(candidates)}; the "
                    "bindings file decides which",
                    loc,
                    f"map {leaf} under `outcomes:` in the bindings file (per incoming node if it "
                    "depends on the path)",
                )

    def _first_reference(self, node_id: str) -> tuple[Hashable, ...]:
        if node_id in self.spec.nodes_by_id:
            return ("decision_tree", self.node_index(node_id), "node_id")
        for i, node in enumerate(self.spec.decision_tree):
            for j, b in enumerate(node.branches):
                if b.next == node_id:
                    return ("decision_tree", i, "branches", j, "next")
        return ()

    def reachability(self) -> None:
        if not self.spec.decision_tree:
            return
        reached = {self.spec.root.node_id}
        frontier = [self.spec.root.node_id]
        while frontier:
            node = self.spec.nodes_by_id.get(frontier.pop())
            if node is None:
                continue
            for b in node.branches:
                if b.next not in reached:
                    reached.add(b.next)
                    frontier.append(b.next)
        for i, node in enumerate(self.spec.decision_tree):
            if node.node_id not in reached:
                self.add(
                    "L005",
                    "warning",
                    f"node {node.node_id} is never reached from the root {self.spec.root.node_id}",
                    ("decision_tree", i, "node_id"),
                    "route a branch to it, or remove it",
                )

    def branch_order(self) -> None:
        for i, node in enumerate(self.spec.decision_tree):
            for j, branch in enumerate(node.branches[:-1]):
                if branch.clause.is_otherwise:
                    self.add(
                        "L009",
                        "warning",
                        f"{node.node_id}: branches after `otherwise` (branch "
                        f"{j + 1}) can never match",
                        ("decision_tree", i, "branches", j + 1, "when"),
                        "move `otherwise` to the last branch of the node",
                    )
                    break

    def base_version(self) -> None:
        spec = self.spec
        if spec.base_version is None and spec.effective_base_version is not None:
            self.add(
                "L008",
                "warning",
                f"version {spec.version} declares no base_version; taken to evolve "
                f"{spec.effective_base_version}",
                ("version",),
                f"add `base_version: '{spec.effective_base_version}'`",
            )

    def respond_tool(self) -> None:
        respond = self.spec.tools_by_name.get("respond")
        contract = self.spec.response_contract
        if respond is None:
            self.add(
                "L006",
                "info",
                "the spec declares no `respond` tool; agentprop builds its schema "
                "from response_contract",
                ("tools",),
            )
            return
        idx = next(i for i, t in enumerate(self.spec.tools) if t.name == "respond")
        props = (respond.input_schema or {}).get("properties", {})
        for f in contract.required_json_fields:
            if f not in props:
                self.add(
                    "L006",
                    "warning",
                    f"response_contract requires {f!r} but the respond tool's input_schema "
                    "has no such property",
                    ("tools", idx, "input_schema", "properties"),
                    f"add `{f}` to the respond tool's input_schema.properties",
                )
        enum = (
            props.get("decision", {}).get("enum")
            if isinstance(props.get("decision"), dict)
            else None
        )
        if enum is not None and list(enum) != list(contract.decision_enum):
            only_tool = sorted(set(enum) - set(contract.decision_enum))
            only_contract = sorted(set(contract.decision_enum) - set(enum))
            if only_tool or only_contract:
                self.add(
                    "L013",
                    "warning",
                    "the respond tool's decision enum and response_contract.decision_enum differ"
                    + (f"; only in the tool: {', '.join(only_tool)}" if only_tool else "")
                    + (
                        f"; only in the contract: {', '.join(only_contract)}"
                        if only_contract
                        else ""
                    ),
                    ("tools", idx, "input_schema", "properties", "decision", "enum"),
                    "make the two lists equal",
                )

    def anchors(self) -> None:
        """L014: a node's list starts with tools its predecessor's list ends on; they are read
        as ordering anchors (one call), never silently as second calls."""
        from agentprop._spec.requirements import anchor_overlap

        for i, node in enumerate(self.spec.decision_tree):
            tools = node.requirements.must_call_tools_in_order
            if not tools:
                continue
            for before in self.spec.decision_tree:
                if before.node_id == node.node_id or not any(
                    b.next == node.node_id for b in before.branches
                ):
                    continue
                k = anchor_overlap(before.requirements.must_call_tools_in_order, tools)
                if k == 0:
                    continue
                shared = ", ".join(tools[:k])
                self.add(
                    "L014",
                    "info",
                    f"{node.node_id}.must_call_tools_in_order starts with {shared}, already "
                    f"required by {before.node_id}: read as an ordering anchor (one "
                    "call), not a second call",
                    ("decision_tree", i, "requirements", "must_call_tools_in_order", 0),
                    f"if {node.node_id} calls {shared} again, say so in the bindings: `nodes: "
                    f"{{{node.node_id}: {{repeat_calls: [{shared}]}}}}`",
                )

    def unchecked_requirements(self) -> None:
        """L015: a requirement key agentprop has no check for is named, never skipped silently."""
        from agentprop._spec.requirements import requirement_keys, unchecked_requirements

        for u in unchecked_requirements(self.spec):
            loc = ("decision_tree", u.node_index, "requirements", u.key)
            close = difflib.get_close_matches(
                u.key, requirement_keys(self.spec.decision_tree[u.node_index]), n=1, cutoff=0.8
            )
            if close:
                # a misspelt key would drop the node's requirement: an error, never a note
                self.add(
                    "L007",
                    "error",
                    f"unknown requirement key {u.key!r} in node {u.node}; did you mean "
                    f"{close[0]!r}? (as written, agentprop would not check this requirement)",
                    loc,
                    f"rename {u.key!r} to {close[0]!r}",
                    key=True,
                )
                continue
            self.add(
                "L015",
                "warning",
                f"{u.clause} is not checked by agentprop (no case verdict reads it)",
                loc,
                "check it with a property of your own (agentprop.check(..., prop=...)); a prose "
                "rule that the agent's prompt carries needs no key under requirements:",
                key=True,
            )

    def call_limit(self) -> None:
        """L016: a loop-free path whose nodes require more calls (anchors read as one call, a new
        turn at each ``after X`` clause) than ``max_tool_calls_per_turn`` allows in one turn."""
        from agentprop._spec.paths import enumerate_paths
        from agentprop._spec.requirements import anchor_overlap

        limit = self.spec.max_tool_calls_per_turn
        if limit is None or not self.spec.decision_tree:
            return
        seen: set[tuple[str, ...]] = set()
        for path in enumerate_paths(self.spec):
            if path.missing is not None:
                continue
            turn: list[str] = []
            previous: list[str] = []
            worst: list[str] = []
            for node_id in path.nodes:
                node = self.spec.nodes_by_id.get(node_id)
                if node is None:
                    continue
                step = next((st for st in path.steps if st.node == node_id), None)
                tools = list(node.requirements.must_call_tools_in_order)
                turn += tools[anchor_overlap(previous, tools) :]
                previous = tools or previous
                if len(turn) > len(worst):
                    worst = list(turn)
                if step is not None and step.clause.after is not None:
                    turn = []
            if len(worst) <= limit or tuple(worst) in seen:
                continue
            seen.add(tuple(worst))
            last = path.steps[-1].node if path.steps else path.leaf
            self.add(
                "L016",
                "warning",
                f"path {path.id} ({' -> '.join(path.nodes)}) requires {len(worst)} tool calls in "
                f"one turn ({', '.join(worst)}) but max_tool_calls_per_turn is {limit}: "
                "no case can reach it",
                ("decision_tree", self.node_index(last), "node_id")
                if last in self.spec.nodes_by_id
                else ("defaults",),
                "raise defaults.limits.max_tool_calls_per_turn, or split the work over turns in "
                "the tree (an `after DECISION` clause ends a turn)",
            )

    def retries_twice(self) -> None:
        """L017: a retry node of the tree and the tool's ``retry_policy`` describe the same retry;
        agentprop reads them as one (see :mod:`agentprop._spec.retries`)."""
        from agentprop._spec.retries import spec_retries

        for r in spec_retries(self.spec):
            if not r.policy_too(self.spec):
                continue
            policy = self.spec.tools_by_name[r.tool].retry_policy
            assert policy is not None
            self.add(
                "L017",
                "info",
                f"the retry of {r.tool} after {r.mode} is described twice: by {r.node}'s branch "
                f"`{r.when}` (to {r.target}) and by {r.tool}'s retry_policy (retries "
                f"{policy.retries} on {r.mode}); read as one retry: a case where {r.tool} fails "
                f"once expects it twice, and {r.target}'s retry limit counts that one retry",
                ("decision_tree", self.node_index(r.node), "branches", r.branch, "when"),
                f"describe the retry once: drop {r.mode} from {r.tool}'s "
                "retry_policy.on, or the retry node",
            )

    def unrouted_failures(self) -> None:
        """L018: see :func:`unrouted_failures`."""
        index = {t.name: i for i, t in enumerate(self.spec.tools)}
        for tool, unrouted in unrouted_failures(self.spec).items():
            self.add(
                "L018",
                "warning",
                f"tool {tool} declares failure mode(s) {', '.join(unrouted)}, which its "
                "retry_policy does not retry, and no branch of the decision tree reads a "
                "failure: where a case injects one, no path says what the agent decides",
                ("tools", index[tool], "failure_modes"),
                f"add a branch on the failure to a node that requires {tool} (e.g. `when: "
                f"{tool}_status == failed`), or retry the mode in its retry_policy",
            )

    def sourceless_variables(self) -> None:
        """L019: a condition variable nothing can give a value: a dotted one
        (``order.days_since_created``) whose field is no property of any tool's output or input
        schema; an undotted one (``loyalty_tier == gold``) compared only with one word, when no
        schema property is named by it or by one of its words (``status`` of ``service_status``),
        no schema ``enum`` holds the word, and the tree reads no other value of it (a variable
        read with several words, like ``intent``, is taken from the conversation). Variables
        compared with a number or a boolean are counts and outcomes the run derives: not flagged."""
        props: set[str] = set()
        enums: set[str] = set()

        def collect(schema: Any) -> None:
            if isinstance(schema, dict):
                enums.update(str(v) for v in schema.get("enum") or [] if isinstance(v, str))
                for k, v in (schema.get("properties") or {}).items():
                    props.add(str(k))
                    collect(v)
                collect(schema.get("items"))

        for tool in self.spec.tools:
            collect(tool.output_schema)
            collect(tool.input_schema)
        words_of: dict[str, set[str]] = {}
        for node in self.spec.decision_tree:
            for b in node.branches:
                for atom in atoms(b.clause):
                    if not isinstance(atom, Compare) or atom.op not in ("==", "!="):
                        continue
                    for var, other in ((atom.left, atom.right), (atom.right, atom.left)):
                        if isinstance(var, WhenPath) and len(var.parts) == 1:
                            value = (
                                other.name
                                if isinstance(other, Symbol)
                                else other.value
                                if isinstance(other, WhenLiteral)
                                else None
                            )
                            words_of.setdefault(var.dotted, set()).add(
                                value if isinstance(value, str) else ""
                            )
        reported: set[str] = set()
        for i, node in enumerate(self.spec.decision_tree):
            for j, b in enumerate(node.branches):
                for name in variables(b.clause):
                    if name in reported:
                        continue
                    if "." in name:
                        field = name.rsplit(".", 1)[1]
                        if field in props:
                            continue
                        message = (
                            f"variable {name} has no possible source: no tool's output (or input) "
                            f"schema has a field {field!r}"
                        )
                        fix = (
                            f"add {field!r} to the output_schema of the tool that returns it, or "
                            "fix the variable's name"
                        )
                    else:
                        words = words_of.get(name, set())
                        if len(words) != 1 or "" in words:
                            continue
                        [word] = words
                        named = {name, *name.split("_")}
                        if named & props or word in enums:
                            continue
                        message = (
                            f"variable {name} has no possible source: no tool's output (or input) "
                            f"schema has a field {' or '.join(repr(n) for n in sorted(named))}, "
                            f"no schema's enum holds {word!r}, and the tree reads no other value "
                            "of it (as it does of what a user says)"
                        )
                        fix = (
                            f"add the field to the output_schema of the tool that returns {name} "
                            f"(with {word!r} in its enum), or drop the branch"
                        )
                    reported.add(name)
                    self.add(
                        "L019", "warning", message, ("decision_tree", i, "branches", j, "when"), fix
                    )

    def policy_references(self) -> None:
        """L020: a policy names a tool no node requires or permits, or a decision no node or
        terminal node decides."""
        used_tools = {
            t
            for n in self.spec.decision_tree
            for t in (*n.requirements.must_call_tools_in_order, *n.requirements.may_call_tools)
        }
        enum = self.spec.response_contract.decision_enum
        decided = {
            d for n in self.spec.decision_tree for _, d in n.requirements.missing_field_outcomes()
        }
        for leaf in self.spec.leaf_ids():
            implied, candidates = implied_decision(leaf, enum)
            decided |= {implied} if implied else set(candidates)
        for i, policy in enumerate(self.spec.policies):
            tools = [
                t.name
                for t in self.spec.action_tools
                if re.search(rf"\b{re.escape(t.name)}\b", policy.text)
            ]
            decisions = [d for d in enum if re.search(rf"\b{re.escape(d)}\b", policy.text)]
            unused = [t for t in tools if t not in used_tools] + [
                d for d in decisions if d not in decided
            ]
            if not unused:
                continue
            self.add(
                "L020",
                "warning",
                f"policy {policy.id} names {', '.join(unused)}, which the decision tree never "
                "uses: no case can exercise it there",
                ("policies", i, "text"),
                "require the tool (must_call_tools_in_order / may_call_tools) or route to the "
                "decision on a node, or map a terminal node to the decision under "
                "`outcomes:` in the bindings",
            )

    def optional_fields(self) -> None:
        """L021: optional response fields the ``respond`` tool's schema does not have."""
        missing = missing_optional_fields(self.spec)
        if missing:
            idx = next(i for i, t in enumerate(self.spec.tools) if t.name == "respond")
            self.add(
                "L021",
                "info",
                f"response_contract lists optional field(s) {', '.join(missing)} that the respond "
                "tool's input_schema does not have: an agent that follows the schema never sends "
                "them, so no case checks them",
                ("tools", idx, "input_schema", "properties"),
                "add them to the respond tool's input_schema.properties, or drop them from "
                "optional_json_fields",
            )

    def rubrics(self) -> None:
        """A ``test_guidance.rubric`` is judged by a model (docs/judges.md): a string, or a mapping
        with a ``text`` string and an optional ``criteria`` list of strings."""
        owners: list[tuple[tuple[Hashable, ...], dict[str, Any] | None]] = [
            (("policies", i), p.test_guidance) for i, p in enumerate(self.spec.policies)
        ] + [(("decision_tree", i), n.test_guidance) for i, n in enumerate(self.spec.decision_tree)]
        for loc, guidance in owners:
            if not isinstance(guidance, dict) or "rubric" not in guidance:
                continue
            rubric = guidance["rubric"]
            criteria = rubric.get("criteria", []) if isinstance(rubric, dict) else []
            if isinstance(rubric, str) or (
                isinstance(rubric, dict)
                and isinstance(rubric.get("text"), str)
                and isinstance(criteria, list)
                and all(isinstance(c, str) for c in criteria)
            ):
                continue
            self.add(
                "L022",
                "error",
                f"test_guidance.rubric is a {type(rubric).__name__}; a judge cannot read it",
                (*loc, "test_guidance", "rubric"),
                fix="write the rubric as a string, or as a mapping with `text:` (a string) and "
                "`criteria:` (a list of strings)",
            )

    def grounding_kinds(self) -> None:
        """L023: the grounding policy promises only some kinds of what a reply states; the
        others are cited under ``response_contract.<field>`` (a notice: the spec is not wrong,
        its author may not expect it)."""
        from agentprop._spec.grounding import TEXT_GROUNDINGS, default_grounding
        from agentprop._spec.grounding_clause import grounding_scope, kind_clauses, named_kinds

        scope = grounding_scope(self.spec)
        if scope.clause is None:
            return
        kept: list[str] = []
        moved: list[str] = []
        for field, kinds in default_grounding(self.spec).items():
            text = [k for k in kinds if k in TEXT_GROUNDINGS]
            for clause, cited in kind_clauses(self.spec, field, text):
                (kept if clause == scope.clause else moved).append(named_kinds(field, cited))
        if not moved:
            return
        policy = scope.clause.removeprefix("policies.")
        index = next(i for i, p in enumerate(self.spec.policies) if p.id == policy)
        self.add(
            "L023",
            "info",
            f"policy {policy} speaks of {', '.join(scope.words)}: an ungrounded statement is "
            f"cited under it only for {'; '.join(kept) or 'nothing'}; "
            f"{'; '.join(moved)} are checked by default and cited under "
            "response_contract.<field>",
            ("policies", index, "text"),
            f'to cite {policy} for them too, name them in its text ("... and ids must be '
            'grounded in tool output"); to check a field differently, set `response:` in the '
            "bindings",
        )


def _repeats(names: Iterable[str]) -> Iterator[tuple[int, int, str]]:
    """``(first, i, name)`` for each item whose name an earlier item has (``first``: its index)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            yield seen[name], i, name
        seen.setdefault(name, i)


def unrouted_failures(spec: Spec) -> dict[str, list[str]]:
    """Per tool a node requires, its failure modes that its ``retry_policy`` does not retry and
    no condition of the tree reads: no word of any ``when`` contains a word of the mode
    (``found`` of ``not_found``) or ``error`` (``status == failed`` reads the tool's answer, not
    its failure). Where a case injects one, no path says what the agent decides."""
    words = {
        w.lower()
        for node in spec.decision_tree
        for b in node.branches
        for w in re.findall(r"[A-Za-z]+", b.when)
    }
    required = {t for n in spec.decision_tree for t in n.requirements.must_call_tools_in_order}
    out: dict[str, list[str]] = {}
    for tool in spec.tools:
        if tool.name not in required:
            continue
        retried = (
            set(tool.retry_policy.on)
            if tool.retry_policy is not None and tool.retry_policy.retries > 0
            else set()
        )
        unrouted = []
        for mode in tool.failure_modes:
            if mode in retried:
                continue
            marks = {p for p in mode.lower().split("_") if len(p) > 3} | {"error"}
            if not any(m in w for w in words for m in marks):
                unrouted.append(mode)
        if unrouted:
            out[tool.name] = unrouted
    return out


def missing_optional_fields(spec: Spec) -> list[str]:
    """The response contract's optional fields that the ``respond`` tool's input schema does not
    have (none when the spec has no ``respond`` tool)."""
    respond = spec.tools_by_name.get("respond")
    if respond is None:
        return []
    props = (respond.input_schema or {}).get("properties", {})
    return [f for f in spec.response_contract.optional_json_fields if f not in props]


def lint(spec: Spec, src: YamlSource | None = None) -> list[LintFinding]:
    """Lint a loaded spec. ``src`` (the YAML with positions) makes findings point at lines."""
    return _Linter(spec, src).run()
