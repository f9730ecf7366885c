"""Benchmark: the gateway's fan-out against a bare trio-websocket server, side by side.

One session's events go to ``--clients`` websocket clients (50 by default):

* **bare**: a plain ``trio_websocket.serve_websocket`` handler per client that sends a list of
  pre-encoded frames (exactly the frames the gateway sends for the same session, built once
  before the clock starts) with ``send_message``, one after the other. No session, no fleet,
  no encoding inside the measured interval: the least a trio-websocket server can do.
* **gateway**: ``open_fleet`` + ``serve_gateway``; the session runs *inside* the measured
  interval on a replay of a recorded scripted CLI (``bench_replay.ReplayTransport``: the SDK
  parses every frame, the mapper maps it, the fleet buffers it and the gateway encodes it once
  and fans it out). Every client is attached before the turn is released; the queues are large
  enough that nothing merges, so both sides deliver the same number of frames.

Each server runs in its own process; the clients run in this one (raw sockets: a wsproto
handshake, then frames are counted from their headers, which costs the client side about a
microsecond per frame, so it never limits the server). Measured per run: wall time from the
release to the last client's last frame, and the server process's CPU over the same interval
(``/proc/<pid>/stat``). Printed: delivered frames/s and server CPU per 1,000 frames for each
side (medians of the rounds, bare and gateway interleaved), and their ratios (gateway / bare
for throughput, bare / gateway for CPU: both ``>= 0.8`` is the target).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import warnings
from functools import partial

import trio
from bench_proc import cpu_seconds
from bench_replay import Recording, replay_factory
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

from claude_trio import ExecuteParams, open_session, serve_gateway
from claude_trio.actors.children import run_child_process
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.protocol.fanout.remote import GatewayLimits, remote_event
from claude_trio.protocol.fanout.replay import slim
from claude_trio.protocol.fanout.wire import EventFrame, encode_frame
from claude_trio.testing import FakeCLI, FakeTurn

TOKEN = "bench-gateway-token-0123456789"
PARAMS = ExecuteParams(prompt="stream please")
SESSION_ID = "00000000-bench-0000-0000-000000000000"
TARGET = 0.8
_HERE_SCRIPT = os.path.abspath(__file__)


# -- the recorded session ------------------------------------------------------------------------


async def fake_recording(deltas: int) -> Recording:
    """A scripted CLI's frames for one turn of ``deltas`` 8-character text deltas."""
    text = ("The gateway fans each event out to every client. " * (deltas // 6 + 1))[: deltas * 8]

    async def script(turn: FakeTurn) -> None:
        await turn.text(text, chunk=8)

    fake = FakeCLI(script)
    async with open_session(PARAMS, transport_factory=fake) as session:
        async for _ in session.events:
            pass
    frames = fake.transport.emitted_frames()
    init_index = next(i for i, f in enumerate(frames) if f.get("type") == "control_response")
    echo = next(
        f for f in frames if f.get("type") == "user" and isinstance(f["message"]["content"], str)
    )
    turn = tuple(frames[init_index + 1 :])
    return Recording(
        initialize_response=frames[init_index]["response"]["response"],
        turn=turn,
        prompt_uuid=echo["uuid"],
        cli_version="fake",
        mentions=frozenset(i for i, f in enumerate(turn) if echo["uuid"] in json.dumps(f)),
    )


async def gateway_frames(recording: Recording, session_id: str) -> list[str]:
    """The frames the gateway sends for one replay of ``recording`` (built as it builds them)."""
    async with open_session(PARAMS, transport_factory=replay_factory(recording)) as session:
        return [
            encode_frame(EventFrame(session=session_id, event=remote_event(slim(event))))
            async for event in session.events
        ]


# -- the servers (subprocesses) ------------------------------------------------------------------


async def _wait_go() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with stdin:
        await stdin.receive_some(16)


async def serve_bare(deltas: int) -> None:
    recording = await fake_recording(deltas)
    frames = await gateway_frames(recording, SESSION_ID)
    go = trio.Event()

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        await go.wait()
        for frame in frames:
            await ws.send_message(frame)
        with contextlib.suppress(ConnectionClosed):
            await ws.get_message()  # until the client closes

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(serve_websocket, handler, "127.0.0.1", 0, ssl_context=None)
        )
        print(server.port, SESSION_ID, len(frames), flush=True)
        await _wait_go()
        go.set()
        await trio.sleep_forever()


async def serve_gateway_side(deltas: int, clients: int) -> None:
    recording = await fake_recording(deltas)
    expected = len(await gateway_frames(recording, SESSION_ID))
    release = trio.Event()
    limits = OPEN_LIMITS
    factory = replay_factory(recording, release=release)
    async with (
        open_fleet(transport_factory=factory, max_live=1, governor=None) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(
            partial(
                serve_gateway,
                fleet,
                token=TOKEN,
                allowed_origins=None,
                client_queue=10 * expected,
                limits=limits,
            )
        )
        session = await fleet.start(PARAMS)
        print(port, session.id, expected, flush=True)
        await _wait_go()
        start = trio.current_time()
        release.set()
        await session.wait_ended()
        # How fast the session itself ran while fanning out (its own progress first).
        print(session.last_seq / (trio.current_time() - start), flush=True)
        await trio.sleep_forever()


# -- the clients (this process) -----------------------------------------------------------------


class FrameCounter:
    """Counts complete server frames (unmasked) from raw bytes, without decoding payloads."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.need = 0  # payload bytes still to skip
        self.frames = 0

    def feed(self, data: bytes) -> None:
        if self.need >= len(data):
            self.need -= len(data)
            if self.need == 0:
                self.frames += 1
            return
        buf = self.buffer
        buf += data[self.need :] if self.need else data
        if self.need:
            self.frames += 1
            self.need = 0
        pos = 0
        end = len(buf)
        while end - pos >= 2:
            length = buf[pos + 1] & 0x7F
            head = 2
            if length == 126:
                if end - pos < 4:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                head = 4
            elif length == 127:
                if end - pos < 10:
                    break
                length = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                head = 10
            if end - pos - head >= length:
                pos += head + length
                self.frames += 1
            else:
                self.need = length - (end - pos - head)
                pos = end
                break
        del buf[:pos]


async def handshake(stream: trio.SocketStream, token: str) -> WSConnection:
    """A raw wsproto client's opening handshake on ``stream`` (bearer ``token``); after it,
    frames are read straight off the socket (see ``FrameCounter``)."""
    ws = WSConnection(ConnectionType.CLIENT)
    headers = [(b"authorization", f"Bearer {token}".encode())]
    await stream.send_all(ws.send(Request(host="127.0.0.1", target="/", extra_headers=headers)))
    while True:
        data = await stream.receive_some(65536)
        if not data:
            raise RuntimeError("the server closed the connection during the handshake")
        ws.receive_data(data)
        if any(isinstance(event, AcceptConnection) for event in ws.events()):
            return ws


async def attach(stream: trio.SocketStream, ws: WSConnection, session_id: str) -> None:
    """Send the ``attach`` op for ``session_id`` from its first event (one reply frame comes)."""
    op = {"op": "attach", "id": "a", "session": session_id, "last_seq": None}
    await stream.send_all(ws.send(TextMessage(data=json.dumps(op))))


async def _client(
    port: int,
    session_id: str | None,
    expected: int,
    ready: trio.Event,
    go: trio.Event,
    done: list[float],
    remaining: list[int],
    all_ready: trio.Event,
) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        ws = await handshake(stream, TOKEN)
        leftover = b""
        counter = FrameCounter()
        if session_id is not None:
            await attach(stream, ws, session_id)
            expected += 1  # the reply
        remaining[0] -= 1
        if remaining[0] == 0:
            all_ready.set()
        await go.wait()
        while counter.frames < expected:
            data = leftover or await stream.receive_some(1 << 18)
            leftover = b""
            if not data:
                raise RuntimeError("the server closed the connection early")
            counter.feed(data)
        done.append(trio.current_time())
        ready.set()


async def run_side(mode: str, deltas: int, clients: int) -> tuple[float, float, int, float]:
    """One run: ``(wall seconds, server CPU seconds, frames delivered, session events/s)``."""
    command = [sys.executable, _HERE_SCRIPT, "serve", mode, str(deltas)]
    command.append(str(clients))
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            partial(run_child_process, command, stdin=-1, stdout=-1, check=False)
        )
        line = b""
        while not line.endswith(b"\n"):
            line += await proc.stdout.receive_some(1024)
        port_text, session_id, expected_text = line.decode().split()
        port, expected = int(port_text), int(expected_text)
        go = trio.Event()
        all_ready = trio.Event()
        done: list[float] = []
        remaining = [clients]
        async with trio.open_nursery() as clients_nursery:
            for _ in range(clients):
                clients_nursery.start_soon(
                    _client,
                    port,
                    session_id if mode == "gateway" else None,
                    expected,
                    trio.Event(),
                    go,
                    done,
                    remaining,
                    all_ready,
                )
            await all_ready.wait()
            await trio.sleep(0.3)  # let the attach ops land (not measured)
            cpu0 = cpu_seconds(proc.pid)
            start = trio.current_time()
            await proc.stdin.send_all(b"go\n")
            go.set()
        wall = max(done) - start
        cpu = cpu_seconds(proc.pid) - cpu0
        session_rate = 0.0
        if mode == "gateway":
            line = b""
            while not line.endswith(b"\n"):
                line += await proc.stdout.receive_some(1024)
            session_rate = float(line)
        proc.kill()
    return wall, cpu, expected * clients, session_rate



#: Limits a benchmark's own clients never reach (every client from one address, no pings).
OPEN_LIMITS = GatewayLimits(
    client_queue_bytes=2**40,
    max_connections_per_peer=10_000,
    max_handshakes_per_peer=10_000,
    max_handshakes=10_000,
    ping_interval=3600,
)

def run(*, rounds: int, deltas: int, clients: int) -> dict[str, float]:
    """Interleave bare and gateway runs; print the medians and the ratios."""
    runs: dict[str, list[tuple[float, float, int, float]]] = {"bare": [], "gateway": []}
    for _ in range(rounds):
        for mode in ("bare", "gateway"):
            runs[mode].append(trio.run(run_side, mode, deltas, clients))
    out: dict[str, float] = {}
    for mode, results in runs.items():
        fps = statistics.median(n / wall for wall, _, n, _ in results)
        cpu = statistics.median(cpu / n * 1000 for _, cpu, n, _ in results)
        out[f"{mode}_fps"] = fps
        out[f"{mode}_cpu_ms"] = cpu * 1000
        frames = results[0][2]
        print(
            f"  {mode:8s} {frames} frames to {clients} clients: {fps:9,.0f} frames/s, "
            f"{cpu * 1000:6.2f} server CPU-ms per 1,000 frames (median of {rounds})"
        )
    rate = statistics.median(r[3] for r in runs["gateway"])
    out["session_events_per_s"] = rate
    per_client = out["gateway_fps"] / clients
    print(
        f"  the session itself ran at {rate:,.0f} events/s while each client received "
        f"{per_client:,.0f} frames/s"
    )
    out["throughput_ratio"] = out["gateway_fps"] / out["bare_fps"]
    out["cpu_ratio"] = out["bare_cpu_ms"] / out["gateway_cpu_ms"]
    met = out["throughput_ratio"] >= TARGET and out["cpu_ratio"] >= TARGET
    print(
        f"  ratios: throughput gateway/bare {out['throughput_ratio']:.2f}, CPU per frame "
        f"bare/gateway {out['cpu_ratio']:.2f} (target >= {TARGET} each: "
        f"{'met' if met else 'NOT met'})"
    )
    return out


def main(argv: list[str]) -> int:
    # The fleet answers questions itself (on_user_input="manual"), which the SDK warns about
    # under bypassPermissions; it is not what is measured here.
    warnings.simplefilter("ignore")
    if argv[:1] == ["serve"]:
        mode, deltas, clients = argv[1], int(argv[2]), int(argv[3])
        trio.run(
            serve_bare if mode == "bare" else serve_gateway_side,
            *((deltas,) if mode == "bare" else (deltas, clients)),
        )
        return 0
    parser = argparse.ArgumentParser(prog="bench_gateway.py", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args(argv)
    run(rounds=args.rounds, deltas=args.deltas, clients=args.clients)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
