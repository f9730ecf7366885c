"""One execution, pure: events, the mapper, usage, lifecycle and the stop."""
