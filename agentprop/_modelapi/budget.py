"""One budget for a whole session: agent runs, tokens and dollars.

Every model call reserves its worst case before it is sent and settles what it really cost;
so a limit is overrun by at most one call's reservation. Cache hits are counted but cost
nothing. A model with no entry in :data:`DEFAULT_PRICES` has an unknown cost, never $0, and a
dollar limit refuses it (:class:`UnpricedModel`). Thread-safe; processes share one budget
through a :class:`~agentprop._modelapi.ledger.SharedLedger` with the same guarantee.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentprop._modelapi.ledger import Ledger, LedgerTotals
from agentprop.errors import BudgetExhausted, InputError, InvalidArgument, UnpricedModel

__all__ = [
    "DEFAULT_PRICES",
    "Budget",
    "BudgetExhausted",
    "BudgetSnapshot",
    "ModelPrice",
    "Reservation",
    "UnpricedModel",
    "cost_usd",
    "load_prices",
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

    def worst_case(self, input_tokens: int, output_tokens: int) -> float:
        """The most one call with at most these token counts can cost: every input token at the
        dearest input rate (plain, prompt-cache write or read) and every output token at the
        output rate, of the tier ``input_tokens`` falls in."""
        inp, out = self.input_per_mtok, self.output_per_mtok
        if self.long_context_threshold is not None and input_tokens > self.long_context_threshold:
            inp = float(self.long_input_per_mtok or 0.0)
            out = float(self.long_output_per_mtok or 0.0)
        write = self.cache_write_per_mtok if self.cache_write_per_mtok is not None else 1.25 * inp
        read = self.cache_read_per_mtok if self.cache_read_per_mtok is not None else 0.1 * inp
        return (input_tokens * max(inp, write, read) + output_tokens * out) / 1_000_000


_PRICE_FIELDS = {
    "input": "input_per_mtok",
    "output": "output_per_mtok",
    "cache_write": "cache_write_per_mtok",
    "cache_read": "cache_read_per_mtok",
    "long_context_threshold": "long_context_threshold",
    "long_input": "long_input_per_mtok",
    "long_output": "long_output_per_mtok",
}

PRICES_PATH = Path(__file__).with_name("prices.json")
"""The bundled price table."""


def _price_entry(where: str, name: object, entry: object) -> ModelPrice:
    if not isinstance(name, str) or not name.strip():
        raise InputError(
            f"{where}: a model name must be a non-empty string, not {name!r}",
            expected='"MODEL-PREFIX": {"input": $/MTok, "output": $/MTok}',
            fix="name the model",
        )
    if not isinstance(entry, Mapping):
        raise InputError(
            f"{where}: the price of {name!r} must be an object, not {type(entry).__name__}",
            expected='{"input": 3.0, "output": 15.0}',
            fix=f"write the price of {name} as an object",
        )
    unknown = sorted(set(entry) - set(_PRICE_FIELDS) - {"note"})
    if unknown or "input" not in entry or "output" not in entry:
        raise InputError(
            f"{where}: the price of {name!r} "
            + (f"has unknown field(s) {unknown}" if unknown else "needs both input and output"),
            expected=f"fields {sorted(_PRICE_FIELDS)} (and an optional note)",
            fix=f"give {name} its input and output price in $ per million tokens",
        )
    try:
        return ModelPrice(**{_PRICE_FIELDS[k]: v for k, v in entry.items() if k != "note"})
    except (InvalidArgument, TypeError) as exc:
        raise InputError(
            f"{where}: the price of {name!r} is invalid: {exc}",
            expected="finite numbers >= 0",
            fix=f"correct the price of {name}",
        ) from None


def load_prices(path: str | os.PathLike[str]) -> dict[str, ModelPrice]:
    """A price table from a JSON file: ``{"models": {PREFIX: {"input": .., "output": ..}}}``
    (the format of the bundled ``prices.json``) or just the ``models`` mapping itself."""
    where = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(
            f"{where}: cannot read the price file ({exc.strerror or exc})", fix="check the path"
        ) from None
    except ValueError as exc:
        raise InputError(
            f"{where}: the price file is not valid JSON ({exc})",
            expected="a JSON object",
            fix="correct the JSON",
        ) from None
    models = document.get("models", document) if isinstance(document, dict) else None
    if not isinstance(models, dict):
        raise InputError(
            f"{where}: expected a JSON object of model prices",
            expected='{"models": {"MODEL": {"input": 3.0, "output": 15.0}}}',
            fix="write the prices as a JSON object",
        )
    return {name: _price_entry(where, name, entry) for name, entry in models.items()}


DEFAULT_PRICES: dict[str, ModelPrice] = load_prices(PRICES_PATH)
"""Model-name prefix -> :class:`ModelPrice`, read from ``prices.json``. Editable in place; see
the module docstring."""


def _coerce_price(key: str, value: object) -> ModelPrice:
    if isinstance(value, ModelPrice):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return ModelPrice(float(value[0]), float(value[1]))
    raise InvalidArgument(
        f"prices[{key!r}] must be a ModelPrice or an (input, output) pair of $/MTok, not {value!r}."
    )


_SUFFIX_STARTS = frozenset("-_@:/")


def _names_family(prefix: object, model: str) -> bool:
    """Whether the table entry ``prefix`` prices ``model``: its whole name, or a prefix that
    ends where a suffix starts (``claude-opus-4`` prices ``claude-opus-4-1``, ``gpt-5`` does
    not price ``gpt-5.5``)."""
    if not isinstance(prefix, str) or not model.startswith(prefix):
        return False
    return len(model) == len(prefix) or model[len(prefix)] in _SUFFIX_STARTS


def price_for(model: str, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of ``model`` by the longest entry of ``prices`` (default
    :data:`DEFAULT_PRICES`) naming it or its family (see the module docstring), or ``None``."""
    table = DEFAULT_PRICES if prices is None else prices
    # Which prefix wins depends only on the table's keys, in order, and the model name: it is
    # remembered under exactly those (a table edited in place has other keys, hence another
    # entry), and the price itself is read from the table every time.
    names = tuple(table)
    best = _best_prefix(names, model) if type(model) is str else _longest_prefix(names, model)
    return None if best is None else _coerce_price(best, table[best])


