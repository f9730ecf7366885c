"""The fan-out stack as a user runs it: ``claude-trio serve --offline`` (the real bundled CLI
against the built-in offline model, in a subprocess) with ``claude-trio batch --remote`` (a
subprocess too) and the client.

* a batch of 20 killed mid-way and run again loses no finished item and runs none twice;
* principals named by ``--tokens`` cannot see each other's sessions; an admin sees them all;
* ``continue`` resumes a conversation: the model sees the earlier turns;
* the JSON log lines never carry a token, a prompt or a path; Ctrl-C drains and exits 0.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from claude_trio import ExecuteParams
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import SessionLostError
from claude_trio.protocol.session.events import Result, TextDelta
from claude_trio.testing.processes import COMMAND, CommandProcess, command_env, open_gateway_process

pytestmark = pytest.mark.e2e

ALICE = "alice-e2e-token-0123456789"
BOB = "bob-e2e-token-0123456789ab"
ADMIN = "admin-e2e-token-0123456789"
CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


@asynccontextmanager
async def serve(tmp_path: Path, *argv: str) -> AsyncIterator[CommandProcess]:
    """``claude-trio serve --offline --port 0`` with a tokens file; stopped with Ctrl-C."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            [
                {"principal": "alice", "token": ALICE},
                {"principal": "bob", "token": BOB},
                {"principal": "ops", "token": ADMIN, "admin": True},
            ]
        )
    )
    tokens.chmod(0o600)
    work = tmp_path / "work"
    work.mkdir()
    async with open_gateway_process(
        tmp_path, "serve", None,
        "--offline", "--tokens", str(tokens), "--cwd-root", str(work), "--log-json", *argv,
    ) as server:  # fmt: skip
        yield server


async def batch(
    prompts: Path, out: Path, url: str, token: str, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(240):
        return await trio.run_process(
            [*COMMAND, "batch", str(prompts), "--remote", url, "--out", str(out), *extra],
            env=command_env({"CLAUDE_TRIO_TOKEN": token}),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes, count: int) -> None:
    """Read ``stream`` until ``marker`` was seen ``count`` times."""
    shown = b""
    while shown.count(marker) < count:
        chunk = await stream.receive_some()
        assert chunk, f"the stream ended after {shown.count(marker)} of {count}"
        shown += chunk


def result_lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


async def test_a_killed_batch_runs_again_without_losing_or_repeating_a_finished_item(
    tmp_path: Path,
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    keys = [f"item-{i:02d}" for i in range(20)]
    prompts.write_text(
        "".join(json.dumps({"key": k, "prompt": f"question {k}"}) + "\n" for k in keys)
    )
    out = tmp_path / "results.jsonl"
    async with serve(tmp_path, "--max-live", "2") as server:
        # The first run is killed (SIGKILL: no clean-up at all) once a few items are done.
        process = await trio.lowlevel.open_process(
            [*COMMAND, "batch", str(prompts), "--remote", server.url, "--out", str(out),
             "--max-live", "3"],
            env=command_env({"CLAUDE_TRIO_TOKEN": ALICE}),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            # Its progress lines (not a terminal: one per finished item, after its result
            # line is written and synced).
            assert process.stdout is not None
            with trio.fail_after(120):
                await read_until(process.stdout, b" ok $", 4)
        finally:
            process.kill()
            with trio.move_on_after(10, shield=True):
                await process.wait()
        done_before = {str(r["key"]) for r in result_lines(out)}
        assert 4 <= len(done_before) < 20

        rerun = await batch(prompts, out, server.url, ALICE, "--max-live", "3")
        assert rerun.returncode == 0, rerun.stderr.decode()
        assert f"{len(done_before)} of 20 items are done already" in rerun.stdout.decode()

        async with connect_gateway(server.url, token=ADMIN, config=CLIENT) as admin:
            listed = await admin.list()
    lines = result_lines(out)
    # every item once, each finished one with its own answer
    assert sorted(str(r["key"]) for r in lines) == keys
    for line in lines:
        assert line["ok"] is True, line
        assert line["text"] == f"You said: question {line['key']}"
        assert isinstance(line["cost_usd"], float)
        assert line["cost_usd"] > 0
    # on the server: an item done before the kill was never started again
    runs: dict[str, int] = {}
    for session in listed:
        assert session.owner == "alice"
        runs[str(session.label)] = runs.get(str(session.label), 0) + 1
    assert set(runs) == set(keys)
    assert all(runs[k] == 1 for k in done_before), runs
    # and the server's log lines are JSON without a token, a prompt or a path
    log_text = server.stderr_path.read_text()
    events = [json.loads(line) for line in log_text.splitlines()]
    assert {e.get("event") for e in events} >= {
        "listening",
        "heap_frozen",
        "opened",
        "ended",
        "draining",
    }
    (frozen,) = [e for e in events if e.get("event") == "heap_frozen"]
    assert frozen["objects"] > 10_000  # the imports' objects, out of the collector's walks
    for secret in (ALICE, BOB, ADMIN, "question item", str(tmp_path)):
        assert secret not in log_text


async def test_principals_cannot_see_each_others_sessions_and_continue_resumes(
    tmp_path: Path,
) -> None:
    async with (
        serve(tmp_path) as server,
        connect_gateway(server.url, token=ALICE, config=CLIENT) as alice,
        connect_gateway(server.url, token=BOB, config=CLIENT) as bob,
        connect_gateway(server.url, token=ADMIN, config=CLIENT) as admin,
    ):
        assert alice.hello is not None
        assert (alice.hello.principal, alice.hello.admin) == ("alice", False)
        session = await alice.open(ExecuteParams(prompt="remember the word pelican"))
        first = [event async for event in session.events]
        assert "".join(e.text for e in first if isinstance(e, TextDelta)).endswith(
            "You said: remember the word pelican"
        )
        # bob: no such session, not in his list; the admin: there
        assert await bob.list() == ()
        with pytest.raises(SessionLostError):
            await bob.attach(session.id)
        assert [s.session for s in await admin.list()] == [session.id]
        # continue: a new CLI resumes the conversation; the model saw the earlier turn
        await session.continue_("which word was it?")
        second = [event async for event in session.events]
        (info,) = await alice.list()
    text = "".join(e.text for e in second if isinstance(e, TextDelta))
    assert text.endswith(
        "You said: which word was it? (earlier in this conversation: remember the word pelican)"
    )
    result = second[-1]
    assert isinstance(result, Result)
    assert result.final
    assert not result.is_error
    assert second[0].seq == first[-1].seq + 1
    assert (info.executions, info.state, info.first_seq) == (2, "ended", second[0].seq)
    assert info.usage.cost_usd > 0


async def test_run_remote_runs_one_prompt_on_the_server(tmp_path: Path) -> None:
    async with serve(tmp_path) as server:
        with trio.fail_after(120):
            done = await trio.run_process(
                [*COMMAND, "run", "hello from afar", "--remote", server.url, "--json"],
                env=command_env({"CLAUDE_TRIO_TOKEN": BOB}),
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
        async with connect_gateway(server.url, token=BOB, config=CLIENT) as bob:
            (info,) = await bob.list()
    assert done.returncode == 0, done.stderr.decode()
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert events[-1]["kind"] == "result"
    assert events[-1]["final"] is True
    text = "".join(e["text"] for e in events if e["kind"] == "text_delta")
    assert text.endswith("You said: hello from afar")
    assert (info.owner, info.state) == ("bob", "ended")
