"""The pure side of ``claude-trio acp``: JSON-RPC framing, and unified events mapped to the
Agent Client Protocol's messages (the ``agent-client-protocol`` package's schema types)."""