def _longest_prefix(names: tuple[Any, ...], model: str) -> str | None:
    best: str | None = None
    for prefix in names:
        if _names_family(prefix, model) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


PREFIXES_REMEMBERED = 1024
"""(price-table keys, model name) pairs whose winning prefix is remembered (the most recently
used): a session prices a few models against one or two tables."""


@functools.lru_cache(maxsize=PREFIXES_REMEMBERED)
def _best_prefix(names: tuple[Any, ...], model: str) -> str | None:
    """:func:`_longest_prefix`, remembered: only for a ``str`` model (a subclass may hash and
    compare as it likes)."""
    return _longest_prefix(names, model)


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
    return price.cost(
        input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens
    )


def _book_unless(
    ledger: Ledger,
    refuse: Callable[[LedgerTotals], str | None],
    grow: Callable[[LedgerTotals], LedgerTotals],
) -> str | None:
    """Book ``grow`` in ``ledger`` in one step with the check, unless ``refuse`` names a limit the
    shared totals reach; returns that limit, or ``None`` (booked)."""
    refused: list[str] = []

    def change(t: LedgerTotals) -> LedgerTotals | None:
        reason = refuse(t)
        if reason is not None:
            refused.append(reason)
            return None
        return grow(t)

    ledger.book(change)
    return refused[0] if refused else None


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
    """Dollars spent on calls of priced models (see ``unpriced_calls``)."""
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
    """Models called that have no price: their cost is unknown, not counted in ``usd``."""
    usd_by_model: dict[str, float]
    unpriced_calls: int = 0
    """Calls (not replays) of unpriced models: ``usd`` leaves their unknown cost out."""
    refused_calls: int = 0
    """Model calls refused before they were sent because a limit was reached."""
    in_flight_calls: int = 0
    """Calls reserved and not yet settled."""
    reserved_usd: float = 0.0
    """The worst-case dollars reserved by the calls in flight."""
    reserved_tokens: int = 0
    largest_reservation_usd: float = 0.0
    """The largest single reservation so far: a dollar limit is never overrun by more."""
    largest_reservation_tokens: int = 0
    """The largest single token reservation so far: a token limit is never overrun by more."""
    abandoned_calls: int = 0
    """Calls abandoned in flight (timed out, cancelled, cut off) that the provider may have
    billed: each is charged its reservation (the worst case), included in ``calls`` and ``usd``."""
    abandoned_usd: float = 0.0
    """The dollars charged for ``abandoned_calls`` (a worst case, not a bill)."""

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def usd_known(self) -> bool:
        """Whether ``usd`` is the whole cost (no call of an unpriced model was made)."""
        return self.unpriced_calls == 0


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


def _check_counts(model: str, counts: tuple[int, ...]) -> None:
    for n in counts:
        if (type(n) is not int and (not isinstance(n, int) or isinstance(n, bool))) or n < 0:
            raise InvalidArgument(f"Token counts must be ints >= 0; got {counts} for {model!r}.")


