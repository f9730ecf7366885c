"""The documentation's examples are files the test suite runs, so they cannot rot.

``docs/testing.md`` quotes ``docs/examples/*.py``: every Python block on the page must be a
verbatim excerpt of one of those files, every file must be named on the page, and pytest must
collect the folder (``testpaths``), where the examples run like any other test. The README's
"Consuming the stream" section and ``docs/offline.md`` (linked from the README) quote them the
same way.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing.md"
OFFLINE = ROOT / "docs" / "offline.md"
README = ROOT / "README.md"
EXAMPLES = ROOT / "docs" / "examples"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, re.DOTALL)


def test_the_examples_folder_is_collected_by_the_suite() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "docs/examples" in config["tool"]["pytest"]["ini_options"]["testpaths"]


def test_every_example_file_is_named_on_the_page() -> None:
    page = PAGE.read_text()
    files = sorted(EXAMPLES.glob("test_*.py"))
    assert files
    for path in files:
        assert f"docs/examples/{path.name}" in page + OFFLINE.read_text(), path.name


def test_the_offline_page_is_linked_from_the_readme_and_names_its_example() -> None:
    assert "(docs/offline.md)" in README.read_text()
    page = OFFLINE.read_text()
    assert python_blocks(page)
    assert "docs/examples/test_guide_offline.py" in page
    for name in ("open_offline_model", "open_model_double", "hermetic_env", "Reply", "turns"):
        assert f"`{name}" in page, name


def readme_section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


STREAMS = readme_section("Consuming the stream")


def test_the_readme_streams_section_names_its_examples() -> None:
    assert python_blocks(STREAMS)
    assert "docs/examples/test_guide_streams.py" in STREAMS


@pytest.mark.parametrize(
    "block",
    python_blocks(PAGE.read_text()) + python_blocks(STREAMS) + python_blocks(OFFLINE.read_text()),
)
def test_every_python_block_of_the_page_is_an_excerpt_of_an_example(block: str) -> None:
    sources = [path.read_text() for path in EXAMPLES.glob("test_*.py")]
    assert any(block in source for source in sources), f"not in docs/examples:\n{block}"
