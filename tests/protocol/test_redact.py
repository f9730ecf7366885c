"""``redact_secrets``: credentials of every common shape are masked, in text and as values;
ordinary words, paths and counts stay readable; masking is linear in the input."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.params import redact_secrets as public_redact_secrets
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.ready import adapter_ready
from claude_trio.protocol.config.redact import MASK, is_secret_key, redact_secrets, redact_text

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"


def chars(alphabet: str, size: int, max_size: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=max_size or size)


def b64url_json(body: str) -> st.SearchStrategy[str]:
    # A JWT part: base64url of a JSON object, so it starts "eyJ".
    return chars(B64URL, 8, 60).map(lambda tail: "eyJ" + body + tail)


SHAPES: dict[str, st.SearchStrategy[str]] = {
    "anthropic": chars(B64URL, 20, 60).map("sk-ant-api03-".__add__),
    "openai": chars(B64URL, 20, 60).map("sk-proj-".__add__),
    "slack": st.tuples(st.sampled_from("bpaors"), chars(ALNUM + "-", 10, 50)).map(
        lambda p: f"xox{p[0]}-{p[1]}"
    ),
    "aws": st.tuples(st.sampled_from(["AKIA", "ASIA"]), chars(UPPER_DIGITS, 16)).map("".join),
    "google": chars(B64URL, 35).map("AIza".__add__),
    "github": st.tuples(st.sampled_from("pousr"), chars(ALNUM, 36)).map(
        lambda p: f"gh{p[0]}_{p[1]}"
    ),
    "github_fine_grained": chars(ALNUM + "_", 82 - 11).map("github_pat_".__add__),
    "gitlab": chars(B64URL, 20, 40).map("glpat-".__add__),
    "jwt": st.tuples(b64url_json("hbGciOi"), b64url_json("zdWIiOi"), chars(B64URL, 0, 80)).map(
        ".".join
    ),
}
SECRETS = st.one_of(*SHAPES.values())
# What may stand next to a token in text: it ends a token's run of characters.
SEPARATORS = st.sampled_from([" ", "\n", "\t", '"', "'", "(", ")", ",", ";", "=", ": ", "<", ">"])
PROSE = st.text(max_size=40)


@pytest.mark.parametrize("shape", sorted(SHAPES))
@given(data=st.data())
def test_a_token_of_every_common_shape_is_masked_in_text(shape: str, data: st.DataObject) -> None:
    secret = data.draw(SHAPES[shape], label="secret")
    before, after = data.draw(PROSE, label="before"), data.draw(PROSE, label="after")
    left, right = data.draw(SEPARATORS), data.draw(SEPARATORS)
    text = f"{before}{left}{secret}{right}{after}"
    redacted = redact_text(text)
    assert secret not in redacted
    assert MASK in redacted


@given(secret=SECRETS, name=st.sampled_from(["SLACK_WEBHOOK", "DATABASE", "GH", "note", "x"]))
def test_a_token_is_masked_as_an_environment_value_under_any_name(secret: str, name: str) -> None:
    assert redact_secrets({"env": {name: secret}}) == {"env": {name: MASK}}
    assert redact_secrets([f"{name}={secret}"]) == [f"{name}={MASK}"]


SECRET_NAMES = st.sampled_from(
    ["GITHUB_TOKEN", "SLACK_BOT_TOKEN", "CLIENT_SECRET", "DB_PASSWORD", "MYSQLPASSWORD",
     "PGPASSWD", "STRIPE_KEY", "AWS_SECRET_ACCESS_KEY", "npmToken", "x-auth-token",
     "GITHUB_PAT", "SSH_PASSPHRASE", "accessToken", "apikey", "credentials"]
)  # fmt: skip
# Values with no known shape: only the name says they are secret.
PLAIN_VALUES = st.text(alphabet=ALNUM + "+/.@!#%*", min_size=1, max_size=40).filter(
    lambda v: MASK not in v
)


@given(name=SECRET_NAMES, value=PLAIN_VALUES)
def test_a_value_under_a_secret_name_is_masked_in_a_mapping_and_in_text(
    name: str, value: str
) -> None:
    assert redact_secrets({name: value}) == {name: MASK}
    assert redact_text(f"export {name}={value} && run") == f"export {name}={MASK} && run"
    assert redact_text(f'{{"{name}": "{value}"}}') == f'{{"{name}": "{MASK}"}}'
    assert redact_text(f"--{name}={value}") == f"--{name}={MASK}"


def test_adapter_ready_masks_every_credential_in_the_environment() -> None:
    secrets = {
        "SLACK_BOT_TOKEN": "xoxb-1234567890-abcdefghijkl",
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "GOOGLE_API": "AIza" + "S" * 35,
        "GH": "ghp_" + "a1" * 18,
        "GITLAB": "glpat-" + "x" * 20,
        "SESSION": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl",
        "MY_SERVICE_SECRET": "plain words",
        "DB_PASSWORD": "hunter2",
    }
    plain = {"GIT_AUTHOR_NAME": "Ada", "MAX_THINKING_TOKENS": "8000", "HOME": "/home/ada"}
    params = ExecuteParams(prompt="hi")
    options = build_options(params, extra_env={**secrets, **plain})  # open_session(env=...)
    ready = adapter_ready(params, options, sdk_version=None, cli_version=None)
    for name in secrets:
        assert ready.env[name] == MASK, name
    for name, value in plain.items():
        assert ready.env[name] == value
    shown = repr(ready)
    assert not [value for value in secrets.values() if value in shown]


# -- no false positives -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "/usr/local/bin/python3.11",
        "~/.config/claude/settings.json",
        "the token count is 5 and the key: name is sorted",
        "a basic example, the bearer of news",
        "Token limits apply",
        "risk-assessment-framework-v2 and task-sk-free",
        "time 12:30:45, ratio=3:4, C:\\Users\\ada",
        "AKIA is four letters; ghp_short, glpat-short, eyJ.x.y",
        "https://example.com/docs?page=2#top",
        "sort_order=asc max_tokens=4096",
        "input_tokens: 12, output_tokens: 30",
    ],
)
def test_ordinary_words_paths_and_counts_stay_readable(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "key",
    ["GIT_AUTHOR_NAME", "KEYBOARD", "MONKEY_PATCH", "TOKENIZERS_PARALLELISM", "PWD", "PATH",
     "MAX_THINKING_TOKENS", "CLAUDE_CODE_MAX_OUTPUT_TOKENS", "input_tokens", "AUTHOR",
     "ANTHROPIC_BASE_URL", "BYPASS_PROXY", "PASSAGE"],
)  # fmt: skip
def test_ordinary_names_are_not_taken_for_secrets(key: str) -> None:
    assert not is_secret_key(key)
    assert redact_secrets({key: "value"}) == {key: "value"}


@given(st.text(alphabet=string.ascii_lowercase + string.digits + " /.\n", max_size=200))
def test_words_and_paths_come_out_as_they_went_in(text: str) -> None:
    assert redact_text(text) == text


# -- linear time ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    ["sk-", "eyJ", "eyJa.", "a=", "x:", "AKIA", "ghp_", "xoxb-", "Bearer ", "a.b", "k=v:",
     "-----BEGIN RSA PRIVATE KEY-----", "token=", "https://"],
)  # fmt: skip
def test_masking_a_long_repetitive_value_is_linear(unit: str) -> None:
    # 128 KiB of one pattern's prefix over and over: a pattern that scanned to the end from
    # every prefix would take minutes here. No clock: a regression shows as a slow test.
    value = unit * (128 * 1024 // len(unit))
    redacted = redact_secrets({"V": value})["V"]
    assert isinstance(redacted, str)
    assert len(redacted) <= len(value)


def test_the_public_module_exports_the_same_function() -> None:
    assert public_redact_secrets is redact_secrets
    sample: dict[str, Any] = {"GITHUB_TOKEN": "ghp_" + "x" * 36, "PATH": "/bin"}
    assert public_redact_secrets(sample) == {"GITHUB_TOKEN": MASK, "PATH": "/bin"}
