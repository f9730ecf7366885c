"""The pure side of fleets and the gateway: the wire format, replay, slots, remote policy,
batches."""
