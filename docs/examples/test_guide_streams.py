"""README, "Consuming the stream": the stream helpers in an application's code, tested."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from claude_trio import (
    Event,
    Session,
    ToolUse,
    UserInputRequest,
    collect,
    console_observer,
    filter_events,
    observe,
    open_subagent_split,
    open_tee,
    wait_for,
)
from claude_trio.testing import FakeTurn


async def summarize(session: Session) -> str:
    """Show the session on the terminal as it runs (as `claude-trio run` does), then sum up."""
    transcript = await collect(observe(session.events, console_observer()))
    calls = ", ".join(f"{call.name}: {call.output}" for call in transcript.tool_calls)
    cost = transcript.usage.cost_usd if transcript.usage else 0.0
    return f"{transcript.text} [{calls}] ${cost:.2f}"


async def bash_commands(session: Session) -> list[str]:
    """Every shell command the agent ran."""
    bash = filter_events(session.events, ToolUse, where=lambda use: use.name == "Bash")
    return [use.input["command"] async for use in bash]


async def answer_first_question(session: Session) -> None:
    request = await wait_for(session.events, UserInputRequest)
    await session.answer(request.request_id, {q.question: "yes" for q in request.questions})


async def show_and_keep(session: Session, kept: list[Event]) -> None:
    """Two consumers of one stream; a slow one is dropped, never slows the other."""

    async def keep(events: Any) -> None:
        with events:
            kept.extend([event async for event in events])

    async with open_tee(session.events, 2) as (screen, log), trio.open_nursery() as nursery:
        nursery.start_soon(keep, log)
        with screen:
            async for _ in observe(screen, console_observer()):
                pass


async def agents_at_work(session: Session) -> dict[str | None, int]:
    """How many events each agent produced: the main agent (None) and each subagent."""
    counts: dict[str | None, int] = {}

    async def count(key: str | None, events: Any) -> None:
        with events:
            counts[key] = len([event async for event in events])

    async with open_subagent_split(session.events) as split, trio.open_nursery() as nursery:
        nursery.start_soon(count, None, split.main)
        async for subagent in split.subagents:
            nursery.start_soon(count, subagent.task_id, subagent.events)
    return counts


async def agent_script(turn: FakeTurn) -> None:
    agent = await turn.tool_use("Agent", {"description": "look around"}, id="toolu_agent")
    await turn.task_started("task-1", tool_use_id=agent, description="look around")
    await turn.tool_use("Bash", {"command": "ls"}, id="toolu_ls", parent_tool_use_id=agent)
    await turn.tool_result("toolu_ls", "app.py", parent_tool_use_id=agent)
    await turn.task_notification("task-1", tool_use_id=agent)
    await turn.tool_result(agent, "one file: app.py")
    await turn.text("There is one file.")
    await turn.result("There is one file.", cost_usd=0.25)


async def test_summarize(
    scripted_session: Any, autojump_clock: trio.testing.MockClock, capsys: Any
) -> None:
    async with scripted_session(agent_script) as session:
        summary = await summarize(session)
    assert summary == "There is one file. [Agent: one file: app.py] $0.25"
    assert "  → Bash(ls)" in capsys.readouterr().out.splitlines()


async def test_bash_commands(scripted_session: Any, autojump_clock: trio.testing.MockClock) -> None:
    async with scripted_session(agent_script) as session:
        assert await bash_commands(session) == ["ls"]


async def test_answer_first_question(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async def asks(turn: FakeTurn) -> None:
        question = {"question": "Go on?", "options": [{"label": "yes"}]}
        reply = await turn.ask_permission("AskUserQuestion", {"questions": [question]})
        await turn.text(f"answer: {reply['updatedInput']['answers']['Go on?']}")

    async with scripted_session(asks, on_user_input="manual") as session:
        await answer_first_question(session)
        transcript = await collect(session.events)
    assert transcript.text == "answer: yes"


async def test_show_and_keep(
    scripted_session: Any, autojump_clock: trio.testing.MockClock, capsys: Any
) -> None:
    kept: list[Event] = []
    async with scripted_session(agent_script) as session:
        await show_and_keep(session, kept)
    assert kept[-1].kind == "result"
    assert "There is one file." in capsys.readouterr().out


async def test_agents_at_work(
    scripted_session: Any, autojump_clock: trio.testing.MockClock
) -> None:
    async with scripted_session(agent_script) as session:
        counts = await agents_at_work(session)
    assert set(counts) == {None, "task-1"}
    assert counts["task-1"] == 4  # its tool call, its result, and the messages holding them
