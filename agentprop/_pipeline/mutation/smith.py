"""MutationSmith for model agents: a model rewrites the agent's system prompt to carry a
mutation's intent, under the pack's generator constraints.
"""

from __future__ import annotations

from typing import Any

from agentprop._agents.project import Project
from agentprop._modelapi.providers import ANTHROPIC_MESSAGES, Provider, TextPrompt
from agentprop._pipeline.mutation.mutants import Mutant
from agentprop._pipeline.mutation.pack import (
    Mutation,
    MutationGenerator,
    MutationPack,
    probe_scenario,
)
from agentprop._pipeline.mutation.run import MutantFactory

# --- MutationSmith for model agents --------------------------------------------------------

MUTATIONSMITH_ROLE = (
    "You are MutationSmith. You rewrite the system prompt of a tool-using agent so that the agent "
    "shows one specific, plausible failure, for mutation testing of its test suite."
)


def mutationsmith_prompt(
    prompt: str, mutation: Mutation, generator: MutationGenerator
) -> TextPrompt:
    """What MutationSmith is asked for one prompt mutant, in any provider's terms."""
    rules = "\n".join(f"- {c}" for c in generator.constraints)
    turns = "\n".join(f"  user: {t}" for t in mutation.activation_probe.user_turns)
    user = (
        f"Mutation intent {mutation.id} ({mutation.severity}, {mutation.category}):\n"
        f"{mutation.intent}\n\nActivation probe: in a conversation like this one the failure must "
        f"show:\n{turns}\n\nThe system prompt that currently passes the visible "
        f"tests:\n<prompt>\n{prompt}\n</prompt>"
    )
    system = MUTATIONSMITH_ROLE + ("\n\nRules:\n" + rules if rules else "")
    return TextPrompt(system=system, user=user, max_tokens=4096, temperature=generator.temperature)


def mutationsmith_request(
    model: str,
    prompt: str,
    mutation: Mutation,
    generator: MutationGenerator,
    provider: Provider = ANTHROPIC_MESSAGES,
) -> dict[str, Any]:
    """The request body asking for one prompt mutant in ``provider``'s API (what the API cache
    keys on)."""
    return provider.text_body(model, mutationsmith_prompt(prompt, mutation, generator))


def _mutated_prompt(text: str) -> str:
    text = text.strip()
    if text.startswith("<prompt>") and text.endswith("</prompt>"):
        text = text[len("<prompt>") : -len("</prompt>")].strip()
    return text


def prompt_mutant_factory(model_agent: Any, project: Project, pack: MutationPack) -> MutantFactory:
    """Prompt mutants of a model agent (:class:`~agentprop.agents.AnthropicAgent`,
    :class:`~agentprop.agents.OpenAIAgent`): each attempt asks
    the same model, through the agent's API cache and budget, for the agent's system prompt
    rewritten to carry the mutation intent. The probe runs in the happy-path world unless the
    bindings' ``mutations:`` section says otherwise."""
    base_prompt = model_agent.system_for(project.spec, project.bindings.context)

    async def make(mutation: Mutation, attempt: int) -> Mutant | None:
        ask = mutationsmith_prompt(base_prompt, mutation, pack.generator)
        text, _ = await model_agent.complete_text(
            ask, trial=attempt - 1, seed_parts=("mutationsmith", mutation.id)
        )
        prompt = _mutated_prompt(text)
        if not prompt or prompt == base_prompt:
            return None
        binding = project.bindings.mutations.get(mutation.id)
        turns = (
            binding.probe.user_turns if binding is not None else None
        ) or mutation.activation_probe.user_turns
        mutant_agent = model_agent.replace(
            system_prompt=prompt, name=f"{model_agent.ref}~{mutation.id}"
        )
        return Mutant(
            mutation=mutation,
            agent=mutant_agent.loaded(),
            source="prompt",
            probe_turns=list(turns),
            probe_scenario=probe_scenario(
                project, binding.probe.scenario if binding is not None else None, mutation
            ),
            prompt=prompt,
        )

    return make
