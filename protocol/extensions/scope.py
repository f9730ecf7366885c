"""Path scope: which files an execution's tools may read and write (pure).

An execution is *scoped* when it names ``allowed_paths``, ``read_only_paths`` or
``disallowed_paths`` (``ExecuteParams``). Each is a list of absolute paths, each meaning that
folder (or file) and everything below it. Rules, checked against CLI 2.1.332 (see
``docs/sdk-facts.md``):

1. **Confined.** With ``allowed_paths`` or ``read_only_paths`` the file tools (Read, Write,
   Edit, ...) reach only the working directories: ``cwd`` (always) and those paths, given to
   the CLI as ``add_dirs``. The CLI's settings ``permissions.blockReadsOutsideWorkingDirectories``
   and ``permissions.blockWritesOutsideWorkingDirectories`` enforce it under
   ``bypassPermissions``, ``default`` and ``acceptEdits`` alike (no ``can_use_tool`` is asked);
   the model's tool result says which path was refused
   and why. Without either list nothing is confined (only rule 2 applies).
2. **Denied.** ``disallowed_paths`` become ``Read(//p)``, ``Read(//p/**)``, ``Edit(//p)`` and
   ``Edit(//p/**)`` deny rules (``Edit`` rules cover every tool that writes files); a
   ``read_only_paths`` entry becomes the two ``Edit`` deny rules. A deny wins over every allow
   and over the working directories. The rules travel in the ``--settings`` JSON
   (``permissions.deny``), not as ``--disallowedTools``: only rules from settings reach the
   Bash sandbox. An absolute path needs the ``//`` prefix; ``/p`` means a path relative to the
   project root.
3. **Bash.** A scoped execution asks the CLI to run Bash in its OS sandbox (``sandbox`` settings:
   enabled, Bash auto-allowed when sandboxed, no unsandboxed escape). There, writes are limited
   to the working directories (read-only paths and denied paths excepted) and reads of denied
   paths fail. When confined, reads outside the scope fail too: the sandbox denies reading
   ``/`` and allows back the working directories and the system folders programs need to run
   (:data:`SYSTEM_READ_PATHS`: ``/usr``, ``/bin``, ``/lib``, ``/etc``, ``/proc``, ``/dev``,
   ...); a home folder, ``/tmp``, ``/var``, ``/run`` and ``/srv`` are outside (a program or a
   toolchain kept there is reachable once named in ``read_only_paths``). Checked on Linux with
   bubblewrap; on macOS the same settings go to ``sandbox-exec``. Network: none at all, not
   even loopback: the sandbox has a network namespace of its own, and a loopback address in
   the CLI's ``sandbox.network.allowedDomains`` still got no answer through its proxy (CLI
   2.1.332), so no host allow-list is offered. The sandbox needs an OS backend
   (:func:`sandbox_problem`); without it the CLI runs Bash unconfined, with only its check of
   the paths a command names literally.
4. **Hard or soft.** ``scope_enforcement="hard"`` (the default) refuses to start when the
   sandbox cannot run (a clear error naming what is missing and how to install it) and also
   tells the CLI to refuse (``sandbox.failIfUnavailable``); ``"soft"`` starts anyway, with a
   ``warning`` before ``adapter_ready`` saying Bash is not confined.
5. **Setting sources.** A scoped execution loads no settings from disk unless the caller names
   ``setting_sources``: settings files are not the caller's choice, and they can change
   permission rules and the sandbox's settings. Sources the caller names are loaded (a warning
   says they may widen the scope).
6. **Resume.** Resuming with a wider scope is a resume violation (:func:`scope_widenings`):
   a path the old scope did not let the tools read or write, a denial dropped, hard made soft.
   A narrower scope is fine.

Paths are checked once, at the edge (:func:`check_paths`): absolute, no NUL or newline, no
glob or rule characters (``* ? [ ] ( ) \\``), then normalized (``/a/./b/../c/`` -> ``/a/c``).
Symbolic links are not resolved (that needs the file system); the CLI matches the path a tool
names, resolved by the CLI itself.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "SANDBOX_BINARIES",
    "SCOPE_ENFORCEMENTS",
    "SETTING_SOURCES",
    "SYSTEM_READ_PATHS",
    "Access",
    "ScopeEnforcement",
    "access",
    "check_paths",
    "deny_rules",
    "normalize_path",
    "sandbox_problem",
    "scope_settings",
    "scope_widenings",
]

ScopeEnforcement: TypeAlias = Literal["hard", "soft"]
SCOPE_ENFORCEMENTS: tuple[ScopeEnforcement, ...] = ("hard", "soft")

SettingSource: TypeAlias = Literal["user", "project", "local"]
SETTING_SOURCES: tuple[SettingSource, ...] = ("user", "project", "local")

Access: TypeAlias = Literal["read-write", "read", "none"]

_FORBIDDEN = frozenset("*?[]()\\\0\n\r")

SANDBOX_BINARIES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "linux": (("bwrap", "bubblewrap"), ("socat", "socat")),
    "darwin": (("sandbox-exec", "(part of macOS)"),),
}
"""Per platform, the programs the CLI's Bash sandbox needs: ``(binary, package)``."""

