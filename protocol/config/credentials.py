"""Whether the ``claude`` CLI has a way to reach a model, decided before it starts (pure).

Without one the CLI still starts, and answers every prompt with the text "Not logged in ·
Please run /login" in a result that says ``success``; so a session checks first, and an
execution with no credential at all ends with one ``error`` event (``code="config"``) that
names what to set, and no CLI is started. Any one of these is a credential (rules):

1. A variable of the CLI's environment (this process's, then the session's ``env``), not
   empty: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``CLAUDE_CODE_OAUTH_TOKEN``.
2. ``ANTHROPIC_BASE_URL``: a server of the user's own (Ollama, a proxy, a test double) may
   need none.
3. A cloud provider's switch, ``CLAUDE_CODE_USE_BEDROCK``, ``CLAUDE_CODE_USE_VERTEX`` or
   ``CLAUDE_CODE_USE_FOUNDRY`` (that cloud's own credentials are its SDK's business).
4. A ``claude login``: the CLI's credentials file ``.credentials.json`` in its config folder
   (``CLAUDE_CONFIG_DIR``, else ``~/.claude``), or an API key in its state file
   (``primaryApiKey`` in ``.claude.json``, in that folder or the home folder).
5. An ``apiKeyHelper`` in a settings file the CLI may read (the user's, the project's, the
   local one, the managed one) or in the session's own settings.
6. On macOS ``claude login`` keeps its token in the Keychain, where nothing here can look: no
   session is refused there.

:func:`credential_files` says which files to read; whoever reads them (``actors/``) passes
their texts to :func:`missing_credentials`.
"""

from __future__ import annotations

import os.path
from collections.abc import Iterable, Mapping

__all__ = [
    "CLOUD_SWITCHES",
    "CREDENTIAL_VARIABLES",
    "NO_CREDENTIALS",
    "credential_files",
    "missing_credentials",
]

CREDENTIAL_VARIABLES: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
)
"""Rules 1 and 2: any one of them, not empty."""

CLOUD_SWITCHES: tuple[str, ...] = (
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
)
"""Rule 3: any one of them, on."""

NO_CREDENTIALS = (
    "no credentials for the Anthropic API: the claude CLI would answer every prompt with "
    '"Not logged in", so it was not started. Set ANTHROPIC_API_KEY (a key from '
    "https://console.anthropic.com/), or ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN "
    "(claude setup-token), in this process's environment or the session's env=; or log in "
    "with `claude login` (it writes ~/.claude/.credentials.json); or set an apiKeyHelper in "
    "the Claude Code settings; or CLAUDE_CODE_USE_BEDROCK / CLAUDE_CODE_USE_VERTEX for a "
    "cloud provider. To run with no key at all: claude_trio.offline.open_offline_model() "
    "(pass its env to the session)"
)
"""The message of the ``error`` event when there is no credential."""

_OFF = frozenset({"", "0", "false", "no", "off"})


def _switched_on(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in _OFF


def credential_files(
    env: Mapping[str, str], *, cwd: str | None, home: str | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files that may hold a credential (rules 4 and 5), as absolute paths:
    ``(credentials files, files to search for a key or a key helper)``.

    ``env``: the CLI's environment; ``cwd``: the session's working directory (its project's
    settings); ``home``: the home folder when ``env`` names none.
    """
    home = env.get("HOME") or home
    config = env.get("CLAUDE_CONFIG_DIR") or (os.path.join(home, ".claude") if home else None)
    logins: list[str] = []
    searched: list[str] = ["/etc/claude-code/managed-settings.json"]
    if config:
        logins.append(os.path.join(config, ".credentials.json"))
        searched += [os.path.join(config, name) for name in ("settings.json", ".claude.json")]
    if home:
        searched.append(os.path.join(home, ".claude.json"))
    if cwd:
        searched += [
            os.path.join(cwd, ".claude", "settings.json"),
            os.path.join(cwd, ".claude", "settings.local.json"),
        ]
    return tuple(logins), tuple(dict.fromkeys(searched))


def missing_credentials(
    env: Mapping[str, str],
    *,
    logged_in: bool,
    texts: Iterable[str] = (),
    platform: str = "linux",
) -> str | None:
    """Why the CLI has no way to reach a model (:data:`NO_CREDENTIALS`), or ``None`` when it
    has one (see the module docstring for the rules).

    ``env``: the environment the CLI runs with; ``logged_in``: a credentials file of rule 4
    exists and is not empty; ``texts``: the contents of the files of rules 4 and 5 and the
    session's own settings; ``platform``: ``sys.platform``.
    """
    if platform == "darwin":
        return None  # rule 6
    if any(env.get(name) for name in CREDENTIAL_VARIABLES):
        return None
    if any(_switched_on(env.get(name)) for name in CLOUD_SWITCHES):
        return None
    if logged_in:
        return None
    if any("apiKeyHelper" in text or "primaryApiKey" in text for text in texts):
        return None
    return NO_CREDENTIALS
