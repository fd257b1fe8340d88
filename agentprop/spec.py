"""Specs: the TDAD / SpecSuite-Core decision tree, its bindings and what is derived from it.

:func:`load_spec` / :func:`lint_spec` read ``spec.yaml``; :func:`load_bindings` reads
``agentprop.yaml`` against it; :func:`load_project` reads both. ``when`` clauses are parsed by
:func:`parse_when` and evaluated by :func:`evaluate`; :func:`enumerate_paths` lists the tree's
paths. :func:`boundary_values` and :func:`directional_pairs` list the cases the strategies
:func:`agentprop.strategies.boundaries` and :func:`agentprop.strategies.directional` draw from;
:func:`choose_branch` and :func:`walk` say which branch an assignment takes.
"""

from agentprop._agents.project import Project, load_project
from agentprop._spec.bindings import Bindings, load_bindings
from agentprop._spec.lint import LintFinding
from agentprop._spec.load import lint_spec, load_spec
from agentprop._spec.model import Spec
from agentprop._spec.paths import TreePath, enumerate_loop_paths, enumerate_paths
from agentprop._spec.response import response_model
from agentprop._spec.when import WhenClause, evaluate, parse_when
from agentprop.strategies._internal.boundary import (
    BoundaryCase,
    BoundaryCases,
    Comparison,
    MovedValue,
    boundary_values,
)
from agentprop.strategies._internal.directional import (
    DirectionalPair,
    DirectionalPairs,
    DirectionalSide,
    directional_pairs,
)
from agentprop.strategies._internal.scenarios import BranchChoice, Route, choose_branch, walk

__all__ = [
    "Bindings",
    "BoundaryCase",
    "BoundaryCases",
    "BranchChoice",
    "Comparison",
    "DirectionalPair",
    "DirectionalPairs",
    "DirectionalSide",
    "LintFinding",
    "MovedValue",
    "Project",
    "Route",
    "Spec",
    "TreePath",
    "WhenClause",
    "boundary_values",
    "choose_branch",
    "directional_pairs",
    "enumerate_loop_paths",
    "enumerate_paths",
    "evaluate",
    "lint_spec",
    "load_bindings",
    "load_project",
    "load_spec",
    "parse_when",
    "response_model",
    "walk",
]
