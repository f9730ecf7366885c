"""Delta coalescing: what merges, what does not, and what a merge preserves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.fanout.coalesce import compact, merge_deltas
from claude_trio.protocol.session.events import Event, TextDelta, ThinkingDelta, ToolUse


def delta(
    text: str,
    seq: int,
    *,
    turn: int = 1,
    mid: str = "m",
    index: int = 0,
    is_subagent: bool = False,
) -> TextDelta:
    return TextDelta(
        text=text,
        seq=seq,
        turn=turn,
        message_id=mid,
        index=index,
        is_subagent=is_subagent,
        raw={"frame": seq},
    )


def test_two_deltas_of_one_block_merge_with_the_later_seq_and_no_raw() -> None:
    merged = merge_deltas(delta("ab", 3), delta("c", 4))
    assert merged == delta("abc", 4)
    assert merged is not None
    assert merged.raw is None


def test_thinking_merges_with_thinking_only() -> None:
    a = ThinkingDelta(text="x", seq=1, message_id="m", index=0)
    b = ThinkingDelta(text="y", seq=2, message_id="m", index=0)
    assert merge_deltas(a, b) == ThinkingDelta(text="xy", seq=2, message_id="m", index=0)
    assert merge_deltas(a, TextDelta(text="y", seq=2, message_id="m", index=0)) is None


def test_deltas_of_different_blocks_messages_turns_or_agents_do_not_merge() -> None:
    base = delta("a", 1)
    assert merge_deltas(base, delta("b", 2, index=1)) is None
    assert merge_deltas(base, delta("b", 2, mid="other")) is None
    assert merge_deltas(base, delta("b", 2, turn=2)) is None
    assert merge_deltas(base, delta("b", 2, is_subagent=True)) is None
    tool = ToolUse(tool_use_id="t", name="Bash", input={}, seq=2)
    assert merge_deltas(base, tool) is None
    assert merge_deltas(tool, base) is None


def test_compact_merges_runs_but_never_across_another_event() -> None:
    tool = ToolUse(tool_use_id="t", name="Bash", input={}, seq=3, turn=1)
    events: list[Event] = [delta("a", 1), delta("b", 2), tool, delta("c", 4), delta("d", 5)]
    assert compact(events) == [delta("ab", 2), tool, delta("cd", 5)]


@given(
    st.lists(
        st.tuples(st.sampled_from(["m1", "m2"]), st.text(max_size=3), st.booleans()), max_size=30
    )
)
def test_compact_keeps_every_character_in_order_and_seqs_increasing(
    items: list[tuple[str, str, bool]],
) -> None:
    events: list[Event] = []
    for seq, (mid, text, is_tool) in enumerate(items, start=1):
        if is_tool:
            events.append(ToolUse(tool_use_id=f"t{seq}", name="X", input={}, seq=seq, turn=1))
        else:
            events.append(delta(text, seq, mid=mid))
    out = compact(events)
    assert len(out) <= len(events)
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == "".join(
        e.text for e in events if isinstance(e, TextDelta)
    )
    assert [e for e in out if isinstance(e, ToolUse)] == [
        e for e in events if isinstance(e, ToolUse)
    ]
    seqs = [e.seq for e in out]
    assert seqs == sorted(set(seqs))
    if events:
        assert out[-1].seq == events[-1].seq
    # compacting again changes nothing: no two adjacent mergeable deltas remain
    assert compact(out) == out
