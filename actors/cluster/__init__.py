"""Sessions on a Redis cluster: the worker, the gateway's view, the store."""
