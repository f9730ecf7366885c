"""Idempotency keys, pure: their checks, the in-process records (one key one session, one key
one request, scope, expiry, bound), and their trip over the wire."""

from __future__ import annotations

import pytest

from claude_trio.protocol.config.images import ImageInput
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.resume import ContinueOptions
from claude_trio.protocol.errors import IdempotencyConflictError, InvalidParamsError, WireError
from claude_trio.protocol.fanout.idempotency import (
    MAX_KEY_CHARS,
    IdempotencyRecords,
    check_idempotency_key,
    continue_digest,
    open_digest,
)
from claude_trio.protocol.fanout.wire import ContinueOp, OpenOp, decode_op, encode_op


def test_a_valid_key_is_returned_and_a_bad_one_is_named() -> None:
    assert check_idempotency_key("item-1") == "item-1"
    assert check_idempotency_key("k" * MAX_KEY_CHARS) == "k" * MAX_KEY_CHARS
    for bad in ("", "   ", "a\x00b", "line\nbreak", 7, None, "k" * (MAX_KEY_CHARS + 1)):
        with pytest.raises(InvalidParamsError, match="idempotency_key"):
            check_idempotency_key(bad)


def test_digests_tell_requests_apart() -> None:
    params = {"prompt": "a"}
    assert open_digest(params, None) == open_digest({"prompt": "a"}, None)
    assert open_digest(params, None) != open_digest({"prompt": "b"}, None)
    assert open_digest(params, None) != open_digest(params, "label")
    assert continue_digest("s1", "go") == continue_digest("s1", "go")
    assert continue_digest("s1", "go") != continue_digest("s2", "go")
    assert continue_digest("s1", "go") != continue_digest("s1", "stop")


def test_a_continues_options_are_part_of_its_request() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    plain = continue_digest("s1", "go")
    assert continue_digest("s1", "go", ContinueOptions()) == plain  # as before options existed
    digests = {
        continue_digest("s1", "go", ContinueOptions(model="haiku")),
        continue_digest("s1", "go", ContinueOptions(model="opus")),
        continue_digest("s1", "go", ContinueOptions(permission_mode="plan")),
        continue_digest("s1", "go", ContinueOptions(images=(ImageInput.from_bytes(png),))),
        continue_digest("s1", "go", ContinueOptions(images=(ImageInput.from_bytes(png + b"x"),))),
        plain,
    }
    assert len(digests) == 6
    again = ContinueOptions(model="haiku", images=[ImageInput.from_bytes(png)])
    assert continue_digest("s1", "go", again) == continue_digest(
        "s1", "go", ContinueOptions(model="haiku", images=(ImageInput.from_bytes(png),))
    )


def test_one_key_one_session_one_request() -> None:
    records = IdempotencyRecords(ttl=10)
    digest = open_digest({"prompt": "a"}, None)
    assert records.find("alice", "k", digest, "open", now=0) is None
    records.record("alice", "k", "s1", digest, "open", now=0)
    assert records.find("alice", "k", digest, "open", now=5) == "s1"
    with pytest.raises(IdempotencyConflictError, match="different open request") as refused:
        records.find("alice", "k", open_digest({"prompt": "b"}, None), "open", now=5)
    assert refused.value.key == "k"
    with pytest.raises(IdempotencyConflictError):  # the same key for a continue: another request
        records.find("alice", "k", digest, "continue", now=5)
    # scoped: another principal's "k" is another key
    assert records.find("bob", "k", open_digest({"prompt": "b"}, None), "open", now=5) is None


def test_keys_expire_after_their_ttl_and_the_oldest_go_first() -> None:
    records = IdempotencyRecords(ttl=10, max_keys=2)
    records.record(None, "a", "s1", "d", "open", now=0)
    records.record(None, "b", "s2", "d", "open", now=1)
    assert records.find(None, "a", "d", "open", now=9.5) == "s1"
    assert records.find(None, "a", "d", "open", now=10) is None  # expired
    assert records.find(None, "b", "d", "open", now=10) == "s2"
    records.record(None, "c", "s3", "d", "open", now=10)
    records.record(None, "d", "s4", "d", "open", now=10)
    assert len(records) == 2  # bounded: "b" was forgotten first
    assert records.find(None, "b", "d", "open", now=10) is None
    assert records.find(None, "d", "d", "open", now=10) == "s4"


def test_the_key_travels_with_open_and_continue() -> None:
    ops = [
        OpenOp(id="1", params=ExecuteParams(prompt="hi"), label="x", idempotency_key="item-7"),
        OpenOp(id="2", params=ExecuteParams(prompt="hi")),
        ContinueOp(id="3", session="s", prompt="more", idempotency_key="k:2"),
        ContinueOp(id="4", session="s", prompt="more"),
    ]
    for op in ops:
        assert decode_op(encode_op(op)) == op
    assert "idempotency_key" not in encode_op(ops[1])


@pytest.mark.parametrize(
    "key", ['""', '"a\\u0000b"', "17", '"' + "k" * (MAX_KEY_CHARS + 1) + '"', '"\\n"']
)
def test_a_bad_key_on_the_wire_is_an_invalid_field(key: str) -> None:
    text = f'{{"op": "open", "id": "o1", "params": {{"prompt": "p"}}, "idempotency_key": {key}}}'
    with pytest.raises(WireError) as refused:
        decode_op(text)
    assert refused.value.code == "invalid_field"
    assert refused.value.id == "o1"
    assert "idempotency_key" in refused.value.message
    continue_text = (
        f'{{"op": "continue", "id": "c1", "session": "s", "prompt": "p", "idempotency_key": {key}}}'
    )
    with pytest.raises(WireError, match="idempotency_key"):
        decode_op(continue_text)


def test_a_null_key_is_no_key() -> None:
    op = decode_op('{"op": "open", "id": "o", "params": {"prompt": "p"}, "idempotency_key": null}')
    assert isinstance(op, OpenOp)
    assert op.idempotency_key is None
