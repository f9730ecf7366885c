"""End-to-end tests use the testing kit's own fixtures (``claude_trio.testing.pytest_plugin``,
registered through the ``pytest11`` entry point): ``model_double`` serves the Messages API double in
the test's nursery and ``hermetic`` is the env that points the real CLI at it."""
