"""What the benchmarks read about a process from ``/proc`` (Linux)."""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")
_SCHEDSTAT = os.path.exists("/proc/self/schedstat")


def cpu_seconds(pid: int) -> float:
    """The CPU process ``pid`` has used so far, in seconds; an ``OSError``
    (``FileNotFoundError``) once the process is gone.

    Read from the scheduler's statistics of each of its threads (nanoseconds: a burst of a
    few hundred milliseconds is measured to the microsecond, where the user + system clock
    ticks of ``/proc/PID/stat`` count in steps of 10 ms), or from those ticks when the kernel
    keeps no such statistics. A thread that ended between two readings takes its time with
    it: the servers measured here keep theirs (trio's idle worker threads leave after 10 s,
    having used microseconds)."""
    if not _SCHEDSTAT:
        return _ticks(pid)
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended since the listing
            continue
    return total / 1e9


def _ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK
