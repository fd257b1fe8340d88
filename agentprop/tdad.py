"""Test-driven agent development: mutation testing, prompt compilation and the TDAD metrics.

:func:`mutation_test` runs a suite against a :class:`MutationPack` of broken agents
(:func:`load_mutation_pack`); :func:`compile_prompt` compiles a model agent's prompt against
the visible cases; :func:`surs` scores regression across a spec's versions; :func:`split_suite`
and :func:`tdad_metrics` compute TDAD's visible/hidden metrics.
"""

from agentprop._pipeline.mutation.mutants import MutationReport
from agentprop._pipeline.mutation.pack import MutationPack, load_mutation_pack
from agentprop._pipeline.mutation.run import mutation_test
from agentprop._pipeline.promptsmith import CompileResult, compile_prompt
from agentprop._pipeline.surs import SursResult, surs
from agentprop._pipeline.tdad import TdadMetrics, split_suite, tdad_metrics

__all__ = [
    "CompileResult",
    "MutationPack",
    "MutationReport",
    "SursResult",
    "TdadMetrics",
    "compile_prompt",
    "load_mutation_pack",
    "mutation_test",
    "split_suite",
    "surs",
    "tdad_metrics",
]
