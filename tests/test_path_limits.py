"""Issue #27 items 4 and 11: path enumeration is lazy and bounded, says which limit it hit and
how to raise it, and a tree thousands of nodes deep is no deeper for Python."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentprop._cli import main
from agentprop._scenario.solver import _first_assignment
from agentprop._spec.load import load_spec
from agentprop._spec.paths import count_paths, enumerate_paths, iter_paths
from agentprop.errors import PathLimitExceeded
from benchmarks._robustness.attack_a import tree_spec


def write(tmp_path: Path, shape: str, n: int) -> Path:
    spec, bindings = tree_spec(shape, n)
    (tmp_path / "spec.yaml").write_text(spec)
    (tmp_path / "agentprop.yaml").write_text(bindings)
    return tmp_path


def test_a_ladder_is_counted_lazily_and_refused_past_the_limit_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the path count is the limit hit here
    monkeypatch.setenv("AGENTPROP_MAX_PATH_CONDITIONS", "1000000")
    spec = load_spec(write(tmp_path, "ladder", 12) / "spec.yaml")
    assert count_paths(spec, limit=10_000) == (4096, True)
    assert count_paths(spec, limit=100) == (100, False)
    with pytest.raises(PathLimitExceeded) as info:
        enumerate_paths(spec)
    text = str(info.value)
    assert (
        "more than 2,000 loop-free paths (agentprop's limit, MAX_PATHS)" in text
        and "AGENTPROP_MAX_PATHS=10000" in text
    )
    monkeypatch.setenv("AGENTPROP_MAX_PATHS", "5000")
    assert len(enumerate_paths(spec)) == 4096


def test_a_router_with_a_thousand_branches_is_refused_on_its_conditions(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "router", 1000) / "spec.yaml")
    with pytest.raises(
        PathLimitExceeded, match=r"more than 20,000 branch conditions .*MAX_PATH_CONDITIONS"
    ):
        enumerate_paths(spec)


def test_a_chain_thousands_of_nodes_deep_raises_no_recursion_error(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "chain", 1500) / "spec.yaml")
    longest = max(iter_paths(spec), key=lambda p: len(p.steps))
    assert len(longest.steps) == 1500
    # the solver's search is as deep as the number of variables a path reads
    slots = [f"v{i}" for i in range(3000)]
    found = _first_assignment(slots, [[1, 2]] * 3000, [], {}, lambda env: env["v2999"] == 2)
    assert found is not None and found["v0"] == 1 and found["v2999"] == 2


def test_lint_reports_the_number_of_paths_and_the_limit_without_listing_them(
    tmp_path: Path,
) -> None:
    folder = write(tmp_path, "ladder", 13)
    out, err = io.StringIO(), io.StringIO()
    code = main(["lint", str(folder)], out=out, err=err)
    text = out.getvalue()
    assert code == 1, text + err.getvalue()
    assert (
        "error P004: the decision tree has 8,192 loop-free paths" in text
        and "AGENTPROP_MAX_PATH" in text
    )
    assert text.count("N12") < 5  # the paths are counted, not listed


# ------------------------------------------------------ lint's work grows with the tree, not faster
# Counted, not timed: a 990-node chain took 44-100 s to lint (the YAML composed three times; the
# bindings scanned the whole tree once per variable), a 150-branch router about 48 s (each path's
# "not any branch before" checked one candidate at a time: cubic in the branches).


def _lint(folder: Path) -> int:
    return main(["lint", str(folder)], out=io.StringIO(), err=io.StringIO())


def test_lint_composes_each_yaml_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentprop._util import yaml_source

    composed: list[str] = []
    original = yaml_source._BoundedLoader.compose_document

    def counting(self: yaml_source._BoundedLoader) -> object:
        composed.append(self.name)
        return original(self)

    monkeypatch.setattr(yaml_source._BoundedLoader, "compose_document", counting)
    _lint(write(tmp_path, "chain", 30))
    assert len(composed) == 2, composed  # the spec and the bindings, once each


def test_the_bindings_read_the_tree_once_not_once_per_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentprop._agents.project import load_project
    from agentprop._spec import bindings

    walked: list[object] = []
    original = bindings.atoms

    def counting(node: object) -> object:
        walked.append(node)
        return original(node)  # type: ignore[arg-type]

    monkeypatch.setattr(bindings, "atoms", counting)
    n = 80  # 80 variables, 160 branches: once per variable was 12,800 walks
    load_project(write(tmp_path, "chain", n))
    assert len(walked) <= 2 * n


@pytest.mark.parametrize("shape", ["router", "chain"])
def test_solving_every_path_of_a_tree_is_at_most_quadratic_in_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    from agentprop._agents.project import load_project
    from agentprop._scenario import solver

    def checks(n: int) -> int:
        count = [0]
        original = solver._count_check

        def counting() -> None:
            count[0] += 1
            original()

        monkeypatch.setattr(solver, "_count_check", counting)
        project = load_project(write(tmp_path / f"{shape}{n}", shape, n))
        project.problems  # noqa: B018 - solves every path
        monkeypatch.setattr(solver, "_count_check", original)
        return count[0]

    (tmp_path / f"{shape}40").mkdir()
    (tmp_path / f"{shape}80").mkdir()
    small, large = checks(40), checks(80)
    # twice the branches: at most four times the checks (cubic was eight)
    assert large <= 4.5 * small, (small, large)
    assert large <= 80 * 80, large
