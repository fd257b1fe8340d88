"""``agentprop.settings``: how hard every check looks, in Hypothesis's manner.

One object holds what a check may be told (mode, tau, runs, max_runs, seed, max_examples,
screen, inv_runs); profiles are registered and loaded in one registry (:data:`PROFILES`). Every
check resolves its settings in :func:`resolve`: profile < pytest marker < decorator or ``with``
block < the call's arguments. Suites resolve theirs in :func:`suite_settings`.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from agentprop._decide.oracle import Mode, OracleSettings
from agentprop._decide.session import current_session, scoped_overrides, settings_scope
from agentprop.errors import InvalidArgument

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "Resolved",
    "fold_deprecated",
    "resolve",
    "settings",
    "suite_settings",
]

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"max_runs": 30, "max_examples": 5, "screen": 1, "inv_runs": 5},
    "ci": {"max_runs": 100, "max_examples": 10, "screen": 2, "inv_runs": 5},
    "release": {"max_runs": 300, "max_examples": 50, "screen": 0, "inv_runs": 20},
}
"""The built-in profiles, the only definition of them: the oracle's run limit, Hypothesis's
examples, and for a suite run the clean runs that pass a case (``screen``; 0: each case is
certified by its own test) and the runs a side of an INV case's two-sample test."""

DEFAULT_PROFILE = "ci"
"""The profile in force when none is loaded or named (pytest, ``agentprop run``)."""

ORACLE_KEYS = ("mode", "tau", "runs", "max_runs")
SUITE_KEYS = ("screen", "inv_runs", "input_model", "simulated_user")
KEYS = (*ORACLE_KEYS, "seed", "max_examples", *SUITE_KEYS)

F = TypeVar("F", bound=Callable[..., Any])


