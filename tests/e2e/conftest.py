"""End-to-end tests use the testing kit's own fixtures (``claude_trio.testing.pytest_plugin``,
registered through the ``pytest11`` entry point): ``model_double`` serves the Messages API double in
the test's nursery and ``hermetic`` is the env that points the real CLI at it."""

import shutil

import pytest


@pytest.fixture
def bash_sandbox() -> None:
    """The CLI's Bash sandbox needs bubblewrap and socat; ``scripts/bootstrap --test`` installs
    them.
    A test that needs them fails, naming what is missing, rather than being skipped."""
    missing = [name for name in ("bwrap", "socat") if shutil.which(name) is None]
    if missing:
        pytest.fail(
            f"the CLI's Bash sandbox needs {' and '.join(missing)}, which this machine lacks: "
            "run scripts/bootstrap --test as root, or apt-get install bubblewrap socat",
            pytrace=False,
        )
