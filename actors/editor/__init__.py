"""The editor face: ``claude-trio acp``, an Agent Client Protocol agent on a session host."""
