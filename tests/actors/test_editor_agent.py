"""The editor face's agent (``actors/editor/agent.py``) over a scripted host, in memory: what
the editor is sent for each event and each request, under trio's virtual clock."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from claude_trio.actors.editor.agent import serve_editor
from claude_trio.actors.extensions.broker import AnswerAccepted
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.errors import ReplayGapError
from claude_trio.protocol.fanout.wire import SessionInfo
from claude_trio.protocol.session.events import (
    Aborted,
    AdapterReady,
    Event,
    Result,
    TextDelta,
    UserInputRequest,
    UserInputResolved,
    UserMessage,
)
from claude_trio.protocol.session.usage import Usage


def result(seq: int) -> Result:
    return Result(
        seq=seq,
        subtype="success",
        is_error=False,
        session_id="s",
        usage=Usage(),
        execution_usage=Usage(),
        session_usage=Usage(),
        final=True,
    )


@attrs.define(eq=False)
class ScriptedHandle:
    """One session whose events the test sends; answers and aborts recorded."""

    id: str = "h1"
    events: list[Event] = attrs.field(factory=list)
    added: trio.Event = attrs.field(factory=trio.Event)
    answers: list[tuple[str, Any]] = attrs.field(factory=list)
    aborts: int = 0

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.added.set()
        self.added = trio.Event()

    @property
    def usage(self) -> Usage:
        return Usage()

    async def push(self, text: str, *, images: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    async def answer(self, request_id: str, answer: Any) -> AnswerAccepted:
        await trio.lowlevel.checkpoint()
        self.answers.append((request_id, answer))
        return AnswerAccepted(request_id=request_id)

    async def abort(self) -> None:
        await trio.sleep(0.03)  # the stop takes tens of milliseconds
        self.aborts += 1
        self.add(Aborted(seq=len(self.events) + 1))

    @asynccontextmanager
    async def subscribe(self, last_seq: int | None = None) -> AsyncIterator[Any]:
        send, receive = trio.open_memory_channel[Event](100)

        async def feed() -> None:
            index = 0
            while True:
                while index < len(self.events):
                    event = self.events[index]
                    index += 1
                    if last_seq is not None and event.seq <= last_seq:
                        continue
                    await send.send(event)
                    if isinstance(event, Result | Aborted) and index == len(self.events):
                        await send.aclose()  # the current execution's end
                        return
                await self.added.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            yield receive
            nursery.cancel_scope.cancel()

    async def result(self) -> Any:
        raise NotImplementedError


@attrs.define(eq=False)
class ScriptedHost:
    handle: ScriptedHandle = attrs.field(factory=ScriptedHandle)
    opened: list[tuple[ExecuteParams, str | None]] = attrs.field(factory=list)
    continued: list[tuple[str, str]] = attrs.field(factory=list)
    continue_options: list[dict[str, Any]] = attrs.field(factory=list)
    infos: list[SessionInfo] = attrs.field(factory=list)
    open_takes: float = 0.0

    async def open(self, params: ExecuteParams, *, label: str | None = None, **_: Any) -> Any:
        await trio.sleep(self.open_takes)
        self.opened.append((params, label))
        return self.handle

    async def continue_(self, session_id: str, prompt: str, **options: Any) -> Any:
        await trio.lowlevel.checkpoint()
        self.continued.append((session_id, prompt))
        self.continue_options.append(options)
        return self.handle

    async def get(self, session_id: str) -> Any:
        await trio.lowlevel.checkpoint()
        return self.handle

    async def list(self) -> Sequence[SessionInfo]:
        await trio.lowlevel.checkpoint()
        return self.infos


@attrs.define(eq=False)
class Wire:
    """The editor's end: JSON lines out, JSON lines in."""

    to_agent: trio.abc.SendStream
    from_agent: trio.abc.ReceiveStream
    buffer: bytearray = attrs.field(factory=bytearray)

    async def send(self, message: dict[str, Any]) -> None:
        await self.to_agent.send_all((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.from_agent.receive_some(65536)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        message: dict[str, Any] = json.loads(line)
        return message


@asynccontextmanager
async def open_wire(host: ScriptedHost, mode: str = "default") -> AsyncIterator[Wire]:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_editor(
                host,
                agent_in,
                agent_out,
                make_params=ExecuteParams,
                permission_mode=mode,  # type: ignore[arg-type]
            )
        )
        yield Wire(to_agent=to_agent, from_agent=from_agent)
        await to_agent.aclose()


async def start_prompt(wire: Wire) -> str:
    await wire.send({"id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}})
    session_id: str = (await wire.receive())["result"]["sessionId"]
    await wire.send(
        {
            "id": 2,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
        }
    )
    return session_id


async def test_an_approval_answered_elsewhere_drops_the_editors_request() -> None:
    host = ScriptedHost()
    async with open_wire(host) as wire:
        await start_prompt(wire)
        ask = UserInputRequest(
            seq=1,
            request_id="r1",
            source="tool_permission",
            tool_name="Bash",
            tool_input={"command": "make"},
            tool_use_id="t1",
        )
        host.handle.add(ask)
        asked = await wire.receive()
        assert asked["method"] == "session/request_permission"
        assert asked["params"]["toolCall"]["title"] == "`make`"
        # another client answers first: the editor's request is dropped
        host.handle.add(UserInputResolved(seq=2, request_id="r1", outcome="answered"))
        host.handle.add(TextDelta(seq=3, text="done"))
        host.handle.add(result(4))
        chunk = await wire.receive()
        assert chunk["params"]["update"]["content"]["text"] == "done"
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"stopReason": "end_turn"},
        }
        # the editor's late answer is ignored: nothing is answered twice
        await wire.send(
            {"id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}
        )
        await trio.testing.wait_all_tasks_blocked()
    assert host.handle.answers == []
    ((params, label),) = host.opened
    assert (params.prompt, params.cwd, params.permission_mode) == ("go", "/w", "default")
    assert label is not None
    assert label.startswith("acp:")


def approval(seq: int, n: int) -> UserInputRequest:
    return UserInputRequest(
        seq=seq,
        request_id=f"r{n}",
        source="tool_permission",
        tool_name="Bash",
        tool_input={"command": f"make {n}"},
        tool_use_id=f"t{n}",
    )


async def test_a_load_of_a_running_turn_asks_only_what_still_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = ScriptedHost()
    host.infos.append(
        SessionInfo(
            session="h1",
            label="acp:S",
            owner=None,
            state="live",
            executions=1,
            first_seq=1,
            last_seq=4,
            usage=Usage(),
            created_at=0.0,
            ended_at=None,
        )
    )
    # the turn so far: one approval answered (by the editor that went away), one waiting
    for event in (
        TextDelta(seq=1, text="working"),
        approval(2, 1),
        UserInputResolved(seq=3, request_id="r1", outcome="answered"),
        approval(4, 2),
    ):
        host.handle.add(event)
    async with open_wire(host) as wire:
        await wire.send(
            {
                "id": 7,
                "method": "session/load",
                "params": {"sessionId": "S", "cwd": "/w", "mcpServers": []},
            }
        )
        asked: list[dict[str, Any]] = []
        loaded = False
        while not (loaded and asked):
            message = await wire.receive()
            if message.get("method") == "session/request_permission":
                asked.append(message)
            loaded = loaded or message.get("id") == 7
        with trio.move_on_after(5):
            extra = await wire.receive()
            raise AssertionError(f"more than one request asked: {extra}")
        (request,) = asked
        assert request["params"]["toolCall"]["toolCallId"] == "t2"
        await wire.send(
            {
                "id": request["id"],
                "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
            }
        )
        await trio.testing.wait_all_tasks_blocked()
        host.handle.add(UserInputResolved(seq=5, request_id="r2", outcome="answered"))
        host.handle.add(result(6))
        await trio.testing.wait_all_tasks_blocked()
    assert host.handle.answers == [("r2", {"decision": "allow"})]


async def test_cancel_aborts_and_the_prompt_answers_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = ScriptedHost()
    async with open_wire(host) as wire:
        session_id = await start_prompt(wire)
        host.handle.add(TextDelta(seq=1, text="working"))
        await wire.receive()
        began = trio.current_time()
        await wire.send({"method": "session/cancel", "params": {"sessionId": session_id}})
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"stopReason": "cancelled"},
        }
        assert trio.current_time() - began == 0.03  # the abort's own time, nothing more
    assert host.handle.aborts == 1


