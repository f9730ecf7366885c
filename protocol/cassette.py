"""Cassettes: a CLI session's traffic, recorded once and played back (pure, no trio).

A cassette is what crossed the CLI's stdio in one session: every frame the CLI wrote, every
line written to it, the CLI's stderr lines and how it ended, each at its time. The recorder
(``actors/recorder.py``) writes one; the replay transport (``claude_trio.testing.replay``)
plays one back through the real SDK. This module holds what both need: the format, the
scrubbing of secrets, the comparison of what a test writes with what was recorded, and the
player's state machine.

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
  ``{"type": ..., "message": ..., "line": ...}``).

Rules of the player (:class:`Player`):

1. **Writes are matched in order, lane by lane.** Each writer of the session keeps its own
   order, and writers race each other (an answer to a question and an interrupt can be
   written in either order): so a write is matched against the next recorded write of its
   *lane* (:func:`lane`): user messages; the SDK's control requests; the answer to each of
   the CLI's control requests, by its id. Ids the SDK and the session choose at random
   (``request_id`` of a control request, ``uuid`` of a user message) are bound, not compared:
   the recorded id stands for the live one from then on, everywhere in what is read back.
   Anything else that differs is a :class:`Mismatch` naming the first difference.
2. **A recorded read is played once every write recorded before it was matched** (the CLI
   could not have written it sooner), and, with recorded timing, not before its time: as long
   after the previous read as it came in the recording, and as long after the last write it
   followed. A write that comes sooner than it did in the recording counts from when it was
   due, so a test at least as quick as the recorded session replays it at exactly the
   recorded times; one that comes later delays what follows it. With ``timing="asap"`` only
   the first condition holds.
3. **A write that does not come** within ``patience`` seconds of when it was due (its
   recorded delay after the records before it) is a :class:`Mismatch`; so is a write the
   cassette has no write of its lane left for.
4. **The end.** A live ``end_input`` satisfies the recorded one (reads recorded after it wait
   for it); without one recorded it is allowed and changes nothing. The recorded ``exit``
   (or ``error``) ends the output when its turn comes.

Secrets (:class:`Scrubber`) are masked when a cassette is written, in every string: the
values of the environment's secret variables wherever they appear, API keys (``sk-...``),
``Bearer``/``Basic`` credentials, ``x-api-key``/``Authorization`` values, ``NAME=value`` pairs
whose name looks secret (``*_KEY``, ``*_TOKEN``, ...: an echoed environment), passwords in
URLs, and the values of mapping keys that look secret (``apiKey``, ``access_token``; never
counts such as ``input_tokens``). What a test writes is masked the same way before it is
compared.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from .errors import ClaudeTrioError

__all__ = [
    "FORMAT_VERSION",
    "HEADER_KEY",
    "ID_KEYS",
    "MASK",
    "Cassette",
    "CassetteError",
    "CassetteHeader",
    "Emit",
    "Finish",
    "Mismatch",
    "Player",
    "Record",
    "Scrubber",
    "Step",
    "Wait",
    "encode_header",
    "encode_record",
    "label",
    "lane",
    "parse_cassette",
    "version_notice",
]

FORMAT_VERSION = 1
HEADER_KEY = "claude_trio_cassette"
MASK = "***"
ID_KEYS = frozenset({"request_id", "uuid"})
"""Keys whose values the SDK or the session choose at random: bound, not compared (rule 1)."""

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
_WRITES = ("write", "write_text")


class CassetteError(ClaudeTrioError):
    """A cassette that cannot be read: the message names the file, the line and the problem."""


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
        return [r for r in self.records if r.kind in _WRITES]

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
            f"{FORMAT_VERSION}, ...}} (record one with `claude-trio record` or "
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
    if isinstance(t, bool) or not isinstance(t, int | float) or not t >= 0:
        raise _problem(source, number, f'"t" must be the seconds since connect (>= 0), not {t!r}')
    if t < after:
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
        if isinstance(value, bool) or not isinstance(value, int):
            raise _problem(source, number, f'"exit" must be an exit code (an int), not {value!r}')
    elif expected is not None and not isinstance(value, expected):
        raise _problem(
            source, number, f'"{kind}" must be a JSON {expected.__name__}, not {value!r}'[:200]
        )
    return Record(t=float(t), kind=kind, value=value, line=number)


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


# ---------------------------------------------------------------------------------------------
# Scrubbing secrets
# ---------------------------------------------------------------------------------------------

_SECRET_NAME = re.compile(
    r"(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH|COOKIE)(?:_|$)", re.IGNORECASE
)
_KEY_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "privatekey",
    "clientsecret",
)
_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # NAME=value with a secret-looking NAME (an environment echoed by a tool).
    (
        re.compile(
            r"\b([A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Z0-9_]*)"
            r"=(?!\*\*\*)[^\s\"'`]+"
        ),
        r"\1=" + MASK,
    ),
    # Header lines and JSON-ish pairs: x-api-key: ..., "authorization": "...".
    (
        re.compile(
            r"(?i)\b(x-api-key|api[-_]?key|authorization|proxy-authorization)"
            r"([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?(?!\*\*\*)[^\s\"',;]+"
        ),
        r"\1\2" + MASK,
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=\-]{8,}"), r"\1 " + MASK),
    (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{4,}"), "sk-ant-" + MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    # Passwords in URLs: scheme://user:password@host.
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]+):[^/\s@]+@"), r"\1:" + MASK + "@"),
)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable named ``name`` holds a secret (its value is masked)."""
    return bool(_SECRET_NAME.search(name))


