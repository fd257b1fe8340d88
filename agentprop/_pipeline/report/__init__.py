"""The run report: its model (:mod:`.model`, schema ``agentprop.run/1``) and its renderings.

The renderers take the model (:class:`.model.RunReport`, or for HTML also a
:class:`.model.SnapshotCheckReport`) and return text; none runs anything: HTML (:mod:`.html`,
a self-contained viewer; needs jinja2, the ``report`` extra), JUnit XML (:mod:`.junit`) and
Markdown (:mod:`.markdown`).
"""

from __future__ import annotations

from agentprop._pipeline.report.html import render_html, require_jinja2
from agentprop._pipeline.report.junit import render_junit
from agentprop._pipeline.report.markdown import render_markdown

__all__ = ["render_html", "render_junit", "render_markdown", "require_jinja2"]
