"""What must not change when a session is resumed, as data and as one pure check.

Rules (as the TypeScript library's session-resume rules):

1. Resuming replays the stored transcript, including earlier thinking blocks, and the API
   requires those back byte-identical. Resuming with a different model or thinking setup fails
   with a 400 ("thinking blocks ... cannot be modified"), so :data:`RESUME_IMMUTABLE` (model,
   ``claude_thinking``, ``claude_thinking_budget``, ``claude_effort``,
   ``claude_thinking_display``) must stay as the session was created. To change one, start a new
   session.
2. We compare what the CLI actually gets, not the spelling: the RESOLVED model (``opus-4.6`` and
   ``claude-opus-4-6`` are the same) and the EFFECTIVE thinking config (on an adaptive-only
   model ``enabled`` with any budget is ``adaptive``, and the display default applies).
3. The check cannot see the CLI's state: it compares two ``ExecuteParams``; the caller keeps the
   ones the session was created with.
4. The provider is immutable too: another server serves other models, and the stored
   thinking blocks are signed by the one that wrote them. So are the subagents' and the output
   schema's presence and shape only in so far as the CLI stores them with the transcript: they
   are not (they travel with each start), so they may change.
5. A fork (``fork_session=True`` with ``resume_session_id``) replays the same history under a
   new session id: the same settings are immutable, and the same requirements apply. The old
   session is left as it was; the fork's id is the one its results report (or
   ``session_id``, when the caller chose it).
6. Addressing a start (:data:`START_ONLY`: ``session_id``, ``resume_session_at``,
   ``resume_drops_turn``, ``fork_session``) is not a setting of the conversation: it says where
   ONE start begins, and is never compared. A continuation (``Fleet.continue_``, a cluster's
   move to another worker) resumes the conversation as it is now, so it drops them
   (:func:`continuation`). The options added with it (``strict_mcp_config``, ``betas``,
   ``task_budget``, ``include_hook_events``, ``verbatim_prompts``, ``client_app``, the system
   prompt) travel with each start and may change. A continuation may also take a model and a
   permission mode (and the new prompt's images), as ``set_model`` / ``set_permission_mode``
   change them in a running session.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs
from claude_agent_sdk.types import ThinkingConfig

from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.permissions import PermissionMode
from claude_trio.protocol.errors import LocalProtocolError
from claude_trio.protocol.extensions.scope import scope_widenings

RESUME_IMMUTABLE: frozenset[str] = frozenset(
    {
        "model",
        "claude_thinking",
        "claude_thinking_budget",
        "claude_effort",
        "claude_thinking_display",
        "provider",
    }
)
"""Settings a resumed session must keep (model by its resolved id, the rest as the ``claude_*``
keys)."""

START_ONLY: Mapping[str, Any] = MappingProxyType(
    {
        "fork_session": False,
        "session_id": None,
        "resume_session_at": None,
        "resume_drops_turn": None,
    }
)
"""The fields that address one start of a conversation (rule 6), with the value a continuation
gives them."""


_PARAMS = attrs.fields(ExecuteParams)


def _images(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen(kw_only=True)
class ContinueOptions:
    """What a continue may set for its execution, checked as ``ExecuteParams`` checks it:
    ``model`` and ``permission_mode`` replace the session's (``None``: kept), as
    ``set_model`` / ``set_permission_mode`` would in a running session; ``images`` go with the
    continue's prompt."""

    model: str | None = attrs.field(default=None, validator=_PARAMS.model.validator)
    permission_mode: PermissionMode | None = attrs.field(
        default=None, validator=_PARAMS.permission_mode.validator
    )
    images: tuple[ImageInput, ...] = attrs.field(
        default=(), converter=_images, validator=_PARAMS.images.validator
    )

    def changes(self) -> dict[str, Any]:
        """The params fields these options set: the model and mode when given, the images."""
        changes: dict[str, Any] = {"images": self.images}
        if self.model is not None:
            changes["model"] = self.model
        if self.permission_mode is not None:
            changes["permission_mode"] = self.permission_mode
        return changes


_NO_OPTIONS = ContinueOptions()


def continuation(
    params: ExecuteParams,
    prompt: str,
    session_id: str,
    options: ContinueOptions | None = None,
) -> ExecuteParams:
    """The params that continue the conversation ``session_id`` (the CLI's id) with ``prompt``:
    ``params`` resumed, without what addressed its first start (rule 6) and without the first
    prompt's images (they are in the conversation already), with ``options`` applied. Raises
    ``InvalidParamsError`` as ``ExecuteParams`` does (an unknown model, a bad prompt)."""
    changes = (options or _NO_OPTIONS).changes()
    return attrs.evolve(
        params, prompt=prompt, resume_session_id=session_id, **START_ONLY, **changes
    )