class settings:  # noqa: N801 (named like hypothesis.settings, which it mirrors)
    """How hard the checks look. ``settings(parent, **changes)`` copies ``parent`` (or nothing)
    with ``changes``; unset values fall through to the layer below (see the module docstring).

    - ``mode``: ``"sprt"``, ``"zero-failure"`` or ``"fixed"``; ``tau``: the pass rate to hold;
      ``runs``: runs of fixed N and zero-failure; ``max_runs``: the sequential test's limit;
    - ``seed``: the trial namespace (the same seed replays the memo); ``fresh=True``: a new
      random seed, drawn once when the object is made (so Hypothesis's replays agree);
    - ``max_examples``: Hypothesis examples of :func:`agentprop.agent_settings`;
    - ``screen``, ``inv_runs`` (``agentprop run`` / ``tdad`` only): clean runs that pass a case,
      a failure being confirmed by the case's own test (0: each case certified on its own), and
      runs a side of an INV case;
    - ``input_model`` (``"PROVIDER:MODEL"``) and ``simulated_user`` (``agentprop run`` only):
      explored turns also written by a model, follow-ups by a simulated user
      (docs/model-written-inputs.md); the flags ``--input-model`` / ``--simulated-user`` win.

    ``settings.register_profile(name, parent, **changes)`` / ``settings.load_profile(name)`` /
    ``settings.get_profile(name)``; ``@settings(...)`` on a test, or ``with settings(...):``."""

    _profiles: ClassVar[dict[str, settings]] = {}
    _values: dict[str, Any]

    def __init__(
        self,
        parent: settings | None = None,
        *,
        mode: Mode | None = None,
        tau: float | None = None,
        runs: int | None = None,
        max_runs: int | None = None,
        seed: int | None = None,
        fresh: bool = False,
        max_examples: int | None = None,
        screen: int | None = None,
        inv_runs: int | None = None,
        input_model: str | None = None,
        simulated_user: bool | None = None,
    ) -> None:
        if parent is not None and not isinstance(parent, settings):
            raise InvalidArgument(
                "agentprop.settings(parent, ...): parent must be an agentprop.settings, not "
                f"{type(parent).__name__}"
            )
        values: dict[str, Any] = dict(parent._values) if parent is not None else {}
        given = {
            "mode": mode,
            "tau": tau,
            "runs": runs,
            "max_runs": max_runs,
            "seed": seed,
            "max_examples": max_examples,
            "screen": screen,
            "inv_runs": inv_runs,
            "input_model": input_model,
            "simulated_user": simulated_user,
        }
        values.update({k: v for k, v in given.items() if v is not None})
        if fresh:
            if seed is not None:
                raise InvalidArgument(
                    "agentprop.settings(seed=..., fresh=True): fresh draws a new seed; "
                    "give one or the other"
                )
            values["seed"] = secrets.randbelow(2**31) + 1
        _validate(values)
        self._values = values
        self._entered: list[contextlib.AbstractContextManager[None]] = []

    @property
    def mode(self) -> Mode | None:
        return self._values.get("mode")

    @property
    def tau(self) -> float | None:
        return self._values.get("tau")

    @property
    def runs(self) -> int | None:
        return self._values.get("runs")

    @property
    def max_runs(self) -> int | None:
        return self._values.get("max_runs")

    @property
    def seed(self) -> int | None:
        return self._values.get("seed")

    @property
    def max_examples(self) -> int | None:
        return self._values.get("max_examples")

    @property
    def screen(self) -> int | None:
        return self._values.get("screen")

    @property
    def inv_runs(self) -> int | None:
        return self._values.get("inv_runs")

    @property
    def input_model(self) -> str | None:
        return self._values.get("input_model")

    @property
    def simulated_user(self) -> bool | None:
        return self._values.get("simulated_user")

    def as_dict(self) -> dict[str, Any]:
        """The values this object sets (unset ones fall through)."""
        return dict(self._values)

    def __repr__(self) -> str:
        return (
            "agentprop.settings(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, settings) and other._values == self._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    # ------------------------------------------------------------------ profiles

    @classmethod
    def register_profile(cls, name: str, parent: settings | None = None, **changes: Any) -> None:
        """Register (or replace) profile ``name``: ``parent`` with ``changes``."""
        if not name or not isinstance(name, str):
            raise InvalidArgument(
                "settings.register_profile(name, ...): name must be a non-empty string"
            )
        cls._profiles[name] = settings(parent, **changes)

    @classmethod
    def get_profile(cls, name: str) -> settings:
        try:
            return cls._profiles[name]
        except KeyError:
            raise InvalidArgument(
                f"no agentprop settings profile {name!r}; registered: "
                f"{', '.join(sorted(cls._profiles))} (register one with "
                "agentprop.settings.register_profile(name, ...))"
            ) from None

    @classmethod
    def profile_names(cls) -> list[str]:
        """The registered profiles' names (the built-ins and any registered since)."""
        return sorted(cls._profiles)

    @classmethod
    def load_profile(cls, name: str) -> None:
        """Make profile ``name`` the current session's (what every check falls back to)."""
        cls.get_profile(name)
        current_session().profile = name

    @classmethod
    def default(cls) -> settings:
        """The profile in force (the current session's, ``ci`` unless one was loaded)."""
        return cls.get_profile(current_session().profile)

    # ------------------------------------------------------------------ scope

    def _scope(self) -> contextlib.AbstractContextManager[None]:
        return settings_scope(
            **{k: v for k, v in self._values.items() if k in (*ORACLE_KEYS, "seed")}
        )

    def __enter__(self) -> settings:
        scope = self._scope()
        scope.__enter__()
        self._entered.append(scope)  # ``with`` on one object may nest
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entered.pop().__exit__(exc_type, exc, tb)

    def __call__(self, test: F) -> F:
        """As a decorator: the test runs with these settings (above or below ``@given``)."""
        if not callable(test):
            raise InvalidArgument(
                f"@agentprop.settings(...) decorates a test function, not {type(test).__name__}"
            )

        @functools.wraps(test)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return test(*args, **kwargs)

        return wrapped  # type: ignore[return-value]


def _validate(values: Mapping[str, Any]) -> None:
    unknown = set(values) - set(KEYS)
    if unknown:
        raise InvalidArgument(
            f"agentprop.settings: unknown setting(s) {', '.join(sorted(unknown))}; "
            f"use {', '.join(KEYS)}"
        )
    for key, least in (
        ("runs", 1),
        ("max_runs", 1),
        ("max_examples", 1),
        ("screen", 0),
        ("inv_runs", 2),
    ):
        value = values.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < least
        ):
            raise InvalidArgument(
                f"agentprop.settings({key}={value!r}): must be a whole number of at least {least}"
            )
    seed = values.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise InvalidArgument(
            f"agentprop.settings(seed={seed!r}): must be a whole number of at least 0"
        )
    if values.get("mode", "sprt") not in ("sprt", "zero-failure", "fixed"):
        raise InvalidArgument(
            f"agentprop.settings(mode={values['mode']!r}): use 'sprt', 'zero-failure' or 'fixed'"
        )
    model = values.get("input_model")
    if model is not None and not (
        isinstance(model, str)
        and all(part.strip() for part in model.partition(":")[::2])
        and ":" in model
    ):
        raise InvalidArgument(
            f"agentprop.settings(input_model={model!r}): write PROVIDER:MODEL, e.g. "
            "'anthropic:claude-haiku-4-5'"
        )
    if values.get("simulated_user") is not None and not isinstance(values["simulated_user"], bool):
        raise InvalidArgument(
            f"agentprop.settings(simulated_user={values['simulated_user']!r}): "
            "must be True or False"
        )
    tau = values.get("tau")
    if tau is not None and not (isinstance(tau, int | float) and 0.0 < tau <= 1.0):
        raise InvalidArgument(
            f"agentprop.settings(tau={tau!r}): the pass rate to hold must be in (0, 1]"
        )


