"""A Hypothesis state machine over Mapper + ExecutionLifecycle with generated message sequences.

Invariants (protocol/session/mapper.py rules R1-R8, lifecycle.py rules 1-3):
* seq strictly increases (by one per event);
* at most one terminal event per (execution, turn), and nothing of that turn after it;
  after the stream ends, every turn that had content has exactly one terminal event;
* every abort request is answered by exactly one Aborted;
* session usage totals on results never decrease;
* every tool_use id is reported at most once;
* every push gets exactly one outcome, and an execution only ends with nothing pending.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import sdk_frames as f
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from claude_trio.protocol.session import events as ev
from claude_trio.protocol.session.lifecycle import Accepted, ExecutionLifecycle, Rejected
from claude_trio.protocol.session.mapper import Mapper

CONTENT = (
    ev.TurnStarted,
    ev.TextDelta,
    ev.ThinkingDelta,
    ev.AssistantMessage,
    ev.ToolUse,
    ev.ToolResult,
    ev.TodoListUpdated,
)
TOOLS = ["Bash", "Read", "Skill", "TodoWrite", "TaskCreate", "TaskUpdate", "TaskList"]


class MapperMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mapper = Mapper()
        self.lifecycle = ExecutionLifecycle()
        self.execution = 1
        self.mapper.start_execution()
        self.last_seq = 0
        self.terminals: Counter[tuple[int, int]] = Counter()
        self.content_turns: set[tuple[int, int]] = set()
        self.tool_use_ids: set[str] = set()
        self.session_usage: tuple[int, int, float] = (0, 0, 0.0)
        self.message_n = 0
        self.message_id: str | None = None
        self.tool_n = 0
        self.open_tool_uses: list[str] = []
        self.tasks: dict[str, str] = {}  # task_id -> tool_use_id
        self.cumulative_cost = 0.0
        self.uuid_n = 0
        self.echo_queue: list[str] = []
        self.unreported_in_result: list[str] = []
        self.abort_outstanding = False
        self.dead_cli_turn = False  # we synthesized Aborted for a turn the CLI is still in
        self.last_assistant: tuple[str, dict[str, Any]] | None = None
        self.execution_over = False
        self.outcomes = 0
        self.pushes = 0

    # -- recording -------------------------------------------------------------------------

    def record(self, events: list[ev.Event]) -> None:
        for event in events:
            assert event.seq == self.last_seq + 1, (event, self.last_seq)
            self.last_seq = event.seq
            key = (self.execution, event.turn)
            assert self.terminals[key] == 0, f"{event!r} after the terminal of turn {key}"
            if ev.is_terminal(event):
                self.terminals[key] += 1
            if isinstance(event, CONTENT) and not event.is_subagent:
                self.content_turns.add(key)
            if isinstance(event, ev.Aborted):
                self.abort_outstanding = False
                if self.lifecycle.aborting:
                    self.lifecycle.finish("aborted")  # what the actor does with the Aborted
                self.execution_over = self.execution_over or self.lifecycle.ended
            if isinstance(event, ev.ToolUse):
                assert event.tool_use_id not in self.tool_use_ids, event
                self.tool_use_ids.add(event.tool_use_id)
            if isinstance(event, ev.Result):
                usage = event.session_usage
                now = (usage.input_tokens, usage.output_tokens, usage.cost_usd)
                assert all(a >= b - 1e-9 for a, b in zip(now, self.session_usage, strict=True))
                self.session_usage = now
                self.result_arrived(event)
        for uuid in self.mapper.pop_consumed_uuids():
            self.lifecycle.consumed(uuid)
        if self.execution_over and not self.mapper.turn_open:
            # What the actor does once an execution has its terminal event.
            self.execution_over = False
            self.mapper.start_execution()
            self.lifecycle = ExecutionLifecycle()
            self.execution += 1
            self.echo_queue.clear()
            self.unreported_in_result.clear()

    def result_arrived(self, result: ev.Result) -> None:
        if self.lifecycle.result_arrived(
            result.user_message_uuids, tasks_in_flight=bool(self.mapper.tasks_in_flight)
        ):
            assert not self.lifecycle.pending
            self.execution_over = True

    def feed(self, message: Any) -> None:
        self.record(self.mapper.feed(message))

    def new_message_id(self) -> str:
        self.message_n += 1
        return f"msg_{self.message_n}"

    # -- rules -----------------------------------------------------------------------------

    @rule()
    def init(self) -> None:
        self.dead_cli_turn = False
        self.feed(f.init())

    @rule(text=st.sampled_from(["a", "bc", ""]), thinking=st.booleans())
    def delta(self, text: str, thinking: bool) -> None:
        if self.message_id is None:
            self.message_id = self.new_message_id()
            self.feed(f.message_start(self.message_id))
        self.feed(f.thinking_delta(text) if thinking else f.text_delta(text))

    @rule(same_message=st.booleans(), tool=st.sampled_from([None, *TOOLS]))
    def assistant_block(self, same_message: bool, tool: str | None) -> None:
        if self.message_id is None or not same_message:
            self.message_id = self.new_message_id()
        if tool is None:
            block = f.text_block("hello")
        else:
            self.tool_n += 1
            tool_use_id = f"toolu_{self.tool_n}"
            tool_input: dict[str, Any] = {
                "Bash": {"command": "ls"},
                "Read": {"file_path": "/x"},
                "Skill": {"skill": "pdf"},
                "TodoWrite": {"todos": [{"content": "x", "status": "pending", "activeForm": "X"}]},
                "TaskCreate": {"subject": "s", "description": "d"},
                "TaskUpdate": {"taskId": "1", "status": "completed"},
                "TaskList": {},
            }[tool]
            block = f.tool_use_block(tool_use_id, tool, tool_input)
            self.open_tool_uses.append(tool_use_id)
        self.last_assistant = (self.message_id, block)
        self.feed(f.assistant(self.message_id, block))

    @precondition(lambda self: self.last_assistant is not None)
    @rule()
    def cli_repeats_a_block(self) -> None:
        assert self.last_assistant is not None
        self.feed(f.assistant(*self.last_assistant))

    @rule(data=st.data(), is_error=st.sampled_from([None, False, True]))
    def tool_result(self, data: st.DataObject, is_error: bool | None) -> None:
        if not self.open_tool_uses:
            return
        tool_use_id = data.draw(st.sampled_from(self.open_tool_uses))
        self.open_tool_uses.remove(tool_use_id)
        self.message_id = None
        self.feed(
            f.tool_result(
                tool_use_id, f"Task #{tool_use_id} created successfully: s", is_error=is_error
            )
        )

    @rule()
    def subagent_block(self) -> None:
        tool_use_id = next(iter(self.tasks.values()), "toolu_agent_0")
        self.feed(
            f.assistant(self.new_message_id(), f.text_block("sub"), parent_tool_use_id=tool_use_id)
        )

    @rule()
    def task_started(self) -> None:
        task_id = f"task_{len(self.tasks) + 1}"
        self.tasks[task_id] = f"toolu_agent_{len(self.tasks) + 1}"
        self.feed(f.task_started(task_id, self.tasks[task_id]))

    @precondition(lambda self: bool(self.tasks))
    @rule(
        data=st.data(),
        how=st.sampled_from(["progress", "notification", "updated", "updated_running"]),
    )
    def task_message(self, data: st.DataObject, how: str) -> None:
        task_id = data.draw(st.sampled_from(sorted(self.tasks)))
        tool_use_id = self.tasks[task_id]
        match how:
            case "progress":
                self.feed(f.task_progress(task_id, tool_use_id))
            case "notification":
                self.feed(f.task_notification(task_id, tool_use_id))
            case "updated":
                self.feed(f.task_updated(task_id, "killed"))
            case _:
                self.feed(f.task_updated(task_id, "running"))

    @rule()
    def push(self) -> None:
        self.uuid_n += 1
        uuid = f"u-{self.uuid_n}"
        outcome = self.lifecycle.push(uuid)
        if isinstance(outcome, Accepted):
            assert outcome.uuid == uuid
            self.record(self.mapper.push_accepted(text="more", uuid=uuid, timestamp=1.0))
            self.echo_queue.append(uuid)
        else:
            assert isinstance(outcome, Rejected)
            assert self.lifecycle.end_reason is not None

    @precondition(lambda self: bool(self.echo_queue))
    @rule(via_echo=st.booleans())
    def cli_consumes_push(self, via_echo: bool) -> None:
        uuid = self.echo_queue.pop(0)
        if via_echo:
            self.feed(f.user_echo("more", uuid))
        else:
            self.unreported_in_result.append(uuid)

    @rule(
        cost_step=st.sampled_from([0.0, 0.01, 0.25]),
        restart=st.booleans(),
        interrupted=st.booleans(),
        tokens=st.integers(0, 50),
    )
    def result(self, cost_step: float, restart: bool, interrupted: bool, tokens: int) -> None:
        self.cumulative_cost = cost_step if restart else self.cumulative_cost + cost_step
        uuids, self.unreported_in_result = self.unreported_in_result, []
        kwargs: dict[str, Any] = {
            "total_cost_usd": self.cumulative_cost,
            "usage": f.api_usage(input_tokens=tokens, output_tokens=tokens // 2),
            "user_message_uuids": uuids,
        }
        self.message_id = None
        events = self.mapper.feed(
            f.interrupted_result(**kwargs) if interrupted else f.result(**kwargs)
        )
        if self.dead_cli_turn:
            # The late result of the turn we aborted must not end anything.
            assert not [e for e in events if ev.is_terminal(e)], events
        self.dead_cli_turn = False
        self.record(events)

    @rule()
    def abort_requested(self) -> None:
        self.abort_outstanding = True
        assert self.mapper.abort_requested() == []
        self.lifecycle.abort()
        self.echo_queue.clear()  # the CLI is interrupted: those pushes are reported lost

    @rule()
    def turn_aborted(self) -> None:
        self.message_id = None
        was_open = self.mapper.turn_open
        events = self.mapper.turn_aborted()
        if was_open:
            assert isinstance(events[-1], ev.Aborted)
            self.dead_cli_turn = True
        self.record(events)

    @rule()
    def stream_end(self) -> None:
        self.message_id = None
        self.dead_cli_turn = False  # the next messages come from a new CLI process
        self.lifecycle.cli_died("stdout closed")
        self.execution_over = True
        self.record(self.mapper.stream_ended())
        assert not self.mapper.tasks_in_flight

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def an_abort_is_pending_until_its_aborted_event(self) -> None:
        assert self.mapper.aborting == self.abort_outstanding

    @invariant()
    def a_pending_push_is_one_the_cli_has_not_reported(self) -> None:
        assert self.lifecycle.pending <= {*self.echo_queue, *self.unreported_in_result}

    def teardown(self) -> None:
        self.record(self.mapper.stream_ended())
        assert not self.mapper.turn_open
        assert not self.mapper.aborting
        for key in self.content_turns:
            assert self.terminals[key] == 1, f"turn {key} has {self.terminals[key]} terminal events"


MapperMachine.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
test_mapper_machine = MapperMachine.TestCase
