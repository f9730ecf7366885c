"""The ``claude-trio demo`` scenario: the real ``claude`` CLI against a scripted model.

The demo is meant to be a user's first command, so it needs no key and no network, finishes in a
few seconds, and still runs the whole pipeline: the bundled CLI as a subprocess, the SDK, every
actor of :func:`~claude_trio.actors.session.open.open_session`. Only the model is fake - a
:class:`~claude_trio.offline.model_double.ModelDouble` served on 127.0.0.1 in the same nursery -
and real tools run in a throw-away project folder.

The scripted model shows one event of every kind a session produces: it thinks, writes, plans a
todo list (``TodoWrite``), reads a file (``Read``), hands a survey to a subagent (``Agent``, run
in the foreground; the subagent lists the folder with ``Bash``), asks the user a question
(``AskUserQuestion``, answered by :func:`answer_demo_question`), ticks the todo list off and
answers; the result carries usage and cost.

The script keys every answer on what the request already contains - which ``tool_use`` ids the
conversation holds, whether the request is a subagent's - never on the order of requests, so an
extra or reordered request from a future CLI (a summary label, a retry) cannot derail it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, assert_never

import trio

from claude_trio.actors.extensions.broker import UserInputHandler
from claude_trio.actors.session.open import Session, open_session
from claude_trio.offline.hermetic import hermetic_env
from claude_trio.offline.model_double import (
    ModelRequest,
    Reply,
    ReplyText,
    ReplyThinking,
    ReplyToolUse,
    ReplyUsage,
    Responder,
    Response,
    open_model_double,
)
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.session.events import UserInputRequest

DEMO_PROMPT = "Get to know the project in this folder and tell me what it does."

# The tool_use ids of the script: the state of the conversation is which of them it holds.
PLAN_ID = "toolu_demo_plan"
READ_ID = "toolu_demo_read"
SURVEY_ID = "toolu_demo_survey"
PROGRESS_ID = "toolu_demo_progress"
ASK_ID = "toolu_demo_ask"
DONE_ID = "toolu_demo_done"
SUBAGENT_LS_ID = "toolu_demo_sub_ls"

FOCUS_QUESTION = "Which part should the summary focus on?"
FOCUS_OPTIONS: tuple[tuple[str, str], ...] = (
    ("Sensors", "How readings are taken"),
    ("Storage", "Where readings are kept"),
)

DEMO_ENV: Mapping[str, str] = {
    # CLI 2.1.332 offers TodoWrite only with both switches (by default it offers neither todo
    # family on its default model; with tasks on it offers TaskCreate/TaskUpdate instead).
    "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",
    "CLAUDE_CODE_ENABLE_TASKS": "0",
    # The CLI sends even 127.0.0.1 through HTTP(S)_PROXY when one is set: the demo would fail
    # behind a corporate proxy.
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

ANSWER_DELAY = 0.4
"""Seconds the demo's user "thinks" before answering: long enough to read the question."""

README = """\
# Weather station

Reads the temperature and humidity sensors once a minute and appends each reading
to `readings.csv`. Run it with `python station.py`.
"""

STATION = """\
import csv
from time import sleep, time

def read_sensors():
    return {"temperature_c": 21.5, "humidity_pct": 40}

while True:
    with open("readings.csv", "a", newline="") as out:
        csv.writer(out).writerow([time(), *read_sensors().values()])
    sleep(60)
"""

FINAL_ANSWERS: Mapping[str | None, str] = {
    "Sensors": (
        "You picked Sensors. This is a small weather station logger: `station.py` samples the "
        "sensors once a minute, and `read_sensors()` returns the temperature (°C) and the "
        "humidity (%) - as fixed values for now, so a real sensor driver comes next."
    ),
    "Storage": (
        "You picked Storage. This is a small weather station logger: each minute `station.py` "
        "appends one row (time, temperature, humidity) to `readings.csv`, which nothing ever "
        "rotates, so the file grows forever."
    ),
    None: (
        "You did not pick a focus, so in short: this is a small weather station logger that "
        "appends the temperature and humidity to `readings.csv` once a minute."
    ),
}


