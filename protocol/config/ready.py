"""What an execution reports before it starts: ``adapter_ready`` and the warnings before it
(pure).

Rules:

1. ``adapter_ready`` is the first event of every execution whose CLI started: the resolved
   configuration (the options the CLI got, not what was asked), every secret masked
   (``redact.py``), with the SDK's and the CLI's versions.
2. Before it, one ``warning`` per option that was converted or ignored
   (:func:`config_warnings`, ``code="config_changed"``) and per version that was not verified
   (``versions.py``, ``code="untested_version"``).
3. A path scope whose Bash sandbox cannot run (``scope.sandbox_problem``): a hard scope does
   not start (one ``error``, ``code="config"``, :func:`scope_refusal`); a soft one starts with
   a ``warning`` (``code="scope_unconfined"``, :func:`scope_warning`) before ``adapter_ready``.
   A scope with ``setting_sources`` named gets a ``config_changed`` warning that those files
   may widen it.
4. A ``cwd`` that is not an existing directory where the session runs: the execution does not
   start (one ``error``, ``code="config"``, :func:`cwd_refusal`), instead of a CLI that exits at
   once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions

from claude_trio.protocol.config.models import is_adaptive_only
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.redact import redact_secrets
from claude_trio.protocol.config.system_prompt import system_prompt_form
from claude_trio.protocol.config.tools import READONLY_BUILTINS
from claude_trio.protocol.session.events import AdapterReady


def config_warnings(params: ExecuteParams) -> list[str]:
    """Options that do not reach the CLI as asked (rule 2)."""
    out: list[str] = []
    config = params.architecture_config
    model = params.resolved_model
    if config.claude_thinking == "enabled" and is_adaptive_only(model):
        budget = config.claude_thinking_budget
        ignored = f"; claude_thinking_budget={budget} is ignored" if budget is not None else ""
        out.append(
            f"claude_thinking='enabled' becomes 'adaptive' on {model}, which takes no fixed "
            f"thinking budget{ignored}"
        )
    if params.plan_mode and params.tools is not None:
        dropped = [tool for tool in params.tools if tool not in READONLY_BUILTINS]
        if dropped:
            out.append(f"plan mode offers read-only tools only: {', '.join(dropped)} dropped")
    if params.inline_skills and not _skill_tool_offered(params):
        names = ", ".join(skill.qualified_name for skill in params.inline_skills)
        out.append(f"the Skill tool is not offered, so the model cannot open {names}")
    if params.provider not in (None, "anthropic") and config.ollama_base_url is not None:
        out.append(
            f"ollama_baseUrl overrides the {params.provider} preset's server "
            f"({config.ollama_base_url})"
        )
    if params.scoped and params.setting_sources:
        names = ", ".join(params.setting_sources)
        out.append(
            f"setting_sources={names} are loaded with a path scope: their permission rules "
            "and additional directories may widen it"
        )
    return out


def cwd_refusal(cwd: str, problem: str) -> str:
    """The error of an execution whose working directory the CLI cannot start in (rule 4)."""
    return (
        f"cwd={cwd!r} {problem}, so the CLI cannot start in it. Create the directory first, "
        "or pass the path of an existing one (cwd is a path on the machine the session runs on)"
    )


def scope_refusal(problem: str) -> str:
    """The error of a hard path scope whose Bash sandbox cannot run (rule 3)."""
    return (
        f"the path scope is hard (scope_enforcement='hard') but {problem}. Install it, or pass "
        "scope_enforcement='soft' to run with Bash unconfined (the file tools stay scoped)"
    )


def scope_warning(problem: str) -> str:
    """The warning of a soft path scope whose Bash sandbox cannot run (rule 3)."""
    return (
        f"Bash is not confined to the path scope: {problem}. The file tools stay scoped; Bash "
        "commands are only checked for the paths they name literally"
    )


def _skill_tool_offered(params: ExecuteParams) -> bool:
    """Plan mode, ``tools`` without it and ``disallowed_tools`` take the Skill tool away."""
    if params.plan_mode or "Skill" in params.disallowed_tools:
        return False
    return params.tools is None or "Skill" in params.tools


def _thinking(options: ClaudeAgentOptions) -> Mapping[str, Any] | None:
    thinking = options.thinking
    return dict(thinking) if thinking is not None else None


def adapter_ready(
    params: ExecuteParams,
    options: ClaudeAgentOptions,
    *,
    sdk_version: str | None,
    cli_version: str | None,
    custom_tools: Sequence[str] = (),
    hooks: Sequence[str] = (),
    bash_sandboxed: bool = False,
) -> AdapterReady:
    """The ``adapter_ready`` event for an execution of ``params`` run with ``options``;
    ``custom_tools``: the full names of the session's in-process tools. ``hooks``: the
    session's hooks, as ``Hook.label`` names them."""
    env = redact_secrets(dict(options.env))
    base_url = env.get("ANTHROPIC_BASE_URL") or None
    return AdapterReady(
        model=options.model,
        fallback_model=options.fallback_model,
        provider=params.provider or "anthropic",
        base_url=base_url,
        thinking=_thinking(options),
        effort=options.effort,
        permission_mode=options.permission_mode,
        plan_mode=params.plan_mode,
        tools=tuple(options.tools) if isinstance(options.tools, list) else None,
        allowed_tools=tuple(options.allowed_tools),
        disallowed_tools=tuple(options.disallowed_tools),
        cwd=str(options.cwd) if options.cwd is not None else None,
        max_turns=options.max_turns,
        max_budget_usd=options.max_budget_usd,
        run_timeout=params.run_timeout,
        idle_timeout=params.idle_timeout,
        subagents=tuple(options.agents or ()),
        output_schema=options.output_format is not None,
        images=len(params.images),
        resume_session_id=options.resume,
        env=env,
        sdk_version=sdk_version,
        cli_version=cli_version,
        custom_tools=tuple(custom_tools),
        hooks=tuple(hooks),
        inline_skills=tuple(skill.qualified_name for skill in params.inline_skills),
        allowed_paths=params.allowed_paths,
        read_only_paths=params.read_only_paths,
        disallowed_paths=params.disallowed_paths,
        add_dirs=tuple(str(d) for d in options.add_dirs),
        scope_enforcement=params.scope_enforcement if params.scoped else None,
        bash_sandboxed=bash_sandboxed,
        setting_sources=(
            tuple(options.setting_sources) if options.setting_sources is not None else None
        ),
        system_prompt=system_prompt_form(options.system_prompt),
        strict_mcp_config=options.strict_mcp_config,
        session_id=options.session_id,
        fork_session=options.fork_session,
        resume_session_at=options.resume_session_at,
        resume_drops_turn=options.resume_drops_turn,
        betas=tuple(options.betas),
        task_budget=options.task_budget["total"] if options.task_budget is not None else None,
        include_hook_events=options.include_hook_events,
        verbatim_prompts=options.verbatim_prompts,
        client_app=options.client_app,
        prompt=params.prompt,
    )
