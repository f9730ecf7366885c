"""Inline skills, SKILL.md front matter and the skills on disk (protocol/extensions/skills.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claude_trio.protocol.config.params import ExecuteParams
from claude_trio.protocol.config.ready import config_warnings
from claude_trio.protocol.errors import InvalidParamsError
from claude_trio.protocol.extensions.skills import (
    MAX_SKILL_BYTES,
    MAX_SKILL_FILES,
    InlineSkill,
    parse_skill_md,
    plugin_files,
    scan_skills,
)


def skill(**kwargs: object) -> InlineSkill:
    values: dict[str, object] = {"name": "review-style", "description": "d", "body": "b"}
    values.update(kwargs)
    return InlineSkill(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "Review", "a--b", "-a", "a-", "a_b", "a b", "x" * 65, 3])
def test_a_bad_name_is_refused_naming_the_rule(name: object) -> None:
    with pytest.raises(InvalidParamsError, match="lowercase letters, digits and single hyphens"):
        skill(name=name)


def test_names_of_the_skill_spec_are_accepted() -> None:
    assert skill(name="a").qualified_name == "inline:a"
    assert skill(name="pdf-2-text").name == "pdf-2-text"
    assert skill(name="x" * 64).name == "x" * 64


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("description", "", "tells the model when to use the skill"),
        ("description", "x" * 1025, "at most 1024 characters"),
        ("description", None, "a non-empty string"),
        ("body", "  ", "the skill's instructions"),
        ("body", "a\0b", "no NUL"),
        ("files", ["a"], "a mapping of relative path"),
        ("files", {"a.txt": 3}, "str or bytes"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(field: str, value: object, message: str) -> None:
    with pytest.raises(InvalidParamsError, match=message) as info:
        skill(**{field: value})
    assert f"'review-style' {field}" in str(info.value)


@pytest.mark.parametrize(
    "path",
    ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a\\b", "SKILL.md", "skill.md"],
)
def test_file_paths_stay_inside_the_skill_folder(path: str) -> None:
    with pytest.raises(InvalidParamsError, match="relative '/'-separated path"):
        skill(files={path: "x"})


def test_a_file_cannot_also_be_a_folder() -> None:
    with pytest.raises(InvalidParamsError, match="not also the folder of another file"):
        skill(files={"scripts": "x", "scripts/run.sh": "y"})


def test_sizes_are_bounded() -> None:
    with pytest.raises(InvalidParamsError, match=f"at most {MAX_SKILL_BYTES} bytes"):
        skill(body="b", files={"big.bin": b"\0" * MAX_SKILL_BYTES})
    with pytest.raises(InvalidParamsError, match=f"at most {MAX_SKILL_FILES}"):
        skill(files={f"f{i}": "" for i in range(MAX_SKILL_FILES + 1)})


def test_execute_params_take_a_list_of_unique_inline_skills() -> None:
    params = ExecuteParams(prompt="hi", inline_skills=[skill(), skill(name="other")])
    assert [s.name for s in params.inline_skills] == ["review-style", "other"]
    with pytest.raises(InvalidParamsError, match="unique names"):
        ExecuteParams(prompt="hi", inline_skills=[skill(), skill()])
    with pytest.raises(InvalidParamsError, match=r"inline_skills\[0\].*an InlineSkill"):
        ExecuteParams(prompt="hi", inline_skills=[{"name": "x"}])
    with pytest.raises(InvalidParamsError, match="a list of InlineSkill"):
        ExecuteParams(prompt="hi", inline_skills=skill())


def test_files_are_frozen() -> None:
    files = {"a.txt": "one"}
    made = skill(files=files)
    files["b.txt"] = "two"
    assert dict(made.files) == {"a.txt": "one"}
    with pytest.raises(TypeError):
        made.files["c"] = "x"  # type: ignore[index]


@given(
    description=st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1
    ).filter(lambda s: s.strip() and len(s) <= 1024)
)
def test_any_description_survives_the_front_matter(description: str) -> None:
    front, body = parse_skill_md(skill(description=description).skill_md())
    assert front["name"] == "review-style"
    assert front["description"] == description
    assert body.strip() == "b"


def test_the_plugin_has_a_manifest_and_one_folder_per_skill() -> None:
    files = plugin_files(
        [
            skill(body="Use the house style.", files={"rules/naming.md": "snake", "x.bin": b"\1"}),
            skill(name="other", description="Other: things"),
        ]
    )
    assert sorted(files) == [
        ".claude-plugin/plugin.json",
        "skills/other/SKILL.md",
        "skills/review-style/SKILL.md",
        "skills/review-style/rules/naming.md",
        "skills/review-style/x.bin",
    ]
    assert json.loads(files[".claude-plugin/plugin.json"])["name"] == "inline"
    assert files["skills/review-style/SKILL.md"].decode() == (
        '---\nname: review-style\ndescription: "d"\n---\n\nUse the house style.\n'
    )
    assert files["skills/review-style/x.bin"] == b"\1"


SKILL_MD = """\
---
name: pdf
description: >-
  Extract text from PDF files,
  and fill forms.

  Use it for PDFs.