def write_demo_project(folder: Path) -> None:
    """The little project the demo's agent explores."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(README)
    (folder / "station.py").write_text(STATION)


def _todos(*statuses: str) -> dict[str, Any]:
    steps = (
        ("Read the README", "Reading the README"),
        ("Survey the files", "Surveying the files"),
        ("Ask what to focus on", "Asking what to focus on"),
        ("Write the summary", "Writing the summary"),
    )
    return {
        "todos": [
            {"content": content, "status": status, "activeForm": active}
            for (content, active), status in zip(steps, statuses, strict=True)
        ]
    }


def _usage(turn: int) -> ReplyUsage:
    # Plausible numbers: the prompt is mostly cached, and grows by a little each round trip.
    return ReplyUsage(
        input_tokens=40 + 25 * turn,
        cache_read_input_tokens=1_000 + 100 * turn,
        output_tokens=60,
    )


def _chosen_focus(answer_text: str | None) -> str | None:
    """The option label the user picked, read back from the AskUserQuestion tool result."""
    for label, _ in FOCUS_OPTIONS:
        if answer_text is not None and f'"{label}"' in answer_text:
            return label
    return None


def _main_agent_turn(request: ModelRequest, project: Path) -> Response | None:
    uses = request.tool_uses
    if request.pending_tool_use_ids:
        return None  # a tool still runs: the CLI never asks then; leave it to the double
    if PLAN_ID not in uses:
        return Reply(
            blocks=(
                ReplyThinking(
                    thinking=(
                        "The user wants an overview of an unknown project. I should read the "
                        "README, have a subagent survey the files, and ask which part matters "
                        "most before I summarize."
                    )
                ),
                ReplyText(text="I'll start with a plan."),
                ReplyToolUse(
                    id=PLAN_ID,
                    name="TodoWrite",
                    input=_todos("in_progress", "pending", "pending", "pending"),
                ),
            ),
            usage=_usage(0),
            chunk_size=12,
            event_delay=0.01,
        )
    if READ_ID not in uses:
        return Reply(
            blocks=(
                ReplyText(text="First, the README."),
                ReplyToolUse(
                    id=READ_ID, name="Read", input={"file_path": str(project / "README.md")}
                ),
            ),
            usage=_usage(1),
        )
    if SURVEY_ID not in uses:
        return Reply.tool_use(
            "Agent",
            {
                "description": "Survey the project files",
                "prompt": "List the files of this project and say what each one is for.",
                "subagent_type": "general-purpose",
                # Background agents end the parent's turn first and report later; in the
                # foreground the Agent call returns the subagent's report, which keeps the
                # demo one linear turn.
                "run_in_background": False,
            },
            id=SURVEY_ID,
            usage=_usage(2),
        )
    if PROGRESS_ID not in uses:
        return Reply.tool_use(
            "TodoWrite",
            _todos("completed", "completed", "in_progress", "pending"),
            id=PROGRESS_ID,
            usage=_usage(3),
        )
    if ASK_ID not in uses:
        question = {
            "question": FOCUS_QUESTION,
            "header": "Focus",
            "options": [{"label": label, "description": d} for label, d in FOCUS_OPTIONS],
            "multiSelect": False,
        }
        return Reply.tool_use(
            "AskUserQuestion", {"questions": [question]}, id=ASK_ID, usage=_usage(4)
        )
    if DONE_ID not in uses:
        return Reply.tool_use(
            "TodoWrite",
            _todos("completed", "completed", "completed", "completed"),
            id=DONE_ID,
            usage=_usage(5),
        )
    focus = _chosen_focus(request.tool_result_text(ASK_ID))
    return Reply(
        blocks=(ReplyText(text=FINAL_ANSWERS[focus]),),
        usage=_usage(6),
        chunk_size=8,
        event_delay=0.01,
    )


def _subagent_turn(request: ModelRequest) -> Response:
    if SUBAGENT_LS_ID not in request.tool_uses:
        return Reply.tool_use(
            "Bash",
            {"command": "ls", "description": "List the project files"},
            id=SUBAGENT_LS_ID,
            usage=ReplyUsage(input_tokens=900, output_tokens=30),
        )
    listing = request.tool_result_text(SUBAGENT_LS_ID) or ""
    files = ", ".join(listing.split()) or "nothing"
    return Reply.text(
        f"The folder holds {files}: the README documents the station, station.py is the "
        "sampling loop.",
        usage=ReplyUsage(input_tokens=950, output_tokens=40),
    )


def demo_responder(project: Path) -> Responder:
    """The scripted model of the demo; ``project`` is the folder the agent works in."""

    def respond(request: ModelRequest) -> Response | None:
        if request.is_tool_use_summary:
            return None  # the double answers the CLI's label requests itself
        if request.is_subagent:
            return _subagent_turn(request)
        return _main_agent_turn(request, project)

    return respond


async def answer_demo_question(request: UserInputRequest) -> Any:
    """The demo's user: waits a moment, then picks the first option of every question.

    An MCP elicitation (the demo has none) is declined: only a user decides to accept one.
    """
    await trio.sleep(ANSWER_DELAY)
    match request.source:
        case "model-tool":
            return {
                q.question: q.options[0] if q.options else "Whatever you think is best"
                for q in request.questions
            }
        case "mcp-elicitation":
            return {"action": "decline"}
        case "tool_permission":
            return {"decision": "allow"}
        case _:
            assert_never(request.source)


def demo_params(project: Path) -> ExecuteParams:
    """The execution the demo runs: Claude Code's system prompt, adaptive thinking."""
    return ExecuteParams(
        prompt=DEMO_PROMPT,
        cwd=str(project),
        # A real API only returns thinking that was asked for. CLI 2.1.332 asks by itself on
        # its default model ({"type": "adaptive", "display": "updates"}); saying so explicitly
        # keeps the scripted thinking plausible whatever the CLI's default becomes. (The CLI
        # streams the double's thinking blocks to us either way.)
        architecture_config=ArchitectureConfig(claude_thinking="adaptive", claude_use_preset=True),
    )


@asynccontextmanager
async def open_demo_session(
    *,
    on_user_input: UserInputHandler = answer_demo_question,
    record_to: str | os.PathLike[str] | None = None,
) -> AsyncIterator[Session]:
    """Run the demo: a model double, a temp project and CLI home, and the real CLI on them.

    ``record_to``: also write a cassette of the CLI's traffic there (``open_session``'s).
    Everything - the double's server, the CLI, the temp folders - is gone when the block ends.
    """
    with tempfile.TemporaryDirectory(prefix="claude-trio-demo-") as tmp:
        root = Path(tmp)
        project = root / "weather-station"
        write_demo_project(project)
        async with open_model_double(demo_responder(project)) as double:
            env = {
                # IS_SANDBOX=1 (sandbox=True): the CLI refuses bypassPermissions as root without
                # it. The scripted model only runs `ls` and reads a file in the temp project.
                **hermetic_env(double.base_url, root / "cli-home", sandbox=True),
                **DEMO_ENV,
            }
            async with open_session(
                demo_params(project), on_user_input=on_user_input, env=env, record_to=record_to
            ) as session:
                yield session
