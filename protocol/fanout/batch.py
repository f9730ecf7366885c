"""Batches, the pure part: items from JSON lines, what an attempt came to, when to retry and
how long to wait, and the result lines (no trio, no I/O).

Rules:

1. **Items.** Each line of a batch file is a prompt (a JSON string) or an object with
   ``"prompt"`` and any other ``ExecuteParams`` field (the wire's names, ``PARAMS_FIELDS``),
   plus an optional ``"key"``. An item without a key is keyed by its line number (``"3"``);
   keys must be unique. A line that is not one of these is an error naming the line; a file
   with several is one error naming every one of them.
2. **An attempt** is one session run to its final event. Its outcome: ``ok`` when the final
   event is a result that is not an error; its cost and usage are the sum over its turns
   (an interrupted turn included).
3. **Retry** an attempt that failed on the model API with 429 or 529, or whose error says
   ``overloaded`` (and a refused start: the server at its limit, or a connection lost before
   the session could start); nothing else is retried. The wait before retry ``n`` (from 1) is
   ``base * 2**(n-1)`` seconds capped at ``cap``, times a random factor from 0.5 to 1 when
   ``jitter`` (so items that failed together do not come back together), and never less than
   the ``retry-after`` the API asked for - which reaches us as the delay of the CLI's own
   last retry (``retry`` events: the CLI waits what ``retry-after`` says) during the attempt.
4. **Result lines.** One JSON object per item: ``key``, ``ok``, ``text`` (the final result's
   text), ``structured_output`` (when the final result carries one), ``usage``, ``cost_usd``
   (every attempt's), ``error``, ``attempts``, ``session`` (the CLI's session id, for
   ``--resume``). A file of them is read back tolerantly: a last line cut short (a crash in
   the middle of writing it) is ignored, and for a key that has several lines (a failed item
   run again) the last one counts.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from claude_trio.protocol.checks import check_bool, check_int, finite_float, seconds, validator
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import BatchFileError, WireError
from claude_trio.protocol.fanout.codec import to_json_safe
from claude_trio.protocol.fanout.wire import PARAMS_FIELDS, params_from_json
from claude_trio.protocol.session.events import Aborted, Error, Event, Result, Retry, is_terminal
from claude_trio.protocol.session.usage import ZERO_USAGE, Usage, add_usage

RETRY_STATUSES = frozenset({429, 529})


@attrs.frozen(kw_only=True)
class BatchItem:
    """One prompt of a batch, under the key its result is filed by."""

    key: str
    params: ExecuteParams


def parse_items(
    lines: Iterable[str], *, source: str = "the batch file", defaults: Mapping[str, Any] = {}
) -> list[BatchItem]:
    """The items of a batch file (rule 1); ``defaults``: params fields an item does not set.

    Every line is read before anything is decided: a file with bad lines is one
    ``BatchFileError`` that names each of them, with its number and problem, one per line.
    """
    items: list[BatchItem] = []
    problems: list[BatchFileError] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(_parse_item(line, number, source, defaults, seen))
        except BatchFileError as exc:
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise BatchFileError(
            source,
            f"{len(problems)} lines are not items:\n" + "\n".join(str(p) for p in problems),
        )
    return items


def _parse_item(
    line: str, number: int, source: str, defaults: Mapping[str, Any], seen: dict[str, int]
) -> BatchItem:
    """One line's item; ``seen``: the keys of the lines before it (this one's is added)."""
    where = f"{source}, line {number}"
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise BatchFileError(where, f"not JSON ({exc})") from None
    if isinstance(value, str):
        value = {"prompt": value}
    if not isinstance(value, dict):
        raise BatchFileError(where, "expected a prompt (a JSON string) or an object")
    fields = dict(value)
    key = fields.pop("key", str(number))
    if not (isinstance(key, str) and key.strip()) or len(key) > 256:
        raise BatchFileError(where, f"key={key!r}: expected a non-empty string (<= 256)")
    if key in seen:
        raise BatchFileError(where, f"key {key!r} is already the key of line {seen[key]}")
    seen[key] = number
    unknown = sorted(set(fields) - set(PARAMS_FIELDS))
    if unknown:
        raise BatchFileError(
            where,
            f"unknown field(s) {unknown}; an item has key, {', '.join(PARAMS_FIELDS)}",
        )
    merged = {**{k: v for k, v in defaults.items() if v is not None}, **fields}
    try:
        params = params_from_json(merged, allow_cwd=True, allow_env=True)
    except WireError as exc:
        raise BatchFileError(where, exc.message) from None
    return BatchItem(key=key, params=params)


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How often, and after how long, an attempt is tried again (rule 3)."""

    retries: int = attrs.field(default=4, validator=validator(check_int, minimum=0))
    base: float = attrs.field(default=2.0, validator=seconds)
    cap: float = attrs.field(default=60.0, validator=seconds)
    jitter: bool = attrs.field(default=True, validator=validator(check_bool))

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        backoff = min(self.cap, self.base * 2.0 ** min(retry - 1, 60))
        if self.jitter:
            backoff *= rng.uniform(0.5, 1.0)
        return max(backoff, retry_after or 0.0)


