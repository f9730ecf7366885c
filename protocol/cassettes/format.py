"""Cassettes: a CLI session's traffic, recorded once and played back (pure, no trio).

A cassette is what crossed the CLI's stdio in one session: every frame the CLI wrote, every
line written to it, the CLI's stderr lines and how it ended, each at its time. The recorder
(``actors/session/recorder.py``) writes one; the replay transport (``claude_trio.testing.replay``)
plays one back through the real SDK, with the player of ``protocol/cassettes/player.py``.
Secrets are scrubbed before a cassette is written (``protocol/cassettes/scrub.py``). This module is
the format.

The format (JSON Lines, UTF-8; one object per line):

* line 1, the header: ``{"claude_trio_cassette": 1, "cli_version": "2.1.332",
  "sdk_version": "0.2.189", "claude_trio_version": "0.1.0"}`` (versions ``null`` when
  unknown);
* then one record per line, in the order they happened, each with ``"t"``: seconds since the
  transport connected, never decreasing; and exactly one of ``"read"`` (a frame the CLI
  wrote, as the SDK parsed it), ``"write"`` (a line written to the CLI, parsed),
  ``"write_text"`` (a written line that was not JSON), ``"stderr"`` (a line of the CLI's
  stderr), ``"end_input"`` (``true``: the CLI's stdin was closed), ``"exit"`` (the CLI's
  output ended; its exit code) or ``"error"`` (reading its output failed otherwise:
  ``{"type": ..., "message": ..., "line": ...}``). Nothing follows ``exit`` or ``error``.

A malformed cassette raises :class:`CassetteError` naming the source, the line and the
problem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from claude_trio.protocol.checks import finite_float, is_int
from claude_trio.protocol.errors import CassetteError

__all__ = [
    "FORMAT_VERSION",
    "HEADER_KEY",
    "WRITE_KINDS",
    "Cassette",
    "CassetteHeader",
    "Record",
    "RecordKind",
    "encode_header",
    "encode_record",
    "parse_cassette",
    "version_notice",
]

FORMAT_VERSION = 1
HEADER_KEY = "claude_trio_cassette"

RecordKind: TypeAlias = Literal[
    "read", "write", "write_text", "stderr", "end_input", "exit", "error"
]
_KINDS: tuple[RecordKind, ...] = (
    "read",
    "write",
    "write_text",
    "stderr",
    "end_input",
    "exit",
    "error",
)
WRITE_KINDS: tuple[RecordKind, ...] = ("write", "write_text")
"""The kinds of record that are lines written to the CLI."""


@attrs.frozen(kw_only=True)
class CassetteHeader:
    """The first line of a cassette: the versions it was recorded with (``None``: unknown)."""

    cli_version: str | None
    sdk_version: str | None
    claude_trio_version: str | None = None


@attrs.frozen(kw_only=True)
class Record:
    """One thing that happened: its time (seconds since connect), kind, value and the line of
    the cassette it is on (0 for a record not read from a file)."""

    t: float
    kind: RecordKind
    value: Any
    line: int = 0


@attrs.frozen(kw_only=True)
class Cassette:
    """A parsed cassette (:func:`parse_cassette`); ``source`` names where it came from."""

    header: CassetteHeader
    records: tuple[Record, ...]
    source: str = "<cassette>"

    @property
    def duration(self) -> float:
        """The time of the last record."""
        return self.records[-1].t if self.records else 0.0

    def writes(self) -> list[Record]:
        return [r for r in self.records if r.kind in WRITE_KINDS]

    def reads(self) -> list[Record]:
        return [r for r in self.records if r.kind == "read"]


# ---------------------------------------------------------------------------------------------
# Reading and writing the format
# ---------------------------------------------------------------------------------------------


def encode_header(header: CassetteHeader) -> str:
    return json.dumps(
        {
            HEADER_KEY: FORMAT_VERSION,
            "cli_version": header.cli_version,
            "sdk_version": header.sdk_version,
            "claude_trio_version": header.claude_trio_version,
        },
        ensure_ascii=False,
    )


def encode_record(t: float, kind: RecordKind, value: Any) -> str:
    """One record's line (without the newline)."""
    return json.dumps({"t": round(t, 6), kind: value}, ensure_ascii=False, separators=(",", ":"))


