"""Loading a compiled agent artifact: the system prompt and the tool-description overrides.

In TDAD a compiled agent is text, not code: a system prompt (``seed_prompt.txt``) and a
mapping from tool name to the description the model sees (``seed_tool_descriptions.yaml``).
The descriptions override the spec's own, tool by tool; tools that are not listed keep the
spec's description. Both files are plain UTF-8 and both are optional.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from agentprop._spec.model import Spec
from agentprop._util.yaml_source import load_yaml
from agentprop.errors import InputError, SourceLocation

__all__ = [
    "SEED_PROMPT_FILE",
    "SEED_TOOL_DESCRIPTIONS_FILE",
    "check_tool_descriptions",
    "find_seed_artifacts",
    "load_prompt",
    "load_tool_descriptions",
]

SEED_PROMPT_FILE = "seed_prompt.txt"
"""The system prompt file looked for next to a spec."""

SEED_TOOL_DESCRIPTIONS_FILE = "seed_tool_descriptions.yaml"
"""The tool-description overrides looked for next to a spec."""


def load_prompt(path: str | os.PathLike[str]) -> str:
    """The system prompt in ``path`` (UTF-8 text; one trailing newline is dropped)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"prompt file not found: {p}",
            location=SourceLocation(p),
            fix="check the path (relative paths are resolved from the current directory)",
        ) from None
    except IsADirectoryError:
        raise InputError(
            f"{p} is a directory, not a prompt file",
            location=SourceLocation(p),
            fix=f"name the text file itself, e.g. {p / SEED_PROMPT_FILE}",
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"prompt file is not UTF-8 text ({exc.reason} at byte {exc.start})",
            location=SourceLocation(p),
            fix="save the prompt as UTF-8",
        ) from None
    if text.endswith("\n"):
        text = text[:-1]
    if not text.strip():
        raise InputError(
            "the prompt file is empty",
            location=SourceLocation(p),
            fix="write the agent's system prompt into the file",
        )
    return text


def load_tool_descriptions(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``tool name -> description`` overrides in the YAML file ``path``.

    An empty file means no overrides. Every value must be a non-empty string.
    """
    src = load_yaml(Path(path))
    data = src.data
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InputError(
            f"tool descriptions must be a mapping, not a {type(data).__name__}",
            location=src.location(()),
            expected='one `tool_name: "description"` line per tool',
            fix='write e.g. `get_account: "Fetch account data."`',
        )
    out: dict[str, str] = {}
    for name, value in data.items():
        if not isinstance(name, str):
            raise InputError(
                f"tool name {name!r} is not a string",
                location=src.location((name,), key=True),
                fix="quote the tool name",
            )
        if not isinstance(value, str) or not value.strip():
            raise InputError(
                f"the description of {name} must be a non-empty string, not {value!r}",
                location=src.location((name,)),
                expected=f'{name}: "What the tool does and when to call it."',
                fix="write the description as a (quoted) string, or delete the "
                "line to keep the spec's",
            )
        out[name] = value.strip()
    return out


def check_tool_descriptions(
    descriptions: Mapping[str, str], spec: Spec, *, path: str | os.PathLike[str] | None = None
) -> None:
    """Raise :class:`InputError` if ``descriptions`` names a tool ``spec`` does not declare."""
    unknown = sorted(set(descriptions) - set(spec.tools_by_name))
    if not unknown:
        return
    where = SourceLocation(Path(path)) if path is not None else None
    raise InputError(
        f"tool description(s) for {', '.join(unknown)}, which spec {spec.spec_id} does not declare",
        location=where,
        expected=f"tool names from the spec: {', '.join(sorted(spec.tools_by_name))}",
        fix="rename the entries to tools of the spec, or delete them",
    )


def find_seed_artifacts(directory: str | os.PathLike[str]) -> tuple[Path | None, Path | None]:
    """``(seed_prompt.txt, seed_tool_descriptions.yaml)`` in ``directory``, each
    ``None`` if absent."""
    d = Path(directory)
    prompt = d / SEED_PROMPT_FILE
    tools = d / SEED_TOOL_DESCRIPTIONS_FILE
    return (prompt if prompt.is_file() else None, tools if tools.is_file() else None)
