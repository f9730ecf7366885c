"""Skills: inline skills given to one session, and the skills on disk the CLI would load.

Checked against the bundled CLI 2.1.332 (``docs/sdk-facts.md``). Rules:

1. A skill is a folder ``<name>/`` holding ``SKILL.md`` (YAML front matter with ``name`` and
   ``description``, then the instructions) and any other files the instructions refer to. The
   CLI offers the model every skill's name and description; the model opens one with the
   ``Skill`` tool (-> ``skill_invoked``), and the CLI then gives it the instructions and the
   skill's folder.
2. **Inline skills** (:class:`InlineSkill`, ``ExecuteParams.inline_skills``) are written, for one
   session, as a plugin in a private temporary folder (``--plugin-dir``) that is removed when
   the session ends. Nothing is written into the user's project or configuration, and a plugin
   is loaded whatever ``setting_sources`` says (skills in an ``--add-dir`` folder are not loaded
   without the ``project`` source). The CLI names a plugin's skills ``<plugin>:<skill>``, so the
   model sees and invokes an inline skill as ``inline:<name>`` (:attr:`InlineSkill.qualified_name`).
3. Names are 1-64 characters of lowercase letters, digits and single hyphens (the skill spec);
   descriptions are at most 1024 characters; a skill's instructions and files are at most
   :data:`MAX_SKILL_BYTES` together. File paths are relative, ``/``-separated, without ``.``
   or ``..`` parts, and never ``SKILL.md`` itself.
4. **Skills on disk** (:func:`scan_skills`): the user's, in ``$CLAUDE_CONFIG_DIR/skills`` (else
   ``~/.claude/skills``), then the project's, in ``.claude/skills`` of the working directory and
   of each parent up to the repository's root (the first folder with ``.git``; without one, up
   to ``/``), nearest first. A skill's name is its folder's name; its description is the front
   matter's, else the first line of its instructions. When a name appears twice, the first one
   in this order is the one the CLI loads.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, Literal

import attrs

from claude_trio.protocol.errors import InvalidParamsError

__all__ = [
    "MAX_INLINE_SKILLS",
    "MAX_SKILL_BYTES",
    "PLUGIN_NAME",
    "InlineSkill",
    "SkillInfo",
    "check_inline_skills",
    "parse_skill_md",
    "plugin_files",
    "scan_skills",
]

PLUGIN_NAME = "inline"
"""The plugin that carries a session's inline skills: the model sees ``inline:<name>``."""

SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_BYTES = 8 * 1024 * 1024
"""A skill's instructions and files, together, in bytes."""
MAX_SKILL_FILES = 256
MAX_INLINE_SKILLS = 64
MAX_PATH_CHARS = 1024
_SCAN_HEAD_BYTES = 64 * 1024  # enough for any front matter: scan_skills reads no more

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")

SkillSource = Literal["user", "project"]


# ---------------------------------------------------------------------------------------------
# Front matter (a YAML subset: what SKILL.md files use)
# ---------------------------------------------------------------------------------------------

_KEY = re.compile(r"([A-Za-z0-9_-]+):(?:\s+(.*)|\s*)$")


_DOUBLE_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_SINGLE_QUOTED = re.compile(r"'(?:[^']|'')*'")


def _unquote(value: str) -> str:
    """A scalar's value: quoted (what follows the closing quote, a comment, is left out) or
    plain (up to a comment)."""
    value = value.strip()
    if (quoted := _DOUBLE_QUOTED.match(value)) is not None:
        try:
            decoded = json.loads(quoted.group())
        except ValueError:
            return quoted.group()[1:-1]
        return decoded if isinstance(decoded, str) else quoted.group()[1:-1]
    if (quoted := _SINGLE_QUOTED.match(value)) is not None:
        return quoted.group()[1:-1].replace("''", "'")
    return re.split(r"\s#", value, maxsplit=1)[0].strip()


