"""``python -m claude_trio.cli``: the ``claude-trio`` command."""

from claude_trio.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