for _name, _values in PROFILES.items():
    settings.register_profile(_name, **_values)


@dataclass(frozen=True)
class Resolved:
    """The settings a check runs with, every layer applied (:func:`resolve`)."""

    values: dict[str, Any]
    seed: int

    def explicit(self) -> dict[str, Any]:
        """``mode``/``tau``/``runs`` as set by some layer (a spec's defaults fill the rest)."""
        return {
            k: self.values[k] for k in ("mode", "tau", "runs") if self.values.get(k) is not None
        }

    @property
    def max_runs(self) -> int | None:
        return self.values.get("max_runs")

    def oracle(self) -> OracleSettings:
        """Oracle settings with no spec to take defaults from (the spec-free tier)."""
        return OracleSettings(
            **{k: self.values[k] for k in ORACLE_KEYS if self.values.get(k) is not None}
        )


def resolve(given: settings | Mapping[str, Any] | None = None, **call: Any) -> Resolved:
    """The one place settings are resolved: the session's profile, then the scope (pytest
    marker, ``@settings``, ``with settings``), then ``given`` (a settings object or a dict),
    then the call's own non-``None`` keyword arguments."""
    session = current_session()
    values: dict[str, Any] = settings.get_profile(session.profile).as_dict()
    values.update(scoped_overrides())
    if isinstance(given, settings):
        values.update(given.as_dict())
    elif given is not None:
        values.update({k: v for k, v in given.items() if v is not None})
    values.update({k: v for k, v in call.items() if v is not None})
    seed = values.pop("seed", None)
    return Resolved(values, int(seed) if seed is not None else session.seed)


def fold_deprecated(where: str, given: settings | None, **keywords: Any) -> settings | None:
    """``where(..., seed=3)`` is the deprecated spelling of
    ``where(..., settings=agentprop.settings(seed=3))``: warn (at the caller's caller), naming the
    settings fields and the ``settings=`` spelling, and return ``given`` with the non-``None``
    keywords folded in (they win over it)."""
    used = {k: v for k, v in keywords.items() if v is not None}
    if not used:
        return given
    shown = ", ".join(f"{k}={v!r}" for k, v in used.items())
    warnings.warn(
        f"{where}({shown}) is deprecated: the {'field' if len(used) == 1 else 'fields'} "
        f"{', '.join(used)} of agentprop.settings go in settings=, e.g. {where}(..., "
        f"settings=agentprop.settings({shown}))",
        DeprecationWarning,
        stacklevel=3,
    )
    return settings(given, **used)


def suite_settings(profile: str | None = None, **flags: Any) -> tuple[str, settings]:
    """The one place ``agentprop run`` and ``agentprop tdad`` resolve their settings: the default
    profile's values, then those of ``profile`` (a built-in, or one registered with
    :meth:`settings.register_profile`, e.g. by the agent's module), then the command's flags
    (``mode``, ``tau``, ``runs``, ``max_runs``, ``seed``; ``None``: not given). Returns the
    profile's name and the resolved settings. An unknown profile raises :class:`InvalidArgument`."""
    name = profile or DEFAULT_PROFILE
    values = settings.get_profile(DEFAULT_PROFILE).as_dict()
    values.update(settings.get_profile(name).as_dict())
    values.update({k: v for k, v in flags.items() if v is not None})
    return name, settings(**values)
