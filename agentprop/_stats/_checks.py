"""Argument checks shared by the statistics modules.

Every check raises :class:`agentprop.errors.InvalidArgument` with a message that names the
argument, the value it got and what it should have been, so a caller can fix the call without
reading this code.
"""

from __future__ import annotations

import math
import numbers

from agentprop.errors import InvalidArgument


def check_count(name: str, value: object, *, minimum: int = 0) -> int:
    """Return ``value`` as an ``int`` if it is a whole number ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgument(
            f"{name}={value!r} must be an integer (a count of runs), got {type(value).__name__}. "
            f"Pass a whole number such as {max(minimum, 0)}."
        )
    result = int(value)
    if result < minimum:
        raise InvalidArgument(f"{name}={result} must be at least {minimum}.")
    return result


def check_successes(successes: object, n: object, *, n_minimum: int = 1) -> tuple[int, int]:
    """Check a (successes, runs) pair: ``0 <= successes <= n`` and ``n >= n_minimum``."""
    n_int = check_count("n", n, minimum=n_minimum)
    s_int = check_count("successes", successes)
    if s_int > n_int:
        raise InvalidArgument(
            f"successes={s_int} is larger than n={n_int}: the number of successes cannot "
            "exceed the number of runs. Check that the arguments are not swapped."
        )
    return s_int, n_int


def check_real(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgument(
            f"{name}={value!r} must be a real number, got {type(value).__name__}."
        )
    result = float(value)
    if not math.isfinite(result):
        raise InvalidArgument(f"{name}={result!r} must be a finite number.")
    return result


def check_open_unit(name: str, value: object) -> float:
    """A probability strictly between 0 and 1 (a confidence level, an error rate...)."""
    result = check_real(name, value)
    if not 0.0 < result < 1.0:
        raise InvalidArgument(
            f"{name}={result!r} must lie strictly between 0 and 1 (for example 0.95)."
        )
    return result


def check_closed_unit(name: str, value: object) -> float:
    """A probability in ``[0, 1]`` (a pass rate)."""
    result = check_real(name, value)
    if not 0.0 <= result <= 1.0:
        raise InvalidArgument(f"{name}={result!r} must lie between 0 and 1 inclusive.")
    return result