async def test_mistakes_get_json_rpc_errors() -> None:
    host = ScriptedHost()
    async with open_wire(host) as wire:
        await wire.to_agent.send_all(b"not json\n")
        assert (await wire.receive())["error"]["code"] == -32700
        await wire.send({"id": 1, "method": "session/fly", "params": {}})
        assert (await wire.receive())["error"] == {
            "code": -32601,
            "message": "no method 'session/fly'",
        }
        await wire.send({"id": 2, "method": "session/new", "params": {"mcpServers": []}})
        error = (await wire.receive())["error"]
        assert error["code"] == -32602
        assert "cwd" in error["message"]
        await wire.send(
            {"id": 3, "method": "session/prompt", "params": {"sessionId": "x", "prompt": []}}
        )
        assert "no session 'x'" in (await wire.receive())["error"]["message"]
        await wire.send(
            {
                "id": 4,
                "method": "session/load",
                "params": {"sessionId": "x", "cwd": "/", "mcpServers": []},
            }
        )
        assert "no session 'x' on this host" in (await wire.receive())["error"]["message"]


async def test_a_mode_and_model_chosen_before_the_first_prompt_are_the_sessions() -> None:
    host = ScriptedHost()
    async with open_wire(host, mode="acceptEdits") as wire:
        await wire.send(
            {"id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}
        )
        new = (await wire.receive())["result"]
        assert new["modes"]["currentModeId"] == "acceptEdits"
        await wire.send(
            {
                "id": 2,
                "method": "session/set_mode",
                "params": {"sessionId": new["sessionId"], "modeId": "plan"},
            }
        )
        assert (await wire.receive())["result"] == {}
        await wire.send(
            {
                "id": 3,
                "method": "session/set_mode",
                "params": {"sessionId": new["sessionId"], "modeId": "yolo"},
            }
        )
        assert "no mode 'yolo'" in (await wire.receive())["error"]["message"]
        assert new["configOptions"][0]["currentValue"] == "default"
        choose = {"sessionId": new["sessionId"], "configId": "model", "value": "haiku"}
        await wire.send({"id": 5, "method": "session/set_config_option", "params": choose})
        assert (await wire.receive())["result"]["configOptions"][0]["currentValue"] == "haiku"
        wrong = {**choose, "value": "gpt"}
        await wire.send({"id": 6, "method": "session/set_config_option", "params": wrong})
        assert "no model 'gpt'" in (await wire.receive())["error"]["message"]
        await wire.send(
            {
                "id": 4,
                "method": "session/prompt",
                "params": {
                    "sessionId": new["sessionId"],
                    "prompt": [{"type": "text", "text": "p"}],
                },
            }
        )
        host.handle.add(result(1))
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    assert host.opened[0][0].permission_mode == "plan"
    assert host.opened[0][0].model == "haiku"


async def test_a_mode_model_and_images_sent_between_prompts_reach_the_continued_one() -> None:
    host = ScriptedHost()
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    async with open_wire(host, mode="acceptEdits") as wire:
        session_id = await start_prompt(wire)
        host.handle.add(result(1))
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
        mode = {"sessionId": session_id, "modeId": "plan"}
        await wire.send({"id": 3, "method": "session/set_mode", "params": mode})
        assert (await wire.receive())["result"] == {}
        choose = {"sessionId": session_id, "configId": "model", "value": "haiku"}
        await wire.send({"id": 4, "method": "session/set_config_option", "params": choose})
        assert (await wire.receive())["result"]["configOptions"][0]["currentValue"] == "haiku"
        image = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()}
        prompt = [{"type": "text", "text": "again"}, image]
        await wire.send(
            {
                "id": 5,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": prompt},
            }
        )
        await trio.testing.wait_all_tasks_blocked()
        host.handle.add(result(2))
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    assert host.opened[0][0].permission_mode == "acceptEdits"
    assert host.opened[0][0].model is None
    assert host.continued == [("h1", "again")]
    (options,) = host.continue_options
    assert options["permission_mode"] == "plan"
    assert options["model"] == "haiku"
    assert [i.data for i in options["images"]] == [png]


