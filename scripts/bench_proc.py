"""What the benchmarks read about a process from ``/proc`` (Linux)."""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The user + system CPU of process ``pid`` so far, in seconds (in clock ticks, 10 ms
    here); an ``OSError`` (``FileNotFoundError``) once the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK
