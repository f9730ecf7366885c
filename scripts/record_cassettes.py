"""The shipped cassettes that `claude-trio demo` alone does not make (see scripts/record_cassettes).

``demo-abort.jsonl``: the demo, aborted the moment the model asks its question (the user
stops the agent instead of answering).
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from claude_trio import Aborted, UserInputRequest
from claude_trio.cli.demo import open_demo_session


async def record_abort(path: Path) -> None:
    async with open_demo_session(record_to=path) as session:
        async for event in session.events:
            if isinstance(event, UserInputRequest):
                await session.abort()
            last = event
    if not isinstance(last, Aborted):
        raise SystemExit(f"the demo was not aborted: it ended with {last.kind}")


def main() -> None:
    folder = Path(sys.argv[1])
    trio.run(record_abort, folder / "demo-abort.jsonl")
    print(f"recorded {folder / 'demo-abort.jsonl'}")


if __name__ == "__main__":
    main()
