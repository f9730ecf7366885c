"""actors/children.py: what the project and its kit start dies with the process that started
it, however that process dies; the benchmark stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import trio

from claude_trio.actors.children import open_child_process

ROOT = Path(__file__).resolve().parent.parent.parent

# A program that runs a redis-server with the testing kit, makes trio's idle worker threads end
# at once (a child forked in one of them would be killed with it: it must not be), checks that
# its redis-server still answers, prints its pid and waits to be killed.
PARENT = """
import sys, trio, coredis
import trio._core._thread_cache as thread_cache
from claude_trio.testing import open_redis_server

thread_cache.IDLE_TIMEOUT = 0.01

async def main():
    async with open_redis_server(sys.argv[1]) as server:
        await trio.to_thread.run_sync(lambda: None)
        await trio.sleep(0.5)  # every worker thread has ended by now
        async with coredis.Redis.from_url(server.url) as client:
            assert await client.ping()
        print(server._process.pid, flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``condition`` (another process's state: nothing to wait on) for ``seconds``."""
    with trio.move_on_after(seconds):
        await trio.lowlevel.checkpoint()
        while not condition():  # noqa: ASYNC110 (the state of other processes)
            await trio.sleep(0.02)
    assert condition(), what


async def read_line(stream: trio.abc.ReceiveStream) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(256)
        assert chunk, f"the program ended before it said anything: {line!r}"
        line += chunk
    return line


async def test_a_killed_parent_takes_its_kits_redis_server_with_it(tmp_path: Path) -> None:
    with trio.fail_after(30):
        parent = await trio.lowlevel.open_process(
            [sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE
        )
        try:
            assert parent.stdout is not None
            redis_pid = int(await read_line(parent.stdout))
            assert alive(redis_pid)
            assert psutil.Process(redis_pid).name() == "redis-server"
            parent.kill()  # SIGKILL: no finally, no async with, nothing runs in the parent
            await parent.wait()
            await until(lambda: not alive(redis_pid), 10, "the redis-server outlived its parent")
        finally:
            parent.kill()
            with trio.move_on_after(10, shield=True):
                await parent.wait()


async def test_a_child_process_has_the_pipes_asked_for() -> None:
    with trio.fail_after(20):
        process = await open_child_process(
            [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send_all(b"hello")
        await process.stdin.aclose()
        said = b""
        while chunk := await process.stdout.receive_some(64):
            said += chunk
        assert await process.wait() == 0
        assert said == b"HELLO"
        await process.stdout.aclose()


def redis_servers_under(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if child.name() == "redis-server":
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


async def test_sigterm_stops_the_bench_and_every_server_it_started() -> None:
    """``scripts/bench --quick`` (its Redis section: the one that runs a redis-server and
    worker processes) stopped by SIGTERM, as a CI timeout stops it: it stops its servers
    itself (their folder is removed, which only its own teardown does), says so, exits 143."""
    bench = [sys.executable, str(ROOT / "scripts" / "bench_run.py"), "--quick", "--only", "redis"]
    with trio.fail_after(120):
        process = await trio.lowlevel.open_process(
            bench, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            await until(lambda: bool(redis_servers_under(process.pid)), 60, "no redis-server")
            (redis,) = redis_servers_under(process.pid)

            # Its folder, in the bench's: it changes into it (--dir) once it runs.
            def bench_folder() -> Path | None:
                here = Path(redis.cwd())
                return next(
                    (p for p in (here, *here.parents) if p.name.startswith("bench-redis-")), None
                )

            await until(lambda: bench_folder() is not None, 10, "not in its folder")
            folder = bench_folder()
            assert folder is not None
            process.send_signal(signal.SIGTERM)
            assert process.stderr is not None
            said = b""
            while chunk := await process.stderr.receive_some(4096):
                said += chunk
            code = await process.wait()
            assert code == 143, said.decode()
            assert "scripts/bench: stopped (SIGTERM)" in said.decode()
            assert "Traceback" not in said.decode()
            assert not alive(redis.pid)
            assert not await trio.Path(folder).exists()
        finally:
            if process.returncode is None:
                process.kill()
                with trio.move_on_after(10, shield=True):
                    await process.wait()
