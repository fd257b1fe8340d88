"""The run report: its model (:mod:`.model`, schema ``agentprop.run/1``) and its renderings.

The renderers take the model (:class:`.model.RunReport`, or for HTML also a
:class:`.model.SnapshotCheckReport`) and return text; none runs anything: HTML (:mod:`.html`,
a self-contained viewer; needs jinja2, the ``report`` extra), JUnit XML (:mod:`.junit`) and
Markdown (:mod:`.markdown`). A renderer is imported when first asked for: a run that writes
no report file needs the model only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentprop._pipeline.report.html import render_html, require_jinja2
    from agentprop._pipeline.report.junit import render_junit
    from agentprop._pipeline.report.markdown import render_markdown

__all__ = ["render_html", "render_junit", "render_markdown", "require_jinja2"]

_MODULE_OF = {
    "render_html": "html",
    "require_jinja2": "html",
    "render_junit": "junit",
    "render_markdown": "markdown",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