@attrs.define(eq=False)
class Attempt:
    """What one session of an item came to, fed its events (rule 2)."""

    final: Event | None = None
    usage: Usage = ZERO_USAGE
    session_id: str | None = None
    #: The delay of the CLI's last retry in this attempt (its ``retry-after``), seconds.
    retry_after: float | None = None
    #: The statuses of the model API errors seen (``error`` events with a status).
    api_statuses: list[int] = attrs.field(factory=list)
    #: Why the session could not be started or followed (then there is no final event), and
    #: whether trying again may help (the server at its limit, a connection lost).
    start_error: str | None = None
    start_error_retryable: bool = False

    def feed(self, event: Event) -> None:
        match event:
            case Result() | Aborted():
                if event.usage is not None:
                    self.usage = add_usage(self.usage, event.usage)
                if event.session_id:
                    self.session_id = event.session_id
            case Retry() if event.delay_ms is not None and math.isfinite(event.delay_ms):
                self.retry_after = max(0.0, event.delay_ms / 1000)
            case Error(code="api_error") if event.status is not None:
                self.api_statuses.append(event.status)
            case _:
                pass
        if is_terminal(event) and getattr(event, "final", True):
            self.final = event

    @property
    def ok(self) -> bool:
        return isinstance(self.final, Result) and not self.final.is_error

    @property
    def error(self) -> str | None:
        """What went wrong, in a line (None when ok)."""
        final = self.final
        if self.start_error is not None:
            return self.start_error
        match final:
            case None:
                return "the session ended without a final event"
            case Result() if final.is_error:
                status = f" (HTTP {final.api_error_status})" if final.api_error_status else ""
                detail = final.text or "; ".join(final.errors) or final.subtype
                return f"{final.subtype}{status}: {detail}"
            case Result():
                return None
            case Aborted():
                return f"aborted: {final.reason}"
            case Error():
                return f"{final.code}: {final.message}"
            case _:
                return f"ended with {final.kind}"

    @property
    def retryable(self) -> bool:
        """An overloaded or rate-limited model API (rule 3)."""
        if self.ok:
            return False
        if self.start_error is not None:
            return self.start_error_retryable
        final = self.final
        statuses = set(self.api_statuses)
        if isinstance(final, Result) and final.api_error_status is not None:
            statuses.add(final.api_error_status)
        if isinstance(final, Error) and final.status is not None:
            statuses.add(final.status)
        if statuses & RETRY_STATUSES:
            return True
        return "overloaded" in (self.error or "").lower()


@attrs.frozen(kw_only=True)
class BatchResult:
    """One item's result line (rule 4)."""

    key: str
    ok: bool
    text: str | None = None
    structured_output: Any = None
    usage: Usage = ZERO_USAGE
    cost_usd: float = 0.0
    error: str | None = None
    attempts: int = 1
    session: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = to_json_safe(self)
        return out

    @classmethod
    def of(cls, key: str, attempt: Attempt, *, attempts: int, cost_usd: float) -> BatchResult:
        final = attempt.final
        return cls(
            key=key,
            ok=attempt.ok,
            text=final.text if isinstance(final, Result) else None,
            structured_output=final.structured_output if isinstance(final, Result) else None,
            usage=attempt.usage,
            cost_usd=cost_usd,
            error=attempt.error,
            attempts=attempts,
            session=attempt.session_id,
        )


@attrs.frozen(kw_only=True)
class ResultsSoFar:
    """What a results file says (rule 4): the keys done (ok), the cost spent, and the byte
    length of its whole lines (what follows, a line cut short, is to be cut off)."""

    done: frozenset[str]
    spent: float
    whole_bytes: int
    lines: int


def read_results(data: bytes) -> ResultsSoFar:
    """Read a results file's bytes tolerantly (rule 4)."""
    end = data.rfind(b"\n") + 1  # 0 when there is no whole line
    last: dict[str, bool] = {}
    spent = 0.0
    lines = 0
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue  # damaged: the item is simply run again
        if not isinstance(obj, dict) or not isinstance(obj.get("key"), str):
            continue
        lines += 1
        last[obj["key"]] = obj.get("ok") is True
        cost = finite_float(obj.get("cost_usd"))
        if cost is not None and cost > 0:
            spent += cost
    return ResultsSoFar(
        done=frozenset(k for k, ok in last.items() if ok), spent=spent, whole_bytes=end, lines=lines
    )


@attrs.frozen(kw_only=True)
class BatchProgress:
    """A snapshot for a progress display: items ``done`` (ok) and ``failed`` this run,
    ``running``, ``queued`` (not started yet), ``skipped`` (done by an earlier run),
    ``not_started`` (left out by the budget), ``retrying`` (waiting to be tried again), tokens
    and cost of this run, and ``spent`` (this run's cost plus what earlier runs recorded)."""

    total: int
    done: int
    failed: int
    running: int
    retrying: int
    queued: int
    skipped: int
    not_started: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    spent: float

    @property
    def finished(self) -> int:
        return self.done + self.failed


__all__ = [
    "Attempt",
    "BatchItem",
    "BatchProgress",
    "BatchResult",
    "ResultsSoFar",
    "RetryPolicy",
    "parse_items",
    "read_results",
]