def info(state: str, last_seq: int) -> SessionInfo:
    return SessionInfo(
        session="h1",
        label="acp:S",
        owner=None,
        state=state,  # type: ignore[arg-type]
        executions=1,
        first_seq=1,
        last_seq=last_seq,
        usage=Usage(),
        created_at=0.0,
        ended_at=None,
    )


def ready(seq: int, prompt: str) -> AdapterReady:
    return AdapterReady(seq=seq, model=None, prompt=prompt)


def update(message: dict[str, Any]) -> tuple[str, str]:
    """A ``session/update`` as (its kind, its text)."""
    assert message["method"] == "session/update", message
    sent = message["params"]["update"]
    return sent["sessionUpdate"], sent["content"]["text"]


LOAD = {
    "id": 7,
    "method": "session/load",
    "params": {"sessionId": "S", "cwd": "/w", "mcpServers": []},
}


def prompt_request(id_: int, text: str, session_id: str = "S") -> dict[str, Any]:
    return {
        "id": id_,
        "method": "session/prompt",
        "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
    }


async def test_a_load_replays_the_prompts_between_the_replies_and_none_is_echoed() -> None:
    host = ScriptedHost()
    host.infos.append(info("ended", 7))
    for event in (
        ready(1, "first"),
        TextDelta(seq=2, text="one"),
        result(3),
        ready(4, "second"),
        TextDelta(seq=5, text="two"),
        UserMessage(seq=6, text="pushed", uuid="u", timestamp=0.0),
        result(7),
    ):
        host.handle.add(event)
    async with open_wire(host) as wire:
        await wire.send(LOAD)
        replayed = [update(await wire.receive()) for _ in range(5)]
        assert replayed == [
            ("user_message_chunk", "first"),
            ("agent_message_chunk", "one"),
            ("user_message_chunk", "second"),
            ("agent_message_chunk", "two"),
            ("user_message_chunk", "pushed"),
        ]
        assert "result" in await wire.receive()
        # the loaded session goes on: the editor's own prompt is not sent back to it
        await wire.send(prompt_request(8, "third"))
        await trio.testing.wait_all_tasks_blocked()
        host.handle.add(ready(8, "third"))
        host.handle.add(TextDelta(seq=9, text="three"))
        host.handle.add(result(10))
        assert update(await wire.receive()) == ("agent_message_chunk", "three")
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    assert host.continued == [("h1", "third")]


