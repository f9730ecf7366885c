"""Cassettes, the pure part: the format (``cassette``), scrubbing (``scrub``) and the player's
rules (``cassette_player``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from claude_trio.errors import CassetteError
from claude_trio.protocol.cassettes.format import (
    Cassette,
    CassetteHeader,
    Record,
    encode_header,
    encode_record,
    parse_cassette,
    version_notice,
)
from claude_trio.protocol.cassettes.player import Emit, Finish, Mismatch, Player, Step, Wait
from claude_trio.protocol.cassettes.scrub import MASK, Scrubber

HEADER = encode_header(CassetteHeader(cli_version="2.1.332", sdk_version="0.2.189"))


def text_of(*records: tuple[float, str, Any]) -> str:
    return "\n".join([HEADER, *(encode_record(t, kind, value) for t, kind, value in records)])


def cassette(*records: tuple[float, str, Any]) -> Cassette:
    return parse_cassette(text_of(*records), source="c.jsonl")


INIT = {"type": "control_request", "request_id": "req_1_rec", "request": {"subtype": "initialize"}}
INIT_OK = {
    "type": "control_response",
    "response": {"subtype": "success", "request_id": "req_1_rec", "response": {}},
}


def prompt(text: str, uuid: str = "u-rec") -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": None,
        "uuid": uuid,
    }


def line(frame: dict[str, Any]) -> str:
    return json.dumps(frame)


# -- the format --------------------------------------------------------------------------------


def test_a_cassette_round_trips() -> None:
    parsed = cassette(
        (0.0, "write", INIT),
        (0.5, "read", INIT_OK),
        (0.75, "stderr", "warming up"),
        (1.0, "end_input", True),
        (1.25, "exit", 0),
    )
    assert parsed.header == CassetteHeader(
        cli_version="2.1.332", sdk_version="0.2.189", claude_trio_version=None
    )
    assert [(r.t, r.kind, r.line) for r in parsed.records] == [
        (0.0, "write", 2),
        (0.5, "read", 3),
        (0.75, "stderr", 4),
        (1.0, "end_input", 5),
        (1.25, "exit", 6),
    ]
    assert parsed.duration == 1.25
    assert [r.value for r in parsed.writes()] == [INIT]
    assert [r.value for r in parsed.reads()] == [INIT_OK]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "c.jsonl, line 1: the cassette is empty"),
        ("{not json", "c.jsonl, line 1: the header is not JSON"),
        ('{"t": 0, "read": {}}', "c.jsonl, line 1: not a claude-trio cassette"),
        ('{"claude_trio_cassette": 9}', "c.jsonl, line 1: cassette format 9; this claude-trio"),
        ('{"claude_trio_cassette": 1, "cli_version": 2}', "the header's 'cli_version' must be"),
        (HEADER + "\n{oops", "c.jsonl, line 2: not JSON"),
        (HEADER + "\n[1, 2]", "c.jsonl, line 2: a record must be a JSON object"),
        (HEADER + '\n{"read": {}}', 'c.jsonl, line 2: "t" must be the seconds since connect'),
        (HEADER + '\n{"t": -1, "read": {}}', 'line 2: "t" must be the seconds since connect'),
        (HEADER + '\n{"t": true, "read": {}}', 'line 2: "t" must be the seconds since connect'),
        (
            HEADER + '\n{"t": 2, "read": {}}\n{"t": 1, "read": {}}',
            'c.jsonl, line 3: "t" goes back in time (1 after 2.0)',
        ),
        (HEADER + '\n{"t": 0, "read": {}, "write": {}}', "line 2: a record holds exactly one of"),
        (HEADER + '\n{"t": 0, "shout": 1}', "this one has 'shout'"),
        (HEADER + '\n{"t": 0}', "this one has none"),
        (HEADER + '\n{"t": 0, "read": "text"}', 'line 2: "read" must be a JSON dict'),
        (HEADER + '\n{"t": 0, "stderr": 3}', 'line 2: "stderr" must be a JSON str'),
        (HEADER + '\n{"t": 0, "exit": "0"}', 'line 2: "exit" must be an exit code'),
        (HEADER + '\n{"t": 0, "exit": 0}\n{"t": 1, "read": {}}', "line 3: a record after the"),
    ],
)
def test_a_malformed_cassette_names_the_line_and_the_problem(text: str, problem: str) -> None:
    with pytest.raises(CassetteError) as caught:
        parse_cassette(text, source="c.jsonl")
    assert problem in str(caught.value)


def test_version_notice_names_what_differs() -> None:
    header = CassetteHeader(cli_version="2.0.1", sdk_version="0.2.189")
    assert version_notice(header, cli_version="2.0.1", sdk_version="0.2.189") is None
    notice = version_notice(header, cli_version="2.1.332", sdk_version="0.2.189")
    assert notice is not None
    assert notice.startswith(
        "this cassette was recorded with claude CLI 2.0.1 (installed: 2.1.332)"
    )
    unknown = version_notice(
        CassetteHeader(cli_version=None, sdk_version=None), cli_version="1", sdk_version="2"
    )
    assert unknown is not None
    assert (
        "claude CLI unknown (installed: 1) and claude-agent-sdk unknown (installed: 2)" in unknown
    )


# -- scrubbing -----------------------------------------------------------------------------------


def test_secrets_are_masked_in_text() -> None:
    scrub = Scrubber(["hunter2-the-password"]).text
    assert scrub("ANTHROPIC_API_KEY=sk-ant-api03-abcdefgh HOME=/root") == (
        f"ANTHROPIC_API_KEY={MASK} HOME=/root"
    )
    assert scrub("GITHUB_TOKEN=ghp_1234 AWS_SECRET_ACCESS_KEY=xyz") == (
        f"GITHUB_TOKEN={MASK} AWS_SECRET_ACCESS_KEY={MASK}"
    )
    assert scrub("key sk-ant-abcdef123 and sk-proj-0123456789abcdefghij") == (
        f"key sk-ant-{MASK} and sk-{MASK}"
    )
    assert scrub("Authorization: Bearer abc.def.ghi-123") == f"Authorization: {MASK}"
    assert scrub("curl -H 'x-api-key: abcd1234'") == f"curl -H 'x-api-key: {MASK}'"
    assert scrub('{"authorization": "Basic dXNlcjpwYXNz"}') == f'{{"authorization": "{MASK}"}}'
    assert scrub("via https://bob:s3cr3t@proxy.example:8080/") == (
        f"via https://bob:{MASK}@proxy.example:8080/"
    )
    assert scrub("it is hunter2-the-password, really") == f"it is {MASK}, really"
    assert (
        scrub("nothing to hide: 42 tokens, key points") == "nothing to hide: 42 tokens, key points"
    )


def test_secrets_of_the_environment_are_masked_wherever_they_appear() -> None:
    scrubber = Scrubber.for_environment(
        {"MY_SERVICE_TOKEN": "tok-0123456789", "PATH": "/usr/bin:/bin", "SHORT_KEY": "abc"}
    )
    assert (
        scrubber.text("echo tok-0123456789 /usr/bin:/bin abc") == f"echo {MASK} /usr/bin:/bin abc"
    )


def test_values_under_secret_keys_are_masked_but_not_counts() -> None:
    frame = {
        "apiKey": "k-123",
        "nested": [{"access_token": "t-1", "refresh-token": "t-2", "clientSecret": "s"}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 1},
        "apiKeySource": "ANTHROPIC_API_KEY",
        "max_tokens": 100,
        "password": "",
    }
    assert Scrubber().value(frame) == {
        "apiKey": MASK,
        "nested": [{"access_token": MASK, "refresh-token": MASK, "clientSecret": MASK}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 1},
        "apiKeySource": "ANTHROPIC_API_KEY",
        "max_tokens": 100,
        "password": "",
    }


# -- the player ------------------------------------------------------------------------------------


def play(player: Player, now: float) -> tuple[list[Any], Step]:
    """Everything the player emits at ``now``, and the step after it."""
    out = []
    while isinstance(step := player.step(now), Emit):
        out.append(step.value)
    return out, step


def play_reads(player: Player, now: float) -> list[Any]:
    return play(player, now)[0]


def test_rule_1_ids_chosen_at_random_are_bound_and_read_back_as_the_live_ones() -> None:
    player = Player(
        cassette(
            (0.0, "write", INIT),
            (0.5, "read", INIT_OK),
            (0.5, "write", prompt("hi")),
            (1.0, "read", {"type": "user", "uuid": "u-rec", "message": {"content": "hi"}}),
            (1.5, "read", {"type": "result", "user_message_uuids": ["u-rec"]}),
        ),
        start=100.0,
    )
    assert player.write(line({**INIT, "request_id": "req_1_live"}), 100.0) is None
    assert player.step(100.0) == Wait(until=100.5)
    [ok] = play_reads(player, 100.5)
    assert ok["response"]["request_id"] == "req_1_live"
    assert player.write(line(prompt("hi", "u-live")), 100.5) is None
    (echo, result), after = play(player, 101.75)
    assert echo["uuid"] == "u-live"
    assert result["user_message_uuids"] == ["u-live"]
    assert after == Finish(record=None)
    assert player.bindings == {"req_1_rec": "req_1_live", "u-rec": "u-live"}


def test_rule_1_a_different_write_names_the_first_difference() -> None:
    player = Player(cassette((0.0, "write", prompt("check the tests"))), start=0.0)
    mismatch = player.write(line(prompt("check the docs", "u-live")), 0.0)
    assert isinstance(mismatch, Mismatch)
    first, *diff = str(mismatch).splitlines()
    assert first == (
        "c.jsonl: write #1 (user message 'check the docs') is not what the cassette recorded "
        "(line 2, t=0): at message.content: the cassette has 'check the tests', the test wrote "
        "'check the docs'"
    )
    assert '-  "content": "check the tests",' in diff
    assert '+  "content": "check the docs",' in diff
    # Once failed, it stays failed.
    assert player.step(0.0) is mismatch


def test_rule_1_a_bound_id_must_keep_standing_for_the_same_live_one() -> None:
    first = {"type": "control_request", "request_id": "r-1", "request": {"subtype": "a"}}
    again = {"type": "control_request", "request_id": "r-1", "request": {"subtype": "b"}}
    player = Player(cassette((0.0, "write", first), (0.0, "write", again)), start=0.0)
    assert player.write(line({**first, "request_id": "live-1"}), 0.0) is None
    mismatch = player.write(line({**again, "request_id": "live-2"}), 0.0)
    assert mismatch is not None
    assert "at request_id: the id 'r-1' of the cassette stands for 'live-1'" in str(mismatch)


def test_rule_1_writes_recorded_back_to_back_may_come_in_any_order() -> None:
    deny = {"type": "control_response", "response": {"request_id": "cli-7", "subtype": "success"}}
    interrupt = {
        "type": "control_request",
        "request_id": "r-9",
        "request": {"subtype": "interrupt"},
    }
    player = Player(
        cassette((0.0, "write", deny), (0.0, "write", interrupt), (0.1, "read", {"type": "x"})),
        start=0.0,
    )
    assert player.write(line({**interrupt, "request_id": "live"}), 0.0) is None
    assert player.step(0.0) == Wait(until=10.0)  # the read waits for both (or the patience)
    assert player.write(line(deny), 0.0) is None
    assert play_reads(player, 0.1) == [{"type": "x"}]


def test_rule_1_lanes_race_each_other_even_across_a_read() -> None:
    # Recorded: the answer to the CLI's question, the CLI's reply to it, then the interrupt.
    # Live, the interrupt may be written first: another writer, another lane.
    deny = {"type": "control_response", "response": {"request_id": "cli-7", "subtype": "success"}}
    interrupt = {
        "type": "control_request",
        "request_id": "r-9",
        "request": {"subtype": "interrupt"},
    }
    player = Player(
        cassette(
            (0.0, "write", deny),
            (0.1, "read", {"type": "ack"}),
            (0.2, "write", interrupt),
            (0.3, "read", {"type": "interrupted"}),
        ),
        start=0.0,
    )
    assert player.write(line({**interrupt, "request_id": "live"}), 0.0) is None
    assert isinstance(player.step(0.0), Wait)  # the first read waits for the answer
    assert player.write(line(deny), 0.05) is None  # 0.05 s late: what follows shifts with it
    assert play(player, 0.35) == ([{"type": "ack"}, {"type": "interrupted"}], Finish(record=None))
    # Within a lane the order holds: a second user message cannot overtake the first.
    ordered = Player(
        cassette((0.0, "write", prompt("one")), (0.0, "write", prompt("two"))), start=0
    )
    mismatch = ordered.write(line(prompt("two", "u")), 0.0)
    assert mismatch is not None
    assert "the cassette has 'one', the test wrote 'two'" in str(mismatch)


def test_rule_1_a_write_beyond_the_cassette_is_a_mismatch() -> None:
    player = Player(cassette((0.0, "read", {"type": "x"})), start=0.0)
    mismatch = player.write("not json", 0.0)
    assert mismatch is not None
    assert str(mismatch).startswith(
        "c.jsonl: write #1 (line 'not json'): the cassette recorded no such write (the writes "
        "it still has: none)"
    )


def test_rule_2_reads_keep_their_recorded_gaps_after_what_they_follow() -> None:
    player = Player(
        cassette(
            (0.0, "read", {"n": 1}),
            (2.0, "read", {"n": 2}),
            (2.5, "write", prompt("push")),
            (3.0, "read", {"n": 3}),
        ),
        start=10.0,
    )
    assert player.step(10.0) == Emit(record=player.cassette.records[0], value={"n": 1})
    assert player.step(11.0) == Wait(until=12.0)
    assert play_reads(player, 12.0) == [{"n": 2}]
    # The push comes late (at 14 instead of 12.5): the read after it keeps its 0.5 s gap.
    assert isinstance(player.step(12.5), Wait)
    assert player.write(line(prompt("push", "u")), 14.0) is None
    assert player.step(14.0) == Wait(until=14.5)
    assert play_reads(player, 14.5) == [{"n": 3}]


def test_rule_2_a_write_sooner_than_recorded_keeps_the_recorded_times() -> None:
    player = Player(
        cassette((0.0, "read", {"n": 1}), (2.5, "write", prompt("p")), (3.0, "read", {"n": 2})),
        start=0.0,
    )
    play_reads(player, 0.0)
    assert player.write(line(prompt("p", "u")), 0.25) is None
    assert player.step(0.25) == Wait(until=3.0)


def test_rule_2_asap_plays_as_soon_as_the_writes_came() -> None:
    player = Player(
        cassette((0.0, "read", {"n": 1}), (5.0, "read", {"n": 2}), (9.0, "exit", 3)),
        start=0.0,
        timing="asap",
    )
    reads, finish = play(player, 0.0)
    assert reads == [{"n": 1}, {"n": 2}]
    assert isinstance(finish, Finish)
    assert finish.record is not None
    assert finish.record.value == 3


def test_rule_3_a_write_that_does_not_come_fails_after_the_patience() -> None:
    player = Player(
        cassette((0.0, "read", {"n": 1}), (1.0, "write", prompt("more")), (1.5, "read", {})),
        start=0.0,
        patience=4.0,
    )
    play_reads(player, 0.0)
    assert player.step(0.0) == Wait(until=5.0)
    mismatch = player.step(5.0)
    assert isinstance(mismatch, Mismatch)
    assert str(mismatch) == (
        "c.jsonl: the cassette waits for the test to write user message 'more' (line 3, "
        "recorded at t=1), and nothing came for 4 s after it was due"
    )
    assert [r.value for r in player.unmatched()] == [prompt("more")]
    assert not player.finished_writes


def test_rule_4_reads_after_the_end_of_input_wait_for_it() -> None:
    player = Player(
        cassette((0.0, "end_input", True), (0.5, "read", {"late": True}), (0.5, "exit", 0)),
        start=0.0,
    )
    assert isinstance(player.step(1.0), Wait)
    player.end_input(1.0)
    player.end_input(1.0)  # again: nothing changes
    assert play(player, 1.5) == ([{"late": True}], Finish(record=player.cassette.records[-1]))


def test_rule_4_an_end_of_input_the_cassette_did_not_record_changes_nothing() -> None:
    player = Player(cassette((0.0, "read", {"n": 1}), (1.0, "exit", 0)), start=0.0)
    player.end_input(0.0)
    assert play(player, 0.0) == ([{"n": 1}], Wait(until=1.0))
    assert player.step(1.0) == Finish(record=player.cassette.records[-1])


def test_stderr_lines_are_played_in_order_with_the_reads() -> None:
    player = Player(cassette((0.0, "stderr", "boot"), (0.0, "read", {"n": 1})), start=0.0)
    first = player.step(0.0)
    assert isinstance(first, Emit)
    assert (first.record.kind, first.value) == ("stderr", "boot")
    assert play_reads(player, 0.0) == [{"n": 1}]


def test_what_the_test_writes_is_scrubbed_before_it_is_compared() -> None:
    recorded = prompt(f"my key is sk-ant-{MASK}")
    player = Player(cassette((0.0, "write", recorded)), start=0.0, scrubber=Scrubber())
    assert player.write(line(prompt("my key is sk-ant-api03-SECRETSECRET", "u")), 0.0) is None


def test_records_read_from_elsewhere_have_no_line() -> None:
    assert Record(t=0.0, kind="read", value={}).line == 0
