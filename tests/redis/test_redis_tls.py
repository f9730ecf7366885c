"""``rediss://`` against a real TLS-only ``redis-server`` (a CA and a server certificate made
for the test with trustme), and AUTH refused: the store and a worker+gateway round trip work
over TLS with the CA named in the URL (``?ssl_ca_certs=``); a wrong CA, a certificate for
another host or a wrong password stop ``open_redis`` and both commands at once with an error
that says which, and the password is never printed or logged."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import attrs
import pytest
import trio
import trustme
from claude_agent_sdk.testing.session_store_conformance import run_session_store_conformance

from claude_trio import ExecuteParams
from claude_trio.actors.cluster.store import RedisSessionStore
from claude_trio.client import ClientConfig, connect_gateway
from claude_trio.errors import RedisUnavailableError
from claude_trio.protocol.cluster.keys import RedisKeys
from claude_trio.protocol.cluster.records import SessionRecord
from claude_trio.protocol.session.events import Result
from claude_trio.redis_url import open_redis
from claude_trio.testing import RedisServer, RedisTLS, open_redis_server
from claude_trio.testing.processes import (
    command_env,
    open_gateway_process,
    open_worker_process,
)

PASSWORD = "tls-s3cret-pass-word"
TOKEN = "cluster-e2e-token-0123456789"
ENV = command_env({"CLAUDE_TRIO_TOKEN": TOKEN})
CLIENT = ClientConfig(backoff_base=0.05, backoff_max=0.5, close_timeout=2.0)


@attrs.frozen(kw_only=True)
class Certs:
    server: RedisTLS
    other_ca: Path  # a CA that signed nothing the server holds
    wrong_host: RedisTLS  # signed by the right CA, for a name that is not 127.0.0.1


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    ca, other = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    other.cert_pem.write_to_path(str(tmp_path / "other-ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "server.pem")
    )
    ca.issue_cert("redis.example").private_key_and_cert_chain_pem.write_to_path(
        str(tmp_path / "elsewhere.pem")
    )
    return Certs(
        server=RedisTLS(
            cert_file=tmp_path / "server.pem",
            key_file=tmp_path / "server.pem",
            ca_file=tmp_path / "ca.pem",
        ),
        other_ca=tmp_path / "other-ca.pem",
        wrong_host=RedisTLS(
            cert_file=tmp_path / "elsewhere.pem",
            key_file=tmp_path / "elsewhere.pem",
            ca_file=tmp_path / "ca.pem",
        ),
    )


@pytest.fixture
async def tls_server(tmp_path: Path, certs: Certs) -> AsyncIterator[RedisServer]:
    async with open_redis_server(tmp_path / "redis", tls=certs.server, password=PASSWORD) as s:
        yield s


async def test_the_tls_server_listens_on_tls_only(tls_server: RedisServer, certs: Certs) -> None:
    await trio.lowlevel.checkpoint()
    assert tls_server.url.startswith("rediss://")
    assert f"ssl_ca_certs={certs.server.ca_file}" in tls_server.url
    assert "--tls-port" in tls_server._argv()
    assert tls_server._argv()[tls_server._argv().index("--port") + 1] == "0"


async def test_store_conformance_over_tls(tls_server: RedisServer) -> None:
    made = 0

    async def fresh() -> RedisSessionStore:
        nonlocal made
        made += 1
        return RedisSessionStore(redis, prefix=f"tls{made}")

    async with open_redis(tls_server.url, environ={}) as redis:
        await run_session_store_conformance(fresh)
        ports = await redis.config_get(["port", "tls-port"])
    assert made == 15
    # No plain-text listener: every command above went over TLS.
    assert ports == {"port": "0", "tls-port": str(tls_server.port)}


async def test_plain_redis_to_the_tls_port_fails_clearly(tls_server: RedisServer) -> None:
    plain = tls_server.url.replace("rediss://", "redis://").split("?")[0]
    with trio.fail_after(30), pytest.raises(RedisUnavailableError, match="cannot") as caught:
        async with open_redis(plain, environ={}):
            pytest.fail("a plain-text client got a connection to a TLS-only port")
    assert PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("wrong_ca", "TLS certificate did not verify .*self.signed"),
        ("wrong_host", "TLS certificate did not verify .*(IP address mismatch|hostname)"),
    ],
)
async def test_a_certificate_that_does_not_verify_fails_clearly(
    tmp_path: Path, certs: Certs, case: str, message: str
) -> None:
    tls = certs.server if case == "wrong_ca" else certs.wrong_host
    async with open_redis_server(tmp_path / case, tls=tls, password=PASSWORD) as server:
        url = server.url
        if case == "wrong_ca":
            url = url.replace(str(certs.server.ca_file), str(certs.other_ca))
        with trio.fail_after(30), pytest.raises(RedisUnavailableError, match=message) as caught:
            async with open_redis(url, environ={}):
                pytest.fail("connected although the certificate does not verify")
        assert PASSWORD not in str(caught.value)
        assert "rediss://:***@127.0.0.1" in str(caught.value)
        if case == "wrong_host":  # the name check is the only thing refusing it
            async with open_redis(f"{url}&ssl_check_hostname=false", environ={}) as redis:
                assert await redis.ping() == "PONG"


async def run_command(*argv: str) -> tuple[int, str]:
    """A ``claude-trio`` command to its end (a hang fails the test): exit code and stderr."""
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "claude_trio.cli", *argv, "--log-json"],
            env=ENV,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return done.returncode, (done.stdout + done.stderr).decode()


@pytest.mark.parametrize("command", [("worker", "--offline"), ("serve", "--port", "0")])
async def test_the_commands_stop_on_a_wrong_ca_or_password_and_never_print_it(
    tls_server: RedisServer, certs: Certs, command: tuple[str, ...]
) -> None:
    wrong_ca = tls_server.url.replace(str(certs.server.ca_file), str(certs.other_ca))
    code, out = await run_command(*command, "--redis", wrong_ca)
    assert code == 1, out
    assert f"claude-trio {command[0]}: cannot use Redis at" in out
    assert "TLS certificate did not verify" in out
    assert "Traceback" not in out
    assert PASSWORD not in out

    wrong_password = tls_server.url.replace(PASSWORD, "not-the-pass-word")
    code, out = await run_command(*command, "--redis", wrong_password)
    assert code == 1, out
    assert "the server refused the password" in out
    assert "Traceback" not in out
    assert "not-the-pass-word" not in out
    assert PASSWORD not in out


async def test_a_worker_and_a_gateway_run_a_session_over_tls(
    tmp_path: Path, tls_server: RedisServer
) -> None:
    url = tls_server.url
    work = tmp_path / "work"
    work.mkdir()
    async with AsyncExitStack() as stack:
        worker = await stack.enter_async_context(
            open_worker_process(tmp_path, "w-tls", url, "--offline", "--log-json", env=ENV)
        )
        gateway = await stack.enter_async_context(
            open_gateway_process(tmp_path, "g", url, "--cwd-root", str(work), "--log-json", env=ENV)
        )
        ws = gateway.url
        redis = await stack.enter_async_context(open_redis(url, environ={}))
        client = await stack.enter_async_context(connect_gateway(ws, token=TOKEN, config=CLIENT))
        with trio.fail_after(90):
            session = await client.open(ExecuteParams(prompt="hello over TLS"))
            events = [event async for event in session.events]
            while True:  # the worker writes the end to Redis (over TLS) after the last event
                record = SessionRecord.from_fields(
                    await redis.hgetall(RedisKeys().session(session.id))
                )
                if record.state == "ended":
                    break
                await trio.sleep(0.05)
    final = events[-1]
    assert isinstance(final, Result), final
    assert final.final
    assert not final.is_error, repr(final)
    assert record.worker == "w-tls"
    assert record.state == "ended"
    for log in (worker.stderr_path, gateway.stderr_path):
        assert PASSWORD not in log.read_text()
