"""Whether the installed MCP SDK can run agentprop's MCP code (mcp 1.24+ below 2, or 2.3+), and if
not, why.

A version conflict is named as one, with the installed version and the packages that cap it.
Versions are read through ``importlib.metadata`` only: nothing is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata

MIN_VERSION = (1, 24)
"""The oldest MCP SDK agentprop's MCP code runs on (the ``mcp`` extra's lower bound)."""

UNSUPPORTED = ((2, 0), (2, 3))
"""The early 2.x releases, ``[2.0, 2.3)``, whose API is neither 1.x's nor 2.3's: not supported."""

SUPPORTED = "mcp 1.24 or later below 2, or 2.3 or later"

_MCP_REQUIREMENT = re.compile(
    r"^\s*mcp\s*(?:\[[^\]]*\])?\s*(?P<spec>[<>=!~][^;]*)?(?:;(?P<marker>.*))?$", re.IGNORECASE
)


@dataclass(frozen=True)
class McpSdkProblem:
    """Why the MCP SDK cannot be used (``problem``) and what to do (``fix``)."""

    problem: str
    fix: str


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.3.0"`` as ``(2, 3, 0)`` (the first three numbers)."""
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


_version_tuple = version_tuple


def supported(version: str) -> bool:
    """Whether agentprop's MCP code runs on MCP SDK ``version``."""
    v = version_tuple(version)
    return v >= MIN_VERSION and not UNSUPPORTED[0] <= v < UNSUPPORTED[1]


def installed_mcp() -> str | None:
    """The installed ``mcp`` version (``None``: not installed)."""
    try:
        return metadata.version("mcp")
    except metadata.PackageNotFoundError:
        return None


def _excludes_min(spec: str) -> bool:
    """Whether a version specifier (``<2.0.0,>=1.24``) rules out :data:`MIN_VERSION`."""
    for clause in spec.replace(" ", "").split(","):
        op = re.match(r"[<>=!~]+", clause)
        if op is None:
            continue
        bound = _version_tuple(clause[op.end() :])
        if (op.group() == "<" and bound <= MIN_VERSION) or (
            op.group() in ("<=", "==", "~=", "===") and bound < MIN_VERSION
        ):
            return True
    return False


def capping_packages() -> list[str]:
    """The installed packages whose requirement on ``mcp`` rules out :data:`MIN_VERSION`, as
    ``"NAME VERSION (mcp<2,...)"``."""
    capping: list[str] = []
    for dist in metadata.distributions():
        for requirement in dist.requires or []:
            match = _MCP_REQUIREMENT.match(requirement)
            if match is None or "extra" in (match.group("marker") or ""):
                continue
            spec = (match.group("spec") or "").strip()
            if _excludes_min(spec):
                capping.append(
                    f"{dist.metadata['Name']} {dist.version} (mcp{spec.replace(' ', '')})"
                )
    return sorted(set(capping))


def diagnose(what: str, version: str | None, capping: list[str]) -> McpSdkProblem | None:
    """The problem of running ``what`` with MCP SDK ``version`` (``None``: not installed),
    ``capping`` naming the packages that hold it down; ``None`` when there is none."""
    if version is None:
        return McpSdkProblem(
            f"{what} needs the MCP SDK ({SUPPORTED}), which is not installed",
            "pip install 'agentprop[mcp]'",
        )
    if supported(version):
        return None
    problem = f"{what} needs the MCP SDK ({SUPPORTED}), and mcp {version} is installed"
    if version_tuple(version) >= UNSUPPORTED[0]:
        # an early 2.x: both ways out are open unless a package caps it (none known does)
        return McpSdkProblem(
            problem, "pip install -U 'agentprop[mcp]' (mcp 2.3 or later), or 'mcp>=1.24,<2'"
        )
    if capping:
        problem += f", held below {'.'.join(map(str, MIN_VERSION))} by {'; '.join(capping)}"
        fix = (
            "upgrade that package, or run agentprop's MCP server from an environment of its own "
            "(a venv with pip install 'agentprop[mcp]') and connect your MCP client to it over "
            f"stdio or --http: a client on mcp {version} speaks to it unchanged"
        )
    else:
        fix = "pip install -U 'agentprop[mcp]'"
    return McpSdkProblem(problem, fix)


def mcp_sdk_problem(what: str) -> McpSdkProblem | None:
    """The problem of running ``what`` with the installed MCP SDK, or ``None``."""
    version = installed_mcp()
    if version is not None and supported(version):
        return None
    return diagnose(what, version, capping_packages() if version is not None else [])


__all__ = [
    "MIN_VERSION",
    "SUPPORTED",
    "UNSUPPORTED",
    "McpSdkProblem",
    "capping_packages",
    "diagnose",
    "installed_mcp",
    "mcp_sdk_problem",
    "supported",
    "version_tuple",
]
