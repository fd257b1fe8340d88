"""Properties over traces of scenarios: the public face of compiled cases.

:func:`mft_verdicts` is the minimum functionality test of a scenario (CheckList's MFT) and
:func:`probe_verdicts` what a PROBE case checks; both compile the scenario into a
:class:`~agentprop._judge.case.Case` (:mod:`agentprop._judge.case` says what each checks) and
judge one trace with it. Code that judges many runs of one scenario compiles it once
(:func:`~agentprop._judge.case.compile_mft`) and calls :meth:`Case.verdicts` per trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agentprop._judge.case import (
    compile_mft,
    compile_probe,
    expected_nodes,
    response_expectations,
    spec_text,
    spec_vocabulary,
)
from agentprop._judge.verdict import Verdict
from agentprop._scenario.build import Scenario
from agentprop._scenario.trace import Trace
from agentprop._spec.grounding import ResponseGrounding
from agentprop._spec.model import Spec
from agentprop.errors import InvalidArgument

__all__ = [
    "Property",
    "PropertyResult",
    "expected_nodes",
    "first_failure",
    "verdicts_of",
    "mft_verdicts",
    "probe_verdicts",
    "response_verdicts",
    "spec_text",
    "spec_vocabulary",
]

PropertyResult = Verdict | bool | Sequence[Verdict]
"""What a property returns for one run."""
Property = Callable[[Trace], PropertyResult]


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
    """What a PROBE case checks (:func:`agentprop._judge.case.compile_probe`) on one run."""
    return compile_probe(spec, scenario).verdicts(trace)


def response_verdicts(
    spec: Spec,
    scenario: Scenario,
    trace: Trace,
    grounding: ResponseGrounding | Mapping[str, Sequence[str]] | None = None,
) -> list[Verdict]:
    """The checks of what each response field states
    (:func:`agentprop._judge.case.response_expectations`)."""
    return [v for e in response_expectations(spec, scenario, grounding) for v in e.verdicts(trace)]


def first_failure(verdicts: list[Verdict]) -> Verdict | None:
    return next((v for v in verdicts if not v.passed), None)


def verdicts_of(result: PropertyResult) -> list[Verdict]:
    if isinstance(result, Verdict):
        return [result]
    if isinstance(result, bool):
        return [
            Verdict(
                passed=result,
                contract="property",
                explanation="the property returned " + str(result),
            )
        ]
    if isinstance(result, Sequence):
        out = list(result)
        if not all(isinstance(v, Verdict) for v in out):
            raise InvalidArgument("a property must return a Verdict, a bool, or a list of Verdicts")
        return out
    raise InvalidArgument(
        "a property must return a Verdict, a bool, or a list of Verdicts; got "
        f"{type(result).__name__}"
    )
