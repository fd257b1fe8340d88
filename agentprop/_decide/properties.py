"""Properties over traces of scenarios: the public face of compiled cases.

:func:`mft_verdicts` is the minimum functionality test of a scenario (CheckList's MFT) and
:func:`probe_verdicts` what a PROBE case checks; both compile the scenario into a
:class:`~agentprop._decide.case.Case` (:mod:`agentprop._decide.case` says what each checks) and
judge one trace with it. Code that judges many runs of one scenario compiles it once
(:func:`~agentprop._decide.case.compile_mft`) and calls :meth:`Case.verdicts` per trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentprop._decide.case import compile_mft, compile_probe, expected_nodes, response_expectations, spec_text, spec_vocabulary
from agentprop._decide.contracts import Verdict
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._spec.grounding import ResponseGrounding
from agentprop._spec.model import Spec

__all__ = ["expected_nodes", "first_failure", "mft_verdicts", "probe_verdicts", "response_verdicts", "spec_text", "spec_vocabulary"]


def mft_verdicts(
    spec: Spec,
    scenario: Scenario,
    trace: Trace,
    *,
    grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None = None,
) -> list[Verdict]:
    """All MFT checks of one run; the run passes when every verdict passes.

    ``grounding`` says which checks apply to which response field (a project's is
    ``project.bindings.response_grounding(project.spec)``); ``None`` means the defaults derived
    from the spec (:func:`agentprop._spec.grounding.default_grounding`)."""
    return compile_mft(spec, scenario, grounding).verdicts(trace)


def probe_verdicts(spec: Spec, scenario: Scenario, trace: Trace) -> list[Verdict]:
    """What a PROBE case checks (:func:`agentprop._decide.case.compile_probe`) on one run."""
    return compile_probe(spec, scenario).verdicts(trace)


def response_verdicts(
    spec: Spec,
    scenario: Scenario,
    trace: Trace,
    grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None = None,
) -> list[Verdict]:
    """The checks of what each response field states (:func:`agentprop._decide.case.response_expectations`)."""
    return [v for e in response_expectations(spec, scenario, grounding) for v in e.verdicts(trace)]


def first_failure(verdicts: list[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if not v.passed), None)
