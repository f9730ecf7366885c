"""How exceptions leave claude-trio's ``async with`` blocks: the caller's own exception as itself.

``open_session``, ``open_fleet`` and ``open_cli_pool`` run a nursery around the caller's block,
so with trio's strict exception groups an exception raised by the caller's own code would come
out wrapped in an ``ExceptionGroup`` (and ``except ValueError`` would miss it). The rule, the one
``trio-websocket``'s ``open_websocket`` follows:

* the caller's exception comes out as itself, whatever our tasks did meanwhile (``Cancelled``
  of our own tasks is dropped; a real failure of ours rides along as its ``__context__``);
* with no exception from the caller, a single exception of ours comes out as itself;
* only when several of our own tasks fail at once (a bug of ours) does a group come out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NoReturn

import trio


def reraise(exc: BaseException) -> NoReturn:
    """Raise ``exc`` again without making the group it came in its ``__context__``."""
    __tracebackhide__ = True
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, context


def raise_unwrapped(
    group: BaseExceptionGroup[BaseException], caller: BaseException | None
) -> NoReturn:
    """Raise what should leave the block for ``group`` (see the module docstring).

    ``caller`` is the exception the caller's block raised, if any.
    """
    leaves = list(_leaves(group))
    ours = [e for e in leaves if e is not caller and not isinstance(e, trio.Cancelled)]
    if caller is not None:
        if ours:
            context = caller.__context__
            internal: list[BaseException] = list(ours)
            if context is not None and not caller.__suppress_context__:
                internal.append(context)
            caller.__context__ = BaseExceptionGroup(
                "claude-trio's own tasks failed while the block's exception propagated", internal
            )
            caller.__suppress_context__ = False
        reraise(caller)
    if len(ours) == 1:
        reraise(ours[0])
    if not ours and leaves:
        reraise(leaves[0])  # only Cancelled: let it reach the scope that owns it
    raise group


@asynccontextmanager
async def open_block_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery for the tasks that serve a caller's block, by these rules.

    Its tasks are cancelled when the block is left, however it is left; what leaves the block
    follows the module docstring (the caller's exception as itself). Put any cleanup that must
    run before the cancellation in a ``try``/``finally`` around your own ``yield``.
    """
    caller: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                caller = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_unwrapped(group, caller)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out