def _problem(source: str, line: int, what: str) -> CassetteError:
    return CassetteError(f"{source}, line {line}: {what}")


def _optional_str(obj: Mapping[str, Any], key: str, source: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _problem(source, 1, f"the header's {key!r} must be a string or null, not {value!r}")
    return value


def _header(text: str, source: str) -> CassetteHeader:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise _problem(source, 1, f"the header is not JSON ({exc})") from None
    if not isinstance(obj, dict) or HEADER_KEY not in obj:
        raise _problem(
            source,
            1,
            f'not a claude-trio cassette: the first line must be its header, {{"{HEADER_KEY}": '
            f"{FORMAT_VERSION}, ...}} (record one with `claude-trio run PROMPT --record FILE` or "
            "open_session(record_to=...))",
        )
    if obj[HEADER_KEY] != FORMAT_VERSION:
        raise _problem(
            source,
            1,
            f"cassette format {obj[HEADER_KEY]!r}; this claude-trio reads format "
            f"{FORMAT_VERSION}: record it again",
        )
    return CassetteHeader(
        cli_version=_optional_str(obj, "cli_version", source),
        sdk_version=_optional_str(obj, "sdk_version", source),
        claude_trio_version=_optional_str(obj, "claude_trio_version", source),
    )


def _record(text: str, number: int, source: str, after: float) -> Record:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise _problem(source, number, f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _problem(source, number, f"a record must be a JSON object, not {text[:80]!r}")
    t = obj.get("t")
    seconds = finite_float(t)
    if seconds is None or seconds < 0:
        raise _problem(source, number, f'"t" must be the seconds since connect (>= 0), not {t!r}')
    if seconds < after:
        raise _problem(source, number, f'"t" goes back in time ({t} after {after})')
    kinds = [k for k in obj if k != "t"]
    if len(kinds) != 1 or kinds[0] not in _KINDS:
        raise _problem(
            source,
            number,
            f'a record holds exactly one of {", ".join(_KINDS)} besides "t"; this one has '
            f"{', '.join(map(repr, kinds)) or 'none'}",
        )
    kind: RecordKind = kinds[0]
    value = obj[kind]
    expected = {
        "read": dict,
        "write": dict,
        "write_text": str,
        "stderr": str,
        "end_input": bool,
        "error": dict,
    }.get(kind)
    if kind == "exit":
        if not is_int(value):
            raise _problem(source, number, f'"exit" must be an exit code (an int), not {value!r}')
    elif expected is not None and not isinstance(value, expected):
        raise _problem(
            source, number, f'"{kind}" must be a JSON {expected.__name__}, not {value!r}'[:200]
        )
    return Record(t=seconds, kind=kind, value=value, line=number)


def parse_cassette(text: str, *, source: str = "<cassette>") -> Cassette:
    """Parse a cassette's text; a malformed one raises :class:`CassetteError` naming ``source``,
    the line and the problem."""
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise _problem(source, 1, "the cassette is empty: its first line must be the header")
    header = _header(lines[0], source)
    records: list[Record] = []
    after = 0.0
    ended = False
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if ended:
            raise _problem(source, number, "a record after the CLI's exit")
        record = _record(line, number, source, after)
        after = record.t
        ended = record.kind in ("exit", "error")
        records.append(record)
    return Cassette(header=header, records=tuple(records), source=source)


def version_notice(
    header: CassetteHeader, *, cli_version: str | None, sdk_version: str | None
) -> str | None:
    """Why replaying a cassette with this header may not show what the installed CLI would do
    (another CLI or SDK version), or ``None`` when the versions agree."""
    differ = []
    if header.cli_version != cli_version:
        differ.append(f"claude CLI {header.cli_version or 'unknown'} (installed: {cli_version})")
    if header.sdk_version != sdk_version:
        differ.append(
            f"claude-agent-sdk {header.sdk_version or 'unknown'} (installed: {sdk_version})"
        )
    if not differ:
        return None
    return (
        f"this cassette was recorded with {' and '.join(differ)}: it replays what that CLI did, "
        "which the installed one may no longer do; record it again to check"
    )
