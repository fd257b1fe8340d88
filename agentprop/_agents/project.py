"""A project: a spec, its bindings and the directory they live in."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType

from agentprop._agents.runtime import AgentFactory, arun_conversation
from agentprop._scenario.build import PathProblem, Scenario, make_world, scenarios_and_problems
from agentprop._scenario.mcdc import mcdc_scenarios
from agentprop._scenario.trace import Trace
from agentprop._scenario.world import stable_seed
from agentprop._spec.bindings import Bindings, empty_bindings, find_bindings, load_bindings
from agentprop._spec.load import load_spec, resolve_spec_path
from agentprop._spec.model import Spec
from agentprop.errors import InvalidArgument


@dataclass
class Project:
    spec: Spec
    bindings: Bindings
    spec_path: Path
    turn_timeout_s: float | None = 60.0
    """The turn timeout of :meth:`arun` when it is not given (``agentprop run --turn-timeout``)."""
    _scenarios: list[Scenario] | None = field(default=None, repr=False)
    _problems: list[PathProblem] | None = field(default=None, repr=False)
    _condition_gaps: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def base_dir(self) -> Path:
        return self.bindings.base_dir if self.bindings.path is not None else self.spec_path.parent

    def scenarios(self) -> list[Scenario]:
        """One scenario per terminal node (and entering node) and per missing-field stop, and
        the MC/DC scenarios of ``and`` / ``or`` conditions (:mod:`agentprop._scenario.mcdc`)."""
        if self._scenarios is None:
            scenarios, self._problems = scenarios_and_problems(self.spec, self.bindings)
            extra, self._condition_gaps = mcdc_scenarios(self.spec, self.bindings, scenarios)
            self._scenarios = scenarios + extra
        return list(self._scenarios)

    @property
    def condition_gaps(self) -> dict[str, str]:
        """Per condition atom (``N1_TRIAGE#0.2``) that no case shows changing its branch on its
        own, the reason."""
        self.scenarios()
        return dict(self._condition_gaps)

    @property
    def problems(self) -> list[str]:
        """Paths the spec and bindings cannot realise, with the reason (one line each)."""
        return [p.render() for p in self.path_problems]

    @property
    def path_problems(self) -> list[PathProblem]:
        """Every unrealisable path (P001), unchecked retry (P002) and the count of impossible
        paths (P003), with the full node path and a fix."""
        self.scenarios()
        return list(self._problems or [])

    def scenario(self, scenario_id: str) -> Scenario:
        """The scenario with this id (``END_CANCELLED<-N7_CANCEL``); a unique substring of an
        id works too."""
        scenarios = self.scenarios()
        exact = [s for s in scenarios if s.id == scenario_id]
        matches = exact or [s for s in scenarios if scenario_id in s.id]
        if len(matches) == 1:
            return matches[0]
        ids = ", ".join(s.id for s in scenarios)
        if not matches:
            close = difflib.get_close_matches(scenario_id, [s.id for s in scenarios], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InvalidArgument(
                f"no scenario {scenario_id!r} in {self.spec.spec_id}; {hint}scenarios: {ids}"
            )
        raise InvalidArgument(
            f"{scenario_id!r} matches several scenarios "
            f"({', '.join(s.id for s in matches)}); use a full id"
        )

    async def arun(
        self,
        scenario: Scenario,
        factory: AgentFactory,
        *,
        trial: int = 0,
        agent_name: str = "",
        turn_timeout_s: float | None | EllipsisType = ...,
        messages: list[str] | None = None,
    ) -> Trace:
        """One run of ``scenario`` (or of ``messages`` in its world) for trial ``trial``, each
        turn within ``turn_timeout_s`` (default: the project's :attr:`turn_timeout_s`)."""
        world = make_world(
            self.spec,
            self.bindings,
            scenario,
            seed=stable_seed("world", scenario.id),
            nonce=str(trial),
        )
        return await arun_conversation(
            self.spec,
            factory,
            messages if messages is not None else scenario.messages,
            world,
            case_id=scenario.id,
            trial=trial,
            context=self.bindings.context,
            agent_name=agent_name,
            turn_timeout_s=self.turn_timeout_s
            if isinstance(turn_timeout_s, EllipsisType)
            else turn_timeout_s,
        )


def load_project(
    path: str | Path, *, bindings: str | Path | None = None, spec: Spec | None = None
) -> Project:
    """Load the spec at ``path`` (a file or a directory with ``spec.yaml``) and its bindings
    (``agentprop.yaml`` next to it, or the file given). ``spec``: the spec at ``path``, already
    loaded (lint loads it once for both)."""
    spec_path = resolve_spec_path(path)
    if spec is None:
        spec = load_spec(spec_path)
    bpath = Path(bindings) if bindings is not None else find_bindings(spec_path)
    b = load_bindings(bpath, spec) if bpath is not None else empty_bindings(spec)
    return Project(spec=spec, bindings=b, spec_path=spec_path)