def _block(style: str, lines: list[str]) -> str:
    """A ``|`` (literal) or ``>`` (folded) block scalar's value, with its chomping."""
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    body = [line[cut:] if line.strip() else "" for line in lines]
    if style.startswith(">"):
        paragraphs: list[str] = []
        current: list[str] = []
        for line in body:
            if line:
                current.append(line)
            else:
                paragraphs.append(" ".join(current))
                current = []
        paragraphs.append(" ".join(current))
        text = "\n".join(paragraphs)
    else:
        text = "\n".join(body)
    text = text.rstrip("\n")
    return text if style.endswith("-") else text + "\n"


def parse_skill_md(text: str) -> tuple[dict[str, str], str]:
    """``(front matter, instructions)`` of a ``SKILL.md``. The front matter's scalar values
    (plain, quoted, ``|`` / ``>`` blocks, continued lines); other values are left out. Without
    front matter: ``({}, text)``."""
    # Only "\n" ends a line (splitlines() would also split at U+0085, U+2028, ...).
    raw = text.split("\n")
    lines = [line.removesuffix("\r") for line in raw]
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next(
        (i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None
    )
    if end is None:
        return {}, text
    body = "\n".join(raw[end + 1 :]).lstrip("\r\n")
    fields: dict[str, str] = {}
    i = 1
    while i < end:
        match = _KEY.match(lines[i])
        i += 1
        if match is None:
            continue
        key, value = match.group(1), (match.group(2) or "").strip()
        continued: list[str] = []
        while i < end and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
            continued.append(lines[i])
            i += 1
        if value[:1] in ("|", ">"):
            fields[key] = _block(value, continued)
        elif value and not value.startswith(("[", "{", "&", "*", "!")):
            rest = " ".join(line.strip() for line in continued if line.strip())
            fields[key] = _unquote(f"{value} {rest}" if rest else value)
        elif not value and continued and not continued[0].strip().startswith("-"):
            fields[key] = " ".join(line.strip() for line in continued if line.strip())
    return fields, body


def _first_line(body: str) -> str:
    return next((line.strip() for line in body.splitlines() if line.strip()), "")


# ---------------------------------------------------------------------------------------------
# Inline skills
# ---------------------------------------------------------------------------------------------


def _check_name(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (isinstance(value, str) and _NAME.fullmatch(value) and len(value) <= MAX_NAME_CHARS):
        raise InvalidParamsError(
            "inline skill name",
            value,
            f"1-{MAX_NAME_CHARS} lowercase letters, digits and single hyphens (like "
            "'review-style')",
        )


def _check_description(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    field = f"inline skill {getattr(inst, 'name', '?')!r} description"
    if not (isinstance(value, str) and value.strip()):
        raise InvalidParamsError(
            field, value, "a non-empty string: it tells the model when to use the skill"
        )
    if len(value) > MAX_DESCRIPTION_CHARS or "\0" in value:
        raise InvalidParamsError(
            field,
            f"{len(value)} characters",
            f"at most {MAX_DESCRIPTION_CHARS} characters, no NUL",
        )


def _check_body(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    field = f"inline skill {getattr(inst, 'name', '?')!r} body"
    if not (isinstance(value, str) and value.strip()):
        raise InvalidParamsError(field, value, "a non-empty string: the skill's instructions")
    if "\0" in value:
        raise InvalidParamsError(field, "...", "no NUL character")


def _freeze_files(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType(dict(value))
    return value


def _check_path(skill: str, path: object) -> None:
    field = f"inline skill {skill!r} files"
    allowed = (
        "a relative '/'-separated path without '.' or '..' parts, backslashes or NUL, at "
        f"most {MAX_PATH_CHARS} characters, and not {SKILL_FILE}"
    )
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
        raise InvalidParamsError(field, path, allowed)
    parts = path.split("/")
    if (
        path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(part in ("", ".", "..") for part in parts)
        or path.lower() == SKILL_FILE.lower()
    ):
        raise InvalidParamsError(field, path, allowed)


def _check_files(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    name = getattr(inst, "name", "?")
    field = f"inline skill {name!r} files"
    if not isinstance(value, Mapping):
        raise InvalidParamsError(field, value, "a mapping of relative path -> str or bytes")
    if len(value) > MAX_SKILL_FILES:
        raise InvalidParamsError(field, f"{len(value)} files", f"at most {MAX_SKILL_FILES}")
    for path, content in value.items():
        _check_path(name, path)
        if not isinstance(content, str | bytes):
            raise InvalidParamsError(f"{field}[{path!r}]", content, "str or bytes")
    folders = {str(parent) for path in value for parent in PurePosixPath(path).parents}
    for path in value:
        if path in folders:
            raise InvalidParamsError(
                field, path, "a file, not also the folder of another file"
            )
    total = len(getattr(inst, "body", "").encode("utf-8", "surrogatepass")) + sum(
        len(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        for content in value.values()
    )
    if total > MAX_SKILL_BYTES:
        raise InvalidParamsError(
            f"inline skill {name!r}",
            f"{total} bytes",
            f"at most {MAX_SKILL_BYTES} bytes of instructions and files together",
        )


@attrs.frozen(kw_only=True)
class InlineSkill:
    """A skill given to one session (see the module rules)::

        InlineSkill(name="release-notes", description="Write release notes from a git log",
                    body="Group the changes by ...", files={"template.md": "# Release ..."})

    The model sees it as ``inline:release-notes``; its files sit next to ``SKILL.md`` in the
    skill's folder, which the CLI tells the model when the skill is opened.
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_description)
    body: str = attrs.field(validator=_check_body)
    """The instructions (the Markdown after the front matter of ``SKILL.md``)."""
    files: Mapping[str, str | bytes] = attrs.field(
        factory=dict, converter=_freeze_files, validator=_check_files
    )
    """Other files of the skill: relative path -> text or bytes."""

    @property
    def qualified_name(self) -> str:
        """The name the model sees and invokes: ``inline:<name>``."""
        return f"{PLUGIN_NAME}:{self.name}"

    def skill_md(self) -> str:
        """The ``SKILL.md`` written for this skill. The description is a JSON string in ASCII,
        which YAML reads as a double-quoted scalar: any text is safe in it."""
        description = json.dumps(self.description)
        return f"---\nname: {self.name}\ndescription: {description}\n---\n\n{self.body}\n"

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> InlineSkill:
        """Read a skill folder (``SKILL.md`` and the files beside it, ``.git`` and symlinked
        folders left out). The name is the front matter's ``name``, else the folder's name;
        the description is the front matter's, else the first line of the instructions.
        Other front matter keys are not carried over. Reads the disk."""
        folder = Path(path)
        skill_md = folder / SKILL_FILE
        try:
            text = skill_md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidParamsError(
                "skill folder", str(folder), f"a folder with a readable UTF-8 {SKILL_FILE} ({exc})"
            ) from None
        front, body = parse_skill_md(text)
        files: dict[str, bytes] = {}
        total = len(text.encode())
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            for name in sorted(names):
                file = Path(root) / name
                relative = file.relative_to(folder).as_posix()
                if relative == SKILL_FILE:
                    continue
                try:
                    data = file.read_bytes()
                except OSError as exc:
                    raise InvalidParamsError(
                        "skill folder file", str(file), f"a readable file ({exc.strerror})"
                    ) from None
                total += len(data)
                if total > MAX_SKILL_BYTES or len(files) >= MAX_SKILL_FILES:
                    raise InvalidParamsError(
                        "skill folder",
                        str(folder),
                        f"at most {MAX_SKILL_FILES} files and {MAX_SKILL_BYTES} bytes",
                    )
                files[relative] = data
        return cls(
            name=front.get("name") or folder.resolve().name,
            description=front.get("description") or _first_line(body),
            body=body,
            files=files,
        )


def check_inline_skills(value: object) -> None:
    """``ExecuteParams.inline_skills``: a tuple of :class:`InlineSkill` with unique names."""
    if not isinstance(value, tuple):
        raise InvalidParamsError("inline_skills", value, "a list of InlineSkill")
    if len(value) > MAX_INLINE_SKILLS:
        raise InvalidParamsError(
            "inline_skills", f"{len(value)} skills", f"at most {MAX_INLINE_SKILLS}"
        )
    seen: set[str] = set()
    for i, skill in enumerate(value):
        if not isinstance(skill, InlineSkill):
            raise InvalidParamsError(f"inline_skills[{i}]", skill, "an InlineSkill")
        if skill.name in seen:
            raise InvalidParamsError(
                "inline_skills", skill.name, "unique names (two skills have this one)"
            )
        seen.add(skill.name)


def plugin_files(skills: Sequence[InlineSkill]) -> dict[str, bytes]:
    """The files of the plugin that carries ``skills`` (rule 2): relative path -> bytes."""
    manifest = {
        "name": PLUGIN_NAME,
        "version": "1.0.0",
        "description": "Skills given to this session",
    }
    out = {".claude-plugin/plugin.json": json.dumps(manifest, indent=2).encode()}
    for skill in skills:
        folder = f"skills/{skill.name}"
        out[f"{folder}/{SKILL_FILE}"] = skill.skill_md().encode("utf-8", "surrogatepass")
        for path, content in skill.files.items():
            data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
            out[f"{folder}/{path}"] = data
    return out


# ---------------------------------------------------------------------------------------------
# Skills on disk
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SkillInfo:
    """A skill the CLI would load from disk."""

    name: str
    """What the model invokes it by: the folder's name."""
    description: str
    source: SkillSource
    path: str
    """The skill's folder."""


def _skill_dirs(cwd: Path, config_dir: Path, sources: Sequence[SkillSource]) -> list[
    tuple[SkillSource, Path]
]:
    found: list[tuple[SkillSource, Path]] = []
    if "user" in sources:
        found.append(("user", config_dir / "skills"))
    if "project" in sources:
        for folder in (cwd, *cwd.parents):
            found.append(("project", folder / ".claude" / "skills"))
            if (folder / ".git").exists():
                break
    return found


def _read_head(path: Path) -> str:
    with path.open("rb") as file:
        return file.read(_SCAN_HEAD_BYTES).decode("utf-8", "replace")


def scan_skills(
    cwd: str | os.PathLike[str],
    *,
    env: Mapping[str, str],
    sources: Sequence[SkillSource] = ("user", "project"),
) -> list[SkillInfo]:
    """The skills the CLI would load from disk for a session in ``cwd`` (rule 4), in the
    CLI's order. ``env``: the CLI's environment (``CLAUDE_CONFIG_DIR``, ``HOME``). Reads the
    disk; unreadable folders and files are skipped."""
    config = env.get("CLAUDE_CONFIG_DIR")
    home = env.get("HOME") or os.path.expanduser("~")
    config_dir = Path(config) if config else Path(home) / ".claude"
    seen_dirs: set[Path] = set()
    seen_names: set[str] = set()
    skills: list[SkillInfo] = []
    for source, folder in _skill_dirs(Path(cwd).absolute(), config_dir, sources):
        try:
            resolved = folder.resolve()
            entries = sorted(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        if resolved in seen_dirs:
            continue  # ~/.claude/skills is the user's, also when the project is under ~
        seen_dirs.add(resolved)
        for entry in entries:
            skill_md = entry / SKILL_FILE
            if entry.name in seen_names:
                continue
            try:
                if not skill_md.is_file():
                    continue
                front, body = parse_skill_md(_read_head(skill_md))
            except OSError:
                continue
            seen_names.add(entry.name)
            skills.append(
                SkillInfo(
                    name=entry.name,
                    description=front.get("description") or _first_line(body),
                    source=source,
                    path=str(entry),
                )
            )
    return skills
