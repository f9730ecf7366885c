"""Log lines of the long-running commands (``claude-trio serve``, ``claude-trio batch``): plain
text, or one JSON object per line for a log pipeline.

claude-trio's own log calls say what happened with structured fields (``extra={"event":
"opened", "session": ..., "principal": ...}``) and never put a token, a prompt or a file path
in a message. The JSON formatter keeps to that: it writes the message, the level, the logger
and the known structured fields, and for an exception only its type (a traceback is full of
paths). Only claude-trio's loggers are shown: other libraries' messages (the SDK's, for
instance, quote the CLI's output) stay out of these lines.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import TextIO

#: The structured fields a log record may carry (``extra=``), written as JSON keys.
FIELDS: tuple[str, ...] = (
    "event",
    "peer",
    "principal",
    "session",
    "execution",
    "outcome",
    "cost_usd",
    "host",
    "port",
    "sessions",
    "deadline_s",
    "objects",
)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, the :data:`FIELDS` the record has, and ``exception`` (its type only)."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in FIELDS:
            if field in record.__dict__:
                obj[field] = record.__dict__[field]
        if record.exc_info and record.exc_info[0] is not None:
            obj["exception"] = record.exc_info[0].__name__
        return json.dumps(obj, ensure_ascii=False, default=str)


class _PlainFormatter(logging.Formatter):
    """``time level message``; an exception by its type only, as in the JSON lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def formatException(self, ei: object) -> str:
        exc_type = ei[0] if isinstance(ei, tuple) else None
        return f"  ({getattr(exc_type, '__name__', 'exception')}; details omitted)"


def configure_logging(stream: TextIO, *, json_lines: bool, level: int = logging.INFO) -> None:
    """Send claude-trio's log records at ``level`` and above to ``stream``."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter() if json_lines else _PlainFormatter())
    logger = logging.getLogger("claude_trio")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