def _is_secret_key(key: str) -> bool:
    folded = key.lower().replace("_", "").replace("-", "")
    return folded.endswith(_KEY_ENDINGS)


class Scrubber:
    """Masks secrets in frames and lines (see the module docstring).

    ``secrets``: values to mask wherever they appear (the environment's secret variables;
    values shorter than 8 characters are ignored, they would mask ordinary words).
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    @classmethod
    def for_environment(cls, *environments: Mapping[str, str]) -> Scrubber:
        """A scrubber for the values of the secret variables of ``environments``."""
        return cls(
            value for env in environments for name, value in env.items() if is_secret_name(name)
        )

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        for pattern, replacement in _TEXT_RULES:
            text = pattern.sub(replacement, text)
        return text

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with its secrets masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {
                key: (
                    MASK
                    if isinstance(key, str)
                    and _is_secret_key(key)
                    and isinstance(item, str)
                    and item
                    else self.value(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value


# ---------------------------------------------------------------------------------------------
# Comparing what a test writes with what was recorded
# ---------------------------------------------------------------------------------------------


def label(kind: str, value: Any) -> str:
    """A short name for a written line: ``user message 'hi'``, ``control_request interrupt``."""
    if kind == "write_text" or not isinstance(value, Mapping):
        return f"line {str(value)[:60]!r}"
    frame_type = value.get("type")
    if frame_type == "user":
        message = value.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        text = content if isinstance(content, str) else json.dumps(content)[:60]
        return f"user message {_short(text)}"
    if frame_type == "control_request":
        request = value.get("request")
        subtype = request.get("subtype") if isinstance(request, Mapping) else None
        return f"control_request {subtype}"
    if frame_type == "control_response":
        response = value.get("response")
        request_id = response.get("request_id") if isinstance(response, Mapping) else None
        return f"control_response to {request_id}"
    return f"{frame_type} frame"


def lane(kind: str, value: Any) -> tuple[str, ...]:
    """Which writer a written line comes from (rule 1): user messages (the session's input
    channel), the SDK's control requests, and each answer to a control request of the CLI,
    by that request's id. Lines of one lane keep their order; lanes race each other."""
    if kind != "write" or not isinstance(value, Mapping):
        return ("text",)
    frame_type = str(value.get("type"))
    if frame_type == "control_response":
        response = value.get("response")
        request_id = response.get("request_id") if isinstance(response, Mapping) else None
        return (frame_type, str(request_id))
    return (frame_type,)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _first_difference(
    recorded: Any,
    written: Any,
    path: str,
    bindings: Mapping[str, str],
    new: dict[str, str],
    key: object = None,
) -> str | None:
    """Where ``written`` first differs from ``recorded`` (ids bound into ``new``), or None."""
    where = path or "the top"
    if key in ID_KEYS and isinstance(recorded, str) and isinstance(written, str):
        if recorded == written or _bind(recorded, written, bindings, new):
            return None
        bound = bindings.get(recorded, new.get(recorded))
        return (
            f"at {where}: the id {recorded!r} of the cassette stands for {bound!r} in this run, "
            f"the test wrote {written!r}"
        )
    if isinstance(recorded, Mapping) and isinstance(written, Mapping):
        for name in [*recorded, *(k for k in written if k not in recorded)]:
            inner = f"{path}.{name}" if path else str(name)
            if name not in written:
                return f"at {inner}: the cassette has {_short(recorded[name])}, the test wrote none"
            if name not in recorded:
                return f"at {inner}: the test wrote {_short(written[name])}, the cassette has none"
            found = _first_difference(recorded[name], written[name], inner, bindings, new, name)
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(written, list):
        for index, (a, b) in enumerate(zip(recorded, written, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]", bindings, new)
            if found is not None:
                return found
        if len(recorded) != len(written):
            return (
                f"at {where}: the cassette has {len(recorded)} items, the test wrote {len(written)}"
            )
        return None
    if recorded == written and type(recorded) is type(written):
        return None
    if isinstance(recorded, str) and bindings.get(recorded, new.get(recorded)) == written:
        return None  # a bound id, somewhere an id is not expected
    return f"at {where}: the cassette has {_short(recorded)}, the test wrote {_short(written)}"


def _bind(recorded: str, written: str, bindings: Mapping[str, str], new: dict[str, str]) -> bool:
    """Bind a recorded id to the live one, unless either is bound to another already."""
    known = bindings.get(recorded, new.get(recorded))
    if known is not None:
        return known == written
    if written in bindings.values() or written in new.values():
        return False
    new[recorded] = written
    return True


def compare(
    recorded: Record, kind: str, written: Any, bindings: Mapping[str, str]
) -> tuple[str | None, dict[str, str]]:
    """``(None, new bindings)`` when ``written`` is the recorded write modulo ids, else
    ``(first difference, {})``."""
    if recorded.kind != kind:
        return (
            f"the cassette has {label(recorded.kind, recorded.value)}, the test wrote "
            f"{label(kind, written)}",
            {},
        )
    new: dict[str, str] = {}
    found = _first_difference(recorded.value, written, "", bindings, new)
    return (found, {}) if found is not None else (None, new)


def diff_text(recorded: Any, written: Any) -> str:
    """A unified diff of the two values as indented JSON (at most 40 lines)."""

    def lines(value: Any) -> list[str]:
        return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()

    diff = list(
        difflib.unified_diff(lines(recorded), lines(written), "cassette", "test", lineterm="", n=2)
    )
    if len(diff) > 40:
        diff = [*diff[:40], f"... ({len(diff) - 40} more lines)"]
    return "\n".join(diff)


def substitute(value: Any, bindings: Mapping[str, str]) -> Any:
    """A copy of ``value`` with every string that is a bound recorded id replaced by its live
    one (what is read back refers to the live ids)."""
    if not bindings:
        return value
    if isinstance(value, str):
        return bindings.get(value, value)
    if isinstance(value, Mapping):
        return {k: substitute(v, bindings) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, bindings) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# The player
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Mismatch:
    """What the test did that the cassette did not record (or did not do that it did)."""

    message: str

    def __str__(self) -> str:
        return self.message


@attrs.frozen(kw_only=True)
class Emit:
    """Play ``record`` now (a read or a stderr line); reads have their ids substituted."""

    record: Record
    value: Any


@attrs.frozen(kw_only=True)
class Wait:
    """Nothing to play before ``until`` (trio clock; ``None``: until the test does something)."""

    until: float | None


@attrs.frozen(kw_only=True)
class Finish:
    """The CLI's output ends: ``record`` is the recorded ``exit`` or ``error`` (``None``: the
    cassette just ends)."""

    record: Record | None


Step: TypeAlias = Emit | Wait | Finish | Mismatch


class Player:
    """Plays a cassette against what a test does (the rules in the module docstring).

    Feed it the test's writes (:meth:`write`, :meth:`end_input`) and ask it what the CLI does
    next (:meth:`step`) with the current time; it never reads a clock itself.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        start: float,
        timing: Literal["recorded", "asap"] = "recorded",
        patience: float = 10.0,
        scrubber: Scrubber | None = None,
    ) -> None:
        self.cassette = cassette
        self.timing = timing
        self.patience = patience
        self._scrubber = scrubber or Scrubber()
        self._records = cassette.records
        self._start = start
        self._played: list[float | None] = [None] * len(self._records)  # live time, by index
        self._next_read = 0  # index of the next record the output plays (reads, stderr, end)
        self._matched_writes: set[int] = set()
        self._input_ended = False
        # For each record, the records its time is measured from (rule 2): the nearest output
        # (read, stderr) and the nearest input (write, end_input) before it.
        self._anchors: list[tuple[int | None, int | None]] = []
        last_output: int | None = None
        last_input: int | None = None
        for index, record in enumerate(self._records):
            self._anchors.append((last_output, last_input))
            if record.kind in ("read", "stderr"):
                last_output = index
            elif record.kind in (*_WRITES, "end_input"):
                last_input = index
        self.bindings: dict[str, str] = {}
        self.mismatch: Mismatch | None = None
        #: How many writes the test made.
        self.writes = 0

    # -- the test's side ----------------------------------------------------------------------

    def write(self, line: str, now: float) -> Mismatch | None:
        """The test wrote ``line``; a :class:`Mismatch` when the cassette did not record it."""
        if self.mismatch is not None:
            return self.mismatch
        self.writes += 1
        kind: RecordKind
        try:
            written: Any = self._scrubber.value(json.loads(line))
            kind = "write"
        except ValueError:
            written, kind = self._scrubber.text(line), "write_text"
        wanted = lane(kind, written)
        unmatched = [
            i
            for i, r in enumerate(self._records)
            if r.kind in _WRITES and i not in self._matched_writes
        ]
        same_lane = [
            i for i in unmatched if lane(self._records[i].kind, self._records[i].value) == wanted
        ]
        if not same_lane:
            left = ", ".join(
                label(self._records[i].kind, self._records[i].value) for i in unmatched[:3]
            )
            return self._fail(
                f"write #{self.writes} ({label(kind, written)}): the cassette recorded no such "
                f"write{' here' if unmatched else ''} (the writes it still has: {left or 'none'})"
                "\n" + diff_text(self._records[unmatched[0]].value if unmatched else None, written)
            )
        index = same_lane[0]
        record = self._records[index]
        problem, new = compare(record, kind, written, self.bindings)
        if problem is not None:
            return self._fail(
                f"write #{self.writes} ({label(kind, written)}) is not what the cassette "
                f"recorded (line {record.line}, t={record.t:g}): {problem}\n"
                + diff_text(record.value, written)
            )
        self.bindings.update(new)
        self._matched_writes.add(index)
        self._played[index] = max(now, self._due(index))
        return None

    def end_input(self, now: float) -> None:
        """The test closed the CLI's stdin."""
        if not self._input_ended:
            self._input_ended = True
            for index, record in enumerate(self._records):
                if record.kind == "end_input" and self._played[index] is None:
                    self._played[index] = max(now, self._due(index))
                    break

    def _fail(self, message: str) -> Mismatch:
        self.mismatch = Mismatch(message=f"{self.cassette.source}: {message}")
        return self.mismatch

    # -- the CLI's side -----------------------------------------------------------------------

    def _due(self, index: int) -> float:
        """When record ``index`` is due, from the live times of the records before it."""
        record = self._records[index]
        due = self._start + record.t
        candidates = []
        for anchor in self._anchors[index]:
            if anchor is not None:
                live = self._played[anchor]
                if live is not None:
                    candidates.append(live + (record.t - self._records[anchor].t))
        return max(candidates) if candidates else due

    def step(self, now: float) -> Step:
        """What the CLI does next at time ``now`` (rules 2-4)."""
        if self.mismatch is not None:
            return self.mismatch
        records = self._records
        while self._next_read < len(records) and records[self._next_read].kind in (
            *_WRITES,
            "end_input",
        ):
            index = self._next_read
            record = records[index]
            if record.kind == "end_input":
                if self._played[index] is None:
                    return self._waiting_for(index, now, "to close the CLI's input")
            elif index not in self._matched_writes:
                return self._waiting_for(index, now, f"to write {label(record.kind, record.value)}")
            self._next_read += 1
        if self._next_read >= len(records):
            return Finish(record=None)
        index = self._next_read
        record = records[index]
        played = now
        if self.timing == "recorded":
            due = self._due(index)
            if now < due:
                return Wait(until=due)
            # Counted from when it was due: a reader that asks late (backpressure) gets what
            # was written meanwhile at once, as from a pipe, and the timeline stays the
            # recording's.
            played = due
        self._played[index] = played
        self._next_read += 1
        if record.kind in ("exit", "error"):
            return Finish(record=record)
        value = substitute(record.value, self.bindings) if record.kind == "read" else record.value
        return Emit(record=record, value=value)

    def _waiting_for(self, index: int, now: float, what: str) -> Step:
        record = self._records[index]
        deadline = self._due(index) + self.patience
        if now >= deadline:
            return self._fail(
                f"the cassette waits for the test {what} (line {record.line}, recorded at "
                f"t={record.t:g}), and nothing came for {self.patience:g} s after it was due"
            )
        return Wait(until=deadline)

    @property
    def finished_writes(self) -> bool:
        """Every recorded write was matched."""
        return all(
            i in self._matched_writes for i, r in enumerate(self._records) if r.kind in _WRITES
        )

    def unmatched(self) -> Sequence[Record]:
        """The recorded writes the test has not made (yet)."""
        return [
            r
            for i, r in enumerate(self._records)
            if r.kind in _WRITES and i not in self._matched_writes
        ]
