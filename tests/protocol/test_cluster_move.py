"""Rules 9-11 of the cluster (``protocol/cluster/move.py``): where a moved turn goes on from,
checked on transcripts shaped as the bundled CLI writes them (entries as its
``transcript_mirror`` frames carry them)."""

from __future__ import annotations

from typing import Any

from claude_trio.protocol.cluster.move import (
    CONTINUE_PROMPT,
    ResumePoint,
    resume_point,
    transcript_uuids,
)
from claude_trio.protocol.cluster.records import AcceptedPush, plan_move
from claude_trio.protocol.session.events import (
    Event,
    Result,
    TextDelta,
    ToolResult,
    ToolUse,
    TurnStarted,
)
from claude_trio.protocol.session.usage import ZERO_USAGE


def turn_result(seq: int, uuids: tuple[str, ...] = (), *, final: bool) -> Result:
    return Result(
        subtype="success",
        is_error=False,
        session_id="conv",
        usage=ZERO_USAGE,
        execution_usage=ZERO_USAGE,
        session_usage=ZERO_USAGE,
        text="done",
        final=final,
        seq=seq,
        user_message_uuids=uuids,
    )


def prompt(uuid: str, text: str) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": text}}


def call(uuid: str, *ids: str, sidechain: bool = False) -> dict[str, Any]:
    blocks = [{"type": "tool_use", "id": i, "name": "Bash", "input": {}} for i in ids]
    entry = {"type": "assistant", "uuid": uuid, "message": {"role": "assistant", "content": blocks}}
    if sidechain:
        entry["isSidechain"] = True
    return entry


def result(uuid: str, tool_use_id: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": "ok"}
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": [block]}}


BOOKKEEPING = [
    {"type": "queue-operation"},
    {"type": "attachment", "uuid": "att-1"},
    {"type": "last-prompt"},
]


def events(*ids: str, results: int | None = None) -> list[Event]:
    """The stored events of a turn that called ``ids`` and has the first ``results`` results."""
    out: list[Event] = [TurnStarted(session_id="conv", seq=1)]
    done = len(ids) if results is None else results
    for n, tool in enumerate(ids):
        out.append(ToolUse(tool_use_id=tool, name="Bash", input={}, seq=len(out) + 1))
        if n < done:
            out.append(ToolResult(tool_use_id=tool, content="ok", seq=len(out) + 1))
    return out


THREE_CALLS = [
    *BOOKKEEPING,
    prompt("p1", "count to three"),
    call("a1", "t1"),
    result("r1", "t1"),
    call("a2", "t2"),
    result("r2", "t2"),
    call("a3", "t3"),
]


def test_a_turn_resumes_after_its_last_stored_tool_result() -> None:
    point = resume_point(events("t1", "t2", "t3", results=2), THREE_CALLS)
    assert point == ResumePoint(uuid="r2", tool_use_id="t2", tool_name="Bash", cut_off=("t3",))


def test_a_call_the_stream_saw_but_the_transcript_did_not_is_cut_off_too() -> None:
    point = resume_point(events("t1", "t2", "t3", results=2), THREE_CALLS[:-1])
    assert point is not None
    assert (point.uuid, point.cut_off) == ("r2", ("t3",))


def test_nothing_is_cut_off_when_the_last_result_ends_the_transcript() -> None:
    point = resume_point(events("t1", "t2", results=2), THREE_CALLS[:-1])
    assert point == ResumePoint(uuid="r2", tool_use_id="t2", tool_name="Bash", cut_off=())


def test_a_batch_of_parallel_calls_counts_once_all_its_results_are_stored() -> None:
    transcript = [
        prompt("p1", "go"),
        call("a1", "t1"),
        result("r1", "t1"),
        call("a2", "t2", "t3"),
        result("r2", "t2"),
    ]
    point = resume_point(events("t1", "t2", "t3", results=2), transcript)
    assert point is not None
    assert (point.uuid, point.cut_off) == ("r1", ("t2", "t3"))
    point = resume_point(events("t1", "t2", "t3"), [*transcript, result("r3", "t3")])
    assert point is not None
    assert (point.uuid, point.tool_use_id, point.cut_off) == ("r3", "t3", ())


def test_a_result_of_an_earlier_execution_is_not_a_resume_point_for_this_one() -> None:
    earlier = [prompt("p0", "before"), call("a0", "t0"), result("r0", "t0")]
    assert resume_point(events("t5", results=0), [*earlier, call("a5", "t5")]) is None
    assert resume_point([TurnStarted(session_id="conv", seq=1)], earlier) is None


def test_a_subagents_sidechain_entries_are_not_the_conversation() -> None:
    transcript = [*THREE_CALLS[:-1], call("s1", "sub1", sidechain=True)]
    point = resume_point(events("t1", "t2", results=2), transcript)
    assert point is not None
    assert (point.uuid, point.cut_off) == ("r2", ())


def test_the_messages_up_to_the_resume_point_are_the_ones_read() -> None:
    assert transcript_uuids(THREE_CALLS, "r1") == {"p1", "a1", "r1"}


def test_a_move_mid_turn_sends_the_continuation_and_redelivers_only_unread_pushes() -> None:
    stored = events("t1", "t2", "t3", results=2)
    point = resume_point(stored, THREE_CALLS)
    pushes = [AcceptedPush(uuid="p-read", text="seen"), AcceptedPush(uuid="p-new", text="later")]
    plan = plan_move("count to three", pushes, stored, resume=point, read={"p-read", "r1"})
    assert (plan.prompt, plan.again, plan.finished, plan.resume) == (
        CONTINUE_PROMPT,
        ("later",),
        False,
        point,
    )


def test_without_a_resume_point_the_turn_starts_again_from_its_prompt() -> None:
    stored = events("t1", results=0)
    plan = plan_move("count to three", [], stored, resume=None)
    assert (plan.prompt, plan.resume) == ("count to three", None)


def test_a_resume_point_in_a_turn_that_ended_is_not_used() -> None:
    stored: list[Event] = [
        *events("t1"),
        turn_result(4, ("pq",), final=False),
        TextDelta(text="next turn", seq=5),
    ]
    point = ResumePoint(uuid="r1", tool_use_id="t1", tool_name="Bash")
    pushes = [AcceptedPush(uuid="pq", text="queued"), AcceptedPush(uuid="pn", text="new")]
    plan = plan_move("p", pushes, stored, resume=point)
    assert (plan.prompt, plan.again, plan.resume) == ("new", (), None)


def test_a_finished_execution_stays_finished() -> None:
    stored: list[Event] = [*events("t1"), turn_result(4, final=True)]
    point = resume_point(stored, THREE_CALLS)
    assert plan_move("p", [], stored, resume=point).finished
