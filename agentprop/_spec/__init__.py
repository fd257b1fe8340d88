"""Specs: models, ``when`` expressions, loading and linting."""

from agentprop._spec.implied import condition_variables, implied_decision
from agentprop._spec.lint import LintFinding, lint
from agentprop._spec.load import lint_spec, load_spec, load_spec_text, resolve_spec_path
from agentprop._spec.model import Branch, Node, Policy, ResponseContract, Spec, Tool
from agentprop._spec.when import WhenClause, evaluate, parse_when, variables

__all__ = [
    "Branch",
    "LintFinding",
    "Node",
    "Policy",
    "ResponseContract",
    "Spec",
    "Tool",
    "WhenClause",
    "condition_variables",
    "evaluate",
    "implied_decision",
    "lint",
    "lint_spec",
    "load_spec",
    "load_spec_text",
    "parse_when",
    "resolve_spec_path",
    "variables",
]
