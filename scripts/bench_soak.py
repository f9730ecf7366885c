"""Soak: about 200 clients, well-behaved and hostile, against one gateway for a bounded time.

The server (its own process) is ``open_fleet`` on the scripted fake CLI plus ``serve_gateway``
with the default limits, except shorter pings and handshakes so that their effects show within
the run. Each client comes from its own loopback address (127.0.x.y), as distinct peers would.
Kinds of clients (``--clients`` in total, split evenly; reconnecting whenever closed):

* **reading**: open a session (a short streamed answer), read it to the end, pause a quarter
  of a second, again; the well-behaved ones whose latency is measured: open -> first event,
  open -> final result.
* **slow**: attach to a shared, never-ending "news" session (a 4 KiB tool call every 50 ms)
  and read one frame every 200 ms: they lag, and are closed 1008 when their queue overflows.
* **never-reading**: attach to the news session and read nothing (4 KiB receive buffer).
* **silent**: open a TCP connection and send nothing.
* **flooding**: send ops as fast as TCP takes them, without reading: malformed JSON, unknown
  ops, pushes to unknown sessions, and now and then an oversize or a binary message.

A first phase runs only the reading clients (the baseline); the second runs all kinds at once,
the hostile ones from a second client process (so the reading clients' latency is measured in
a process that does nothing else), at the lowest CPU priority (``nice 19``): on this 2-core
machine they share the cores with the server and the measuring process, where real attackers
would use CPUs of their own.
Printed: the server's RSS and open descriptors sampled every second, the reading clients'
latencies in both phases and their ratio, and every close code each kind saw (``cut`` = the
TCP connection ended without a close frame; ``503`` = shed before the handshake; ``refused``
= the connection could not even be made).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import statistics
import sys
import time
from functools import partial
from typing import Any

import trio
from bench_proc import cpu_seconds
from trio_websocket import ConnectionClosed, HandshakeError, wrap_client_stream
from wsproto.utilities import LocalProtocolError

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.children import run_child_process
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.fanout.wire import EventFrame, OpenedFrame, decode_frame, params_to_json
from claude_trio.testing import FakeCLI, FakeTurn

TOKEN = "bench-soak-token-0123456789abcdef"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode())]
KINDS = ("reading", "slow", "never-reading", "silent", "flooding")
BLOB = "n" * (4 * 1024)
_HERE_SCRIPT = os.path.abspath(__file__)


# -- the server ----------------------------------------------------------------------------------


async def _script(turn: FakeTurn) -> None:
    if turn.prompt == "news":
        i = 0
        while True:
            i += 1
            await turn.tool_use("Read", {"blob": BLOB, "n": i})
            await turn.sleep(0.05)
    await turn.text("A short streamed answer from the scripted CLI. " * 8, chunk=8, delay=0.002)


async def serve() -> None:
    limits = GatewayLimits(ping_interval=2.0, ping_timeout=2.0, handshake_timeout=3.0)
    big = 64 * 2**20  # the news session's assistant frames grow; the SDK's line cap is 1 MiB
    # A fresh fake per session: one FakeCLI keeps every process it started (for tests' asserts).
    async with (
        open_fleet(
            transport_factory=lambda options: FakeCLI(_script).transport_for(options),
            max_live=64,  # more slots than reading clients: their latency is not slot waits
            governor=None,  # nor start spacing
            max_buffer_size=big,
        ) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(
            partial(
                serve_gateway,
                fleet,
                token=TOKEN,
                allowed_origins=None,
                client_queue=200,
                limits=limits,
                max_message_size=16 * 1024,
            )
        )
        news = await fleet.start(ExecuteParams(prompt="news"))
        print(port, news.id, flush=True)
        await trio.sleep_forever()


# -- the clients ---------------------------------------------------------------------------------


class Tally:
    def __init__(self) -> None:
        self.closes: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.first: list[float] = []
        self.final: list[float] = []
        self.sessions = 0
        self.cpu_start = (0.0, 0.0, 0.0)
        #: (server, this client process) CPU seconds per second of the phase.
        self.cpu = (0.0, 0.0)


async def _stream(port: int, source: str, rcvbuf: int | None = None) -> trio.SocketStream:
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        await sock.bind((source, 0))
        await sock.connect(("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


def _leaf(group: BaseExceptionGroup[Any]) -> Any:
    first: Any = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first


def _close_code(exc: ConnectionClosed) -> str:
    reason = exc.reason
    if reason is None or reason.code == 1006:
        return "cut"
    return str(reason.code)


async def _connected(port: int, source: str, kind: str, tally: Tally, body: Any, **kw: Any) -> None:
    """Connect, run ``body(ws)``, record how it ended."""
    try:
        stream = await _stream(port, source, kw.pop("rcvbuf", None))
    except OSError:
        tally.closes[kind]["refused"] += 1
        await trio.sleep(0.2)
        return
    outcome = "cut"
    try:
        async with trio.open_nursery() as nursery:
            ws = await wrap_client_stream(
                nursery, stream, "127.0.0.1", "/", extra_headers=AUTH, max_message_size=2**24
            )
            try:
                await body(ws)
            except ConnectionClosed as exc:
                outcome = _close_code(exc)
            else:
                outcome = "closed by the client"
            nursery.cancel_scope.cancel()
    except* HandshakeError as group:
        status = getattr(_leaf(group), "status_code", None)
        outcome = str(status) if status else "handshake failed"
        await trio.sleep(0.2)
    except* ConnectionClosed as group:
        outcome = _close_code(_leaf(group))
    except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        outcome = "cut"
    except* LocalProtocolError:
        # trio-websocket's client answers a ping that crossed its own close frame and fails
        # (a client-side race of the library): the connection was being closed by the client.
        outcome = "closed by the client"
    finally:
        tally.closes[kind][outcome] += 1
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def reading(port: int, source: str, tally: Tally, stop: trio.Event) -> None:
    async def body(ws: Any) -> None:
        while not stop.is_set():
            params = params_to_json(ExecuteParams(prompt="answer briefly"))
            start = trio.current_time()
            await ws.send_message(json.dumps({"op": "open", "id": "o", "params": params}))
            first = None
            while True:
                frame = decode_frame(str(await ws.get_message()))
                if isinstance(frame, OpenedFrame):
                    continue
                if isinstance(frame, EventFrame):
                    if first is None:
                        first = trio.current_time() - start
                    if getattr(frame.event, "final", False):
                        break
                else:
                    raise RuntimeError(f"unexpected frame {frame}")
            tally.first.append(first or 0.0)
            tally.final.append(trio.current_time() - start)
            tally.sessions += 1
            await trio.sleep(0.25)  # a user reading the answer: the server is not saturated
        await ws.aclose()

    while not stop.is_set():
        await _connected(port, source, "reading", tally, body)


async def slow(port: int, source: str, news: str, tally: Tally, stop: trio.Event) -> None:
    async def body(ws: Any) -> None:
        await ws.send_message(json.dumps({"op": "attach", "id": "a", "session": news}))
        while not stop.is_set():
            await ws.get_message()
            await trio.sleep(0.2)
        await ws.aclose()

    while not stop.is_set():
        await _connected(port, source, "slow", tally, body)


async def never_reading(port: int, source: str, news: str, tally: Tally, stop: trio.Event) -> None:
    async def body(ws: Any) -> None:
        await ws.send_message(json.dumps({"op": "attach", "id": "a", "session": news}))
        # Read nothing; trio-websocket's reader stops after one buffered message, so neither
        # events nor pings are read. At the end, read what is left to see how it ended.
        await stop.wait()
        await _what_is_left(ws)

    while not stop.is_set():
        await _connected(port, source, "never-reading", tally, body, rcvbuf=4096)


async def _what_is_left_at(ws: Any, stop: trio.Event) -> None:
    await stop.wait()
    await _what_is_left(ws)


async def _what_is_left(ws: Any) -> None:
    """Read until the connection ends (raises ``ConnectionClosed``); if it does not end within
    a few seconds, the server had not closed it: close it from here."""
    with trio.move_on_after(5):
        while True:
            await ws.get_message()
    await ws.aclose()


async def silent(port: int, source: str, tally: Tally, stop: trio.Event) -> None:
    while not stop.is_set():
        try:
            stream = await _stream(port, source)
        except OSError:
            tally.closes["silent"]["refused"] += 1
            await trio.sleep(0.2)
            continue
        async with stream:
            data = b""
            try:
                while chunk := await stream.receive_some(4096):
                    data += chunk
            except trio.BrokenResourceError:
                pass
            tally.closes["silent"]["503" if data.startswith(b"HTTP/1.1 503") else "cut"] += 1


async def flooding(port: int, source: str, tally: Tally, stop: trio.Event) -> None:
    junk = [
        "{not json",
        '{"op":"launch","id":"x"}',
        '{"op":"push","id":"p","session":"nope","text":"hi"}',
    ]

    # Half of them end their flood with an oversize message (1009), a quarter with a binary
    # one (1002), the rest just go on (until the server cuts them for not reading its pings).
    ending = int(source.rsplit(".", 1)[1]) % 4

    async def flood(ws: Any) -> None:
        i = 0
        while True:
            i += 1
            if i % 150 == 0 and ending in (0, 1):
                await ws.send_message("x" * (32 * 1024))  # oversize: 1009
            elif i % 150 == 0 and ending == 2:
                await ws.send_message(b"\x00binary")  # binary: 1002
            else:
                await ws.send_message(junk[i % len(junk)])

    async def body(ws: Any) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood, ws)
            await stop.wait()
            nursery.cancel_scope.cancel()
        await _what_is_left(ws)

    while not stop.is_set():
        await _connected(port, source, "flooding", tally, body)


def _rss_and_fds(pid: int) -> tuple[int, int]:
    """The process's resident set (KiB) and its open descriptors, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _sample(pid: int, samples: list[tuple[float, int, int]], stop: trio.Event) -> None:
    start = trio.current_time()
    while not stop.is_set():
        rss, fds = _rss_and_fds(pid)
        samples.append((trio.current_time() - start, rss, fds))
        with trio.move_on_after(1.0):
            await stop.wait()


def _start_clients(
    nursery: trio.Nursery,
    port: int,
    news: str,
    counts: dict[str, int],
    tally: Tally,
    stop: trio.Event,
    network: int,
) -> None:
    n = 0
    for kind in KINDS:
        for _ in range(counts.get(kind, 0)):
            n += 1
            source = f"127.{network}.{n // 250}.{n % 250 + 1}"
            match kind:
                case "reading":
                    nursery.start_soon(reading, port, source, tally, stop)
                case "slow":
                    nursery.start_soon(slow, port, source, news, tally, stop)
                case "never-reading":
                    nursery.start_soon(never_reading, port, source, news, tally, stop)
                case "silent":
                    nursery.start_soon(silent, port, source, tally, stop)
                case "flooding":
                    nursery.start_soon(flooding, port, source, tally, stop)


async def hostile(port: int, news: str, per_kind: int, seconds: float) -> None:
    """The hostile kinds, in their own process (so the reading clients' latency is measured
    in a process that does nothing else); prints how their connections ended, as JSON."""
    tally = Tally()
    stop = trio.Event()
    only = os.environ.get("SOAK_HOSTILE")  # for a closer look: e.g. SOAK_HOSTILE=silent,slow
    counts = {
        kind: per_kind
        for kind in KINDS
        if kind != "reading" and (not only or kind in only.split(","))
    }
    async with trio.open_nursery() as nursery:
        _start_clients(nursery, port, news, counts, tally, stop, 30)
        await trio.sleep(seconds)
        stop.set()
        nursery.cancel_scope.deadline = trio.current_time() + 5
    print(json.dumps({kind: dict(c) for kind, c in tally.closes.items()}), flush=True)


async def phase(
    port: int, news: str, pid: int, per_kind: int, seconds: float, with_hostile: bool
) -> tuple[Tally, list[tuple[float, int, int]]]:
    tally = Tally()
    tally.cpu_start = (cpu_seconds(pid), time.process_time(), trio.current_time())
    samples: list[tuple[float, int, int]] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_sample, pid, samples, stop)
        network = 20 if with_hostile else 10
        _start_clients(nursery, port, news, {"reading": per_kind}, tally, stop, network)
        proc = None
        if with_hostile:
            command = [sys.executable, _HERE_SCRIPT, "hostile", str(port), news]
            command += [str(per_kind), str(seconds)]
            proc = await nursery.start(partial(run_child_process, command, stdout=-1, check=False))
        await trio.sleep(seconds)
        server, client, wall = cpu_seconds(pid), time.process_time(), trio.current_time()
        s0, c0, w0 = tally.cpu_start
        tally.cpu = ((server - s0) / (wall - w0), (client - c0) / (wall - w0))
        stop.set()
        if proc is not None:
            out = b""
            while not out.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(65536)
                if not chunk:
                    break
                out += chunk
            for kind, seen in json.loads(out or b"{}").items():
                tally.closes[kind].update(seen)
        nursery.cancel_scope.deadline = trio.current_time() + 5
    return tally, samples


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.1f} ms" if values else "    n/a"


async def soak(clients: int, seconds: float) -> dict[str, Any]:
    command = [sys.executable, _HERE_SCRIPT, "serve"]
    per_kind = clients // len(KINDS)
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(partial(run_child_process, command, stdout=-1, check=False))
        line = b""
        while not line.endswith(b"\n"):
            line += await proc.stdout.receive_some(1024)
        port_text, news = line.decode().split()
        port = int(port_text)
        base, base_samples = await phase(port, news, proc.pid, per_kind, seconds / 2, False)
        full, samples = await phase(port, news, proc.pid, per_kind, seconds, True)
        proc.kill()
    print(
        f"  clients: {per_kind} of each kind {KINDS}; phases of {seconds / 2:.0f} s "
        f"and {seconds:.0f} s"
    )
    print("  server RSS (MiB) and open descriptors, every second:")
    for label, rows in (("reading only", base_samples), ("all kinds", samples)):
        series = " ".join(f"{rss / 1024:.0f}/{fds}" for _, rss, fds in rows)
        print(f"    {label:12s}: {series}")
    ratio_first = statistics.median(full.first) / statistics.median(base.first)
    ratio_final = statistics.median(full.final) / statistics.median(base.final)
    print(
        f"  reading clients, open -> first event: alone {_median_ms(base.first)}, with the "
        f"others {_median_ms(full.first)} (ratio {ratio_first:.2f})"
    )
    print(
        f"  reading clients, open -> final result: alone {_median_ms(base.final)}, with the "
        f"others {_median_ms(full.final)} (ratio {ratio_final:.2f}); sessions completed: "
        f"{base.sessions} alone, {full.sessions} with the others"
    )
    print("  how connections ended, by kind:")
    for kind in KINDS:
        seen = full.closes.get(kind)
        text = ", ".join(f"{code}: {n}" for code, n in sorted(seen.items())) if seen else "-"
        print(f"    {kind:14s} {text}")
    for label, t in (("reading only", base), ("all kinds", full)):
        print(
            f"  CPU, {label}: server {t.cpu[0] * 100:.0f}% of a core, the reading clients' "
            f"process {t.cpu[1] * 100:.0f}%"
        )
    peak_rss = max(rss for _, rss, _ in samples) / 1024
    peak_fds = max(fds for _, _, fds in samples)
    print(f"  peak server RSS {peak_rss:.0f} MiB, peak descriptors {peak_fds}")
    return {
        "ratio_first": ratio_first,
        "ratio_final": ratio_final,
        "peak_rss_mib": peak_rss,
        "peak_fds": peak_fds,
    }


def run(*, clients: int, seconds: float) -> dict[str, Any]:
    return trio.run(soak, clients, seconds)


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        trio.run(serve)
        return 0
    if argv[:1] == ["hostile"]:
        # Real attackers use their own machines' CPUs; here they share 2 cores with the server
        # and the measuring clients, so they run at a lower priority.
        os.nice(19)
        trio.run(hostile, int(argv[1]), argv[2], int(argv[3]), float(argv[4]))
        return 0
    parser = argparse.ArgumentParser(prog="bench_soak.py", description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    run(clients=args.clients, seconds=args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