SYSTEM_READ_PATHS: tuple[str, ...] = (
    # Linux: programs, libraries, configuration, and the kernel's and devices' files.
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/dev",
    # macOS: the system's own folders (a missing one is ignored).
    "/System",
    "/Library",
    "/Applications",
    "/private/etc",
)
"""What Bash may read outside a confined scope, so that programs run: the system's folders,
never a user's home, ``/tmp``, ``/var``, ``/run`` or ``/srv`` (rule 3)."""


def normalize_path(field: str, value: object) -> str:
    """``value`` as a normalized absolute path, or ``InvalidParamsError`` naming ``field``."""
    if not isinstance(value, str) or not value:
        raise InvalidParamsError(field, value, "an absolute path (a non-empty string)")
    bad = sorted(_FORBIDDEN.intersection(value))
    if bad:
        raise InvalidParamsError(
            field,
            value.replace("\0", "\\0"),
            "a plain absolute path without "
            + " ".join(repr(c) for c in bad)
            + " (NUL and line breaks cannot be passed; glob and rule characters would change "
            "what the CLI's permission rule matches)",
        )
    if not value.startswith("/"):
        raise InvalidParamsError(
            field, value, "an absolute path (starting with '/'); resolve it first, e.g. "
            "os.path.abspath(path)"
        )
    normal = posixpath.normpath(value)
    # POSIX keeps a leading '//' as is; for a rule it means the same folder as '/'.
    return "/" + normal.lstrip("/")


def check_paths(field: str, value: object) -> tuple[str, ...]:
    """A list of paths, each normalized (:func:`normalize_path`), without repeats."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidParamsError(field, value, "a list of absolute paths")
    paths = [normalize_path(f"{field}[{i}]", item) for i, item in enumerate(value)]
    return tuple(dict.fromkeys(paths))


def is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` or below it (both normalized)."""
    return path == root or root == "/" or path.startswith(root + "/")


def _covered(path: str, roots: Iterable[str]) -> bool:
    return any(is_under(path, root) for root in roots)


def access(
    path: str,
    *,
    cwd: str | None,
    allowed: Sequence[str] = (),
    read_only: Sequence[str] = (),
    disallowed: Sequence[str] = (),
) -> Access:
    """What the file tools may do with ``path`` under a scope (rules 1 and 2): a denied path
    is ``none`` whatever else covers it; a read-only one at most ``read``; when confined,
    a path outside the working directories is ``none``."""
    path = normalize_path("path", path)
    if _covered(path, disallowed):
        return "none"
    confined = bool(allowed or read_only)
    working = [*([cwd] if cwd is not None else []), *allowed, *read_only]
    if confined and not _covered(path, [normalize_path("cwd", w) for w in working]):
        return "none"
    if _covered(path, read_only):
        return "read"
    return "read-write"


def _rules(tool: str, path: str) -> list[str]:
    # '//' + the absolute path: a single '/' would be relative to the project root.
    spelled = "/" + path
    below = "//**" if path == "/" else f"{spelled}/**"
    return [f"{tool}({spelled})", f"{tool}({below})"]


def deny_rules(read_only: Sequence[str], disallowed: Sequence[str]) -> list[str]:
    """The CLI's deny rules for a scope (rule 2), without repeats."""
    rules: list[str] = []
    for path in disallowed:
        rules += _rules("Read", path) + _rules("Edit", path)
    for path in read_only:
        rules += _rules("Edit", path)
    return list(dict.fromkeys(rules))


