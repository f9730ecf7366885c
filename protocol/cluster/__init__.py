"""What the Redis cluster writes and reads, and its key names (pure)."""
