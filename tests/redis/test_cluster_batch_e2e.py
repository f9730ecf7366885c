"""``claude-trio batch --remote`` over a cluster as a user runs it: one ``redis-server``, two
``claude-trio serve --redis`` gateways and two ``claude-trio worker`` processes (the real CLI
against the Messages API double), the batch given both gateways (``--remote`` twice).

Every item's first model answer is held until four items are in the model's hands (two on
each worker); then the gateway the batch is connected to and one worker are killed with
SIGKILL. The items the dead worker held are asked again by the other worker (their CLI never
got an answer); the batch goes on through the other gateway. Checked from the model double's
side: every item's prompt was answered exactly once, the prompts asked twice are exactly the
dead worker's, and Redis holds one session per item; the results file has every item once.
"""

from __future__ import annotations

import json
import re
from contextlib import AsyncExitStack
from pathlib import Path

import attrs
import pytest
import trio

from claude_trio.actors.children import open_child_process
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisServer, hermetic_env
from claude_trio.testing.model_double import ModelDouble, ModelRequest, Reply, Response
from claude_trio.testing.processes import (
    COMMAND,
    command_env,
    open_gateway_process,
    open_worker_process,
)

pytestmark = pytest.mark.e2e

TOKEN = "batch-cluster-e2e-token-0123456789"
KEYS = RedisKeys()
ITEMS = [f"item-{i:02d}" for i in range(8)]
MARKER = re.compile(r"item-\d\d")


@attrs.define(eq=False)
class Model:
    """Answers ``answer <item>``; while ``holding``, every answer waits on a gate of its own
    (kept in ``held``). ``asked``: the prompts each item's marker reached the double with;
    ``answered``: the answers let through (a held one counts once its gate opens)."""

    holding: bool = True
    held: list[tuple[str, trio.Event]] = attrs.field(factory=list)
    asked: dict[str, int] = attrs.field(factory=dict)
    answered: dict[str, int] = attrs.field(factory=dict)

    def __call__(self, request: ModelRequest) -> Response | None:
        if request.is_tool_use_summary:
            return None
        found = MARKER.findall(" ".join(request.user_texts))
        if not found:
            return Reply.text("ok")  # not an item's turn (none is expected)
        item = found[0]
        self.asked[item] = self.asked.get(item, 0) + 1
        if self.holding:
            gate = trio.Event()
            self.held.append((item, gate))
            return Reply.text(f"answer {item}", gate=gate)
        self.answered[item] = self.answered.get(item, 0) + 1
        return Reply.text(f"answer {item}")

    def release(self, items: set[str]) -> None:
        """Let the held answers of ``items`` through, and answer at once from now on."""
        self.holding = False
        for item, gate in self.held:
            if item in items:
                self.answered[item] = self.answered.get(item, 0) + 1
                gate.set()


async def test_a_batch_over_two_gateways_and_two_workers_runs_every_item_once(
    tmp_path: Path, redis_server: RedisServer, model_double: ModelDouble
) -> None:
    url = redis_server.url
    work = tmp_path / "work"
    work.mkdir()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"key": k, "prompt": f"say {k}"}) + "\n" for k in ITEMS))
    out = tmp_path / "results.jsonl"
    model = Model()
    model_double.responder = model
    env = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
    async with AsyncExitStack() as stack:
        redis = await stack.enter_async_context(open_redis(url))
        workers = [
            await stack.enter_async_context(
                open_worker_process(
                    tmp_path,
                    name,
                    url,
                    "--max-live",
                    "2",
                    "--dead-after",
                    "2",
                    "--drain-grace",
                    "10",
                    # Not about the governor: its slow start (two turns at once, shared by
                    # the workers) would never let four answers be held at once.
                    "--no-governor",
                    "--log-json",
                    env=command_env(
                        hermetic_env(model_double.base_url, tmp_path / name, sandbox=True)
                    ),
                )
            )
            for name in ("w0", "w1")
        ]
        gateways = [
            await stack.enter_async_context(
                open_gateway_process(tmp_path, name, url, "--cwd-root", str(work), env=env)
            )
            for name in ("g0", "g1")
        ]
        log = (tmp_path / "batch.stderr").open("wb")
        stack.callback(log.close)
        batch = await open_child_process(
            [*COMMAND, "batch", str(prompts), "--out", str(out), "--max-live", "4",
             "--remote", gateways[0].url, "--remote", gateways[1].url],
            env=env, stdout=log.fileno(), stderr=log.fileno(),
        )  # fmt: skip
        try:
            with trio.fail_after(180):
                while len(model.held) < 4:  # two items held on each worker
                    assert batch.returncode is None, (tmp_path / "batch.stderr").read_text()
                    await trio.sleep(0.05)
                on_w0 = set()
                for sid in await redis.zrange(KEYS.sessions_index, 0, -1):
                    record = SessionRecord.from_fields(await redis.hgetall(KEYS.session(sid)))
                    if record.worker == "w0" and record.state == "live":
                        on_w0.add(str(record.label))
                assert len(on_w0) == 2, on_w0
                await gateways[0].kill()  # the batch's connection
                assert await workers[0].kill()  # and its CLIs
                model.release(set(ITEMS) - on_w0)
                code = await batch.wait()
        finally:
            if batch.returncode is None:
                batch.kill()
                with trio.move_on_after(10, shield=True):
                    await batch.wait()
        sids = await redis.zrange(KEYS.sessions_index, 0, -1)
        done = [SessionRecord.from_fields(await redis.hgetall(KEYS.session(s))) for s in sids]
        pending = await redis.xpending(KEYS.jobs, KEYS.workers_group)

    shown = (tmp_path / "batch.stderr").read_text()
    assert code == 0, shown
    results = [json.loads(li) for li in out.read_text().splitlines() if li.strip()]
    assert sorted(r["key"] for r in results) == ITEMS
    for result in results:
        assert result["ok"] is True, result
        assert result["text"] == f"answer {result['key']}"
    # The model double's side: each item answered once; asked twice only when its worker died
    # with the question in the model's hands.
    assert model.answered == dict.fromkeys(ITEMS, 1)
    assert model.asked == {k: 2 if k in on_w0 else 1 for k in ITEMS}
    # The cluster's side: one session per item, each ended, every job acknowledged.
    assert sorted(str(r.label) for r in done) == ITEMS
    assert {r.state for r in done} == {"ended"}
    assert {r.worker for r in done} == {"w1"}  # w0 finished none: its two moved to w1
    assert pending.pending == 0
    assert "acknowledged already" not in workers[1].stderr_path.read_text()