async def test_a_prompt_right_after_a_load_waits_for_the_running_turn_then_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = ScriptedHost()
    host.infos.append(info("live", 2))
    host.handle.add(ready(1, "first"))
    host.handle.add(TextDelta(seq=2, text="working"))
    async with open_wire(host) as wire:
        await wire.send(LOAD)
        assert update(await wire.receive()) == ("user_message_chunk", "first")
        assert update(await wire.receive()) == ("agent_message_chunk", "working")
        assert "result" in await wire.receive()
        await wire.send(prompt_request(8, "next"))
        await trio.sleep(60)  # the loaded turn goes on: the prompt waits, nothing is refused
        assert host.continued == []
        await wire.send(prompt_request(9, "another"))
        refused = await wire.receive()
        assert refused["id"] == 9
        assert refused["error"]["code"] == -32600
        assert "a prompt is already running" in refused["error"]["message"]
        host.handle.add(TextDelta(seq=3, text=" done"))
        assert update(await wire.receive()) == ("agent_message_chunk", " done")
        host.handle.add(result(4))
        await trio.testing.wait_all_tasks_blocked()
        # the turn ended: the waiting prompt continues the conversation
        assert host.continued == [("h1", "next")]
        host.handle.add(ready(5, "next"))
        host.handle.add(TextDelta(seq=6, text="next answer"))
        host.handle.add(result(7))
        assert update(await wire.receive()) == ("agent_message_chunk", "next answer")
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 8,
            "result": {"stopReason": "end_turn"},
        }


