"""The Weir broker: partition logs, stream processing, state and the command API."""
