"""What a session runs of the user's: approvals and questions, hooks, custom tools, skills, the path
scope's look-ups."""
