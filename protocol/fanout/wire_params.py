"""The ``params`` of the websocket gateway's ``open`` op, both ways (sans-I/O, no trio): which
``ExecuteParams`` fields a remote client may set (:data:`PARAMS_FIELDS`; never
:data:`LOCAL_ONLY_FIELDS`; ``cwd``, a ``file`` system prompt and the CLI's environment
(:data:`ENV_KEYS`, ``provider``) only when the gateway allows them), :func:`params_from_json`
with the checks of every value it lets in, and :func:`params_to_json`. Rules 3 and 5 of
``protocol/fanout/wire.py`` are kept here; ``wire.py`` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.subagents import subagent_from_mapping
from claude_trio.protocol.errors import InvalidParamsError, WireError
from claude_trio.protocol.fanout.codec import json_type
from claude_trio.protocol.fanout.wire_checks import (
    check_arguments,
    check_value,
    images_from_json,
    images_to_json,
)

__all__ = [
    "ENV_KEYS",
    "LOCAL_ONLY_FIELDS",
    "PARAMS_FIELDS",
    "params_from_json",
    "params_to_json",
]

PARAMS_FIELDS: tuple[str, ...] = (
    "prompt",
    "model",
    "system_prompt",
    "max_turns",
    "plan_mode",
    "permission_mode",
    "cwd",
    "resume_session_id",
    "streaming_input",
    "architecture_config",
    "user_input_timeout",
    "images",
    "run_timeout",
    "idle_timeout",
    "max_budget_usd",
    "provider",
    "fallback_model",
    "subagents",
    "output_schema",
    "allowed_tools",
    "disallowed_tools",
    "tools",
    "allowed_paths",
    "read_only_paths",
    "disallowed_paths",
    "scope_enforcement",
    "setting_sources",
    "fork_session",
    "session_id",
    "resume_session_at",
    "resume_drops_turn",
    "strict_mcp_config",
    "betas",
    "task_budget",
    "include_hook_events",
    "verbatim_prompts",
    "client_app",
)
"""The ``ExecuteParams`` fields an ``open`` op may carry (``mcp_servers`` never: rule 3).
``system_prompt`` is a string or one of its mapping forms (a JSON object); the ``file`` form
reads a file of the server, so it is refused unless ``allow_cwd``.
``images`` travel as ``[{"data": "<base64>"}]`` (the type is read from the bytes), ``subagents``
as ``{name: {"description", "prompt", ...}}``; ``provider`` counts as environment (it sends a
credential of the server's environment to another server): refused unless ``allow_env``."""

LOCAL_ONLY_FIELDS: frozenset[str] = frozenset(
    {"mcp_servers", "inline_skills", "tool_timeout", "hook_timeout", "file_checkpointing"}
)
"""``ExecuteParams`` fields a remote client can never set: servers to start, files to write on
the server (inline skills), the deadlines of the operator's own custom tools and hooks, and
file checkpoints (rewinding files is not a remote control)."""

ENV_KEYS: frozenset[str] = frozenset({"custom_env", "ollama_baseUrl"})
"""``architecture_config`` keys that set the CLI's environment (refused unless ``allow_env``)."""


def params_from_json(
    obj: Any, *, allow_cwd: bool = False, allow_env: bool = False, op_id: str | None = None
) -> ExecuteParams:
    """``ExecuteParams`` from the ``params`` object of an ``open`` op; raises :class:`WireError`
    (with ``op_id``, the op's, when it came in one)."""
    if not isinstance(obj, dict):
        raise WireError(
            "invalid_field", f"params: expected a JSON object, got {json_type(obj)}", op_id
        )
    for key in obj:
        if key == "provider" and not allow_env and obj[key] not in (None, "anthropic"):
            raise WireError(
                "forbidden_field",
                "params.provider cannot be set by a remote client (it is environment, and the "
                "gateway does not allow it)",
                op_id,
            )
        if key in LOCAL_ONLY_FIELDS or (key == "cwd" and not allow_cwd):
            raise WireError(
                "forbidden_field",
                f"params.{key} cannot be set by a remote client"
                + ("" if key in LOCAL_ONLY_FIELDS else " (the gateway does not allow it)"),
                op_id,
            )
        if key == "system_prompt" and not allow_cwd and _is_file_prompt(obj[key]):
            raise WireError(
                "forbidden_field",
                "params.system_prompt: the 'file' form reads a file on the server (the gateway "
                "does not allow it); send the prompt's text instead",
                op_id,
            )
        if key not in PARAMS_FIELDS:
            raise WireError(
                "unknown_field",
                f"params.{key} is not a field; allowed: {', '.join(PARAMS_FIELDS)}",
                op_id,
            )
    if "prompt" not in obj:
        raise WireError("missing_field", "params.prompt is required", op_id)
    check_value(obj, "params", 1, op_id)
    check_arguments(obj, op_id)
    kwargs = dict(obj)
    if "architecture_config" in kwargs:
        kwargs["architecture_config"] = _architecture_config(
            kwargs["architecture_config"], allow_env, op_id
        )
    try:
        if "images" in kwargs:
            kwargs["images"] = images_from_json(kwargs["images"], op_id, "params.images")
        if "subagents" in kwargs:
            raw = kwargs["subagents"]
            if not isinstance(raw, dict):
                raise WireError("invalid_field", "params.subagents: expected an object", op_id)
            kwargs["subagents"] = {
                # A subagent's server config would start a process (rule 3): names only.
                name: subagent_from_mapping(name, value, inline_mcp=False)
                for name, value in raw.items()
            }
        return ExecuteParams(**kwargs)
    except InvalidParamsError as exc:
        raise WireError("invalid_params", f"params.{exc.field}: {exc}", op_id) from None


def _is_file_prompt(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "file"


def _architecture_config(obj: Any, allow_env: bool, op_id: str | None) -> ArchitectureConfig:
    where = "params.architecture_config"
    if not isinstance(obj, dict):
        raise WireError(
            "invalid_field", f"{where}: expected a JSON object, got {json_type(obj)}", op_id
        )
    if not allow_env:
        for key in obj:
            if key in ENV_KEYS:
                raise WireError(
                    "forbidden_field",
                    f"{where}.{key} sets the CLI's environment on the server; "
                    "the gateway does not allow it",
                    op_id,
                )
    try:
        return ArchitectureConfig.from_mapping(obj)
    except InvalidParamsError as exc:
        raise WireError("invalid_params", f"{where}.{exc.field}: {exc}", op_id) from None


def params_to_json(params: ExecuteParams) -> dict[str, Any]:
    """The ``params`` object for ``params``: the prompt plus every wire field not at its default.

    The inverse of :func:`params_from_json` (with ``allow_cwd``/``allow_env`` for such params);
    ``mcp_servers`` cannot travel and is left out.
    """
    out: dict[str, Any] = {"prompt": params.prompt}
    for field in attrs.fields(ExecuteParams):
        if field.name == "prompt" or field.name not in PARAMS_FIELDS:
            continue
        value = getattr(params, field.name)
        if field.name == "architecture_config":
            mapping = value.to_mapping()
            if mapping:
                out[field.name] = mapping
        elif field.name == "images":
            if value:
                out[field.name] = images_to_json(value)
        elif field.name == "subagents":
            if value:
                out[field.name] = {
                    name: {k: v for k, v in attrs.asdict(d).items() if v not in (None, False)}
                    for name, d in value.items()
                }
        elif field.name in ("output_schema", "system_prompt") and isinstance(value, Mapping):
            out[field.name] = dict(value)
        elif field.name in (
            "allowed_tools",
            "disallowed_tools",
            "tools",
            "allowed_paths",
            "read_only_paths",
            "disallowed_paths",
            "betas",
        ):
            if value:
                out[field.name] = list(value)
        elif field.name == "setting_sources":
            if value is not None:
                out[field.name] = list(value)
        elif value != field.default:  # the other wire fields have plain (non-factory) defaults
            out[field.name] = value
    return out
