"""Safe by default: the operator's policy for remote sessions, strict options, and errors that
never show a server path. Real sockets on 127.0.0.1, FakeCLI sessions."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from claude_agent_sdk import CLINotFoundError
from gateway_kit import TOKEN, client, gateway, say
from trio_websocket import ConnectionRejected, open_websocket_url

from claude_trio import ExecuteParams, serve_gateway
from claude_trio.actors.fanout.fleet import Subscription, open_fleet
from claude_trio.protocol.config.options import MUTATING_BUILTINS, READONLY_BUILTINS
from claude_trio.protocol.config.tools import SCHEDULING_TOOLS
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.fanout.remote import GatewayLimits
from claude_trio.protocol.fanout.wire import ErrorFrame, EventFrame
from claude_trio.protocol.session.events import Error
from claude_trio.testing import FakeCLI


async def open_and_finish(port: int, params: dict[str, Any]) -> list[Any]:
    async with client(port) as c:
        await c.send("open", id="o", params=params)
        first = await c.receive()
        if isinstance(first, ErrorFrame):
            return [first]
        return [first, *await c.receive_until(lambda f: _final(f))]


def _final(frame: Any) -> bool:
    return (isinstance(frame, EventFrame) and getattr(frame.event, "final", False) is True) or (
        isinstance(frame, EventFrame) and isinstance(frame.event, Error) and frame.event.fatal
    )


# -- tools -------------------------------------------------------------------------------------


async def test_remote_sessions_get_read_only_tools_by_default_whatever_the_client_asks() -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake) as (_, port):
            await open_and_finish(port, {"prompt": "rm -rf /", "plan_mode": False})
    options = fake.transport.options
    assert options.tools == list(READONLY_BUILTINS)
    assert set(MUTATING_BUILTINS) <= set(options.disallowed_tools)
    assert "Bash" not in options.tools
    assert json.loads(options.settings or "{}")["disableSkillShellExecution"] is True


@pytest.mark.parametrize("mode", ["default", "plan", "dontAsk"])
async def test_a_clients_asking_mode_never_widens_the_read_only_policy(mode: str) -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake) as (_, port):
            await open_and_finish(
                port, {"prompt": "hi", "permission_mode": mode, "plan_mode": False}
            )
    options = fake.transport.options
    # The mode is the client's (it only decides what asks) ...
    assert options.permission_mode == mode
    # ... the tools offered stay the policy's, and no settings file is read.
    assert options.tools == list(READONLY_BUILTINS)
    assert set(MUTATING_BUILTINS) <= set(options.disallowed_tools)
    assert options.setting_sources == []


@pytest.mark.parametrize(
    ("field", "value", "names"),
    [
        ("permission_mode", "bypassPermissions", "'bypassPermissions' lets the CLI run tools"),
        ("permission_mode", "acceptEdits", "'acceptEdits' lets the CLI run tools"),
        ("permission_mode", "auto", "'auto' lets the CLI run tools"),
        ("setting_sources", ["project"], "load no settings files"),
    ],
)
async def test_a_read_only_server_refuses_what_would_run_commands_at_open(
    field: str, value: Any, names: str
) -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake) as (_, port):
            (frame,) = await open_and_finish(port, {"prompt": "hi", field: value})
            await open_and_finish(port, {"prompt": "hi"})  # unset: runs as a local one does
    assert isinstance(frame, ErrorFrame)
    assert frame.code == "forbidden_field"
    assert frame.message.startswith(f"params.{field}")
    assert names in frame.message
    [transport] = fake.transports
    assert transport.options.permission_mode == "bypassPermissions"
    assert transport.options.setting_sources == []


async def test_an_unknown_permission_mode_is_refused_naming_the_field() -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake) as (_, port):
            (frame,) = await open_and_finish(port, {"prompt": "hi", "permission_mode": "yolo"})
    assert isinstance(frame, ErrorFrame)
    assert frame.code == "invalid_params"
    assert "params.permission_mode" in frame.message
    assert fake.transports == []


async def test_the_operator_can_opt_in_to_every_tool() -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake, remote_tools="all") as (_, port):
            await open_and_finish(port, {"prompt": "hi"})
    assert fake.transport.options.tools is None
    # Every tool but those a headless CLI must never have (a wake-up it could not keep).
    assert fake.transport.options.disallowed_tools == list(SCHEDULING_TOOLS)


# -- the working directory ---------------------------------------------------------------------


@asynccontextmanager
async def rooted(fake: FakeCLI, root: Path, **options: Any) -> AsyncIterator[int]:
    async with gateway(fake, cwd_root=str(root), **options) as (_, port):
        yield port


async def test_sessions_run_in_the_root_and_below_it_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "project").mkdir(parents=True)
    (root / "notes.txt").write_text("a file")
    outside = tmp_path / "secret"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with rooted(fake, root, allow_cwd=True) as port:
            await open_and_finish(port, {"prompt": "hi"})
            await open_and_finish(port, {"prompt": "hi", "cwd": "project"})
            await open_and_finish(port, {"prompt": "hi", "cwd": str(root / "project")})
            refusals = {}
            for cwd in ["..", "../secret", "escape", "notes.txt", "missing", "/etc"]:
                (error,) = await open_and_finish(port, {"prompt": "hi", "cwd": cwd})
                refusals[cwd] = error
    real_root = await trio.Path(root).resolve()
    assert [str(t.options.cwd) for t in fake.transports] == [
        str(real_root),
        str(real_root / "project"),
        str(real_root / "project"),
    ]
    for cwd, error in refusals.items():
        assert isinstance(error, ErrorFrame)
        assert error.code == "invalid_params"
        assert error.message.startswith(f"params.cwd={cwd!r}: not a directory inside")
        assert str(tmp_path) not in error.message.replace(repr(cwd), "")


async def test_a_remote_scope_must_lie_inside_the_root_and_is_resolved_there(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    fake = FakeCLI(partial(say, "ok"))
    real_root = await trio.Path(root).resolve()
    with trio.fail_after(10):
        async with rooted(fake, root) as port:
            scope = {
                "allowed_paths": [str(root / "data")],
                "read_only_paths": [str(root)],
                "disallowed_paths": ["/etc"],
                "scope_enforcement": "soft",
            }
            await open_and_finish(port, {"prompt": "hi", **scope})
            refusals = {}
            for field, path in [
                ("allowed_paths", str(outside)),
                ("read_only_paths", str(root / "escape")),
                ("allowed_paths", str(root / "data" / ".." / "..")),
            ]:
                (error,) = await open_and_finish(port, {"prompt": "hi", field: [path]})
                refusals[(field, path)] = error
    [transport] = fake.transports
    assert transport.options.add_dirs == [str(real_root / "data"), str(real_root)]
    settings = json.loads(transport.options.settings or "{}")
    assert "Read(//etc/**)" in settings["permissions"]["deny"]
    assert settings["permissions"]["blockReadsOutsideWorkingDirectories"] is True
    for (field, _path), error in refusals.items():
        assert isinstance(error, ErrorFrame)
        assert error.code == "invalid_params"
        assert error.message.startswith(f"params.{field}[0]=")
        assert "not inside the folder this server runs sessions in" in error.message


async def test_a_symlink_loop_is_refused_by_name_and_the_connection_lives_on(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with rooted(fake, root, allow_cwd=True) as port, client(port) as c:
            await c.send(
                "open", id="scope", params={"prompt": "hi", "allowed_paths": [str(root / "a")]}
            )
            scope_error = await c.receive()
            await c.send("open", id="cwd", params={"prompt": "hi", "cwd": "a"})
            cwd_error = await c.receive()
            await c.send("list", id="still-there")
            listing = await c.receive()
    assert isinstance(scope_error, ErrorFrame)
    assert (scope_error.id, scope_error.code) == ("scope", "invalid_params")
    assert "cannot be resolved (a symlink loop?)" in scope_error.message
    assert isinstance(cwd_error, ErrorFrame)
    assert (cwd_error.id, cwd_error.code) == ("cwd", "invalid_params")
    assert listing.id == "still-there"
    assert fake.transports == []


async def test_without_allow_cwd_a_client_cannot_choose_the_folder(tmp_path: Path) -> None:
    fake = FakeCLI(partial(say, "ok"))
    real = str(await trio.Path(tmp_path).resolve())
    with trio.fail_after(10):
        async with rooted(fake, tmp_path) as port:
            (error,) = await open_and_finish(port, {"prompt": "hi", "cwd": "."})
            await open_and_finish(port, {"prompt": "hi"})
    assert error.code == "forbidden_field"
    assert [str(t.options.cwd) for t in fake.transports] == [real]


# -- errors a remote client sees ---------------------------------------------------------------


class _MissingCLI:
    """A transport factory whose CLI cannot be found (as the real transport reports it)."""

    def __call__(self, options: Any) -> Any:
        raise CLINotFoundError("Claude Code not found", "/opt/secret/bin/claude")


async def test_errors_that_name_server_paths_are_withheld_from_remote_clients() -> None:
    fake = FakeCLI()
    with trio.fail_after(10):
        async with open_fleet(transport_factory=_MissingCLI()) as fleet, trio.open_nursery() as n:
            port = await n.start(partial(serve_gateway, fleet, token=TOKEN, allowed_origins=None))
            async with client(port) as c:
                sid = await c.open(ExecuteParams(prompt="hi"))
                frames = await c.receive_until(_final)
            local = fleet.get_nowait(sid).subscribe_nowait(None, max_queue=10)
            assert isinstance(local, Subscription)
            with local:
                kept = [e async for e in local]
            n.cancel_scope.cancel()
    (remote,) = [f.event for f in frames if isinstance(f, EventFrame)]
    assert isinstance(remote, Error)
    assert "/opt/secret" not in json.dumps(remote.message)
    assert "chmod" not in remote.message
    assert "server" in remote.message
    # The fleet itself keeps the full story for the operator.
    (error,) = kept
    assert isinstance(error, Error)
    assert "/opt/secret/bin/claude" in error.message
    del fake


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"prompt": "x", "system_prompt": "be\u0000brief"}, "params.system_prompt"),
        ({"prompt": "x", "system_prompt": "s" * (128 * 1024)}, "params.system_prompt"),
        ({"prompt": "x", "architecture_config": {"custom_env": {"A": 1}}},
         "params.architecture_config.custom_env"),
        ({"prompt": "x", "architecture_config": {"custom_env": {"A": "a\u0000"}}},
         "params.architecture_config.custom_env.A"),
    ],
    ids=["nul-prompt", "big-prompt", "env-int", "env-nul"],
)  # fmt: skip
async def test_what_the_cli_cannot_take_is_an_invalid_params_frame_naming_the_field(
    params: dict[str, Any], field: str
) -> None:
    fake = FakeCLI()
    with trio.fail_after(10):
        async with gateway(fake, allow_env=True, max_message_size=512 * 1024) as (_, port):
            (error,) = await open_and_finish(port, params)
    assert isinstance(error, ErrorFrame)
    assert error.code == "invalid_params"
    assert error.message.startswith(field)
    assert "chmod" not in error.message
    assert fake.transports == []  # nothing was spawned


# -- every option is checked -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"allow_cwd": "false", "cwd_root": "/tmp"}, "allow_cwd"),
        ({"allow_env": "no"}, "allow_env"),
        ({"allow_env": 1}, "allow_env"),
        ({"port": 70000}, "port"),
        ({"port": -1}, "port"),
        ({"port": True}, "port"),
        ({"host": 127}, "host"),
        ({"token": "x"}, "token"),
        ({"token": " " * 20}, "token"),
        ({"token": "a-long-enough-token with-a-space"}, "token"),
        ({"token": 12345678901234567890}, "token"),
        ({"allowed_origins": "https://app.example"}, "allowed_origins"),
        ({"allowed_origins": [3]}, "allowed_origins"),
        ({"max_message_size": 0}, "max_message_size"),
        ({"max_message_size": 2**40}, "max_message_size"),
        ({"client_queue": True}, "client_queue"),
        ({"remote_tools": "everything"}, "tools"),
        ({"cwd_root": "relative/path"}, "cwd_root"),
        ({"cwd_root": "/no/such/folder/anywhere"}, "cwd_root"),
        ({"allow_cwd": True}, "allow_cwd"),
        ({"limits": {"max_connections": 3}}, "limits"),
    ],
)
async def test_bad_gateway_options_are_refused_by_name_before_listening(
    options: dict[str, Any], field: str
) -> None:
    options.setdefault("token", TOKEN)
    options.setdefault("allowed_origins", None)
    with trio.fail_after(10):
        async with open_fleet(transport_factory=FakeCLI()) as fleet:
            with pytest.raises(InvalidParamsError) as caught:
                await serve_gateway(fleet, **options)
    assert caught.value.field == field
    assert TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_connections": 0}, "max_connections"),
        ({"ping_interval": -1}, "ping_interval"),
        ({"ping_timeout": float("nan")}, "ping_timeout"),
        ({"handshake_timeout": True}, "handshake_timeout"),
        ({"client_queue_bytes": 2.5}, "client_queue_bytes"),
        ({"max_sessions_per_client": 10**400}, "max_sessions_per_client"),
    ],
)
def test_bad_limits_are_refused_by_name(limits: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        GatewayLimits(**limits)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"env": {"A": 1}}, "env['A']"),
        ({"env": {"A=B": "1"}}, "env['A=B']"),
        ({"env": {"A": "x\u0000"}}, "env['A']"),
        ({"env": "A=1"}, "env"),
        ({"cli_path": 3}, "cli_path"),
        ({"cli_path": "/bin/cl\u0000aude"}, "cli_path"),
        ({"transport_factory": "fake"}, "transport_factory"),
        ({"stderr": print.__name__}, "stderr"),
        ({"max_buffer_size": True}, "max_buffer_size"),
        ({"max_buffer_size": 512}, "max_buffer_size"),  # what every session would refuse
        ({"config": {"connect_timeout": 1}}, "config"),
        ({"replay_bytes": 0}, "replay_bytes"),
    ],
)
async def test_bad_fleet_options_are_refused_by_name_and_type(
    options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        async with open_fleet(**options):
            pass  # pragma: no cover
    assert caught.value.field == field


async def test_query_token_given_twice_is_refused() -> None:
    with trio.fail_after(10):
        async with gateway(FakeCLI()) as (_, port):
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(
                    f"ws://127.0.0.1:{port}/?token={TOKEN}&token=other", extra_headers=[]
                ):
                    pass  # pragma: no cover
    assert refused.value.status_code == 400


def test_the_descriptor_limit_lowers_the_connection_cap() -> None:
    from claude_trio.protocol.fanout.remote import connection_cap

    limits = GatewayLimits(max_connections=512, fd_reserve=64)
    assert connection_cap(limits, 256) == 192
    assert connection_cap(limits, 100_000) == 512
    assert connection_cap(limits, None) == 512
    assert connection_cap(limits, 10) == 1
    assert os.sysconf("SC_OPEN_MAX") > 0


async def test_an_op_the_decoder_fails_on_is_an_error_frame_not_a_dead_connection(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import claude_trio.actors.fanout.gateway_connection as gateway_connection

    real_decode = gateway_connection.decode_op

    def decode(text: str, **kwargs: Any) -> Any:
        if "poison" in text:
            raise TypeError("unhashable type: 'list'")  # a value a validator forgot to refuse
        return real_decode(text, **kwargs)

    monkeypatch.setattr(gateway_connection, "decode_op", decode)
    with trio.fail_after(10):
        async with gateway(FakeCLI(partial(say, "ok"))) as (_, port), client(port) as c:
            await c.send("list", id="poison")
            error = await c.receive()
            await c.send("list", id="after")
            listing = await c.receive()
    assert isinstance(error, ErrorFrame)
    assert error.code == "invalid_params"
    assert "cannot read" in error.message
    assert "unhashable" not in error.message
    assert listing.id == "after"
    assert "an op could not be decoded: TypeError" in caplog.text


async def test_what_is_not_a_served_host_is_refused_by_name() -> None:
    """A gateway serves any host that offers what it needs (``ServedHost``); anything else,
    a session host without owners (a gateway client) included, is refused before a socket
    is opened."""

    class OnlyASessionHost:
        async def open(self, params: Any, *, label: Any = None) -> Any: ...
        async def continue_(self, session_id: str, prompt: str) -> Any: ...
        async def get(self, session_id: str) -> Any: ...
        async def list(self) -> Any: ...

    for host in (object(), OnlyASessionHost()):
        with pytest.raises(InvalidParamsError) as caught:
            await serve_gateway(host, token=TOKEN, allowed_origins=None)  # type: ignore[arg-type]
        assert caught.value.field == "fleet"
        assert "ServedHost" in str(caught.value)


async def test_a_read_only_server_refuses_a_writing_mode_in_continue_as_in_open() -> None:
    fake = FakeCLI(partial(say, "ok"))
    with trio.fail_after(10):
        async with gateway(fake) as (_, port):
            opened, *_ = await open_and_finish(port, {"prompt": "hi"})
            session = opened.session
            async with client(port) as c:
                await c.send(
                    "continue", id="c1", session=session, prompt="go", permission_mode="auto"
                )
                refused = await c.receive()
                await c.send(
                    "continue",
                    id="c2",
                    session=session,
                    prompt="go",
                    permission_mode="plan",
                    model="haiku",
                )
                continued = await c.receive()
                await c.receive_until(_final)
    assert isinstance(refused, ErrorFrame)
    assert refused.code == "forbidden_field"
    assert refused.message.startswith("permission_mode: 'auto' lets the CLI run tools")
    assert continued.type == "continued"
    first, second = fake.transports  # the refused continue ran nothing
    assert first.options.permission_mode == "bypassPermissions"
    assert second.options.permission_mode == "plan"
    assert second.options.model == ExecuteParams(prompt="x", model="haiku").resolved_model
    assert second.options.tools == list(READONLY_BUILTINS)  # still the policy's tools