def check_continuable(
    session_id: str, *, state: str, ended: bool, claude_session_id: str | None
) -> str:
    """The CLI's session id to resume when a session may be continued now: its execution
    ended, and its CLI said a session id (a conversation to resume). Raises
    ``LocalProtocolError`` saying what to do otherwise."""
    if not ended:
        raise LocalProtocolError(
            f"session {session_id!r} is still running ({state}): push to it, or wait for its "
            "end (wait_ended) before continuing it"
        )
    if claude_session_id is None:
        raise LocalProtocolError(
            f"session {session_id!r} has no conversation to continue: its CLI never reported "
            "a session id (its first execution failed before a turn started); start a new "
            "session instead"
        )
    return claude_session_id


RESUME_NARROW_ONLY: frozenset[str] = frozenset(
    {"allowed_paths", "read_only_paths", "disallowed_paths", "scope_enforcement"}
)
"""The path scope's settings: a resume may narrow the scope, never widen it (rule 5)."""


@attrs.frozen(kw_only=True)
class ResumeConstraints:
    """The resume rules as data, for a UI that locks controls on a resumed session."""

    immutable: frozenset[str]
    reason: str
    remedy: str
    requirements: tuple[str, ...]
    """What else a resume needs to find the session at all."""
    narrow_only: frozenset[str] = RESUME_NARROW_ONLY
    """Settings that may narrow but not widen (the path scope)."""


_CONSTRAINTS = ResumeConstraints(
    immutable=RESUME_IMMUTABLE,
    reason=(
        "the CLI replays the stored transcript, including earlier thinking blocks, which the "
        "API requires back unchanged; a different model or thinking setup fails with HTTP 400 "
        "'thinking blocks ... cannot be modified'"
    ),
    remedy=(
        "to change the model, the provider or the thinking settings, start a new session "
        "instead of resuming"
    ),
    requirements=(
        "resume_session_id is the session_id of an earlier result of this library",
        "the same cwd as the session was created with",
        "the same CLAUDE_CONFIG_DIR as the session was created with",
        "max_turns counts the resumed session's earlier turns too: omit it or set it generously",
        "fork_session=True (with resume_session_id) continues the history under a new session "
        "id; the old session stays resumable, and the same settings must not change",
        "session_id with resume_session_id only with fork_session=True: it names the fork",
        "resume_session_at is the uuid of a message of that session's transcript (only with "
        "resume_session_id); resume_drops_turn, the uuid of the user prompt whose turn it drops "
        "(only with resume_session_at)",
    ),
)


def get_session_resume_constraints() -> ResumeConstraints:
    """The resume rules as data (see the module docstring)."""
    return _CONSTRAINTS


@attrs.frozen(kw_only=True)
class ResumeViolation:
    """One immutable setting that differs: ``old`` from the creating params, ``new`` from the
    resuming ones, both as the CLI would get them (resolved model, effective thinking)."""

    field: str
    old: Any
    new: Any

    @property
    def message(self) -> str:
        return (
            f"{self.field} cannot change on resume ({self.old!r} -> {self.new!r}): "
            f"{_CONSTRAINTS.remedy}"
        )


@attrs.frozen(kw_only=True)
class ScopeWidening(ResumeViolation):
    """The resuming params' path scope opens what the creating params' did not (rule 5);
    ``old`` says where and how."""

    @property
    def message(self) -> str:
        return (
            f"the path scope cannot widen on resume ({self.old}): keep the scope the session "
            "was created with or narrow it, or start a new session"
        )


def _thinking_fields(config: ThinkingConfig | None) -> dict[str, Any]:
    """The effective thinking config spelled as the ``claude_*`` keys."""
    fields: dict[str, Any] = dict(config) if config is not None else {}
    return {
        "claude_thinking": fields.get("type"),
        "claude_thinking_budget": fields.get("budget_tokens"),
        "claude_thinking_display": fields.get("display"),
    }


def find_resume_violations(previous: ExecuteParams, next: ExecuteParams) -> list[ResumeViolation]:
    """Every :data:`RESUME_IMMUTABLE` setting ``next`` changes relative to ``previous``.

    An empty list means resuming with ``next`` is safe as far as these settings go. The order is
    stable: model, the thinking keys, effort.
    """
    violations: list[ResumeViolation] = []
    if previous.resolved_model != next.resolved_model:
        violations.append(
            ResumeViolation(field="model", old=previous.resolved_model, new=next.resolved_model)
        )
    old_thinking = _thinking_fields(previous.effective_thinking())
    new_thinking = _thinking_fields(next.effective_thinking())
    for field in ("claude_thinking", "claude_thinking_budget", "claude_thinking_display"):
        if old_thinking[field] != new_thinking[field]:
            violations.append(
                ResumeViolation(field=field, old=old_thinking[field], new=new_thinking[field])
            )
    old_effort = previous.architecture_config.claude_effort
    new_effort = next.architecture_config.claude_effort
    if old_effort != new_effort:
        violations.append(ResumeViolation(field="claude_effort", old=old_effort, new=new_effort))
    old_provider = previous.provider or "anthropic"
    new_provider = next.provider or "anthropic"
    if old_provider != new_provider:
        violations.append(ResumeViolation(field="provider", old=old_provider, new=new_provider))
    for widening in scope_widenings(previous.path_scope, next.path_scope):
        violations.append(ScopeWidening(field="path_scope", old=widening, new=None))
    return violations
