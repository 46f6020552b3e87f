"""Partition state in LMDB behind typed repositories."""
