"""One session's actors: open_session, the SDK driver, the CLI process, the stop."""