def scope_settings(
    *,
    allowed: Sequence[str],
    read_only: Sequence[str],
    disallowed: Sequence[str],
    enforcement: ScopeEnforcement,
    cwd: str | None = None,
) -> dict[str, Any]:
    """The Claude Code settings of a scope (rules 1-4); empty when nothing is scoped.
    ``cwd``: the working directory (``None``: the CLI's, which the settings name ``.``)."""
    if not (allowed or read_only or disallowed):
        return {}
    permissions: dict[str, Any] = {}
    if allowed or read_only:
        permissions["blockReadsOutsideWorkingDirectories"] = True
        permissions["blockWritesOutsideWorkingDirectories"] = True
    deny = deny_rules(read_only, disallowed)
    if deny:
        permissions["deny"] = deny
    sandbox: dict[str, Any] = {
        "enabled": True,
        "autoAllowBashIfSandboxed": True,
        "allowUnsandboxedCommands": False,
        "failIfUnavailable": enforcement == "hard",
    }
    if allowed or read_only:
        # Deny every read, then allow back the scope and the system's folders (rule 3). A
        # disallowed path inside one of them stays denied: its Read rule reaches the sandbox.
        working = [cwd if cwd is not None else ".", *allowed, *read_only]
        sandbox["filesystem"] = {
            "denyRead": ["/"],
            "allowRead": list(dict.fromkeys([*working, *SYSTEM_READ_PATHS])),
        }
    return {"permissions": permissions, "sandbox": sandbox}


def sandbox_problem(platform: str, found: Mapping[str, bool]) -> str | None:
    """Why the CLI's Bash sandbox cannot run here, or ``None`` when it can (rule 3).

    ``platform`` is ``sys.platform``; ``found`` says which of :data:`SANDBOX_BINARIES` exist
    (the actor layer looks them up on the CLI's ``PATH``)."""
    key = "linux" if platform.startswith("linux") else platform
    needed = SANDBOX_BINARIES.get(key)
    if needed is None:
        return (
            f"the CLI's Bash sandbox is not available on {platform!r} (only on Linux and macOS)"
        )
    missing = [(binary, package) for binary, package in needed if not found.get(binary)]
    if not missing:
        return None
    names = ", ".join(binary for binary, _ in missing)
    if key == "linux":
        packages = " ".join(package for _, package in missing)
        how = f"install {packages} (Debian/Ubuntu: apt-get install {packages}; Fedora: dnf " \
            f"install {packages})"
    else:
        how = "it is part of macOS; check the CLI's PATH"
    return f"the CLI's Bash sandbox needs {names} (not found on the CLI's PATH); {how}"


_RANK: Mapping[Access, int] = {"none": 0, "read": 1, "read-write": 2}


def scope_widenings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """How scope ``new`` is wider than ``old`` (rule 6); empty when it is not.

    Each scope is a mapping with ``cwd`` (a path or ``None``), ``allowed``, ``read_only``,
    ``disallowed`` (tuples of normalized paths) and ``enforcement``. Access only changes at
    the roots, so comparing :func:`access` at every root of both scopes (and outside all of
    them) finds every path the new scope opens further."""
    out: list[str] = []

    def of(scope: Mapping[str, Any], path: str) -> Access:
        return access(
            path,
            cwd=scope["cwd"],
            allowed=scope["allowed"],
            read_only=scope["read_only"],
            disallowed=scope["disallowed"],
        )

    old_confined = bool(old["allowed"] or old["read_only"])
    new_confined = bool(new["allowed"] or new["read_only"])
    if old_confined and not new_confined:
        out.append("the file tools are no longer confined to the scope's paths")
    roots = [
        *([old["cwd"]] if old["cwd"] is not None else []),
        *([new["cwd"]] if new["cwd"] is not None else []),
    ]
    for scope in (old, new):
        roots += [*scope["allowed"], *scope["read_only"], *scope["disallowed"]]
    # A relative cwd (possible only when unconfined) is no root: it names no absolute path.
    absolute = [root for root in roots if root.startswith("/")]
    for path in dict.fromkeys(normalize_path("path", root) for root in absolute):
        before, after = of(old, path), of(new, path)
        if _RANK[after] > _RANK[before]:
            out.append(f"{path}: {before} -> {after}")
    scoped_before = old_confined or bool(old["disallowed"])
    if scoped_before and old["enforcement"] == "hard" and new["enforcement"] == "soft":
        out.append("scope_enforcement: 'hard' -> 'soft'")
    return out