async def test_cancel_while_a_prompt_waits_for_a_loaded_turn_stops_both(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = ScriptedHost()
    host.infos.append(info("live", 1))
    host.handle.add(TextDelta(seq=1, text="working"))
    async with open_wire(host) as wire:
        await wire.send(LOAD)
        await wire.receive()
        assert "result" in await wire.receive()
        await wire.send(prompt_request(8, "next"))
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await wire.send({"method": "session/cancel", "params": {"sessionId": "S"}})
        assert await wire.receive() == {
            "jsonrpc": "2.0",
            "id": 8,
            "result": {"stopReason": "cancelled"},
        }
        assert trio.current_time() - began == 0.03  # the abort's own time
    assert host.handle.aborts == 1
    assert host.continued == []


async def test_a_cancel_while_the_execution_starts_aborts_it_once_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    host = ScriptedHost(open_takes=1.0)
    async with open_wire(host) as wire:
        session_id = await start_prompt(wire)
        await trio.sleep(0.5)  # the host is still starting the execution
        await wire.send({"method": "session/cancel", "params": {"sessionId": session_id}})
        with trio.fail_after(5):  # not aborted, the execution would run on and on
            answer = await wire.receive()
        assert answer == {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}
        assert trio.current_time() == 1.03  # started at 1 s, then the abort's own time
    assert host.handle.aborts == 1


# -- a load from the CLI's transcript -------------------------------------------------------------

FORGOTTEN = "0b6f7d4e-2c1a-4d9e-8f3b-5a7c9e1d2f40"


def write_transcript(config: Path, session_id: str = FORGOTTEN) -> None:
    """A transcript as the CLI writes it: one entry per content block, chained by
    ``parentUuid``, metadata lines without a uuid, and a last line torn mid-write."""

    def entry(uuid: str, parent: str | None, kind: str, content: Any, **more: Any) -> str:
        role = "user" if kind == "user" else "assistant"
        return json.dumps(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "cwd": "/w",
                "sessionId": session_id,
                "type": kind,
                "message": {"role": role, "content": content, **more},
                "uuid": uuid,
                "timestamp": f"2026-01-01T00:00:0{uuid[-1]}.000Z",
            }
        )

    lines = [
        json.dumps({"type": "permission-mode", "permissionMode": "default"}),
        entry("00000000-0000-4000-8000-000000000001", None, "user", "list the files"),
        entry(
            "00000000-0000-4000-8000-000000000002",
            "00000000-0000-4000-8000-000000000001",
            "assistant",
            [{"type": "thinking", "thinking": "ls will do", "signature": "s"}],
            id="msg_1",
        ),
        entry(
            "00000000-0000-4000-8000-000000000003",
            "00000000-0000-4000-8000-000000000002",
            "assistant",
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
            id="msg_1",
        ),
        entry(
            "00000000-0000-4000-8000-000000000004",
            "00000000-0000-4000-8000-000000000003",
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}],
        ),
        entry(
            "00000000-0000-4000-8000-000000000005",
            "00000000-0000-4000-8000-000000000004",
            "assistant",
            [{"type": "text", "text": "One file: a.txt."}],
            id="msg_2",
        ),
        '{"parentUuid":"00000000-0000-4000-8000-000000000005","type":"user","mess',
    ]
    folder = config / "projects" / "-w"
    folder.mkdir(parents=True)
    (folder / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n")


def load_request(session_id: str) -> dict[str, Any]:
    return {
        "id": 7,
        "method": "session/load",
        "params": {"sessionId": session_id, "cwd": "/w", "mcpServers": []},
    }


async def expect_transcript_replay(wire: Wire, session_id: str) -> None:
    sent = []
    for _ in range(5):
        message = await wire.receive()
        assert message["method"] == "session/update"
        assert message["params"]["sessionId"] == session_id
        sent.append(message["params"]["update"])
    assert [s["sessionUpdate"] for s in sent] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert sent[0]["content"]["text"] == "list the files"
    assert sent[1]["content"]["text"] == "ls will do"
    assert (sent[2]["toolCallId"], sent[2]["kind"], sent[2]["status"], sent[2]["title"]) == (
        "toolu_1",
        "execute",
        "pending",
        "`ls`",
    )
    assert (sent[3]["toolCallId"], sent[3]["status"]) == ("toolu_1", "completed")
    assert sent[3]["content"][0]["content"]["text"] == "a.txt"
    assert sent[4]["content"]["text"] == "One file: a.txt."
    assert "result" in await wire.receive()


@asynccontextmanager
async def open_wire_reading(host: ScriptedHost, config: Path) -> AsyncIterator[Wire]:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve_editor(
                host, agent_in, agent_out, make_params=ExecuteParams, transcripts=config
            )
        )
        yield Wire(to_agent=to_agent, from_agent=from_agent)
        await to_agent.aclose()


