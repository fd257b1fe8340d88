"""Profiles: how deep ``agentprop run`` decides each case, and at which level each claim is made.

The profiles live in :class:`agentprop.settings`; this module applies a profile's suite-level
fields to a case. A case's own expectation is decided per case; a policy it exercises is
certified over the runs of every case that exercises it (:mod:`agentprop._decide.claims`). A
screen passes clean cases cheaply, but a failure is always confirmed by the case's own test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from agentprop._decide.safety import CaseSettings
from agentprop._decide.settings import DEFAULT_PROFILE, settings, suite_settings
from agentprop.errors import InputError, InvalidArgument


@dataclass(frozen=True)
class Profile:
    name: str
    screen: int | None
    """Clean runs that pass a case (``None``: each case is certified by its own test)."""
    inv_runs: int
    """Runs per side of an INV case's two-sample test."""

    @property
    def pooled(self) -> bool:
        """Whether safety policies are certified over the suite's runs (not per case)."""
        return self.screen is not None


def get_profile(name: str | None) -> Profile:
    """The profile called ``name`` (``None``: the default), as registered with
    :class:`agentprop.settings`; an unknown name is an :class:`InputError` naming
    the registered ones."""
    try:
        name, resolved = suite_settings(name)
    except InvalidArgument:
        raise InputError(
            f"unknown profile {name!r}",
            expected=f"one of {', '.join(settings.profile_names())}, or a profile registered with "
            "agentprop.settings.register_profile",
            fix=f"e.g. --profile {DEFAULT_PROFILE}; register your own in the agent's module (it "
            "is imported before the profile is read)",
        ) from None
    return Profile(name, resolved.screen or None, resolved.inv_runs or 5)


def screened(profile: Profile, rule: CaseSettings) -> CaseSettings:
    """``rule`` under ``profile``: behind the profile's screen, its text saying so."""
    if profile.screen is None:
        return rule
    k = profile.screen
    changed = dataclasses.replace(rule.settings, screen=k)
    text = f"{profile.name}: {k} clean run{'s' if k > 1 else ''}, else {rule.rule}"
    return CaseSettings(changed, text, rule.safety)


__all__ = ["DEFAULT_PROFILE", "Profile", "get_profile", "screened"]
