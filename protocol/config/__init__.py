"""What a session is told, pure: parameters, models, providers, options and what it reports before
it starts."""
