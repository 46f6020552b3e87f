"""The stream processor: partitions, replay and snapshots."""