allowed-tools: [Read, Bash]
license: 'Apache 2.0' # a comment
plain: one
  two
literal: |
  line 1
  line 2
---

# PDF

Do it well.
"""


def test_the_front_matter_subset_skill_files_use() -> None:
    front, body = parse_skill_md(SKILL_MD)
    assert front == {
        "name": "pdf",
        "description": "Extract text from PDF files, and fill forms.\nUse it for PDFs.",
        "license": "Apache 2.0",
        "plain": "one two",
        "literal": "line 1\nline 2\n",
    }
    assert body == "# PDF\n\nDo it well.\n"


def test_without_front_matter_everything_is_the_body() -> None:
    assert parse_skill_md("just text\n") == ({}, "just text\n")
    assert parse_skill_md("---\nname: x\nno end") == ({}, "---\nname: x\nno end")
    assert parse_skill_md("---\ndescription: 'it''s'\n---\n") == ({"description": "it's"}, "")


def write_skill(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text)
    return path


def test_from_dir_reads_the_folder(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "pdf-tools", SKILL_MD)
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fill.py").write_text("print('fill')")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref")
    made = InlineSkill.from_dir(folder)
    assert made.name == "pdf"  # the front matter's name
    assert made.description.startswith("Extract text from PDF files")
    assert made.body == "# PDF\n\nDo it well.\n"
    assert dict(made.files) == {"scripts/fill.py": b"print('fill')"}
    bare = write_skill(tmp_path, "bare-skill", "Say hello nicely.\n\nMore.")
    made = InlineSkill.from_dir(bare)
    assert (made.name, made.description) == ("bare-skill", "Say hello nicely.")
    with pytest.raises(InvalidParamsError, match=r"a folder with a readable UTF-8 SKILL\.md"):
        InlineSkill.from_dir(tmp_path / "missing")


def test_scan_finds_the_user_skills_then_the_projects_nearest_first(tmp_path: Path) -> None:
    config = tmp_path / "config"
    repo = tmp_path / "repo"
    work = repo / "pkg" / "work"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    write_skill(config / "skills", "dup", "---\ndescription: USER\n---\nb")
    write_skill(config / "skills", "mine", "---\ndescription: my own\n---\nb")
    write_skill(work / ".claude" / "skills", "dup", "---\ndescription: CWD\n---\nb")
    write_skill(work / ".claude" / "skills", "dup2", "---\ndescription: CWD2\n---\nb")
    write_skill(repo / ".claude" / "skills", "dup2", "---\ndescription: ROOT2\n---\nb")
    write_skill(repo / ".claude" / "skills", "at-root", "First line here.\nsecond")
    write_skill(tmp_path / ".claude" / "skills", "above-git-root", "---\ndescription: no\n---\n")
    (work / ".claude" / "skills" / "loose.md").write_text("---\ndescription: no\n---\n")
    (work / ".claude" / "skills" / "empty-folder").mkdir()
    found = scan_skills(work, env={"CLAUDE_CONFIG_DIR": str(config)})
    assert [(s.name, s.description, s.source) for s in found] == [
        ("dup", "USER", "user"),
        ("mine", "my own", "user"),
        ("dup2", "CWD2", "project"),
        ("at-root", "First line here.", "project"),
    ]
    assert found[0].path == str(config / "skills" / "dup")
    only_project = scan_skills(work, env={"CLAUDE_CONFIG_DIR": str(config)}, sources=["project"])
    assert [s.name for s in only_project] == ["dup", "dup2", "at-root"]


def test_scan_without_a_config_dir_reads_home_and_counts_it_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_skill(home / ".claude" / "skills", "homely", "---\ndescription: h\n---\n")
    work = home / "project"
    work.mkdir()
    found = scan_skills(work, env={"HOME": str(home)})
    assert [(s.name, s.source) for s in found] == [("homely", "user")]


def test_plan_mode_or_no_skill_tool_warns_that_inline_skills_cannot_be_opened() -> None:
    inline = [skill()]
    expected = "the Skill tool is not offered, so the model cannot open inline:review-style"
    assert expected in config_warnings(
        ExecuteParams(prompt="x", plan_mode=True, inline_skills=inline)
    )
    assert expected in config_warnings(
        ExecuteParams(prompt="x", disallowed_tools=["Skill"], inline_skills=inline)
    )
    assert expected in config_warnings(
        ExecuteParams(prompt="x", tools=["Read"], inline_skills=inline)
    )
    assert config_warnings(ExecuteParams(prompt="x", tools=["Skill"], inline_skills=inline)) == []
    assert config_warnings(ExecuteParams(prompt="x", plan_mode=True)) == []
