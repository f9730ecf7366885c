"""Path scope (protocol/extensions/scope.py): path checks, the CLI's settings, what the scope lets
the tools do, the sandbox's requirements, and the resume guard over the scope."""

from __future__ import annotations

import dataclasses
import json
import posixpath
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.actors.session.sdk_private import SubprocessCLITransport
from claude_trio.errors import WireError
from claude_trio.protocol.config.capabilities import architecture_capabilities
from claude_trio.protocol.config.options import build_options
from claude_trio.protocol.config.params import ArchitectureConfig, ExecuteParams
from claude_trio.protocol.config.ready import adapter_ready, config_warnings, scope_refusal
from claude_trio.protocol.config.resume import ScopeWidening, find_resume_violations
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.scope import (
    SYSTEM_READ_PATHS,
    access,
    check_paths,
    deny_rules,
    normalize_path,
    sandbox_problem,
    scope_settings,
    scope_widenings,
)
from claude_trio.protocol.fanout.wire import params_from_json, params_to_json


def params(**kwargs: Any) -> ExecuteParams:
    return ExecuteParams(prompt="hello", **kwargs)


# ---------------------------------------------------------------------------------------------
# Paths at the edge


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("/a/b", "/a/b"),
        ("/a/b/", "/a/b"),
        ("/a/./b/../c", "/a/c"),
        ("//a//b", "/a/b"),
        ("///a", "/a"),
        ("/", "/"),
        ("/a/../..", "/"),
    ],
)
def test_paths_are_normalized(raw: str, normal: str) -> None:
    assert normalize_path("p", raw) == normal


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("rel/path", "an absolute path (starting with '/')"),
        ("./x", "an absolute path (starting with '/')"),
        ("", "a non-empty string"),
        ("/a\0b", "NUL and line breaks cannot be passed"),
        ("/a\nb", "NUL and line breaks cannot be passed"),
        ("/a/*", "glob and rule characters"),
        ("/a/b?", "glob and rule characters"),
        ("/a/[x]", "glob and rule characters"),
        ("/a/(x)", "glob and rule characters"),
        ("/a\\b", "glob and rule characters"),
        (3, "an absolute path"),
    ],
)
def test_bad_paths_are_refused_naming_the_field_and_the_fix(raw: object, says: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        params(allowed_paths=["/ok", raw])
    assert info.value.field == "allowed_paths[1]"
    assert says in str(info.value)


@pytest.mark.parametrize("field", ["allowed_paths", "read_only_paths", "disallowed_paths"])
def test_a_single_string_is_not_taken_for_a_list_of_characters(field: str) -> None:
    with pytest.raises(InvalidParamsError, match="a list of absolute paths"):
        params(**{field: "/etc"})


def test_paths_are_stored_normalized_without_repeats() -> None:
    p = params(allowed_paths=["/a/", "/a", "/b/../a/c"], disallowed_paths=("/x/./y",))
    assert p.allowed_paths == ("/a", "/a/c")
    assert p.disallowed_paths == ("/x/y",)
    assert check_paths("f", []) == ()


def test_a_confined_scope_needs_an_absolute_cwd() -> None:
    with pytest.raises(InvalidParamsError) as info:
        params(cwd="work", allowed_paths=["/a"])
    assert info.value.field == "cwd"
    params(cwd="work", disallowed_paths=["/a"])  # not confined: any cwd


def test_scope_enforcement_and_setting_sources_are_checked() -> None:
    with pytest.raises(InvalidParamsError, match="'hard', 'soft'"):
        params(scope_enforcement="strict")
    with pytest.raises(InvalidParamsError) as info:
        params(setting_sources=["project", "managed"])
    assert info.value.field == "setting_sources[1]"
    assert params(setting_sources=["user"]).setting_sources == ("user",)


# ---------------------------------------------------------------------------------------------
# The CLI's settings


def test_deny_rules_name_each_path_and_all_below_it_with_the_absolute_prefix() -> None:
    assert deny_rules(read_only=["/ro"], disallowed=["/no"]) == [
        "Read(//no)",
        "Read(//no/**)",
        "Edit(//no)",
        "Edit(//no/**)",
        "Edit(//ro)",
        "Edit(//ro/**)",
    ]
    assert deny_rules(read_only=[], disallowed=["/"]) == [
        "Read(//)",
        "Read(//**)",
        "Edit(//)",
        "Edit(//**)",
    ]


def test_a_confined_scope_blocks_both_ways_and_asks_for_the_sandbox() -> None:
    settings = scope_settings(allowed=["/a"], read_only=[], disallowed=[], enforcement="hard")
    assert settings == {
        "permissions": {
            "blockReadsOutsideWorkingDirectories": True,
            "blockWritesOutsideWorkingDirectories": True,
        },
        "sandbox": {
            "enabled": True,
            "autoAllowBashIfSandboxed": True,
            "allowUnsandboxedCommands": False,
            "failIfUnavailable": True,
            "filesystem": {"denyRead": ["/"], "allowRead": [".", "/a", *SYSTEM_READ_PATHS]},
        },
    }


def test_a_confined_scope_lets_bash_read_only_the_scope_and_the_system_folders() -> None:
    settings = scope_settings(
        allowed=["/srv/cache"],
        read_only=["/srv/docs", "/usr"],
        disallowed=["/srv/repo/secrets"],
        enforcement="soft",
        cwd="/srv/repo",
    )
    files = settings["sandbox"]["filesystem"]
    assert files["denyRead"] == ["/"]
    assert files["allowRead"][:3] == ["/srv/repo", "/srv/cache", "/srv/docs"]
    assert files["allowRead"].count("/usr") == 1
    for outside in ("/root", "/home", "/tmp", "/var", "/run", "/srv"):
        assert outside not in files["allowRead"]
    # The denied path still reaches the sandbox as a Read deny rule.
    assert "Read(//srv/repo/secrets/**)" in settings["permissions"]["deny"]
    # Denials alone confine nothing, so Bash's reads are not narrowed either.
    only_denied = scope_settings(
        allowed=[], read_only=[], disallowed=["/s"], enforcement="hard", cwd="/w"
    )
    assert "filesystem" not in only_denied["sandbox"]


def test_only_denials_do_not_confine_and_a_soft_scope_lets_the_cli_start_unsandboxed() -> None:
    settings = scope_settings(allowed=[], read_only=[], disallowed=["/s"], enforcement="soft")
    assert settings["permissions"] == {
        "deny": ["Read(//s)", "Read(//s/**)", "Edit(//s)", "Edit(//s/**)"]
    }
    assert settings["sandbox"]["failIfUnavailable"] is False


def test_no_scope_no_settings() -> None:
    assert scope_settings(allowed=[], read_only=[], disallowed=[], enforcement="hard") == {}


def cli_argv(p: ExecuteParams) -> list[str]:
    options = dataclasses.replace(build_options(p), cli_path="/opt/claude")
    return SubprocessCLITransport(prompt="unused", options=options)._build_command()


def _flag(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == name]


def test_the_cli_gets_the_scope_in_its_settings_add_dirs_and_no_setting_sources() -> None:
    p = params(
        cwd="/w",
        allowed_paths=["/a"],
        read_only_paths=["/r"],
        disallowed_paths=["/a/s"],
        architecture_config=ArchitectureConfig(claude_skill_listing_budget_fraction=0.5),
    )
    argv = cli_argv(p)
    [settings] = _flag(argv, "--settings")
    parsed = json.loads(settings)
    assert parsed["skillListingBudgetFraction"] == 0.5  # the skills' settings are kept
    assert parsed["permissions"]["deny"] == deny_rules(["/r"], ["/a/s"])
    assert parsed["permissions"]["blockReadsOutsideWorkingDirectories"] is True
    assert parsed["sandbox"]["enabled"] is True
    assert _flag(argv, "--add-dir") == ["/a", "/r"]
    assert "--setting-sources=" in argv
    # Denials travel only in the settings: those are the ones that reach the Bash sandbox.
    assert "Read(//a/s)" not in ",".join(_flag(argv, "--disallowedTools"))


def test_named_setting_sources_pass_and_an_unscoped_execution_keeps_the_clis_default() -> None:
    assert "--setting-sources=user,project" in cli_argv(
        params(disallowed_paths=["/s"], setting_sources=["user", "project"])
    )
    argv = cli_argv(params())
    assert not [a for a in argv if a.startswith("--setting-sources")]
    assert _flag(argv, "--add-dir") == []
    assert _flag(argv, "--settings") == []


# ---------------------------------------------------------------------------------------------
# What the scope lets the file tools do


def test_access_follows_the_rules() -> None:
    scope = {"cwd": "/w", "allowed": ["/a"], "read_only": ["/r"], "disallowed": ["/a/s"]}
    assert access("/w/x", **scope) == "read-write"
    assert access("/a/x", **scope) == "read-write"
    assert access("/r/x", **scope) == "read"
    assert access("/a/s/x", **scope) == "none"
    assert access("/elsewhere", **scope) == "none"
    assert access("/ab", **scope) == "none"  # a sibling with a common prefix is not below
    assert access("/elsewhere", cwd="/w", disallowed=["/s"]) == "read-write"


_segment = st.text(alphabet="abc", min_size=1, max_size=2)
_paths = st.lists(_segment, min_size=1, max_size=3).map(lambda parts: "/" + "/".join(parts))


@given(
    allowed=st.lists(_paths, min_size=1, max_size=3),
    read_only=st.lists(_paths, max_size=2),
    disallowed=st.lists(_paths, max_size=2),
    tail=st.lists(_segment, max_size=2),
    pick=st.integers(min_value=0),
)
def test_under_an_allowed_root_is_allowed_under_a_denied_root_denied_deny_wins(
    allowed: list[str], read_only: list[str], disallowed: list[str], tail: list[str], pick: int
) -> None:
    scope = {"cwd": None, "allowed": allowed, "read_only": read_only, "disallowed": disallowed}
    root = allowed[pick % len(allowed)]
    path = posixpath.join(root, *tail)
    below = lambda roots: any(path == r or path.startswith(r + "/") for r in roots)  # noqa: E731
    got = access(path, **scope)
    if below(disallowed):
        assert got == "none"
    elif below(read_only):
        assert got == "read"
    else:
        assert got == "read-write"
    # And the CLI's rules say the same about denials: a denied path is matched by a rule.
    rules = deny_rules(read_only, disallowed)
    for denied in disallowed:
        assert f"Read(/{denied}/**)" in rules
        assert f"Edit(/{denied}/**)" in rules


# ---------------------------------------------------------------------------------------------
# The Bash sandbox's requirements


def test_the_sandbox_needs_bwrap_and_socat_on_linux_and_says_how_to_install_them() -> None:
    assert sandbox_problem("linux", {"bwrap": True, "socat": True}) is None
    problem = sandbox_problem("linux", {"bwrap": False, "socat": True})
    assert problem is not None
    assert "needs bwrap (not found on the CLI's PATH)" in problem
    assert "apt-get install bubblewrap" in problem
    both = sandbox_problem("linux", {})
    assert both is not None
    assert "bwrap, socat" in both
    assert "apt-get install bubblewrap socat" in both
    assert sandbox_problem("darwin", {"sandbox-exec": True}) is None
    assert "only on Linux and macOS" in (sandbox_problem("win32", {}) or "")


def test_a_hard_refusal_names_the_problem_and_the_soft_way_out() -> None:
    message = scope_refusal("the CLI's Bash sandbox needs bwrap")
    assert "scope_enforcement='hard'" in message
    assert "needs bwrap" in message
    assert "scope_enforcement='soft'" in message


# ---------------------------------------------------------------------------------------------
# The resume guard


def scope(**kwargs: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cwd": "/w",
        "allowed": (),
        "read_only": (),
        "disallowed": (),
        "enforcement": "hard",
    }
    return {**base, **kwargs}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (scope(allowed=("/a",)), scope(allowed=("/a", "/b"))),
        (scope(allowed=("/a",)), scope()),
        (scope(read_only=("/a",)), scope(allowed=("/a",))),
        (scope(read_only=("/a",)), scope(read_only=("/",))),
        (scope(disallowed=("/s",)), scope()),
        (scope(disallowed=("/s",)), scope(disallowed=("/s/t",))),
        (scope(allowed=("/a",)), scope(allowed=("/a",), enforcement="soft")),
        (scope(allowed=("/a/b",)), scope(allowed=("/a",))),
    ],
)
def test_a_wider_scope_is_a_widening(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert scope_widenings(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (scope(), scope()),
        (scope(allowed=("/a", "/b")), scope(allowed=("/a",))),
        (scope(), scope(allowed=("/a",))),
        (scope(allowed=("/a",)), scope(read_only=("/a",))),
        (scope(disallowed=("/s",)), scope(disallowed=("/",))),
        (scope(allowed=("/a",)), scope(allowed=("/a",), disallowed=("/a/s",))),
        (scope(allowed=("/a",), enforcement="soft"), scope(allowed=("/a",))),
        (scope(allowed=("/a", "/r")), scope(allowed=("/a",), read_only=("/r",))),
    ],
)
def test_a_narrower_or_equal_scope_is_no_widening(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert scope_widenings(old, new) == []


def test_an_unscoped_session_with_a_relative_cwd_resumes_without_violations() -> None:
    assert find_resume_violations(params(cwd="work"), params(cwd="work")) == []
    assert find_resume_violations(
        params(cwd="work"), params(cwd="work", disallowed_paths=["/s"])
    ) == []


def test_resuming_with_a_wider_scope_is_a_resume_violation() -> None:
    old = params(cwd="/w", allowed_paths=["/a"], disallowed_paths=["/a/s"])
    [violation] = find_resume_violations(
        old, params(cwd="/w", allowed_paths=["/a"], resume_session_id="s1")
    )
    assert isinstance(violation, ScopeWidening)
    assert violation.field == "path_scope"
    assert "/a/s: none -> read-write" in violation.message
    assert "cannot widen on resume" in violation.message
    narrower = params(cwd="/w", allowed_paths=["/a/b"], disallowed_paths=["/a/s"])
    assert find_resume_violations(old, narrower) == []


# ---------------------------------------------------------------------------------------------
# What the execution reports


def test_adapter_ready_reports_the_scope_as_the_cli_got_it() -> None:
    p = params(cwd="/w", allowed_paths=["/a/"], disallowed_paths=["/s"])
    ready = adapter_ready(
        p, build_options(p), sdk_version=None, cli_version=None, bash_sandboxed=True
    )
    assert ready.allowed_paths == ("/a",)
    assert ready.disallowed_paths == ("/s",)
    assert ready.add_dirs == ("/a",)
    assert ready.scope_enforcement == "hard"
    assert ready.bash_sandboxed is True
    assert ready.setting_sources == ()
    unscoped = adapter_ready(params(), build_options(params()), sdk_version=None, cli_version=None)
    assert (unscoped.scope_enforcement, unscoped.setting_sources) == (None, None)


def test_named_setting_sources_with_a_scope_are_warned_about() -> None:
    [warning] = config_warnings(params(disallowed_paths=["/s"], setting_sources=["project"]))
    assert "setting_sources=project" in warning
    assert "may widen it" in warning
    assert config_warnings(params(setting_sources=["project"])) == []


def test_capabilities_list_the_scope_fields() -> None:
    caps = architecture_capabilities()
    assert {"allowed_paths", "disallowed_paths", "read_only_paths"} <= caps.path_scope
    for field in caps.path_scope:
        assert hasattr(params(), field)
    assert caps.scope_enforcements == ("hard", "soft")


def test_a_scope_travels_over_the_wire_and_back() -> None:
    p = params(
        allowed_paths=["/a"],
        read_only_paths=["/r"],
        disallowed_paths=["/a/s"],
        scope_enforcement="soft",
        setting_sources=["project"],
    )
    sent = params_to_json(p)
    assert sent["allowed_paths"] == ["/a"]
    assert sent["setting_sources"] == ["project"]
    assert params_from_json(json.loads(json.dumps(sent))) == p
    assert "setting_sources" not in params_to_json(params())
    with pytest.raises(WireError, match=r"params\.allowed_paths\[0\]"):
        params_from_json({"prompt": "hi", "allowed_paths": ["relative"]})