async def test_a_new_sessions_cli_runs_under_the_acp_session_id() -> None:
    host = ScriptedHost()
    host.handle.add(result(1))
    async with open_wire(host) as wire:
        session_id = await start_prompt(wire)
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    assert host.opened[0][0].session_id == session_id


async def test_a_load_of_a_forgotten_session_replays_its_transcript_and_resumes_it(
    tmp_path: Path,
) -> None:
    write_transcript(tmp_path)
    host = ScriptedHost()  # the fleet forgot the session: it lists nothing
    async with open_wire_reading(host, tmp_path) as wire:
        await wire.send(load_request(FORGOTTEN))
        await expect_transcript_replay(wire, FORGOTTEN)
        await wire.send(prompt_request(8, "and now?", FORGOTTEN))
        await trio.testing.wait_all_tasks_blocked()
        host.handle.add(ready(1, "and now?"))
        host.handle.add(TextDelta(seq=2, text="still one"))
        host.handle.add(result(3))
        assert update(await wire.receive()) == ("agent_message_chunk", "still one")
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    params, label = host.opened[0]
    assert (params.resume_session_id, params.session_id, label) == (
        FORGOTTEN,
        None,
        f"acp:{FORGOTTEN}",
    )


@attrs.define(eq=False)
class EvictedHandle(ScriptedHandle):
    """A session whose replay no longer starts at its first event."""

    @asynccontextmanager
    async def subscribe(self, last_seq: int | None = None) -> AsyncIterator[Any]:
        if last_seq is not None and last_seq < 40:
            raise ReplayGapError("h1", last_seq, 40)
        async with ScriptedHandle.subscribe(self, last_seq) as events:
            yield events


async def test_a_load_past_the_hosts_replay_reads_the_transcript_and_continues(
    tmp_path: Path,
) -> None:
    write_transcript(tmp_path)
    host = ScriptedHost(handle=EvictedHandle())
    host.infos.append(attrs.evolve(info("ended", 50), label=f"acp:{FORGOTTEN}"))
    async with open_wire_reading(host, tmp_path) as wire:
        await wire.send(load_request(FORGOTTEN))
        await expect_transcript_replay(wire, FORGOTTEN)
        await wire.send(prompt_request(8, "again", FORGOTTEN))
        await trio.testing.wait_all_tasks_blocked()
        host.handle.add(ready(51, "again"))
        host.handle.add(TextDelta(seq=52, text="again one"))
        host.handle.add(result(53))
        assert update(await wire.receive()) == ("agent_message_chunk", "again one")
        assert (await wire.receive())["result"] == {"stopReason": "end_turn"}
    assert host.continued == [("h1", "again")]
    assert host.opened == []


async def test_a_load_with_neither_replay_nor_transcript_names_the_session(
    tmp_path: Path,
) -> None:
    write_transcript(tmp_path)
    missing = "9e0c1b2a-3d4f-4a5b-8c6d-7e8f9a0b1c2d"
    async with open_wire_reading(ScriptedHost(), tmp_path) as wire:
        await wire.send(load_request(missing))
        error = (await wire.receive())["error"]
        assert error["code"] == -32602
        assert f"no session {missing!r} on this host" in error["message"]
        assert str(tmp_path / "projects") in error["message"]
        # the failed load left no session behind
        await wire.send(prompt_request(8, "hello", missing))
        assert f"no session {missing!r}" in (await wire.receive())["error"]["message"]


async def test_a_load_past_the_hosts_replay_without_a_transcript_shows_what_is_held(
    tmp_path: Path,
) -> None:
    host = ScriptedHost(handle=EvictedHandle())
    host.infos.append(attrs.evolve(info("ended", 42), label=f"acp:{FORGOTTEN}"))
    for event in (TextDelta(seq=40, text="the tail"), result(42)):
        host.handle.add(event)
    async with open_wire_reading(host, tmp_path) as wire:
        await wire.send(load_request(FORGOTTEN))
        assert update(await wire.receive()) == ("agent_message_chunk", "the tail")
        assert "result" in await wire.receive()
