"""Benchmark: the web console following live sessions against the Python client following the
same sessions, side by side.

A gateway process (``open_fleet`` + ``serve_gateway(console=True)``) runs ``--sessions`` (20)
sessions on the fake CLI (``claude_trio.testing.FakeCLI``: no real CLI, so the measure is the
gateway's and the follower's, not a CLI's); each streams text deltas at about 50 events/s for
``--seconds`` once released. Each round runs twice, in a fresh gateway each time:

* **console**: a headless Chromium (the system's, driven by Selenium, as the browser tests do)
  loads the console with the token, which attaches to every session; one session is selected,
  so its stream is drawn live too, as a person watching would see it.
* **client**: ``connect_gateway`` in this process attaches to every session and reads every
  event.

Measured from the release to the moment the follower holds every session's last event: the
CPU of the gateway process (``/proc/<pid>/stat``; the fake CLIs run in it, the same on both
sides) and of the follower (the whole Chromium process tree, or this process), each per event
delivered. Printed: the medians, and the ratios console / client.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio
from bench_proc import cpu_seconds

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.children import die_with_parent
from claude_trio.actors.fanout.fleet import open_fleet
from claude_trio.client import RemoteSession, connect_gateway
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.testing import FakeCLI, FakeTurn

TOKEN = "bench-console-token-0123456789"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
RATE = 50  # events per second and session
_HERE = Path(__file__).resolve()


# -- the gateway (a subprocess) ------------------------------------------------------------------


async def serve(sessions: int, seconds: float) -> None:
    """Start the sessions (held before their text), print the port, release them on a line of
    stdin, and run until stdin ends."""
    release = trio.Event()
    text = "console " * int(RATE * seconds)

    async def script(turn: FakeTurn) -> None:
        await release.wait()
        await turn.text(text, chunk=8, delay=1 / RATE)

    limits = GatewayLimits(client_queue_bytes=2**40, ping_interval=3600)
    async with (
        open_fleet(transport_factory=FakeCLI(script), max_live=sessions, governor=None) as fleet,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(
            partial(
                serve_gateway,
                fleet,
                token=TOKEN,
                allowed_origins=(),
                client_queue=100_000,
                limits=limits,
                console=True,
            )
        )
        for number in range(sessions):
            await fleet.start(ExecuteParams(prompt="stream please"), label=f"bench {number}")
        print(port, flush=True)
        stdin = trio.wrap_file(sys.stdin)
        await stdin.readline()
        release.set()
        await stdin.readline()  # the end of input
        nursery.cancel_scope.cancel()


# -- measuring -----------------------------------------------------------------------------------


def cpu_so_far(pid: int) -> float:
    """The CPU of one process so far (0 once it is gone: a browser's helper processes come
    and go)."""
    try:
        return cpu_seconds(pid)
    except OSError:
        return 0.0


def tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


class Gateway:
    def __init__(self, sessions: int, seconds: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(_HERE), "serve", str(sessions), str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            preexec_fn=die_with_parent(),
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())
        self.base = f"http://127.0.0.1:{self.port}"

    def release(self) -> float:
        assert self.process.stdin is not None
        before = cpu_so_far(self.process.pid)
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return before

    def cpu(self) -> float:
        return cpu_so_far(self.process.pid)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def console_round(driver: Any, sessions: int, seconds: float) -> tuple[float, float, int, float]:
    """(gateway CPU, browser CPU, events, wall seconds) of the console following the sessions."""
    gateway = Gateway(sessions, seconds)
    try:
        driver.get("about:blank")
        driver.get(f"{gateway.base}/#token={TOKEN}")
        rows = "[data-testid=session-row]"
        attached = (
            f"return [...document.querySelectorAll('{rows}')]"
            ".filter(r => Number(r.dataset.lastSeq) > 0).length"
        )
        _until(lambda: driver.execute_script(attached) == sessions, "every session attached")
        driver.execute_script(f"document.querySelector('{rows}').click()")
        browser = tree(driver.service.process.pid)
        browser_before = sum(cpu_so_far(pid) for pid in browser)
        started = time.perf_counter()
        gateway_before = gateway.release()
        ended = f"return document.querySelectorAll('{rows}[data-state=ended]').length"
        _until(lambda: driver.execute_script(ended) == sessions, "every session ended", 0.25)
        wall = time.perf_counter() - started
        gateway_cpu = gateway.cpu() - gateway_before
        browser_cpu = sum(cpu_so_far(pid) for pid in browser) - browser_before
        events = driver.execute_script(
            f"return [...document.querySelectorAll('{rows}')]"
            ".reduce((n, r) => n + Number(r.dataset.lastSeq), 0)"
        )
        return gateway_cpu, browser_cpu, int(events), wall
    finally:
        gateway.close()


def client_round(sessions: int, seconds: float) -> tuple[float, float, int, float]:
    """(gateway CPU, client CPU, events, wall seconds) of the Python client following them."""
    gateway = Gateway(sessions, seconds)
    try:
        return trio.run(_follow, gateway, sessions)
    finally:
        gateway.close()


async def _follow(gateway: Gateway, sessions: int) -> tuple[float, float, int, float]:
    counts: list[int] = []
    async with connect_gateway(f"ws://127.0.0.1:{gateway.port}/", token=TOKEN) as client:
        infos = await client.list()  # every session was started before the port was printed
        if len(infos) != sessions:
            raise RuntimeError(f"bench console: {len(infos)} sessions listed, not {sessions}")
        followed = [await client.attach(info.session) for info in infos]

        async def read(session: RemoteSession) -> None:
            last = 0
            async for event in session.events:
                last = event.seq
            counts.append(last)

        cpu_before = time.process_time()
        started = time.perf_counter()
        gateway_before = gateway.release()
        async with trio.open_nursery() as nursery:
            for session in followed:
                nursery.start_soon(read, session)
        wall = time.perf_counter() - started
        return gateway.cpu() - gateway_before, time.process_time() - cpu_before, sum(counts), wall


def _until(
    check: Callable[[], bool], what: str, poll: float = 0.05, timeout: float = 300.0
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"bench console: timed out waiting for {what}")
        time.sleep(poll)


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        raise RuntimeError("bench console: chromium is missing: run scripts/ensure-chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def run(*, rounds: int, sessions: int = 20, seconds: float = 10.0) -> None:
    print(
        f"{sessions} sessions on the fake CLI, {RATE} text deltas/s each for {seconds:g} s; "
        f"{rounds} round(s), console and client interleaved"
    )
    console: list[tuple[float, float, int, float]] = []
    client: list[tuple[float, float, int, float]] = []
    driver = _browser()
    try:
        for _ in range(rounds):
            console.append(console_round(driver, sessions, seconds))
            client.append(client_round(sessions, seconds))
    finally:
        driver.quit()

    def per_event(runs: list[tuple[float, float, int, float]], index: int) -> float:
        return statistics.median(r[index] / r[2] * 1e6 for r in runs)

    def rate(runs: list[tuple[float, float, int, float]]) -> float:
        return statistics.median(r[2] / r[3] for r in runs)

    gw_console, gw_client = per_event(console, 0), per_event(client, 0)
    fo_console, fo_client = per_event(console, 1), per_event(client, 1)
    print(f"  {'':34}{'console':>12}{'client':>12}{'ratio':>9}")
    print(f"  {'events delivered per second':34}{rate(console):12.0f}{rate(client):12.0f}")
    print(
        f"  {'gateway CPU per event (us)':34}{gw_console:12.1f}{gw_client:12.1f}"
        f"{gw_console / gw_client:9.2f}"
    )
    print(
        f"  {'follower CPU per event (us)':34}{fo_console:12.1f}{fo_client:12.1f}"
        f"{fo_console / fo_client:9.2f}"
    )
    print("  (follower: the whole Chromium process tree vs this process's connect_gateway)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        trio.run(serve, int(sys.argv[2]), float(sys.argv[3]))
    else:
        run(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 1)
