"""Judges: deciding a result that code alone cannot, and measuring how far to trust the judge.

:func:`code_judge` / :class:`CodeJudge` wrap a Python predicate; :class:`ModelJudge` asks a
model with a :class:`Rubric`. :func:`calibrate` measures a judge against labelled examples and
keeps the :class:`Calibration` in a :class:`CalibrationStore`, so a verdict's interval accounts
for the judge's own errors.
"""

from agentprop._judge.judges import (
    Calibration,
    CalibrationStore,
    CodeJudge,
    ModelJudge,
    Rubric,
    calibrate,
    code_judge,
)

__all__ = [
    "Calibration",
    "CalibrationStore",
    "CodeJudge",
    "ModelJudge",
    "Rubric",
    "calibrate",
    "code_judge",
]
