"""Many sessions: the fleet, its subscribers, and the websocket gateway."""