@dataclass
class Reservation:
    """The worst case of one model call, booked by :meth:`Budget.reserve` until
    :meth:`Budget.settle` (or :meth:`Budget.release`) frees it."""

    model: str
    tokens: int
    usd: float | None
    """``None``: the model has no price (allowed only without a dollar limit)."""
    open: bool = field(default=True)
    input_tokens: int = 0
    """The input bound of ``tokens`` (the rest is the output limit)."""


class Budget:
    """The ledger of one session: runs, tokens and dollars, with optional limits.

    Args:
        max_runs: the most agent runs to start (``None``: unlimited).
        max_usd: stop starting runs, and sending model calls, once this many dollars are spent
            or reserved (see the module docstring for the exact guarantee).
        max_tokens: the same for tokens (input + output).
        prices: prefix -> :class:`ModelPrice` or ``(input, output)`` $/MTok, overriding
            :data:`DEFAULT_PRICES` entry by entry.
        ledger: a :class:`~agentprop._modelapi.ledger.Ledger` when several processes
            share the limits (pytest-xdist workers): every run, reservation and charge is booked
            there too, and the limits are checked against its totals. This budget's own
            figures (its snapshot) stay those of this process.
    """

    def __init__(
        self,
        *,
        max_runs: int | None = None,
        max_usd: float | None = None,
        max_tokens: int | None = None,
        prices: Mapping[str, ModelPrice | tuple[float, float]] | None = None,
        ledger: Ledger | None = None,
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
        self._refused_calls = 0
        self._unpriced: set[str] = set()
        self._unpriced_calls = 0
        self._usd_by_model: dict[str, float] = {}
        self._in_flight = 0
        self._reserved_usd = 0.0
        self._reserved_tokens = 0
        self._largest_usd = 0.0
        self._largest_tokens = 0
        self._abandoned = 0
        self._abandoned_usd = 0.0
        self.ledger = ledger

    # -- prices ----------------------------------------------------------------------------------

    @property
    def prices(self) -> dict[str, ModelPrice]:
        """The effective price table: :data:`DEFAULT_PRICES` with this budget's overrides."""
        return {**DEFAULT_PRICES, **self._overrides}

    def price(self, model: str) -> ModelPrice | None:
        """The price of ``model`` in the effective table, or ``None`` (no price)."""
        # no overrides: the default table itself (what ``prices`` copies, in the same order)
        return price_for(model, self.prices if self._overrides else DEFAULT_PRICES)

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
    ) -> float | None:
        """Dollars for one call, or ``None`` when the model has no price (cost unknown)."""
        price = self.price(model)
        if price is None:
            return None
        return price.cost(
            input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens
        )

    def check_priced(self, model: str) -> None:
        """Raise :class:`UnpricedModel` if a dollar limit is set and ``model`` has no price."""
        if self.max_usd is not None and self.price(model) is None:
            raise UnpricedModel(
                f"model {model!r} has no price in agentprop's price table, so its cost is unknown "
                f"and the dollar limit max_usd=${self.max_usd:g} cannot be enforced",
                expected="a price for the model: an entry naming it or its family (see "
                "agentprop/_modelapi/prices.json)",
                fix=f'give its price: --prices FILE (JSON {{"models": {{"{model}": {{"input": '
                '1.0, "output": 2.0}}}, '
                "$ per million tokens) or Budget(prices={...}); or drop the dollar limit and cap "
                "runs or tokens instead",
            )

    # -- runs ------------------------------------------------------------------------------------

    def _local_totals_locked(self) -> LedgerTotals:
        return LedgerTotals(
            self._runs,
            self._input + self._output,
            self._usd,
            self._reserved_tokens,
            self._reserved_usd,
        )

    def _totals_locked(self) -> LedgerTotals:
        """What the limits are checked against: this process's figures, or the shared ledger's."""
        return self.ledger.totals() if self.ledger is not None else self._local_totals_locked()

    def _run_reason(self, t: LedgerTotals) -> str | None:
        """Which limit refuses a new run, or ``None``."""
        if self.max_runs is not None and t.runs >= self.max_runs:
            who = " by all processes" if self.ledger is not None else ""
            return f"max_runs={self.max_runs} reached ({t.runs} runs started{who})"
        return self._spent_reason(t)

    def _spent_reason(self, t: LedgerTotals) -> str | None:
        """Which token or dollar limit is spent or held by calls in flight (what refuses a model
        call; the run limit only refuses new runs), or ``None``."""
        if self.max_tokens is not None and t.tokens + t.reserved_tokens >= self.max_tokens:
            held = f", {t.reserved_tokens} reserved by calls in flight" if t.reserved_tokens else ""
            return f"max_tokens={self.max_tokens} reached ({t.tokens} tokens used{held})"
        if self.max_usd is not None and t.usd + t.reserved_usd >= self.max_usd:
            held = f", ${t.reserved_usd:.4f} reserved by calls in flight" if t.reserved_usd else ""
            return f"max_usd=${self.max_usd:.4f} reached (${t.usd:.4f} spent{held})"
        return None

    def _exhausted_reason_locked(self) -> str | None:
        return self._run_reason(self._totals_locked())

    def _book_run(self) -> str | None:
        """Start one run if no limit refuses it; returns the refusing limit, or ``None``."""
        if self.ledger is not None:
            refused = _book_unless(
                self.ledger, self._run_reason, lambda t: replace(t, runs=t.runs + 1)
            )
            with self._lock:
                if refused is not None:
                    self._refused += 1
                    return refused
                self._runs += 1
                return None
        with self._lock:
            reason = self._exhausted_reason_locked()
            if reason is not None:
                self._refused += 1
                return reason
            self._runs += 1
            return None

    def try_start_run(self) -> bool:
        """Reserve one run if the budget allows it; ``False`` (and nothing reserved) if not."""
        return self._book_run() is None

    def start_run(self) -> None:
        """Reserve one run or raise :class:`BudgetExhausted`."""
        reason = self._book_run()
        if reason is not None:
            raise BudgetExhausted(reason, self.snapshot())

    def room_left_after_settling(self) -> bool:
        """Whether the limits leave room once the calls in flight settle: what is spent, not
        what is reserved, is below every limit (a call refused now may be admitted then)."""
        with self._lock:
            t = self._totals_locked()
        return self._run_reason(replace(t, reserved_tokens=0, reserved_usd=0.0)) is None

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

    # -- model calls -----------------------------------------------------------------------------

    def reserve(
        self, model: str, *, input_tokens: int, max_output_tokens: int, call: str | None = None
    ) -> Reservation:
        """Book the worst case of one model call before it is sent: ``input_tokens`` (an upper
        bound of the request's input) and ``max_output_tokens`` at the model's prices.

        Raises :class:`BudgetExhausted` (nothing booked) unless what is spent plus what the calls
        in flight reserved is below every limit, and :class:`UnpricedModel` for a model without
        a price under a dollar limit. ``call`` names the call in the error message.
        """
        _check_counts(model, (input_tokens, max_output_tokens))
        price = self.price(model)
        if price is None:
            self.check_priced(model)
        usd = price.worst_case(input_tokens, max_output_tokens) if price is not None else None
        tokens = input_tokens + max_output_tokens
        if self.ledger is not None:
            refused = _book_unless(
                self.ledger,
                self._spent_reason,
                lambda t: replace(
                    t,
                    reserved_tokens=t.reserved_tokens + tokens,
                    reserved_usd=t.reserved_usd + (usd or 0.0),
                ),
            )
            if refused is not None:
                with self._lock:
                    self._refused_calls += 1
                raise BudgetExhausted(refused, self.snapshot(), call=call)
        with self._lock:
            reason = (
                None if self.ledger is not None else self._spent_reason(self._local_totals_locked())
            )
            if reason is None:
                self._in_flight += 1
                self._reserved_tokens += tokens
                self._largest_tokens = max(self._largest_tokens, tokens)
                if usd is not None:
                    self._reserved_usd += usd
                    self._largest_usd = max(self._largest_usd, usd)
                return Reservation(model, tokens, usd, input_tokens=input_tokens)
            self._refused_calls += 1
        raise BudgetExhausted(reason, self.snapshot(), call=call)

    def _free_locked(self, reservation: Reservation, *, book: bool = True) -> None:
        """Free ``reservation`` here, and in the shared ledger unless ``book`` is false (the
        caller then frees it there in the same booking as the charge that replaces it: two
        bookings would let another process reserve against totals holding neither)."""
        if not reservation.open:
            raise InvalidArgument("This reservation was already settled or released.")
        reservation.open = False
        self._in_flight -= 1
        self._reserved_tokens -= reservation.tokens
        if reservation.usd is not None:
            self._reserved_usd = max(0.0, self._reserved_usd - reservation.usd)
        if self._in_flight == 0:
            self._reserved_usd, self._reserved_tokens = 0.0, 0  # no rounding left behind
        if self.ledger is not None and book:
            self.ledger.add(
                reserved_tokens=-reservation.tokens, reserved_usd=-(reservation.usd or 0.0)
            )

    def release(self, reservation: Reservation) -> None:
        """Free a reservation without a charge (the call failed before any answer)."""
        with self._lock:
            self._free_locked(reservation)

    def charge_abandoned(self, reservation: Reservation) -> float | None:
        """Charge a call abandoned in flight its whole reservation and free it: the provider may
        have billed it, and what it used is unknown, so the worst case is what counts. Returns
        the dollars charged (``None``: the model has no price)."""
        usd = reservation.usd
        with self._lock:
            self._free_locked(reservation, book=False)
            self._abandoned += 1
            self._calls += 1
            self._input += reservation.input_tokens
            self._output += reservation.tokens - reservation.input_tokens
            if self.ledger is not None:
                self.ledger.add(
                    tokens=reservation.tokens,
                    usd=usd or 0.0,
                    reserved_tokens=-reservation.tokens,
                    reserved_usd=-(usd or 0.0),
                )
            if usd is None:
                self._unpriced.add(reservation.model)
                self._unpriced_calls += 1
                return None
            self._abandoned_usd += usd
            self._usd += usd
            self._usd_by_model[reservation.model] = (
                self._usd_by_model.get(reservation.model, 0.0) + usd
            )
        return usd

    def settle(
        self,
        reservation: Reservation,
        input_tokens: int,
        output_tokens: int,
        *,
        model: str | None = None,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
    ) -> float | None:
        """Charge what a reserved call really used and free its reservation; returns its cost
        (``None``: the model has no price). ``model``: the model the API says answered
        (default: the reserved one)."""
        return self._charge(
            model or reservation.model,
            input_tokens,
            output_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
            freeing=reservation,
        )

    def charge(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cached: bool = False,
    ) -> float | None:
        """Record one model call's usage; returns its cost in dollars, or ``None`` when the
        model has no price (the tokens are still counted).

        With ``cached=True`` (a replay from the API cache) the call is recorded as saved and
        costs nothing.
        """
        return self._charge(
            model,
            input_tokens,
            output_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
            cached=cached,
        )

    def _charge(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cached: bool = False,
        freeing: Reservation | None = None,
    ) -> float | None:
        """:meth:`charge`, freeing reservation ``freeing`` (never a cached call's) here and in
        the shared ledger in the same booking as the charge."""
        counts = (input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens)
        _check_counts(model, counts)
        usd = self.cost(
            model,
            input_tokens,
            output_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
        )
        all_input = input_tokens + cache_creation_input_tokens + cache_read_input_tokens
        with self._lock:
            held_tokens, held_usd = 0, 0.0
            if freeing is not None:
                self._free_locked(freeing, book=False)
                held_tokens, held_usd = freeing.tokens, freeing.usd or 0.0
            if usd is None:
                self._unpriced.add(model)
            if cached:
                self._cached_calls += 1
                self._cached_input += all_input
                self._cached_output += output_tokens
                self._usd_saved += usd or 0.0
                return 0.0
            self._calls += 1
            self._input += all_input
            self._output += output_tokens
            if self.ledger is not None:
                self.ledger.add(
                    tokens=all_input + output_tokens,
                    usd=usd or 0.0,
                    reserved_tokens=-held_tokens,
                    reserved_usd=-held_usd,
                )
            if usd is None:
                self._unpriced_calls += 1
                return None
            self._usd += usd
            self._usd_by_model[model] = self._usd_by_model.get(model, 0.0) + usd
        return usd

    def charge_usage(self, model: str, usage: Any, *, cached: bool = False) -> float | None:
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
            reason = self._exhausted_reason_locked()
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
                exhausted=reason is not None,
                exhausted_reason=reason,
                refused_runs=self._refused,
                unpriced_models=sorted(self._unpriced),
                usd_by_model=dict(sorted(self._usd_by_model.items())),
                unpriced_calls=self._unpriced_calls,
                refused_calls=self._refused_calls,
                in_flight_calls=self._in_flight,
                reserved_usd=self._reserved_usd,
                reserved_tokens=self._reserved_tokens,
                largest_reservation_usd=self._largest_usd,
                largest_reservation_tokens=self._largest_tokens,
                abandoned_calls=self._abandoned,
                abandoned_usd=self._abandoned_usd,
            )

    def __repr__(self) -> str:
        s = self.snapshot()
        return (
            f"Budget(runs={s.runs}/{s.max_runs}, tokens={s.tokens}/{s.max_tokens}, "
            f"usd={s.usd:.4f}/{s.max_usd})"
        )
