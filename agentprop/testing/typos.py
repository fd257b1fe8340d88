"""Reading a message the way a person does, for simulated agents and test doubles.

:func:`correct_typos` puts a word within one edit of a known word back; :func:`as_corrected`
reads a self-repaired message by what follows its last repair; :func:`as_simplified` reads
traditional Chinese as simplified. (Implemented in :mod:`agentprop._util.typos`, which a run's
grounding reads through without importing the test servers of this package.)
"""

from __future__ import annotations

from agentprop._util.typos import as_corrected, as_simplified, correct_typos, withdrawn_part

__all__ = ["as_corrected", "as_simplified", "correct_typos", "withdrawn_part"]
