"""The forms of ``ExecuteParams.system_prompt``: their checks and what the SDK gets (pure).

Every form the SDK takes (``ClaudeAgentOptions.system_prompt``):

1. ``None``: an EMPTY system prompt (the SDK sends ``--system-prompt ""``), unless
   ``claude_usePreset`` asks for Claude Code's.
2. A string: the whole system prompt; with ``claude_usePreset`` it is appended to Claude Code's
   (``{"type": "preset", "preset": "claude_code", "append": ...}``).
3. ``{"type": "preset", "preset": "claude_code"}``, with optional ``"append"`` (a string),
   ``"exclude_dynamic_sections"`` and ``"snapshot"`` (booleans): Claude Code's own prompt.
4. ``{"type": "custom", "prompt": ...}``, with optional ``"snapshot"``: a string prompt that can
   also say whether the session keeps the prompt it recorded on its first request.
5. ``{"type": "file", "path": ...}``: the prompt is read by the CLI from a file (an absolute
   path: the CLI's working directory may differ from this process's).

A mapping form is the whole answer: with ``claude_usePreset`` set only the ``preset`` form
agrees with it; ``custom`` and ``file`` are refused (they replace Claude Code's prompt, which
the preset asks for). Every string the CLI gets as a command-line argument is under
:data:`~claude_trio.protocol.checks.MAX_ARGUMENT_BYTES` and holds no NUL.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

from claude_agent_sdk.types import SystemPromptCustom, SystemPromptFile, SystemPromptPreset

from claude_trio.protocol.checks import MAX_ARGUMENT_BYTES
from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "SYSTEM_PROMPT_KEYS",
    "SdkSystemPrompt",
    "build_system_prompt",
    "check_argument_text",
    "check_system_prompt",
    "check_with_preset",
    "freeze_system_prompt",
    "system_prompt_form",
]

SdkSystemPrompt = str | SystemPromptPreset | SystemPromptCustom | SystemPromptFile
"""What ``ClaudeAgentOptions.system_prompt`` takes (besides ``None``)."""

SYSTEM_PROMPT_KEYS: Mapping[str, Mapping[str, type]] = MappingProxyType(
    {
        "preset": MappingProxyType(
            {"preset": str, "append": str, "exclude_dynamic_sections": bool, "snapshot": bool}
        ),
        "custom": MappingProxyType({"prompt": str, "snapshot": bool}),
        "file": MappingProxyType({"path": str}),
    }
)
"""Each mapping form's ``type`` -> its other keys and their types."""

_REQUIRED: Mapping[str, str] = MappingProxyType(
    {"preset": "preset", "custom": "prompt", "file": "path"}
)
_FORMS = (
    "a string, None, {'type': 'preset', 'preset': 'claude_code', 'append'?, "
    "'exclude_dynamic_sections'?, 'snapshot'?}, {'type': 'custom', 'prompt', 'snapshot'?} or "
    "{'type': 'file', 'path'}"
)


def check_argument_text(field: str, value: str) -> None:
    """A string the CLI gets as one command-line argument: no NUL, within the system's limit."""
    if "\0" in value:
        raise InvalidParamsError(
            field,
            "...",
            "no NUL character (the CLI gets it as a command-line argument, which cannot hold one)",
        )
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ARGUMENT_BYTES:
        raise InvalidParamsError(
            field,
            f"{size} bytes",
            f"at most {MAX_ARGUMENT_BYTES} bytes (the CLI gets it as one command-line argument; "
            "put long instructions in the prompt, a CLAUDE.md file or "
            "{'type': 'file', 'path': ...} instead)",
        )


def freeze_system_prompt(value: Any) -> Any:
    """A mapping form becomes a read-only copy (the caller's dict cannot change it later)."""
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def check_system_prompt(field: str, value: object) -> None:
    """Raise :class:`InvalidParamsError` unless ``value`` is one of the forms (module rules)."""
    if value is None:
        return
    if isinstance(value, str):
        check_argument_text(field, value)
        return
    if not isinstance(value, Mapping):
        raise InvalidParamsError(field, value, _FORMS)
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in SYSTEM_PROMPT_KEYS:
        raise InvalidParamsError(f"{field}.type", kind, "'preset', 'custom' or 'file'")
    keys = SYSTEM_PROMPT_KEYS[kind]
    for key, item in value.items():
        if key == "type":
            continue
        if key not in keys:
            raise InvalidParamsError(
                f"{field}[{key!r}]",
                item,
                f"no such key in the {kind!r} form; its keys: "
                + ", ".join(repr(k) for k in ("type", *keys)),
            )
        expected = keys[key]
        if not isinstance(item, expected) or (expected is int and isinstance(item, bool)):
            raise InvalidParamsError(f"{field}.{key}", item, f"a {expected.__name__}")
        if isinstance(item, str):
            check_argument_text(f"{field}.{key}", item)
    required = _REQUIRED[kind]
    if required not in value:
        raise InvalidParamsError(field, dict(value), f"the {kind!r} form needs {required!r}")
    match kind:
        case "preset" if value["preset"] != "claude_code":
            raise InvalidParamsError(
                f"{field}.preset",
                value["preset"],
                "'claude_code' (the SDK knows no other preset, and would send Claude Code's "
                "prompt for any name)",
            )
        case "file" if not (value["path"] and posixpath.isabs(value["path"])):
            raise InvalidParamsError(
                f"{field}.path",
                value["path"],
                "an absolute path (the CLI reads the file from its own working directory)",
            )
        case "custom" if not value["prompt"].strip():
            raise InvalidParamsError(
                f"{field}.prompt", value["prompt"], "a non-empty prompt (None gives an empty one)"
            )


def check_with_preset(value: object, preset: str | None) -> None:
    """A mapping form must agree with ``claude_usePreset`` (module rules)."""
    if preset is None or not isinstance(value, Mapping) or value.get("type") == "preset":
        return
    raise InvalidParamsError(
        "system_prompt",
        dict(value),
        f"a string or the 'preset' form with claude_usePreset (a {value.get('type')!r} prompt "
        "replaces Claude Code's, which the preset asks for): drop one of the two",
    )


def build_system_prompt(
    value: str | Mapping[str, Any] | None, preset: str | None
) -> SdkSystemPrompt | None:
    """What ``ClaudeAgentOptions.system_prompt`` gets for ``ExecuteParams.system_prompt`` and
    the ``claude_usePreset`` preset (module rules 1-5)."""
    if isinstance(value, Mapping):
        return cast(SdkSystemPrompt, dict(value))
    match preset:
        case None:
            return value
        case "claude_code":
            config: SystemPromptPreset = {"type": "preset", "preset": "claude_code"}
            if value:
                config["append"] = value
            return config
        case _:  # ArchitectureConfig only admits KNOWN_PRESETS
            raise InvalidParamsError("claude_usePreset", preset, "'claude_code'")


def system_prompt_form(value: SdkSystemPrompt | None) -> str | None:
    """How ``adapter_ready`` names the system prompt the CLI got: ``None`` (empty),
    ``"custom"`` (a string or the custom form), ``"preset"``, ``"preset+append"`` or
    ``"file:<path>"``."""
    match value:
        case None:
            return None
        case str():
            return "custom"
        case {"type": "file", "path": str(path)}:
            return f"file:{path}"
        case {"type": "preset", "append": str()}:
            return "preset+append"
        case {"type": "preset"}:
            return "preset"
        case _:
            return "custom"
