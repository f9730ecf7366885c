"""What a session is told: its parameters, and the checks you can run on them before it starts.

:class:`ExecuteParams` carries the prompt, the model and every option of an execution (each
checked when it is made, with an error that names the field); :class:`ArchitectureConfig` the
CLI-specific settings (thinking, effort, the system prompt preset, ``custom_env``).
:class:`ImageInput`, :class:`SubagentDefinition` and :class:`InlineSkill` are the values of
its ``images``, ``subagents`` and ``inline_skills``.

Before starting: :func:`resolve_model` (an alias to the model id the CLI gets),
:func:`find_resume_violations` (whether resuming with new parameters would be refused),
:func:`architecture_capabilities` (what this architecture supports), and
:func:`redact_secrets` (a configuration with its secrets masked, as ``adapter_ready`` shows it).

Servers and tools: :func:`register_provider` adds a provider (another server that speaks the
Messages API; ``ExecuteParams(provider=...)`` then takes its name and any model id), a
:class:`ProviderPreset`. A tool list naming a tool the bundled CLI does not report warns
:class:`UnknownToolWarning` (a category to filter) and is passed on; :data:`KNOWN_TOOLS` are the
names it knows.

This module imports no trio.
"""

from claude_trio.protocol.config.capabilities import (
    ArchitectureCapabilities,
    architecture_capabilities,
)
from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.models import ADAPTIVE_THINKING_ONLY, resolve_model
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.permissions import PERMISSION_MODES, PermissionMode
from claude_trio.protocol.config.providers import ProviderPreset, register_provider
from claude_trio.protocol.config.redact import redact_secrets
from claude_trio.protocol.config.resume import (
    ResumeConstraints,
    ResumeViolation,
    ScopeWidening,
    find_resume_violations,
    get_session_resume_constraints,
)
from claude_trio.protocol.config.subagents import SubagentDefinition
from claude_trio.protocol.config.tools import KNOWN_TOOLS, UnknownToolWarning
from claude_trio.protocol.extensions.skills import InlineSkill

__all__ = [
    "ADAPTIVE_THINKING_ONLY",
    "KNOWN_TOOLS",
    "PERMISSION_MODES",
    "ArchitectureCapabilities",
    "ArchitectureConfig",
    "ExecuteParams",
    "ImageInput",
    "InlineSkill",
    "PermissionMode",
    "ProviderPreset",
    "ResumeConstraints",
    "ResumeViolation",
    "ScopeWidening",
    "SubagentDefinition",
    "UnknownToolWarning",
    "architecture_capabilities",
    "find_resume_violations",
    "get_session_resume_constraints",
    "redact_secrets",
    "register_provider",
    "resolve_model",
]
