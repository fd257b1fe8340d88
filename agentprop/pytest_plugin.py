"""pytest plugin for agentprop (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentprop(tau=None, n=None, risk=None): statistical settings for an agent property test",
    )
