"""A moved turn continues: the worker's side of ``protocol/cluster/move.py`` rules 9-11.

:class:`WatchedStore` wraps the worker's ``SessionStore`` (``RedisSessionStore``): every batch
the SDK appends goes through it, and it notes which tool results of which conversation are now
in the store, so the worker's publisher can wait for a tool result to be stored before it
stores the ``tool_result`` event (rule 9). :func:`find_resume_point` reads a conversation back
from the store for a move (rule 10).

The SDK calls ``append`` from its own trio system tasks; the notes live in this process only
(the worker that runs the CLI is the one that waits). Channels: none; one ``trio.Event``
replaced at each append wakes every waiter. Memory: the tool result ids of each conversation a
running execution of this worker has, dropped by :meth:`WatchedStore.forget` when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Protocol

import attrs
import coredis
import trio
from claude_agent_sdk import SessionStore, project_key_for_directory
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from claude_trio.actors.cluster.writes import FencedWrites
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.move import ResumePoint, resume_point, transcript_uuids
from claude_trio.protocol.cluster.records import (
    AcceptedPush,
    Job,
    SessionRecord,
    decode_event_text,
    entry_texts,
    event_id,
    plan_move,
)
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.resume import START_ONLY
from claude_trio.protocol.fanout.wire import params_from_json
from claude_trio.protocol.session.events import Aborted, Event, Result, WarningEvent
from claude_trio.protocol.session.outcomes import Outcome as EndOutcome


class Worker(Protocol):
    """What a move needs of the worker taking the session over (``actors/cluster/worker.py``)."""

    id: str
    redis: coredis.Redis[str]
    keys: RedisKeys
    store: WatchedStore | None
    moved_in: int
    _writes: FencedWrites

    async def _retrying(self, what: str, call: Any) -> Any: ...

    async def _ended(
        self, sid: str, token: int, entry_id: str, final: Event, *, execution: int
    ) -> None: ...

__all__ = ["WatchedStore", "continuing", "find_resume_point", "take_over"]

log = logging.getLogger("claude_trio.cli.worker")


def _tool_result_ids(entries: Sequence[Mapping[str, Any]]) -> set[str]:
    ids: set[str] = set()
    for entry in entries:
        if entry.get("type") != "user" or entry.get("isSidechain"):
            continue
        message = entry.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            ids |= {
                str(b["tool_use_id"])
                for b in content
                if isinstance(b, Mapping)
                and b.get("type") == "tool_result"
                and isinstance(b.get("tool_use_id"), str)
            }
    return ids


class WatchedStore(SessionStore):
    """``inner`` (the store the SDK mirrors to), noting each main-conversation tool result
    once ``inner.append`` has returned (it is then in the store)."""

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self._results: dict[str, set[str]] = {}
        self._changed = trio.Event()

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await self.inner.append(key, entries)
        if key.get("subpath"):
            return  # a subagent's transcript: not what a move resumes
        ids = _tool_result_ids(entries)
        if ids:
            self._results.setdefault(key["session_id"], set()).update(ids)
            self._changed.set()
            self._changed = trio.Event()

    def holds(self, session_id: str, tool_use_id: str) -> bool:
        return tool_use_id in self._results.get(session_id, ())

    async def wait_stored(self, session_id: str, tool_use_id: str) -> None:
        """Until the result of ``tool_use_id`` in conversation ``session_id`` is in the store
        (the caller bounds the wait)."""
        await trio.lowlevel.checkpoint()
        while not self.holds(session_id, tool_use_id):
            await self._changed.wait()

    def forget(self, session_id: str) -> None:
        """Drop the notes of a conversation (its execution ended on this worker)."""
        self._results.pop(session_id, None)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        return await self.inner.load(key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return await self.inner.list_sessions(project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        return await self.inner.list_session_summaries(project_key)

    async def delete(self, key: SessionKey) -> None:
        await self.inner.delete(key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        return await self.inner.list_subkeys(key)


async def find_resume_point(
    store: SessionStore, *, cwd: str | None, session_id: str, stored: Sequence[Event]
) -> tuple[ResumePoint | None, set[str]]:
    """Rule 10 for conversation ``session_id`` (run in ``cwd``): the resume point and the
    uuids of the messages up to it ((None, empty) when the store cannot give one)."""
    await trio.lowlevel.checkpoint()
    key: SessionKey = {"project_key": project_key_for_directory(cwd), "session_id": session_id}
    try:
        entries = await store.load(key)
    except Exception as exc:  # the store's failure: the turn starts again (rule 5)
        log.warning("a moved turn cannot read its transcript from the store: %r", exc)
        return None, set()
    if not entries:
        return None, set()
    transcript: list[Mapping[str, Any]] = list(entries)
    point = resume_point(stored, transcript)
    if point is None:
        return None, set()
    return point, transcript_uuids(transcript, point.uuid)


async def take_over(
    worker: Worker, sid: str, token: int, job: Job, record: SessionRecord, entry_id: str
) -> tuple[Job, ExecuteParams, tuple[str, ...]] | None:
    """Take over a dead worker's execution (rules 5 and 10-11): store the move event and say
    what to run, or None when there is nothing to run (then it is ended here)."""
    keys = worker.keys
    stream = keys.events(sid)
    first = job.after_seq + 1
    entries = await worker._retrying(
        "claim", partial(worker.redis.xrange, stream, event_id(first), "+")
    )
    stored = [
        decode_event_text(text)
        for entry in entries
        for seq, text in entry_texts(str(entry.identifier), entry.field_values)
        if seq >= first
    ]
    raw_pushes = await worker._retrying(
        "claim", partial(worker.redis.lrange, keys.pushes(sid), 0, -1)
    )
    pushes = [AcceptedPush.decode(text) for text in raw_pushes]
    prompt = str(job.params.get("prompt", ""))
    resume, read = None, set[str]()
    if worker.store is not None and record.claude_session_id:
        cwd = job.params.get("cwd")
        resume, read = await find_resume_point(
            worker.store,
            cwd=cwd if isinstance(cwd, str) else None,
            session_id=record.claude_session_id,
            stored=stored,
        )
    plan = plan_move(prompt, pushes, stored, resume=resume, read=read)
    last = stored[-1].seq if stored else job.after_seq
    if plan.finished:
        await worker._ended(sid, token, entry_id, stored[-1], execution=job.execution)
        return None
    worker.moved_in += 1
    moved_event = WarningEvent(
        code="session_moved",
        message=f"the session moved from worker {record.worker or '?'} to worker "
        f"{worker.id} after event {last}: "
        + (
            continuing(plan.resume, len(plan.again))
            if plan.resume is not None
            else "the turn in flight runs again from its prompt"
            if plan.prompt == prompt and not any(isinstance(e, Result) for e in stored)
            else f"{len(plan.again) + (plan.prompt is not None)} push(es) not confirmed "
            "by the CLI are delivered again"
        ),
        seq=last + 1,
        turn=stored[-1].turn if stored else 0,
    )
    await worker._writes.store(sid, token, moved_event)
    await worker._writes.record(
        sid, token, {"moves": str(record.moves + 1), "worker": worker.id}, clear_pushes=True
    )
    log.info(
        "worker %s: took over session %s from worker %s at seq %d",
        worker.id,
        sid,
        record.worker or "?",
        last,
        extra={"event": "takeover", "session": sid},
    )
    if plan.prompt is None:
        final = Aborted(
            reason="the session moved after its last turn: nothing was left to run",
            outcome=EndOutcome.CLOSED,
            phase="between_turns",
            seq=last + 2,
            turn=moved_event.turn,
        )
        await worker._writes.store(sid, token, final)
        await worker._ended(sid, token, entry_id, final, execution=job.execution)
        return None
    params_json = {**job.params, "prompt": plan.prompt}
    # Resume only a conversation the transcript store holds: one continued before this
    # execution, or whose first turn ended (the SDK mirrors a turn's transcript when its
    # result comes). A first turn that never ended starts the conversation again.
    has_results = any(isinstance(e, Result) for e in stored)
    if plan.resume is not None and record.claude_session_id:
        # Rule 11: the conversation up to its last stored tool result, then go on.
        params_json = {
            **params_json,
            **START_ONLY,
            "resume_session_id": record.claude_session_id,
            "resume_session_at": plan.resume.uuid,
        }
    elif record.claude_session_id and "resume_session_id" not in params_json and has_results:
        # The conversation as it is now (resume.continuation): what addressed its first
        # start (a chosen id) does not apply to its resume.
        params_json = {**params_json, **START_ONLY, "resume_session_id": record.claude_session_id}
    params = params_from_json(params_json, allow_cwd=True, allow_env=True)
    moved_job = attrs.evolve(job, params=params_json, after_seq=last + 1)
    return moved_job, params, plan.again


def continuing(resume: ResumePoint, again: int) -> str:
    """What the ``session_moved`` warning says of a turn that continues (rule 11)."""
    said = (
        f"the turn in flight continues after tool call {resume.tool_use_id}"
        f" ({resume.tool_name or 'tool'}), whose result the session store holds: the model is "
        "sent a continuation message and no finished tool call runs again"
    )
    if resume.cut_off:
        said += (
            "; tool call(s) " + ", ".join(resume.cut_off) + " had started with no result "
            "stored and may run again"
        )
    if again:
        said += f"; {again} push(es) not read by the CLI are delivered again"
    return said
