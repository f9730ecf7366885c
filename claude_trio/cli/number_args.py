"""Number options and the fleet governor's options of the commands (``serve``, ``batch``,
``worker``)."""

from __future__ import annotations

import argparse

from claude_trio.protocol.fanout.governor import DEFAULT_START_LIMIT, GovernorConfig

__all__ = ["add_governor_options", "governor_config"]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def add_governor_options(command: argparse.ArgumentParser, *, budget: bool) -> None:
    """The fleet governor's options (``actors/fanout/governor.py``): on by default with the
    settings that suit one API key; ``--no-governor`` turns it off."""
    command.add_argument(
        "--no-governor",
        action="store_true",
        help="no fleet governor: sessions start as soon as a slot is free, and back off from "
        "429/529 each on its own (by default starts pause together on a rate limit, and the "
        "sessions running at once adapt to what the API accepts)",
    )
    command.add_argument(
        "--starts-per-second",
        type=_positive_float,
        default=4.0,
        metavar="N",
        help="at most this many CLIs started a second (default 4)",
    )
    if budget:
        command.add_argument(
            "--fleet-budget",
            type=_positive_float,
            metavar="USD",
            help="start no new execution once the fleet spent this much (exact, per turn)",
        )
        command.add_argument(
            "--on-budget",
            choices=("finish", "abort"),
            default="finish",
            help="at the fleet budget, let running executions finish (default) or abort them",
        )


def governor_config(args: argparse.Namespace) -> GovernorConfig | None:
    """The governor of a command's fleet, from :func:`add_governor_options`' options."""
    if args.no_governor:
        return None
    return GovernorConfig(
        max_live=args.max_live,
        initial_limit=min(DEFAULT_START_LIMIT, args.max_live),
        starts_per_second=args.starts_per_second,
        budget_usd=getattr(args, "fleet_budget", None),
        on_budget=getattr(args, "on_budget", "finish"),
    )
