"""One budget for a whole session: agent runs, tokens and dollars.

Generation, repeats for the statistical oracle, shrinking and mutation testing all draw from the
same :class:`Budget`. Before starting an agent run, ask :meth:`Budget.try_start_run` (or call
:meth:`Budget.start_run`, which raises :class:`BudgetExhausted`); after every model call, report
its usage with :meth:`Budget.charge` (or :meth:`Budget.charge_usage`). Once any limit is reached
the budget is *exhausted* and no new run starts; runs already in flight finish and are charged
(so tokens and dollars can end slightly above their limits, by at most the in-flight runs).

Cache hits are recorded with ``cached=True``: they are counted (to report what replays saved)
but cost nothing and do not count against the limits.

Dollars come from :data:`DEFAULT_PRICES`, a table from model-name prefix to
:class:`ModelPrice` ($ per million tokens). The longest matching prefix wins, so
``claude-opus-4-5-20251101`` is priced as ``claude-opus-4-5`` and ``claude-opus-4-20250514`` as
``claude-opus-4``. Prices change: edit :data:`DEFAULT_PRICES` in place, or pass ``prices=`` to a
:class:`Budget` (entries there override the defaults). A model that matches no prefix is charged
at the highest price in the table, so that a dollar limit is never under-counted, and is listed
in the snapshot's ``unpriced_models`` so the table can be fixed.

All methods are thread-safe (one lock, held for microseconds, never across an ``await``), so one
budget can be shared by threads and asyncio tasks alike.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentprop.errors import InvalidArgument
from agentprop.errors import BudgetExhausted  # noqa: F401 (re-exported: defined in errors.py)

__all__ = [
    "DEFAULT_PRICES",
    "Budget",
    "BudgetExhausted",
    "BudgetSnapshot",
    "ModelPrice",
    "cost_usd",
    "price_for",
]


@dataclass(frozen=True)
class ModelPrice:
    """US dollars per million tokens for one model family.

    ``cache_write_per_mtok`` / ``cache_read_per_mtok`` price prompt-cache writes and reads
    (defaults: 1.25x and 0.1x the input price, Anthropic's usual 5-minute cache ratios). If
    ``long_context_threshold`` is set, a request with more input tokens than that is priced at
    ``long_input_per_mtok`` / ``long_output_per_mtok`` instead (tiered pricing).
    """

    input_per_mtok: float
    output_per_mtok: float
    cache_write_per_mtok: float | None = None
    cache_read_per_mtok: float | None = None
    long_context_threshold: int | None = None
    long_input_per_mtok: float | None = None
    long_output_per_mtok: float | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise InvalidArgument(f"ModelPrice.{name}={value!r} must be a finite number >= 0.")
        if self.long_context_threshold is not None and (
            self.long_input_per_mtok is None or self.long_output_per_mtok is None
        ):
            raise InvalidArgument(
                "ModelPrice with long_context_threshold also needs long_input_per_mtok and "
                "long_output_per_mtok."
            )

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
    ) -> float:
        """Dollars for one call with these token counts."""
        inp, out = self.input_per_mtok, self.output_per_mtok
        prompt = input_tokens + cache_creation_input_tokens + cache_read_input_tokens
        if self.long_context_threshold is not None and prompt > self.long_context_threshold:
            inp = float(self.long_input_per_mtok or 0.0)
            out = float(self.long_output_per_mtok or 0.0)
        write = self.cache_write_per_mtok if self.cache_write_per_mtok is not None else 1.25 * inp
        read = self.cache_read_per_mtok if self.cache_read_per_mtok is not None else 0.1 * inp
        total = (
            input_tokens * inp
            + output_tokens * out
            + cache_creation_input_tokens * write
            + cache_read_input_tokens * read
        )
        return total / 1_000_000


DEFAULT_PRICES: dict[str, ModelPrice] = {
    # Anthropic list prices, $ per million tokens (input, output), checked against
    # platform.claude.com model pages. Longest prefix wins. Edit or override as prices change.
    "claude-fable-5": ModelPrice(10.0, 50.0),  # Fable 5, 5.1 (5.2 assumed the same)
    "claude-mythos": ModelPrice(10.0, 50.0),  # shares Fable 5's pricing
    "claude-opus-5-5": ModelPrice(4.0, 20.0),
    "claude-opus-5": ModelPrice(5.0, 25.0),
    "claude-opus-4-8": ModelPrice(5.0, 25.0),
    "claude-opus-4-7": ModelPrice(5.0, 25.0),
    "claude-opus-4-6": ModelPrice(5.0, 25.0),
    "claude-opus-4-5": ModelPrice(5.0, 25.0),
    "claude-opus-4": ModelPrice(15.0, 75.0),  # Opus 4 and 4.1
    "claude-sonnet-5": ModelPrice(2.0, 10.0),  # Sonnet 5 and 5.5
    "claude-sonnet-4": ModelPrice(3.0, 15.0),  # Sonnet 4, 4.5, 4.6
    "claude-haiku-5-5": ModelPrice(
        0.10, 0.50, long_context_threshold=100_000, long_input_per_mtok=0.50, long_output_per_mtok=2.50
    ),
    "claude-haiku-4-5": ModelPrice(1.0, 5.0),
    "claude-3-7-sonnet": ModelPrice(3.0, 15.0),
    "claude-3-5-sonnet": ModelPrice(3.0, 15.0),
    "claude-3-5-haiku": ModelPrice(0.80, 4.0),
    "claude-3-opus": ModelPrice(15.0, 75.0),
    "claude-3-haiku": ModelPrice(0.25, 1.25),
}
"""Model-name prefix -> :class:`ModelPrice`. Editable in place; see the module docstring."""


def _coerce_price(key: str, value: object) -> ModelPrice:
    if isinstance(value, ModelPrice):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return ModelPrice(float(value[0]), float(value[1]))
    raise InvalidArgument(
        f"prices[{key!r}] must be a ModelPrice or an (input, output) pair of $/MTok, not {value!r}."
    )


def price_for(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of ``model`` by longest matching prefix in ``prices`` (default
    :data:`DEFAULT_PRICES`), or ``None`` if no prefix matches."""
    table = DEFAULT_PRICES if prices is None else prices
    # Which prefix wins depends only on the table's keys, in order, and the model name: it is
    # remembered under exactly those (a table edited in place has other keys, hence another
    # entry), and the price itself is read from the table every time.
    names = tuple(table)
    found = _BEST_PREFIX.get(names)
    best = found.get(model, _NO_ENTRY) if found is not None and type(model) is str else _NO_ENTRY
    if best is _NO_ENTRY:
        best = None
        for prefix in names:
            if model.startswith(prefix) and (best is None or len(prefix) > len(best)):
                best = prefix
        if type(model) is str:
            _remember_prefix(names, model, best)
    return None if best is None else _coerce_price(best, table[best])  # type: ignore[index]


_BEST_PREFIX: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Price-table keys (in order) -> model name -> the longest matching prefix (or ``None``)."""
_BEST_PREFIX_LIMIT = 256
"""At most this many tables, and models per table, are remembered (past it, afresh)."""
_NO_ENTRY = object()


def _remember_prefix(names: tuple[Any, ...], model: str, best: str | None) -> None:
    known = _BEST_PREFIX.get(names)
    if known is None:
        if len(_BEST_PREFIX) >= _BEST_PREFIX_LIMIT:
            _BEST_PREFIX.clear()
        known = _BEST_PREFIX[names] = {}
    elif len(known) >= _BEST_PREFIX_LIMIT:
        known.clear()
    known[model] = best


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    prices: Mapping[str, ModelPrice] | None = None,
) -> float | None:
    """Dollars for one call, or ``None`` if ``model`` has no price."""
    price = price_for(model, prices)
    if price is None:
        return None
    return price.cost(input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens)


class BudgetSnapshot(BaseModel):
    """The state of a :class:`Budget` at one moment, for reports."""

    model_config = ConfigDict(frozen=True)

    runs: int
    """Runs started (cached or not)."""
    calls: int
    """Model calls charged (cache misses that reached the API)."""
    input_tokens: int
    """Input tokens, prompt-cache writes and reads included."""
    output_tokens: int
    usd: float
    cached_calls: int
    """Model calls answered from the cache (free)."""
    cached_input_tokens: int
    cached_output_tokens: int
    usd_saved: float
    """What the cached calls would have cost."""
    max_runs: int | None
    max_tokens: int | None
    max_usd: float | None
    exhausted: bool
    exhausted_reason: str | None
    refused_runs: int
    """Runs that asked to start after the budget was exhausted."""
    unpriced_models: list[str]
    usd_by_model: dict[str, float]

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


def _check_limit(name: str, value: float | None, *, integer: bool) -> None:
    if value is None:
        return
    if integer and not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int or None.")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgument(f"{name}={value!r} must be a number >= 0 or None.")


def _usage_field(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
    return int(value) if isinstance(value, (int, float)) else 0


class Budget:
    """The ledger of one session: runs, tokens and dollars, with optional limits.

    Args:
        max_runs: the most agent runs to start (``None``: unlimited).
        max_usd: stop starting runs once this many dollars are spent.
        max_tokens: stop starting runs once this many tokens (input + output) are used.
        prices: prefix -> :class:`ModelPrice` or ``(input, output)`` $/MTok, overriding
            :data:`DEFAULT_PRICES` entry by entry.
    """

    def __init__(
        self,
        *,
        max_runs: int | None = None,
        max_usd: float | None = None,
        max_tokens: int | None = None,
        prices: Mapping[str, ModelPrice | tuple[float, float]] | None = None,
    ) -> None:
        _check_limit("max_runs", max_runs, integer=True)
        _check_limit("max_tokens", max_tokens, integer=True)
        _check_limit("max_usd", max_usd, integer=False)
        self.max_runs = max_runs
        self.max_usd = None if max_usd is None else float(max_usd)
        self.max_tokens = max_tokens
        self._overrides = {k: _coerce_price(k, v) for k, v in (prices or {}).items()}
        self._lock = threading.Lock()
        self._runs = 0
        self._calls = 0
        self._input = 0
        self._output = 0
        self._usd = 0.0
        self._cached_calls = 0
        self._cached_input = 0
        self._cached_output = 0
        self._usd_saved = 0.0
        self._refused = 0
        self._unpriced: set[str] = set()
        self._usd_by_model: dict[str, float] = {}

    # -- prices ----------------------------------------------------------------------------------

    @property
    def prices(self) -> dict[str, ModelPrice]:
        """The effective price table: :data:`DEFAULT_PRICES` with this budget's overrides."""
        return {**DEFAULT_PRICES, **self._overrides}

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
    ) -> tuple[float, bool]:
        """Dollars for one call and whether the model was found in the price table.

        An unpriced model is charged at the most expensive entry (see the module docstring).
        """
        # no overrides: the default table itself (what ``prices`` copies, in the same order)
        table = self.prices if self._overrides else DEFAULT_PRICES
        price = price_for(model, table)
        priced = price is not None
        if price is None:
            price = max(
                (_coerce_price(k, v) for k, v in table.items()),
                key=lambda p: (p.output_per_mtok, p.input_per_mtok),
                default=ModelPrice(0.0, 0.0),
            )
        usd = price.cost(input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens)
        return usd, priced

    # -- runs ------------------------------------------------------------------------------------

    def _exhausted_reason_locked(self) -> str | None:
        if self.max_runs is not None and self._runs >= self.max_runs:
            return f"max_runs={self.max_runs} reached ({self._runs} runs started)"
        if self.max_tokens is not None and self._input + self._output >= self.max_tokens:
            return f"max_tokens={self.max_tokens} reached ({self._input + self._output} tokens used)"
        if self.max_usd is not None and self._usd >= self.max_usd:
            return f"max_usd=${self.max_usd:.4f} reached (${self._usd:.4f} spent)"
        return None

    def try_start_run(self) -> bool:
        """Reserve one run if the budget allows it; ``False`` (and nothing reserved) if not."""
        with self._lock:
            if self._exhausted_reason_locked() is not None:
                self._refused += 1
                return False
            self._runs += 1
            return True

    def start_run(self) -> None:
        """Reserve one run or raise :class:`BudgetExhausted`."""
        with self._lock:
            reason = self._exhausted_reason_locked()
            if reason is None:
                self._runs += 1
                return
            self._refused += 1
        raise BudgetExhausted(reason, self.snapshot())

    @property
    def exhausted(self) -> bool:
        """Whether no new run may start."""
        with self._lock:
            return self._exhausted_reason_locked() is not None

    @property
    def exhausted_reason(self) -> str | None:
        """Which limit was reached, or ``None``."""
        with self._lock:
            return self._exhausted_reason_locked()

    def check(self) -> None:
        """Raise :class:`BudgetExhausted` if the budget is exhausted (reserves nothing)."""
        reason = self.exhausted_reason
        if reason is not None:
            raise BudgetExhausted(reason, self.snapshot())

    # -- charges ---------------------------------------------------------------------------------

    def charge(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cached: bool = False,
    ) -> float:
        """Record one model call's usage; returns its cost in dollars.

        With ``cached=True`` (a replay from the API cache) the call is recorded as saved and
        costs nothing.
        """
        counts = (input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens)
        for n in counts:
            if (type(n) is not int and (not isinstance(n, int) or isinstance(n, bool))) or n < 0:
                raise InvalidArgument(f"Token counts must be ints >= 0; got {counts} for {model!r}.")
        usd, priced = self.cost(
            model,
            input_tokens,
            output_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
        )
        all_input = input_tokens + cache_creation_input_tokens + cache_read_input_tokens
        with self._lock:
            if not priced:
                self._unpriced.add(model)
            if cached:
                self._cached_calls += 1
                self._cached_input += all_input
                self._cached_output += output_tokens
                self._usd_saved += usd
                return 0.0
            self._calls += 1
            self._input += all_input
            self._output += output_tokens
            self._usd += usd
            self._usd_by_model[model] = self._usd_by_model.get(model, 0.0) + usd
        return usd

    def charge_usage(self, model: str, usage: Any, *, cached: bool = False) -> float:
        """:meth:`charge` from a Messages API ``usage`` (an SDK ``Usage`` object or a dict)."""
        return self.charge(
            model,
            _usage_field(usage, "input_tokens"),
            _usage_field(usage, "output_tokens"),
            cache_creation_input_tokens=_usage_field(usage, "cache_creation_input_tokens"),
            cache_read_input_tokens=_usage_field(usage, "cache_read_input_tokens"),
            cached=cached,
        )

    # -- reporting -------------------------------------------------------------------------------

    def snapshot(self) -> BudgetSnapshot:
        """A consistent, immutable copy of the ledger."""
        with self._lock:
            return BudgetSnapshot(
                runs=self._runs,
                calls=self._calls,
                input_tokens=self._input,
                output_tokens=self._output,
                usd=self._usd,
                cached_calls=self._cached_calls,
                cached_input_tokens=self._cached_input,
                cached_output_tokens=self._cached_output,
                usd_saved=self._usd_saved,
                max_runs=self.max_runs,
                max_tokens=self.max_tokens,
                max_usd=self.max_usd,
                exhausted=self._exhausted_reason_locked() is not None,
                exhausted_reason=self._exhausted_reason_locked(),
                refused_runs=self._refused,
                unpriced_models=sorted(self._unpriced),
                usd_by_model=dict(sorted(self._usd_by_model.items())),
            )

    def __repr__(self) -> str:
        s = self.snapshot()
        return (
            f"Budget(runs={s.runs}/{s.max_runs}, tokens={s.tokens}/{s.max_tokens}, "
            f"usd={s.usd:.4f}/{s.max_usd})"
        )
