"""Renderers of the run report: HTML (a self-contained viewer), JUnit XML and Markdown.

Each takes the report model (:class:`agentprop._report.RunReport`, or for HTML also a
:class:`agentprop._report.SnapshotCheckReport`) and returns text; none runs anything.
"""

from __future__ import annotations

from agentprop._render.html import render_html, require_jinja2
from agentprop._render.junit import render_junit
from agentprop._render.markdown import render_markdown

__all__ = ["render_html", "render_junit", "render_markdown", "require_jinja2"]
